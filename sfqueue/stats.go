package sfqueue

import "time"

// Stats is a snapshot of the queue's counters.
type Stats struct {
	// UsedBytes is what the cap counts: the headers and frames of retained
	// segments, the dictionary (DictBytes) and, in memory-only mode, the
	// producer's index (IndexBytes).
	UsedBytes     int64
	CapacityBytes int64 // MaxTotalBytes
	// UnackedBytes is the segments' share of UsedBytes (not the dictionary
	// or the index) without the acknowledged frames (and fully acknowledged
	// segments) still on disk: a segment is deleted only when
	// it is sealed and all its frames are acknowledged, so the segment
	// taking appends keeps acknowledged frames that no longer matter.
	UnackedBytes int64
	// AtCap: an append found no room under the cap (it waited, was
	// refused, or evicted the oldest frames), and acknowledgements have not
	// freed a segment since. While it holds, producers are being refused
	// (on_full: block) or are evicting (evict_oldest).
	AtCap    bool
	Segments int
	// DictBytes is the symbol dictionary: its files in SF mode, the RAM
	// its entries hold in memory-only mode. DictGenerations is the
	// generations held.
	DictBytes       int64
	DictGenerations int
	// IndexBytes is the producer's index as the last AppendWith reported
	// it (Batch.IndexBytes): memory-only mode, 0 in SF mode.
	IndexBytes int64
	OnDisk     bool // SF mode: segments and DictBytes are files

	FramesAppended uint64
	BytesAppended  uint64 // payload bytes
	FramesAcked    uint64
	BytesAcked     uint64 // payload bytes
	FramesEvicted  uint64 // unacked frames deleted by evict_oldest
	BytesEvicted   uint64 // their payload bytes
	// ItemsEvicted is the items (AppendBatchItems' counts) of the evicted
	// frames whose count is known. FramesEvictedItemsUnknown counts the
	// evicted frames whose count is not (in FramesEvicted, not in
	// ItemsEvicted): frames of segment format 1, written before frames
	// carried one, and frames unreadable when they were evicted.
	ItemsEvicted              uint64
	FramesEvictedItemsUnknown uint64
	FullErrors                uint64 // appends refused with *FullError
	// DiskFullErrors counts the FullErrors whose reason is DiskFull: the
	// file system refused space (ENOSPC) below the cap.
	DiskFullErrors uint64

	PublishedFSN uint64
	AckedFSN     uint64
	DurableFSN   uint64 // covered by a completed fsync (SF, periodic/flush)

	TornBytesRecovered int64 // bytes cut from segment tails by recovery

	Fsyncs       uint64
	FsyncTotal   time.Duration
	FsyncMax     time.Duration
	FsyncBuckets [len(fsyncBucketBounds) + 1]uint64 // counts per FsyncBucketBounds, last = above
	Fatal        error                              // the latched *FatalError, if any
}

// FsyncBucketBounds are the upper bounds of Stats.FsyncBuckets.
func FsyncBucketBounds() []time.Duration {
	return append([]time.Duration(nil), fsyncBucketBounds[:]...)
}

var fsyncBucketBounds = [...]time.Duration{
	100 * time.Microsecond, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond,
	100 * time.Millisecond, time.Second,
}

type counters struct {
	framesAppended, bytesAppended, framesAcked uint64
	bytesAcked                                 uint64
	framesEvicted, bytesEvicted, fullErrors    uint64
	diskFullErrors                             uint64
	itemsEvicted, framesEvictedItemsUnknown    uint64
	fsyncs                                     uint64
	fsyncTotal, fsyncMax                       time.Duration
	fsyncBuckets                               [len(fsyncBucketBounds) + 1]uint64
	// spares made (recycled: from an acked segment) and used by rotations
	// (spare.go); kept for tests, not in Stats.
	sparesMade, sparesRecycled, sparesUsed uint64
}

func (c *counters) recordFsync(d time.Duration) {
	c.fsyncs++
	c.fsyncTotal += d
	c.fsyncMax = max(c.fsyncMax, d)
	i := 0
	for i < len(fsyncBucketBounds) && d > fsyncBucketBounds[i] {
		i++
	}
	c.fsyncBuckets[i]++
}

// Stats returns the counters.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := Stats{
		UsedBytes: q.usedLocked(), CapacityBytes: q.o.MaxTotalBytes, Segments: len(q.segs),
		DictBytes: q.dict.bytes, DictGenerations: len(q.dict.counts), IndexBytes: q.index, OnDisk: q.sf,
		UnackedBytes: q.used - q.ackedRetainedLocked(), AtCap: q.atCap,
		FramesAppended: q.st.framesAppended, BytesAppended: q.st.bytesAppended,
		FramesAcked: q.st.framesAcked, BytesAcked: q.st.bytesAcked, FramesEvicted: q.st.framesEvicted, BytesEvicted: q.st.bytesEvicted,
		ItemsEvicted: q.st.itemsEvicted, FramesEvictedItemsUnknown: q.st.framesEvictedItemsUnknown,
		FullErrors: q.st.fullErrors, DiskFullErrors: q.st.diskFullErrors,
		PublishedFSN: q.nextFSN - 1, AckedFSN: q.acked, DurableFSN: q.durable,
		TornBytesRecovered: q.recovery.TornBytes,
		Fsyncs:             q.st.fsyncs, FsyncTotal: q.st.fsyncTotal, FsyncMax: q.st.fsyncMax,
		FsyncBuckets: q.st.fsyncBuckets,
	}
	if q.fatal != nil {
		s.Fatal = q.fatal
	}
	return s
}

// ackedRetainedLocked counts the bytes of retained segments that hold no
// unacknowledged frame: whole segments at or below the acknowledged FSN (or
// still empty), and the header and acknowledged frames of the segment the
// first unacknowledged frame is in.
func (q *Queue) ackedRetainedLocked() int64 {
	var n int64
	for _, s := range q.segs {
		if len(s.offsets) == 0 { // a new segment's header alone
			n += s.size
			continue
		}
		if s.base > q.acked {
			break
		}
		if s.end()-1 <= q.acked {
			n += s.size + s.slack
			continue
		}
		start, _ := s.frameBounds(int(q.acked + 1 - s.base))
		n += start
		break
	}
	return n
}

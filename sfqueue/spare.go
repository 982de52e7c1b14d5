package sfqueue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap"
)

// spareName is the file of the spare segment: not a segment name, so
// recovery never reads it as one (it deletes it, see applyPlan).
const spareName = ".spare-segment"

// The spare segment (periodic and flush durability, SF mode) takes the
// file-system work of a rotation off the append path. Creating a segment
// (create, fallocate, and a journal commit for the new extents at the next
// fsync) while every append waits, and deleting an acked one (whose freed
// blocks a `discard` mount turns into a discard inside the next journal
// commit, that is inside some append's group fsync), each added about one
// to two fsync times to one group fsync in every segment's worth of appends
// (BENCHMARKS.md, #14 third pass). Instead the oldest acked segment is
// recycled: renamed to spareName, the rename made durable, its content
// zeroed without freeing its blocks (fallocate ZERO_RANGE), and fsynced, by
// the Ack that frees it, with q.mu released. When there is none to recycle
// by the time the active segment is half full, the background goroutine
// creates and preallocates a fresh one. A rotation renames the ready spare
// to the new segment's name and writes its header: two cheap metadata
// operations under the lock.
//
// Safety: only a spare whose zeroing and allocation an fsync made durable
// is used, so a power loss after a rotation finds zeros, never the recycled
// segment's old frames, after the new ones. The recycled segment's name is
// durably gone before its content changes, so a power loss cannot bring it
// back zeroed. A directory fsync may make a new segment's name durable
// before its header; a power loss then leaves a torn creation, which
// recovery deletes (doc.go). A spare left by a crash is
// deleted by recovery. The spare's size counts against MaxTotalBytes
// (admitLocked drops it before refusing or evicting for room), except
// while one is prepared under on_full=evict_oldest (spareBytesLocked), so
// the disk holds at most the cap plus the active segment's preallocated
// tail, and then one segment more for milliseconds. A failure while
// preparing costs only the spare: the next rotation creates its segment on
// the append path as before, where ENOSPC is a DiskFull refusal before any
// frame of the batch is written.

// rangeZeroer is a File that can zero a range while keeping its blocks
// allocated (fallocate FALLOC_FL_ZERO_RANGE on Linux). Files without it
// (or whose file system refuses) are deleted when acked, not recycled.
type rangeZeroer interface {
	ZeroRange(off, size int64) error
}

// errNoZeroRange: the file system cannot zero a range; recycling is off.
var errNoZeroRange = errors.New("zeroing a range is not supported")

// spareWantedLocked reports whether a spare should be prepared now: SF
// mode with preallocation, none ready or under way, the queue usable, and
// room under the cap for the spare beside one more segment (so that a
// queue near its cap does not make a spare only to drop it).
func (q *Queue) spareWantedLocked() bool {
	return q.sf && q.segmentAlloc() > 0 && q.spare == nil && !q.sparing && !q.closed && q.fatal == nil &&
		q.usedLocked()+2*q.o.MaxSegmentBytes <= q.o.MaxTotalBytes
}

// spareBytesLocked is the room under the cap the spare holds: a ready one
// (admitLocked drops it when the room is needed), or one being prepared,
// which an append waits out (the preparation ends with notifySpaceLocked)
// under on_full=block; under evict_oldest no frame is evicted to make
// room for a spare, so there the disk can hold one segment more than the
// bound while a spare is prepared (milliseconds) as the queue fills.
func (q *Queue) spareBytesLocked() int64 {
	if q.spare != nil || (q.sparing && q.o.OnFull != OnFullEvictOldest) {
		return q.o.MaxSegmentBytes
	}
	return 0
}

// prepareSpare makes a spare, from the acked segment file from (recycled)
// or, when from is "", a new file, and hands it to the queue. The caller
// set q.sparing; q.mu is not held.
func (q *Queue) prepareSpare(from string) {
	f, err := q.makeSpare(from)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sparing = false
	q.syncDone.Broadcast() // Close waits for q.sparing
	switch {
	case errors.Is(err, errNoZeroRange):
		q.noRecycle = true
		q.log.Debug("sfqueue: acked segments are deleted, not recycled", zap.String("slot", q.slot), zap.Error(err))
	case err != nil:
		q.log.Warn("sfqueue: cannot prepare a spare segment; segments are created when needed",
			zap.String("slot", q.slot), zap.Error(err))
	default:
		q.spare = f // Close deletes it if it has started meanwhile
		q.st.sparesMade++
		if from != "" {
			q.st.sparesRecycled++
		}
		if q.usedLocked()+2*q.o.MaxSegmentBytes > q.o.MaxTotalBytes {
			q.dropSpareLocked() // the queue filled meanwhile: frames need the room
		}
	}
	q.notifySpaceLocked() // appends may have waited for the room it held
}

// makeSpare does prepareSpare's I/O. On any error no spare file is left
// (a recycled segment is then deleted, as an Ack would have).
func (q *Queue) makeSpare(from string) (File, error) {
	p := filepath.Join(q.slot, spareName)
	var f File
	var err error
	if from != "" {
		f, err = q.recycle(from, p)
	} else {
		f, err = q.fs.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC)
	}
	if err != nil {
		return nil, err
	}
	fail := func(op string, err error) (File, error) {
		f.Close()
		q.fs.Remove(p)
		return nil, fmt.Errorf("sfqueue: %s %s: %w", op, p, err)
	}
	if err := f.Allocate(q.o.MaxSegmentBytes); err != nil {
		return fail("preallocate", err)
	}
	if err := f.Sync(); err != nil {
		return fail("fsync", err)
	}
	return f, nil
}

// recycle renames the acked segment from to p, makes the rename durable,
// and zeroes its content (blocks kept), cut to MaxSegmentBytes.
func (q *Queue) recycle(from, p string) (File, error) {
	if err := q.fs.Rename(from, p); err != nil {
		q.unlink(from)
		return nil, fmt.Errorf("sfqueue: rename %s to %s: %w", from, p, err)
	}
	fail := func(err error) (File, error) {
		q.fs.Remove(p)
		return nil, err
	}
	q.mu.Lock()
	err := q.syncDirInGroupLocked()
	q.mu.Unlock()
	if err != nil {
		return fail(err)
	}
	f, err := q.fs.OpenFile(p, os.O_RDWR)
	if err != nil {
		return fail(err)
	}
	z, ok := f.(rangeZeroer)
	size, err := f.Size()
	switch {
	case !ok:
		err = errNoZeroRange
	case err == nil && size > q.o.MaxSegmentBytes:
		err = f.Truncate(q.o.MaxSegmentBytes) // a segment of a larger MaxSegmentBytes
		size = q.o.MaxSegmentBytes
	}
	if err == nil {
		err = z.ZeroRange(0, size)
	}
	if err != nil {
		f.Close()
		if !errors.Is(err, errNoZeroRange) {
			err = fmt.Errorf("sfqueue: zero %s: %w", p, err)
		}
		return fail(err)
	}
	return f, nil
}

// syncDirInGroupLocked makes the slot directory durable through a group
// fsync (flush: the flusher's next one; periodic: one run here), which
// fsyncs every written segment before the directory: the rename shares a
// journal commit the appends pay for anyway, and a segment renamed from
// the spare meanwhile gets its header fsynced before its name.
func (q *Queue) syncDirInGroupLocked() error {
	q.dirDirty = true
	if q.flushReq == nil {
		for q.syncing {
			q.syncDone.Wait()
		}
		q.syncLocked()
	} else {
		if q.pending == nil {
			q.pending = &syncEpoch{done: make(chan struct{})}
		}
		ep := q.pending // not a waiter: waiters counts appends only
		select {
		case q.flushReq <- struct{}{}:
		default:
		}
		q.mu.Unlock()
		select {
		case <-ep.done:
		case <-q.stop: // the flusher may stop before this epoch's fsync
		}
		q.mu.Lock()
	}
	return q.usableLocked()
}

// spareSegmentLocked turns the ready spare into the segment base: rename
// and header. It returns nil when there is no spare or using it failed
// (the spare is then deleted and the caller creates the segment).
func (q *Queue) spareSegmentLocked(base uint64) *segment {
	f := q.spare
	if f == nil {
		return nil
	}
	q.spare = nil
	sp := filepath.Join(q.slot, spareName)
	p := filepath.Join(q.slot, segmentName(base))
	err := q.fs.Rename(sp, p)
	if err != nil {
		f.Close()
		q.fs.Remove(sp)
	} else if _, err = f.WriteAt(encodeSegmentHeader(base), 0); err != nil {
		f.Close()
		q.fs.Remove(p)
	}
	if err != nil {
		q.log.Warn("sfqueue: cannot use the spare segment; creating one", zap.String("slot", q.slot), zap.Error(err))
		return nil
	}
	q.st.sparesUsed++
	return &segment{base: base, path: p, version: segmentVersion, f: f, size: segmentHeaderSize, dirty: true}
}

// dropSpareLocked deletes the ready spare (to free its room under the cap).
func (q *Queue) dropSpareLocked() {
	if q.spare == nil {
		return
	}
	q.spare.Close()
	q.spare = nil
	q.unlink(filepath.Join(q.slot, spareName))
}

// wakeSpareLocked asks the background goroutine for a new spare when none
// is coming and the active segment is half full: by then the Ack that
// frees the previous segment would have recycled it. q.sparing holds from
// here until the spare is ready (or has failed), so one is asked for at a
// time and the channel (capacity 1) never blocks.
func (q *Queue) wakeSpareLocked() {
	if q.spareWake != nil && q.active != nil && q.active.size > q.o.MaxSegmentBytes/2 && q.spareWantedLocked() {
		q.sparing = true
		q.spareWake <- struct{}{}
	}
}

// cancelSpareWakeLocked withdraws a request the stopped background
// goroutine will not serve (Close).
func (q *Queue) cancelSpareWakeLocked() {
	select {
	case <-q.spareWake:
		q.sparing = false
	default:
	}
}

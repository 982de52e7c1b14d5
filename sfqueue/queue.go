package sfqueue

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"
)

// ConsumerState is what the consumer (the I/O loop) tells the queue about
// its connection, so that a full-queue error can say why nothing drains.
type ConsumerState struct {
	Reconnecting bool
	Attempts     int
	OutageStart  time.Time
}

// Queue is a store-and-forward queue of opaque frames numbered by FSN. It is
// safe for concurrent use: producers Append, one consumer reads through a
// Cursor and Acks. All state lives under one mutex; fsyncs run outside it.
// In flush durability a flusher goroutine runs the group fsyncs.
type Queue struct {
	o    Options
	fs   FS
	sf   bool   // SF mode (files) rather than memory-only
	slot string // slot directory (a virtual name in memory-only mode)
	lock io.Closer
	log  *zap.Logger

	mu       sync.Mutex
	syncDone *sync.Cond // broadcast when an fsync finishes
	segs     []*segment // ascending base FSN; contiguous
	active   *segment   // segment taking appends; nil: create one on demand
	nextFSN  uint64
	// written is the highest FSN whose frame is in its segment file (the
	// page cache): what cursors see. It trails nextFSN-1 only in flush
	// durability, between an append and the group fsync that writes it.
	written uint64
	acked   uint64
	durable uint64 // highest FSN covered by a completed fsync
	used    int64  // header and frame bytes of the retained segments
	// atCap: the latest append found no room under the cap (it waited, was
	// refused, or evicted); cleared by an append admitted without evicting.
	atCap bool
	// noSpace: the latest store met a full file system (ENOSPC) and no
	// segment was deleted since; Fits answers no while it holds.
	noSpace bool
	// noSpaceLog is when the last ENOSPC Warn was logged and noSpaceQuiet
	// the ENOSPC met since: a full disk is summarised, not logged per
	// refused append (logNoSpaceLocked).
	noSpaceLog   time.Time
	noSpaceQuiet uint64
	fatal        *FatalError
	closed       bool
	syncing      bool
	// rotating: an append is fsyncing with q.mu released (the segment it
	// seals, or its dictionary entries); other appends wait.
	rotating bool
	// sealSyncing: sealed segments (segment.sealing) are being fsynced
	// with q.mu released.
	sealSyncing bool
	// dictSyncs counts fsyncs of dictionary files running unlocked.
	dictSyncs int
	// index is the producer's index bytes (Batch.IndexBytes), memory-only
	// mode.
	index     int64
	dirDirty  bool // a segment was created since the last directory fsync
	unlinking int  // Acks deleting segment files with q.mu released
	// spare is a prepared segment file (spare.go) the next rotation
	// renames into place; sparing: one is being prepared with q.mu
	// released; noRecycle: the file system cannot zero a range, so acked
	// segments are deleted rather than recycled into spares.
	spare     File
	sparing   bool
	noRecycle bool
	spareWake chan struct{} // asks the background goroutine for a spare
	// sealWake asks the background goroutine to fsync the sealed segments
	// at once (flush durability: so the group fsync that must wait for
	// them finds them durable or nearly; memory: off the append path).
	sealWake chan struct{}
	consumer ConsumerState
	space    chan struct{} // closed and replaced when room may have appeared
	waiters  int           // appends waiting on space
	wbuf     []byte
	// pend holds, in flush durability, the frames appended to the end of
	// q.active since the last group fsync, built but not yet written:
	// the flusher writes them with one call before its fsync
	// (flushWritesLocked). An append then costs a copy under q.mu instead
	// of a write system call, and the appends an fsync released can all
	// join the next one before it starts (BENCHMARKS.md, #14 fifth pass).
	// Only the active segment ever has built frames: a rotation writes
	// them before the sealed segment's fsync.
	pend []byte
	// pendWrites counts flushWritesLocked's writes, so an undo can tell
	// whether the batch's frames reached the file.
	pendWrites uint64
	// undo is the batch writeLocked is storing, nil between batches: a
	// group write that fails meanwhile cuts its built frames too.
	undo *writeUndo
	// lastGroup is the bytes of the frames the last flush-mode write
	// carried: what the next group fsync is likely to carry (rotatesEarlyLocked).
	lastGroup int64
	readOpen  []*segment // sealed segments the cursor opened, oldest first
	dict      *symbolDict
	gens      genTracker
	st        counters
	recovery  RecoveryReport
	wmSaved   watermark // last written to .ack-watermark
	wmWriting bool      // a .ack-watermark write is under way (q.mu released)
	wmFailing bool      // the last background .ack-watermark write failed

	// pending is the group fsync (flush mode) that appends written since
	// the last one started wait for; nil: none waits.
	pending  *syncEpoch
	flushReq chan struct{} // wakes the flusher (capacity 1)

	published chan struct{}
	stop      chan struct{}
	done      chan struct{} // background has returned
	flushDone chan struct{} // the flusher has returned (flush mode)
}

// Open opens (SF mode: recovers) a queue. Data that recovery had to set
// aside is reported by Recovery, not as an error; errors are for a slot that
// cannot be used at all (locked, unreadable, bad options).
func Open(o Options) (*Queue, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	q := &Queue{
		o:         o,
		log:       o.Logger,
		nextFSN:   1,
		space:     make(chan struct{}),
		published: make(chan struct{}, 1),
	}
	q.syncDone = sync.NewCond(&q.mu)
	if o.Dir == "" {
		q.fs = newMemRing()
		q.slot = "memory"
		q.dict = newMemoryDict()
		q.gens = newGenTracker(0, nil)
		return q, nil
	}
	q.sf = true
	q.fs = o.FS
	q.slot = filepath.Join(o.Dir, o.SenderID)
	if err := q.recover(); err != nil {
		return nil, err
	}
	q.gens = newGenTracker(q.nextFSN-1, q.SymbolGenerations())
	q.stop = make(chan struct{})
	q.done = make(chan struct{})
	if q.segmentAlloc() > 0 {
		q.spareWake = make(chan struct{}, 1)
	}
	if o.Durability != DurabilityPeriodic {
		q.sealWake = make(chan struct{}, 1)
	}
	go q.background()
	if o.Durability == DurabilityFlush {
		q.flushReq = make(chan struct{}, 1)
		q.flushDone = make(chan struct{})
		go q.flusher()
	}
	return q, nil
}

// Recovery reports what Open found in the slot.
func (q *Queue) Recovery() RecoveryReport {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.recovery
}

// Published receives a value (the channel has capacity 1) after frames are
// published, so a consumer that found Next empty can wait without polling.
func (q *Queue) Published() <-chan struct{} { return q.published }

// PublishedFSN is the FSN of the last frame cursors can read: the last
// appended, except in flush durability, where frames are published when
// the group fsync that covers them writes them (0: none yet).
func (q *Queue) PublishedFSN() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.written
}

// AckedFSN is the highest FSN acknowledged (0: none).
func (q *Queue) AckedFSN() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.acked
}

// SetConsumerState records the consumer's connection state for *FullError.
func (q *Queue) SetConsumerState(s ConsumerState) {
	q.mu.Lock()
	q.consumer = s
	q.mu.Unlock()
}

// Append appends one frame carrying no items; see AppendBatchItems.
func (q *Queue) Append(ctx context.Context, payload []byte) (uint64, error) {
	return q.AppendBatchItems(ctx, [][]byte{payload}, nil)
}

// AppendBatch appends frames carrying no items (an item count of 0); see
// AppendBatchItems.
func (q *Queue) AppendBatch(ctx context.Context, payloads [][]byte) (uint64, error) {
	return q.AppendBatchItems(ctx, payloads, nil)
}

var errNoRoom = errors.New("no room")

// AppendBatchItems appends payloads as consecutive frames and returns the
// FSN of the last one; items is Batch.Items. See AppendWith.
func (q *Queue) AppendBatchItems(ctx context.Context, payloads [][]byte, items []uint32) (uint64, error) {
	return q.appendBatch(ctx, Batch{Payloads: payloads, Items: items}, false)
}

// Batch is what one AppendWith stores, all or nothing.
type Batch struct {
	// Payloads are appended as consecutive frames.
	Payloads [][]byte
	// Items[i] is the number of items (the exporter's rows) Payloads[i]
	// carries; the queue stores it with the frame (doc.go, frame format)
	// so that an eviction can count what it drops (Stats.ItemsEvicted),
	// even after a restart. nil means 0 for every frame.
	Items []uint32
	// Symbols are the dictionary entries the payloads define (and later
	// frames use), admitted under the cap together with them.
	Symbols []SymbolRun
	// IndexBytes is, in memory-only mode, the RAM the producer holds
	// outside the queue to assign symbol ids (its index of the generation
	// being written): counted in the cap from this batch on, as the
	// frames and dictionary are, so that the cap bounds all the RAM an
	// outage costs. Ignored in SF mode, whose cap is disk.
	IndexBytes int64
}

// AppendWith appends b.Payloads as consecutive frames with the dictionary
// entries b.Symbols, and returns the FSN of the last frame. The batch is
// all or nothing: frames and entries are admitted under the cap together
// (at the cap OnFull applies to both, and eviction frees room for both),
// and when the append fails neither stays. The entries are written first
// and, in periodic and flush durability, fsynced before any frame is
// written, so no frame reaches the disk ahead of the ids it needs. The
// frames are published to cursors at once, except in flush durability:
// there they are built in memory and written, and published, by the next
// group fsync, and AppendWith returns once that fsync has ended (all
// appends that wait while an fsync runs share the next one). ctx bounds
// only the wait for room; the wait for the fsync is not cancelable, because
// by then the frames are taken and will be sent.
func (q *Queue) AppendWith(ctx context.Context, b Batch) (uint64, error) {
	return q.appendBatch(ctx, b, true)
}

func (q *Queue) appendBatch(ctx context.Context, b Batch, setIndex bool) (uint64, error) {
	payloads := b.Payloads
	if len(payloads) == 0 {
		return 0, errors.New("sfqueue: AppendBatch needs at least one payload, got 0")
	}
	if b.Items != nil && len(b.Items) != len(payloads) {
		return 0, fmt.Errorf("sfqueue: AppendBatchItems got %d item counts for %d payloads; want one per payload (or nil)", len(b.Items), len(payloads))
	}
	var frames int64
	for _, p := range payloads {
		fs := frameSize(len(p))
		if fs > q.o.MaxSegmentBytes-segmentHeaderSize {
			return 0, &FrameTooLargeError{FrameBytes: fs, SegmentBytes: q.o.MaxSegmentBytes}
		}
		frames += fs
	}
	start := time.Now()
	deadline := start.Add(q.o.AppendDeadline)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}

	q.mu.Lock()
	last, err := q.appendLocked(ctx, b, setIndex, frames, start, deadline)
	var ep *syncEpoch
	if err == nil && q.flushReq != nil {
		ep = q.pendingEpochLocked()
	}
	q.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if ep != nil {
		<-ep.done
		if ep.err != nil {
			return 0, ep.err
		}
	}
	return last, nil
}

// appendLocked stores the batch once it is admitted (waiting for room,
// evicting or refusing by OnFull) and returns the FSN of its last frame.
func (q *Queue) appendLocked(ctx context.Context, b Batch, setIndex bool, frames int64, start, deadline time.Time) (uint64, error) {
	payloads := b.Payloads
	var need int64
	for {
		// A directory fsync may make a new segment's name durable before
		// its header (the .ack-watermark's replace, a dictionary file's
		// creation): a power loss then leaves a torn creation, which
		// recovery deletes as the loss window it is (doc.go, Recovery).
		for q.rotating && !q.closed {
			q.syncDone.Wait()
		}
		if err := q.usableLocked(); err != nil {
			return 0, err
		}
		reason := q.consumerReasonLocked()
		var index int64
		// Recomputed on every pass: acks and evictions change what the
		// dictionary holds.
		need, index = q.needLocked(b, frames, setIndex)
		early, err := q.admitLocked(payloads, need)
		if err != nil && !errors.Is(err, errNoRoom) {
			return 0, err // latched, or closed while a sealed segment's fsync ran
		}
		if err == nil {
			err = q.storeLocked(b, early)
			if err == nil {
				q.index = index
				q.noSpace = false
				break
			}
			if q.fatal != nil {
				// An undo that latched: its error may wrap the ENOSPC
				// that began it, but no retry can succeed now.
				return 0, q.fatal
			}
			if !isNoSpace(err) {
				return 0, err
			}
			reason = DiskFull
			q.logNoSpaceLocked(err)
		}
		if q.o.OnFull == OnFullEvictOldest && q.evictOldestLocked() {
			// The dictionaries only evicted frames used count in the cap:
			// free them now, before evicting more.
			q.dropUnusedGenerationsLocked()
			continue
		}
		q.atCap = true
		if err := q.waitSpaceLocked(ctx, deadline); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				q.st.fullErrors++
				if reason == DiskFull {
					q.st.diskFullErrors++
				}
				c := q.consumer
				return 0, &FullError{Reason: reason, Attempts: c.Attempts, OutageStart: c.OutageStart,
					Used: q.usedLocked(), Cap: q.o.MaxTotalBytes, Need: need, Waited: time.Since(start)}
			}
			return 0, err
		}
	}
	return q.nextFSN - 1, nil
}

// noSpaceLogInterval is the shortest time between two ENOSPC Warns: a full
// disk refuses every append, often several times each (every wake-up
// retries), and the exporter's full-queue alert already reports it.
const noSpaceLogInterval = time.Minute

// logNoSpaceLocked notes a store refused by a full file system: it logs the
// first, then at most one Warn per noSpaceLogInterval with how many were
// met since the previous line.
func (q *Queue) logNoSpaceLocked(err error) {
	q.noSpace = true
	q.noSpaceQuiet++
	now := time.Now()
	if !q.noSpaceLog.IsZero() && now.Sub(q.noSpaceLog) < noSpaceLogInterval {
		return
	}
	q.log.Warn("sfqueue: file system full while appending; appends are refused as a full queue (DiskFull) until there is room; logged at most once a minute",
		zap.String("slot", q.slot), zap.Uint64("enospc_since_last_line", q.noSpaceQuiet), zap.Error(err))
	q.noSpaceLog, q.noSpaceQuiet = now, 0
}

// needLocked is what b adds to the bytes the cap counts (frames holds its
// frames' bytes), and the producer's index once it is in.
func (q *Queue) needLocked(b Batch, frames int64, setIndex bool) (need, index int64) {
	index = q.index
	if setIndex && !q.sf {
		index = b.IndexBytes
	}
	return frames + q.dict.need(b.Symbols) + index - q.index, index
}

// Fits reports whether AppendWith(b) would find room under the cap right
// now, without waiting or evicting. It changes nothing and waits for no
// fsync: the room the spare and the wholly acknowledged oldest segments
// (not one still being fsynced) would give back counts as free.
func (q *Queue) Fits(b Batch) bool {
	var frames int64
	for _, p := range b.Payloads {
		frames += frameSize(len(p))
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.noSpace {
		return false
	}
	if len(q.segs) == 0 {
		return true
	}
	need, _ := q.needLocked(b, frames, true)
	free := q.o.MaxTotalBytes - q.usedLocked() - need
	for _, s := range q.segs {
		if s.end()-1 > q.acked || s.sealing {
			break
		}
		free += s.size + s.slack
	}
	return q.rotationBytes(b.Payloads, false) <= free
}

// storeLocked writes an admitted batch: its dictionary entries (durable
// first, see writeSymbolsLocked), then its frames. On error nothing of it
// stays.
func (q *Queue) storeLocked(b Batch, early bool) error {
	marks, err := q.writeSymbolsLocked(b.Symbols)
	if err != nil {
		return err
	}
	if err := q.writeLocked(b.Payloads, b.Items, early); err != nil {
		if q.fatal == nil || isNoSpace(err) {
			q.undoSymbolsLocked(marks)
		}
		return err
	}
	q.noteSymbolsLocked(b.Symbols)
	q.noteFramesLocked(q.nextFSN-uint64(len(b.Payloads)), b.Payloads)
	return nil
}

// usedLocked is what the cap counts: segments, dictionary and, in
// memory-only mode, the producer's index (Batch.IndexBytes).
func (q *Queue) usedLocked() int64 { return q.used + q.dict.bytes + q.index }

// usableLocked is the error every append gets once the queue is closed or
// an fsync failed.
func (q *Queue) usableLocked() error {
	if q.closed {
		return ErrClosed
	}
	if q.fatal != nil {
		return q.fatal
	}
	return nil
}

func (q *Queue) consumerReasonLocked() FullReason {
	if q.consumer.Reconnecting {
		return Reconnecting
	}
	return Publishing
}

// admitLocked decides whether payloads and need more bytes (their frames,
// dictionary entries and index) fit under the byte cap, reclaiming fully
// acked segments (the active one included) first, and reports whether the
// batch is to rotate early (rotatesEarlyLocked), which it counted: the
// flusher may write the frames built meanwhile (writeSymbolsLocked
// releases q.mu), and writeLocked must not decide otherwise. A queue holding no
// segments admits any batch whose frames fit a segment, so one frame larger
// than the whole cap, or a dictionary that the cap cannot hold beside one
// frame, cannot wedge it.
func (q *Queue) admitLocked(payloads [][]byte, need int64) (early bool, err error) {
	fits := func() bool {
		room := q.o.MaxTotalBytes - q.usedLocked() - q.spareBytesLocked() - need
		// Rotating early is a latency choice: only when its unused room
		// fits too, never a reason to refuse or evict.
		early = q.rotatesEarlyLocked() && q.rotationBytes(payloads, true) <= room
		return len(q.segs) == 0 || q.rotationBytes(payloads, early) <= room
	}
	if fits() {
		return early, nil
	}
	q.dropSpareLocked() // its room goes to frames first
	if fits() {
		return early, nil
	}
	for len(q.segs) > 0 && q.segs[0].end()-1 <= q.acked {
		if q.segs[0].sealing && q.o.Durability != DurabilityMemory {
			// Not durable yet (flush durability): deleted now, a power
			// loss could find the next segment's frames and not its
			// tail, as Ack knows. Its fsync first, with q.mu released.
			if err := q.syncSealedLocked(true); err != nil {
				return false, err
			}
			continue
		}
		q.removeFirstLocked()
	}
	if fits() {
		return early, nil
	}
	return false, errNoRoom
}

// rotationBytes is what the rotations writeLocked would make for payloads
// add beside their frames: each new segment's header, and the unused tail
// of each segment they seal (sealSlack).
func (q *Queue) rotationBytes(payloads [][]byte, early bool) int64 {
	var n int64
	size := q.o.MaxSegmentBytes // forces a new segment when there is no active one
	if q.active != nil {
		size = q.active.size
	}
	for i, p := range payloads {
		fs := frameSize(len(p))
		if size+fs > q.o.MaxSegmentBytes || i == 0 && early {
			n += q.sealSlack(size) + segmentHeaderSize // no active segment: size is the whole, no slack
			size = segmentHeaderSize
		}
		size += fs
	}
	return n
}

// rotatesEarlyLocked reports whether the next batch starts a new segment
// although its first frame would fit (flush durability): it is the first
// of a gather (no frame built since the last group write), and the frames
// of a group like the last one would not fit the active segment's room.
// The rotation then finds every frame of the sealed segment written, and
// covered by the group fsync in flight, so the next group does not wait
// for a sealed segment's own fsync before writing (the costliest step of
// a rotation in the middle of a gather; BENCHMARKS.md, #14 sixth pass).
// The room left unused, at most a sixteenth of a segment, counts against
// the cap (sealSlack).
func (q *Queue) rotatesEarlyLocked() bool {
	a := q.active
	return q.flushReq != nil && len(q.pend) == 0 && a != nil && len(a.offsets) > 0 &&
		q.lastGroup <= q.o.MaxSegmentBytes/16 && a.size+q.lastGroup > q.o.MaxSegmentBytes
}

// sealSlack is the unused tail a segment of size bytes keeps when it is
// sealed: in periodic and flush durability its file was preallocated
// whole (MaxSegmentBytes), and the disk holds it until the segment goes,
// so the cap counts it like frames. Without it a queue of frames that
// fill segments badly (two 2.1 MiB batches do not share a 4 MiB segment)
// held up to twice the cap on disk.
func (q *Queue) sealSlack(size int64) int64 {
	if !q.sf || q.segmentAlloc() == 0 {
		return 0
	}
	return max(0, q.o.MaxSegmentBytes-size)
}

// waitSpaceLocked waits (unlocked) until acks may have freed room, the
// deadline passes (context.DeadlineExceeded), ctx is canceled, or the queue
// closes.
func (q *Queue) waitSpaceLocked(ctx context.Context, deadline time.Time) error {
	wait := time.Until(deadline)
	if wait <= 0 {
		return context.DeadlineExceeded
	}
	ch := q.space
	q.waiters++
	q.mu.Unlock()
	t := time.NewTimer(wait)
	var err error
	select {
	case <-ch:
	case <-t.C:
		err = context.DeadlineExceeded
	case <-ctx.Done():
		err = ctx.Err()
		if !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("sfqueue: append canceled while waiting for room in a full queue: %w", err)
		}
	}
	t.Stop()
	q.mu.Lock()
	q.waiters--
	if q.closed {
		return ErrClosed
	}
	return err
}

// notifySpaceLocked wakes appends waiting for room.
func (q *Queue) notifySpaceLocked() {
	if q.waiters > 0 {
		close(q.space)
		q.space = make(chan struct{})
	}
}

// writeLocked writes payloads as frames, frame i carrying items[i] (0 when
// items is nil), in a new segment from the first one when early (the
// admission's rotatesEarlyLocked, whose unused room it counted). It first creates every segment the
// batch needs (so a full disk is found before any frame is written), then
// writes them in order (flush durability: builds them, writeFramesLocked).
// Before the first write into a new segment the previous one is fsynced
// (periodic: here; flush: sealLocked leaves it to the next group fsync,
// which runs it before it writes the new segment's frames), so a power
// loss can cut only the newest data and never leave a hole between
// segments. Any error
// undoes the whole batch; errors other than ENOSPC latch the queue fatal.
func (q *Queue) writeLocked(payloads [][]byte, items []uint32, early bool) error {
	type chunk struct {
		seg      *segment
		from, to int
	}
	var one [1]chunk // most batches fit the active segment: no allocation
	chunks := one[:0]
	fsn := q.nextFSN
	cur, size := q.active, q.o.MaxSegmentBytes
	if cur != nil {
		size = cur.size
	}
	var created []*segment
	for i, p := range payloads {
		fs := frameSize(len(p))
		if size+fs > q.o.MaxSegmentBytes || i == 0 && early {
			ns := q.spareSegmentLocked(fsn)
			var err error
			if ns == nil {
				ns, err = createSegment(q.fs, q.slot, fsn, q.segmentAlloc())
			}
			if err != nil {
				for _, s := range created {
					s.f.Close()
					q.fs.Remove(s.path)
				}
				if isNoSpace(err) {
					return err
				}
				return q.latchLocked("create segment "+segmentName(fsn), err)
			}
			created = append(created, ns)
			cur, size = ns, segmentHeaderSize
			chunks = append(chunks, chunk{seg: ns, from: i})
		} else if len(chunks) == 0 {
			chunks = append(chunks, chunk{seg: cur, from: i})
		}
		size += fs
		chunks[len(chunks)-1].to = i + 1
		fsn++
	}

	rollback := q.snapshotLocked(created)
	if a := rollback.active; a != nil && len(chunks) > 0 && chunks[0].seg == a {
		for _, p := range payloads[chunks[0].from:chunks[0].to] {
			rollback.end += frameSize(len(p))
		}
	}
	q.undo = rollback // a group write that fails meanwhile tells it (dropGroupLocked)
	defer func() { q.undo = nil }()
	var sealed []*segment // closed once the batch is in: no more writes
	for _, c := range chunks {
		if c.seg != q.active {
			// A group or periodic fsync under way may be fsyncing prev
			// (its dirty flag already cleared): it is not durable yet,
			// so it is sealed (flush, memory) or fsynced (periodic) too.
			if prev := q.active; prev != nil && (prev.dirty || q.syncing) && q.sf {
				var err error
				if q.o.Durability == DurabilityPeriodic {
					err = q.rotationSyncLocked(prev)
				} else {
					err = q.sealLocked(prev)
				}
				if err != nil {
					if ferr := rollback.undo(); ferr != nil {
						return ferr
					}
					return err
				}
			}
			if a := q.active; a != nil {
				sealed = append(sealed, a)
				rollback.rotated = true
				a.slack = q.sealSlack(a.size)
				q.used += a.slack
				rollback.added += a.slack
			}
			q.segs = append(q.segs, c.seg)
			q.active = c.seg
			q.used += segmentHeaderSize
			rollback.added += segmentHeaderSize
			q.dirDirty = true
		}
		chunkItems, err := q.writeFramesLocked(c.seg, payloads[c.from:c.to], items[min(c.from, len(items)):min(c.to, len(items))])
		if err != nil {
			if ferr := rollback.undo(); ferr != nil {
				return ferr
			}
			if isNoSpace(err) {
				return err
			}
			return q.latchLocked("write "+filepath.Base(c.seg.path), err)
		}
		off := c.seg.size
		for _, p := range payloads[c.from:c.to] {
			c.seg.offsets = append(c.seg.offsets, uint32(off))
			off += frameSize(len(p))
		}
		q.used += off - c.seg.size
		rollback.added += off - c.seg.size
		c.seg.size = off
		c.seg.items += chunkItems
		c.seg.dirty = true
	}
	for _, s := range sealed {
		s.closeFile() // a sealing one stays open for its fsync (a ref)
	}
	if cap(q.wbuf) > 4*directWrite {
		q.wbuf = nil // do not pin a large buffer after a batch of many small frames
	}
	for _, p := range payloads {
		q.st.framesAppended++
		q.st.bytesAppended += uint64(len(p))
	}
	q.nextFSN = fsn
	q.wakeSpareLocked()
	if q.flushReq == nil {
		q.publishLocked()
	}
	return nil
}

// publishLocked shows cursors every frame appended so far, whose bytes are
// in the segment files by now, and wakes the consumer.
func (q *Queue) publishLocked() {
	if q.written == q.nextFSN-1 {
		return
	}
	q.written = q.nextFSN - 1
	select {
	case q.published <- struct{}{}:
	default:
	}
}

// flushWritesLocked writes the frames built in q.pend (flush durability)
// at the end of the active segment and publishes them. A write that fails
// with ENOSPC or EDQUOT drops the group (dropGroupLocked): its appends fail
// with a retryable DiskFull and the queue stays usable. Any other failed
// write latches the queue, as a failed fsync does: the appends waiting for
// the group fsync get the error, and nothing they built is published.
func (q *Queue) flushWritesLocked() error {
	if len(q.pend) > 0 {
		s := q.active
		q.lastGroup = int64(len(q.pend))
		start := s.size - int64(len(q.pend))
		_, err := s.f.WriteAt(q.pend, start)
		q.pendWrites++
		if err != nil && isNoSpace(err) {
			err = q.dropGroupLocked(s, start, err)
		} else if err != nil {
			err = q.latchLocked("write "+filepath.Base(s.path), err)
		} else if q.pending != nil {
			q.pending.shut = true // its frames are written: a failed later group is not its
		}
		q.pend = q.pend[:0]
		if cap(q.pend) > 4*directWrite {
			q.pend = nil // do not pin the buffer of a burst of large frames
		}
		if err != nil {
			return err
		}
	}
	q.publishLocked()
	return nil
}

// dropGroupLocked undoes the frames of q.pend, which a write at start of s
// refused for want of space (err): a file system that does not reserve
// blocks at preallocation (copy-on-write, no fallocate) meets a full disk
// here. It cuts s back to start, so no part of a refused frame stays in the
// file for recovery to count torn (the cut is fsynced with the next group),
// takes the frames' FSNs and bytes back, and fails the appends waiting for
// them (q.pending, unless a rotation wrote its frames already) with the
// DiskFull refusal a full disk gives any append, counted. Frames of the
// batch writeLocked is storing (q.undo) are left to its undo, which gets
// err. Only a failed cut latches: the file could then hold a torn frame.
func (q *Queue) dropGroupLocked(s *segment, start int64, err error) error {
	if terr := s.f.Truncate(start); terr != nil {
		return q.latchLocked("truncate "+filepath.Base(s.path)+" after a full disk", errors.Join(err, terr))
	}
	s.dirty = true
	keep := len(s.offsets)
	for keep > 0 && int64(s.offsets[keep-1]) >= start {
		keep--
	}
	group, batch := len(s.offsets)-keep, 0 // frames cut, of which the batch's
	var batchBytes int64
	if u := q.undo; u != nil {
		u.lost = err
		switch {
		case u.active == s:
			batch, batchBytes = len(s.offsets)-u.frames, s.size-u.size
		case slices.Contains(u.created, s):
			batch, batchBytes = group, s.size-start
		}
	}
	earlier := group - batch // frames of the appends waiting, before the batch's
	var items uint64
	for i, off := 0, 0; off < len(q.pend); i++ {
		n := binary.LittleEndian.Uint32(q.pend[off:])
		items += uint64(binary.LittleEndian.Uint32(q.pend[off+4:]))
		off += int(frameSize(int(n)))
		if i < earlier {
			q.st.framesAppended--
			q.st.bytesAppended -= uint64(n)
		}
	}
	q.used -= int64(len(q.pend)) - batchBytes // the batch's undo takes its own bytes back
	q.nextFSN -= uint64(earlier)
	q.gens.dropFrom(q.nextFSN)
	s.offsets, s.size, s.items = s.offsets[:keep], start, s.items-items
	if u := q.undo; u != nil && u.active == s {
		// The undo now restores s to the cut, not to before the batch.
		u.size, u.end, u.frames, u.items = start, start, keep, s.items
		u.pend, u.pendWrites = 0, q.pendWrites
	}
	full := &FullError{Reason: DiskFull, Attempts: q.consumer.Attempts, OutageStart: q.consumer.OutageStart,
		Used: q.usedLocked(), Cap: q.o.MaxTotalBytes, Need: int64(len(q.pend))}
	if ep := q.pending; ep != nil && !ep.shut {
		ep.shut, ep.err = true, full // completed by the group fsync, as usual
		q.st.fullErrors += uint64(ep.waiters)
		q.st.diskFullErrors += uint64(ep.waiters)
	}
	if q.undo == nil {
		q.logNoSpaceLocked(err) // else the batch's append logs it
	}
	return err
}

// directWrite is the payload size from which writeFramesLocked writes a
// payload from the caller's slice instead of copying it into q.wbuf: the
// copy would keep a buffer as large as the largest batch alive between
// appends (the collector's peak RSS counts it twice, with the heap's
// headroom), to save two write calls per large frame.
const directWrite = 64 << 10

// writeFramesLocked writes payloads as consecutive frames at the end of s
// (items[i] is frame i's item count; items is empty when none were given)
// and returns the items written. Small frames are built in q.wbuf and
// written together; a large payload is written as it is, between its head
// and its CRC. A crash can tear the frame between those writes like inside
// one: the CRC finds it.
func (q *Queue) writeFramesLocked(s *segment, payloads [][]byte, items []uint32) (uint64, error) {
	if q.flushReq != nil {
		var total uint64
		for i, p := range payloads {
			n := itemCount(items, i)
			total += uint64(n)
			q.pend = appendFrame(q.pend, p, n)
		}
		return total, nil
	}
	buf, off := q.wbuf[:0], s.size
	write := func(b []byte) error {
		if len(b) == 0 {
			return nil
		}
		_, err := s.f.WriteAt(b, off)
		off += int64(len(b))
		return err
	}
	var total uint64
	for i, p := range payloads {
		n := itemCount(items, i)
		total += uint64(n)
		if len(p) < directWrite {
			buf = appendFrame(buf, p, n)
			continue
		}
		head := len(buf)
		buf = appendFrameHead(buf, len(p), n)
		crc := crc32.Update(crc32.Checksum(buf[head:], castagnoli), castagnoli, p)
		if err := write(buf); err != nil {
			return 0, err
		}
		if err := write(p); err != nil {
			return 0, err
		}
		buf = binary.LittleEndian.AppendUint32(buf[:0], crc)
	}
	q.wbuf = buf[:0]
	return total, write(buf)
}

// itemCount is payload i's item count: items[i], or 0 when no counts
// were given.
func itemCount(items []uint32, i int) uint32 {
	if len(items) > 0 {
		return items[i]
	}
	return 0
}

// segmentAlloc is the preallocation of a new segment. Memory durability in
// SF mode does not preallocate: writing into fallocate'd (unwritten) extents
// is ext4's slow path, and that mode never fsyncs, so the file size and
// extents preallocation would make durable with the segment do not matter;
// a full disk then surfaces as ENOSPC from the frame write, which undoes the
// batch like any refused append (see doc.go). The memory ring takes the
// segment size as its growth limit.
func (q *Queue) segmentAlloc() int64 {
	if q.sf && q.o.Durability == DurabilityMemory {
		return 0
	}
	return q.o.MaxSegmentBytes
}

// writeUndo restores the write state after a failed batch: the active
// segment's size and frames, the bytes accounted, and the segments created
// for the batch (deleted). It also zeroes the active segment's bytes the
// batch wrote past the old end: the next append overwrites them from the
// old end, and a refused frame it left whole would read as a frame after a
// restart (replayed, a duplicate of the caller's retry), one it left in
// part as a damage with valid frames after it (the slot set aside).
type writeUndo struct {
	q       *Queue
	active  *segment
	size    int64
	end     int64 // where the batch's frames in active end (size: none there)
	frames  int
	items   uint64
	added   int64 // bytes added to q.used so far
	created []*segment
	// pend and pendWrites are q.pend's length and q.pendWrites at the
	// snapshot (flush durability): while no write happened since, the
	// batch's frames are only built, and cutting q.pend undoes them.
	pend       int
	pendWrites uint64
	// lost is the error of a group write that cut frames of the batch
	// (dropGroupLocked): the batch fails with it.
	lost error
	// rotated: the batch moved appends to a later segment, whose rotation
	// may have fsynced active with the batch's first frames in it.
	rotated bool
}

func (q *Queue) snapshotLocked(created []*segment) *writeUndo {
	u := &writeUndo{q: q, active: q.active, created: created, pend: len(q.pend), pendWrites: q.pendWrites}
	if u.active != nil {
		u.size, u.frames, u.items = u.active.size, len(u.active.offsets), u.active.items
		u.end = u.size
	}
	return u
}

// writeZeros overwrites f from off up to end with zeros (the undo of a
// write that already failed).
func writeZeros(f File, off, end int64) error {
	zeros := make([]byte, min(end-off, 64<<10))
	for off < end {
		n := min(end-off, int64(len(zeros)))
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// eraseUndoneLocked removes what an undone batch wrote into s from off up
// to end: zeros over it, which keeps a preallocated segment's blocks, or,
// when that fails too (a full disk that refuses overwrites: copy-on-write
// file systems, a write that was cut short before its blocks were
// reserved), a truncate to off. A remainder would outlive the undo: once s
// is sealed, recovery finds written bytes after its last frame in a
// segment before the newest, which is damage, and sets the slot aside. A
// failed truncate latches.
func (q *Queue) eraseUndoneLocked(s *segment, off, end int64) error {
	zerr := writeZeros(s.f, off, end)
	if zerr == nil {
		return nil
	}
	if err := s.f.Truncate(off); err != nil {
		return q.latchLocked("truncate "+filepath.Base(s.path)+" after a failed write", errors.Join(zerr, err))
	}
	return nil
}

// undo restores the state before the batch. It returns the fatal error
// when erasing the batch's frames latched the queue (nil otherwise): the
// append then fails with it, not with a retryable refusal.
func (u *writeUndo) undo() error {
	q := u.q
	q.segs = slices.DeleteFunc(q.segs, func(s *segment) bool { return slices.Contains(u.created, s) })
	if a := u.active; a != nil && a.removed {
		// Acked and deleted while the batch waited for a rotation's fsync
		// with q.mu released (the batch had given it no frame): its size
		// and the slack the batch charged left the count with it.
		u.added -= a.slack
		u.active = nil
	}
	q.active = u.active
	q.used -= u.added
	var fatal error
	// A seal fsync during the batch (memory durability) counted the
	// batch's frames in the segment it sealed as durable: they are gone.
	q.durable = min(q.durable, q.nextFSN-1)
	written := u.pendWrites != q.pendWrites
	if written {
		q.pend = q.pend[:0] // frames of the batch only: the rest was written
	} else {
		q.pend = q.pend[:u.pend]
	}
	if a := u.active; a != nil {
		a.size, a.offsets, a.items, a.slack = u.size, a.offsets[:u.frames], u.items, 0
		a.unsealLocked() // active again
		if written || q.flushReq == nil {
			if err := q.eraseUndoneLocked(a, u.size, max(u.end, u.size+4)); err != nil {
				fatal = err
			} else if u.rotated {
				// The batch's rotation may have fsynced a with the
				// batch's first frames in it: the zeros must be durable
				// before the refusal returns, or a power loss brings
				// the refused frames back, in the place of later
				// appends' frames (a rare path: the fsync holds q.mu).
				if err := q.fsyncLocked(a); err != nil {
					fatal = err
				}
			} else {
				// Durable before a later segment's frames are.
				a.dirty = true
			}
		}
	}
	for _, s := range u.created {
		s.unsealLocked() // sealed by this batch, its fsync failed
		s.removed = true
		s.closeFile() // or the fsync holding it does (a ref), when it ends
		q.fs.Remove(s.path)
	}
	if u.rotated && len(u.created) > 0 && fatal == nil {
		// A segment the batch created and sealed may be durable with
		// its frames, name included (a memory-durability seal fsyncs
		// the directory too): its removal must be, or a power loss
		// brings the frames back.
		if err := q.fs.SyncDir(q.slot); err != nil {
			fatal = q.latchLocked("fsync directory after undoing a batch", err)
		}
	}
	return fatal
}

// sealLocked seals prev at a rotation in flush and memory durability.
// Flush: it writes the frames built for prev and leaves prev's fsync to
// the next group fsync, which runs it before it writes any frame of a
// later segment (syncSealedLocked). Appends do not wait for that fsync, as
// they do at a periodic-mode rotation (rotationSyncLocked); no frame
// reaches the next segment's file before prev is durable either way, so a
// power loss cannot leave a hole between them. Memory: the background
// goroutine fsyncs prev, off the append path, and q.durable then records
// it, so the mode's loss window is the active segment and at most this
// one (rule.go). Either way a segment sealed before and not yet durable (a
// rotation faster than an fsync, a batch larger than a segment) is fsynced
// first, here, other appends waiting.
func (q *Queue) sealLocked(prev *segment) error {
	if err := q.syncSealedLocked(true); err != nil {
		return err
	}
	if u := q.undo; u != nil && u.lost != nil {
		return u.lost // the flusher's group write, which held frames of the batch, found no room
	}
	if err := q.flushWritesLocked(); err != nil {
		return err
	}
	prev.sealing = true
	prev.refs++ // open until its fsync: syncSealedLocked drops it
	select {
	case q.sealWake <- struct{}{}:
	default:
	}
	return nil
}

// syncSealedLocked fsyncs the sealed segments not yet durable
// (segment.sealing), with q.mu released, and waits for such an fsync
// already under way. It returns with none left. byAppend: on the append
// path, where other appends wait meanwhile (q.rotating), and a queue that
// closed meanwhile fails the append with ErrClosed.
func (q *Queue) syncSealedLocked(byAppend bool) error {
	if byAppend {
		// The batch being written holds state computed under the lock
		// (its chunks, the segments it created): no other append may run
		// while this one waits with the lock released, for its own fsync
		// or for one already under way.
		q.rotating = true
		defer func() {
			q.rotating = false
			q.syncDone.Broadcast()
		}()
	}
	for {
		if q.fatal != nil {
			return q.fatal
		}
		if q.sealSyncing {
			q.syncDone.Wait()
			continue
		}
		var segs []*segment
		for _, s := range q.segs {
			if s.sealing {
				segs = append(segs, s)
			}
		}
		if len(segs) == 0 {
			if byAppend && q.closed {
				return ErrClosed
			}
			return nil
		}
		q.sealSyncing = true
		// Memory durability: the directory too, so that what q.durable
		// then records is durable, names included (nothing else fsyncs
		// the directory but the .ack-watermark's save), and first the
		// dictionary entries the sealed frames use: nothing else fsyncs
		// them in this mode, and once the frames defining them are acked
		// and deleted, a power loss would leave the sealed frames' ids
		// backed by nothing (the slot set aside).
		var dict []*genFile
		if q.o.Durability == DurabilityMemory {
			dict = q.dict.takeDirty()
		}
		op, err := q.fsyncUnlocked(segs, dict, q.o.Durability == DurabilityMemory)
		q.sealSyncing = false
		q.syncDone.Broadcast()
		if err != nil {
			return q.latchLocked(op, err)
		}
		for _, s := range segs {
			s.unsealLocked()
			s.dirty = false
			q.closeIdleLocked(s)
			if q.o.Durability == DurabilityMemory {
				// Sealed in order, each after the one before was synced.
				q.durable = max(q.durable, s.end()-1)
			}
		}
	}
}

// rotationSyncLocked fsyncs the segment being sealed, with q.mu released
// so the consumer keeps reading and acking meanwhile. Other appends wait
// (q.rotating): nothing may reach the next segment before this one is
// durable, or a power loss could leave a hole between them.
func (q *Queue) rotationSyncLocked(prev *segment) error {
	q.rotating = true
	op, err := q.fsyncUnlocked([]*segment{prev}, nil, false)
	q.rotating = false
	q.syncDone.Broadcast()
	if err != nil {
		return q.latchLocked(op, err)
	}
	if q.closed {
		return ErrClosed
	}
	prev.dirty = false
	return nil
}

// latchLocked records the first fatal error; later appends fail with it.
func (q *Queue) latchLocked(op string, err error) error {
	if q.fatal == nil {
		q.fatal = &FatalError{Op: op, Err: err, When: time.Now()}
		q.log.Error("sfqueue: fatal I/O error, appends stop until the queue is reopened",
			zap.String("slot", q.slot), zap.String("op", op), zap.Error(err))
	}
	return q.fatal
}

// Ack acknowledges every frame up to fsn (clamped to PublishedFSN; lower
// values are ignored) and deletes the segments that are now fully acked,
// except the one taking appends and, in flush durability, one sealed and
// not yet durable (and those after it); the first of them becomes the spare
// segment when one is wanted (spare.go). The files are unlinked (or
// recycled) with q.mu released: an unlink waits for the file system's
// journal, as long as an fsync at times, and appends and the flusher need
// the lock meanwhile. A crash before the unlink leaves a wholly acked
// segment, which recovery deletes (or replays, if the watermark had not
// caught up: as before).
func (q *Queue) Ack(fsn uint64) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	if pub := q.written; fsn > pub {
		fsn = pub
	}
	if fsn <= q.acked {
		q.mu.Unlock()
		return
	}
	q.st.framesAcked += fsn - q.acked
	q.st.bytesAcked += q.payloadBytesLocked(q.acked+1, fsn)
	q.acked = fsn
	var gone []string
	// A sealed segment not yet fsynced stays, acked or not, until its
	// fsync ends: deleted earlier, a power loss could keep the deletion
	// undone and its unsynced tail torn, before a later segment's durable
	// frames (a hole recovery must set aside). The Ack of the frames
	// behind it (published after that fsync) deletes it. Not in memory
	// durability, where the later segment is not durable either: the torn
	// tail is the window's cut (rule.go) whether the deletion was undone
	// or never made.
	for len(q.segs) > 0 && q.segs[0] != q.active && (!q.segs[0].sealing || q.o.Durability == DurabilityMemory) && q.segs[0].end()-1 <= q.acked {
		gone = append(gone, q.detachFirstLocked().path)
	}
	q.notifySpaceLocked()
	q.generationsChangedLocked()
	if len(gone) == 0 {
		q.mu.Unlock()
		return
	}
	recycle := ""
	if !q.noRecycle && q.spareWantedLocked() {
		recycle, gone = gone[0], gone[1:]
		q.sparing = true // Close waits for it
	}
	q.unlinking++ // Close waits for it
	q.mu.Unlock()
	// The others first: the recycle waits for a group fsync, and the disk
	// should not hold their room meanwhile.
	for _, p := range gone {
		q.unlink(p)
	}
	if recycle != "" {
		q.prepareSpare(recycle)
	}
	q.mu.Lock()
	q.unlinking--
	q.notifySpaceLocked() // the disk space is free now (a DiskFull wait)
	q.syncDone.Broadcast()
	q.mu.Unlock()
}

// payloadBytesLocked sums the payload sizes of the retained frames from..to.
func (q *Queue) payloadBytesLocked(from, to uint64) uint64 {
	var n uint64
	i := sort.Search(len(q.segs), func(i int) bool { return q.segs[i].end() > from })
	for ; i < len(q.segs) && q.segs[i].base <= to; i++ {
		s := q.segs[i]
		lo, hi := max(from, s.base), min(to, s.end()-1)
		for fsn := lo; fsn <= hi; fsn++ {
			_, size := s.frameBounds(int(fsn - s.base))
			n += uint64(size - int64(overheadOf(s.version)))
		}
	}
	return n
}

// removeFirstLocked deletes the oldest segment. A segment being fsynced
// outside the lock is closed by the fsync's owner when it finishes.
func (q *Queue) removeFirstLocked() {
	q.unlink(q.detachFirstLocked().path)
}

// unlink deletes a segment file; a failure is only logged (recovery deletes
// a wholly acked segment it finds).
func (q *Queue) unlink(path string) {
	if err := q.fs.Remove(path); err != nil {
		q.log.Warn("sfqueue: cannot delete segment", zap.String("path", path), zap.Error(err))
	}
}

// detachFirstLocked drops the oldest segment from the queue (accounting,
// the cursor's open files) and leaves the deletion of its file to the
// caller.
func (q *Queue) detachFirstLocked() *segment {
	s := q.segs[0]
	q.segs[0] = nil
	q.segs = q.segs[1:]
	if s == q.active {
		q.active = nil
	}
	q.used -= s.size + s.slack
	q.atCap, q.noSpace = false, false
	s.removed = true
	q.readOpen = slices.DeleteFunc(q.readOpen, func(o *segment) bool { return o == s })
	s.unsealLocked() // acked or evicted: its fsync no longer matters
	s.closeFile()
	return s
}

// evictOldestLocked deletes the oldest segment, acked or not, for
// on_full=evict_oldest. It reports false when there is nothing to evict.
func (q *Queue) evictOldestLocked() bool {
	if len(q.segs) == 0 {
		return false
	}
	s := q.segs[0]
	if s == q.active && q.flushWritesLocked() != nil {
		return false // latched: the append fails with it
	}
	var frames, bytes uint64
	over := int64(overheadOf(s.version))
	for i := range s.offsets {
		if s.base+uint64(i) > q.acked {
			_, n := s.frameBounds(i)
			frames++
			bytes += uint64(n - over)
		}
	}
	items, unknown := q.unackedItemsLocked(s, frames)
	q.removeFirstLocked()
	if last := s.end() - 1; last > q.acked {
		q.acked = last
		q.generationsChangedLocked()
	}
	q.st.framesEvicted += frames
	q.st.bytesEvicted += bytes
	q.st.itemsEvicted += items
	q.st.framesEvictedItemsUnknown += unknown
	q.atCap = true
	// Not logged here: a full queue evicts a segment per append, and the
	// owner logs a rate-limited summary from Stats (FramesEvicted).
	return true
}

// unackedItemsLocked counts the items of s's frames above the ack
// watermark (frames of them), before an eviction deletes s. A segment with
// no acknowledged frame costs no read: its sum is kept in RAM. A partly
// acknowledged one (only ever the oldest, so at most one segment per
// eviction) has the heads of its frames from the first unacknowledged one
// on read (segment.itemsFrom), not their payloads, as this runs under
// q.mu. unknown counts the frames whose items cannot be known: all of them
// in format 1, which stores no item count, or frames whose heads cannot be
// read or whose length disagrees with their place in the segment (logged).
func (q *Queue) unackedItemsLocked(s *segment, frames uint64) (items, unknown uint64) {
	switch {
	case frames == 0:
		return 0, 0
	case s.version == segmentVersionItemless:
		return 0, frames
	case s.base > q.acked:
		return s.items, 0
	}
	first := int(q.acked + 1 - s.base)
	fail := func(err error) (uint64, uint64) {
		q.log.Warn("sfqueue: cannot read the item counts of the frames an eviction drops; they are counted as frames of unknown items",
			zap.String("path", s.path), zap.Uint64("frames", frames), zap.Error(err))
		return 0, frames
	}
	if err := q.fileLocked(s); err != nil {
		return fail(err)
	}
	items, err := s.itemsFrom(first)
	if err != nil {
		return fail(err)
	}
	return items, 0
}

// Close closes the queue. In SF mode it fsyncs what is not yet durable
// (periodic and flush), records the ack watermark, and, when everything was
// acked, deletes every segment file. It releases the slot lock. A latched
// *FatalError is returned again here. Flush-mode appends still waiting for
// their fsync return after Close's, with its outcome (nil when it kept
// their frames), never ErrClosed for frames that stay on disk.
func (q *Queue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	q.notifySpaceLocked()
	q.syncDone.Broadcast()
	q.mu.Unlock()
	if q.stop != nil {
		close(q.stop)
		<-q.done
		if q.flushDone != nil {
			<-q.flushDone
		}
	}

	q.mu.Lock()
	defer q.mu.Unlock()
	q.cancelSpareWakeLocked()
	for q.syncing || q.sealSyncing || q.rotating || q.dictSyncs > 0 || q.unlinking > 0 || q.sparing {
		q.syncDone.Wait()
	}
	q.dropSpareLocked()
	// Appends whose fsync had not started (the flusher has stopped) get the
	// outcome of the fsyncs below, which keep their frames: answering
	// ErrClosed would have a retrying caller store them twice.
	var errs []error
	drained := q.acked == q.nextFSN-1
	if q.fatal == nil && !drained {
		err := q.syncSealedLocked(false)
		if err == nil {
			err = q.flushWritesLocked() // a full disk fails q.pending's appends (dropGroupLocked)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	ep := q.pending
	q.pending = nil
	// What a close leaves on disk: everything written, fsynced (periodic,
	// flush; unless an fsync failed) or in the page cache only (memory
	// durability's active segment). .ack-watermark records both, so that
	// the next recovery tells a loss in the window (counted) from media
	// damage, and never starts without a frame in silence.
	if q.sf && !drained && q.o.Durability != DurabilityMemory {
		for _, s := range q.segs {
			if q.fatal != nil {
				break
			}
			if s.dirty {
				if err := q.fsyncLocked(s); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if q.dirDirty && q.fatal == nil {
			if err := q.fs.SyncDir(q.slot); err != nil {
				errs = append(errs, q.latchLocked("fsync directory "+q.slot, err))
			}
		}
		if q.fatal == nil {
			q.durable = max(q.durable, q.written)
		}
	}
	q.completeLocked(ep) // with the latched error if an fsync failed
	if q.sf {
		// The watermark goes first: once the segments are gone it is what
		// keeps the next Open from reusing FSNs.
		if err := q.saveWatermarkLocked(); err != nil {
			errs = append(errs, err)
		}
	}
	for len(q.segs) > 0 {
		if drained {
			q.removeFirstLocked()
			continue
		}
		q.segs[0].unsealLocked() // never fsynced (latched): its ref goes with the queue
		q.segs[0].closeFile()
		q.segs = q.segs[1:]
	}
	q.active = nil
	q.readOpen = nil
	if q.sf && drained {
		if err := q.fs.SyncDir(q.slot); err != nil {
			errs = append(errs, fmt.Errorf("sfqueue: fsync slot directory %s: %w", q.slot, err))
		}
	}
	if err := q.dict.close(); err != nil {
		errs = append(errs, err)
	}
	if q.fatal != nil && !slices.Contains(errs, error(q.fatal)) {
		errs = append(errs, q.fatal) // the safety net: never let it pass unseen
	}
	if q.lock != nil {
		if err := q.lock.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// background runs the periodic fsync and the ack-watermark writer (SF mode).
func (q *Queue) background() {
	defer close(q.done)
	wm := time.NewTicker(watermarkInterval)
	defer wm.Stop()
	var syncTick <-chan time.Time
	if q.o.Durability == DurabilityPeriodic {
		t := time.NewTicker(q.o.SyncInterval)
		defer t.Stop()
		syncTick = t.C
	}
	for {
		select {
		case <-q.stop:
			return
		case <-syncTick:
			q.mu.Lock()
			if !q.syncing && q.fatal == nil {
				q.syncLocked()
			}
			q.mu.Unlock()
		case <-q.sealWake:
			q.mu.Lock()
			q.syncSealedLocked(false) // a failure latches
			q.mu.Unlock()
		case <-q.spareWake:
			q.prepareSpare("")
		case <-q.gens.wake:
			q.mu.Lock()
			q.dropUnusedGenerationsLocked()
			q.mu.Unlock()
		case <-wm.C:
			q.mu.Lock()
			err := q.saveWatermarkLocked()
			switch {
			case err != nil && !q.wmFailing:
				// Once per failure streak: it is retried every 250 ms.
				q.log.Error("sfqueue: cannot write .ack-watermark; a restart now would replay acknowledged frames (QuestDB may see duplicates), and frames a power loss takes now may go uncounted; retrying",
					zap.String("slot", q.slot), zap.Error(err))
				q.wmFailing = true
			case err == nil && q.wmFailing && q.wmSaved.acked == q.acked:
				q.log.Info("sfqueue: .ack-watermark written again", zap.String("slot", q.slot))
				q.wmFailing = false
			}
			q.mu.Unlock()
		}
	}
}

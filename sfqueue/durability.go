package sfqueue

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"time"
)

// syncEpoch is one group fsync of flush mode. Appends register on the epoch
// whose fsync has not started yet (q.pending) and wait on done, without the
// queue's lock; the flusher takes the epoch off q.pending under the lock as
// its fsync starts, so every frame an epoch's waiters wrote precedes that
// fsync, and closes done when it ends. err is set before done is closed.
//
// A channel per epoch, rather than a condition variable on q.mu, lets the
// appends an fsync covers return the moment it ends: they do not queue on
// the mutex to re-check a counter, and the flusher starts the next fsync
// without waiting behind them.
type syncEpoch struct {
	done    chan struct{}
	err     error
	waiters int // appends registered
	// shut: no append joins it any more, because a rotation wrote its
	// waiters' frames (their fsync is still to come) or their group write
	// failed (dropGroupLocked). Later appends wait on a new epoch whose
	// prev it is; the fsync that completes an epoch completes its prevs.
	shut bool
	prev *syncEpoch
}

// pendingEpochLocked is the epoch an append that has just written its
// frames waits for: the next fsync to start. It wakes the flusher.
func (q *Queue) pendingEpochLocked() *syncEpoch {
	if q.pending == nil || q.pending.shut {
		q.pending = &syncEpoch{done: make(chan struct{}), prev: q.pending}
	}
	q.pending.waiters++
	select {
	case q.flushReq <- struct{}{}:
	default: // already woken
	}
	return q.pending
}

// flusher runs flush mode's group commit (seed 004): while appends wait,
// fsync everything written so far, release them, repeat. There is no timer:
// the appends that arrive during one fsync share the next, so the batch
// grows with load.
func (q *Queue) flusher() {
	defer close(q.flushDone)
	var last time.Duration // the previous group fsync: bounds the gather
	for {
		select {
		case <-q.stop:
			return
		case <-q.flushReq:
		}
		q.mu.Lock()
		for q.pending != nil && !q.closed {
			q.gatherLocked(last)
			start := time.Now()
			q.syncLocked()
			last = time.Since(start)
		}
		q.mu.Unlock()
	}
}

// maxGather bounds gatherLocked: the appends an fsync released need far
// less to write again, even on a loaded machine.
const maxGather = 2 * time.Millisecond

// gatherLocked lets the appends that are ready to run write and join the
// pending epoch before its fsync starts: it yields the processor (with q.mu
// released) for as long as each yield brings new waiters, for at most the
// previous fsync's duration (last) and maxGather. The appends an fsync just
// released are runnable at that moment; without the gather the next fsync
// starts before they have written, and in a steady stream every append
// waits for two whole fsyncs (the one running when it writes, then its own)
// instead of one. The bound keeps the appends already waiting from paying
// more than an fsync for it; an append that finds the flusher idle costs
// one yield.
func (q *Queue) gatherLocked(last time.Duration) {
	end := time.Now().Add(min(last, maxGather))
	for q.pending != nil && !q.closed {
		n := q.pending.waiters
		q.mu.Unlock()
		runtime.Gosched()
		q.mu.Lock()
		if q.pending == nil || q.pending.waiters == n || time.Now().After(end) {
			return
		}
	}
}

// syncLocked fsyncs every segment written since its last fsync, and the slot
// directory if a segment was created, with q.mu released during the I/O, and
// then completes the pending epoch it took at the start. In flush
// durability it first fsyncs the segments sealed since the last one and
// then writes the frames appends built (flushWritesLocked). On success
// everything published before it started is durable; a failure latches the
// queue fatal and is never retried (after a failed fsync Linux may report
// later ones clean for data that never reached the disk), and nothing is
// fsynced once the queue is latched.
func (q *Queue) syncLocked() {
	if q.flushReq != nil && q.syncSealedLocked(false) == nil {
		q.flushWritesLocked() // a failure latches: handled below
	}
	ep := q.pending
	q.pending = nil
	if q.fatal != nil {
		q.completeLocked(ep)
		return
	}
	target := q.nextFSN - 1
	var segs []*segment
	for _, s := range q.segs {
		if s.dirty {
			s.dirty = false
			segs = append(segs, s)
		}
	}
	dir := q.dirDirty
	q.dirDirty = false
	if len(segs) == 0 && !dir {
		if target > q.durable {
			q.durable = target
		}
		q.completeLocked(ep)
		return
	}
	q.syncing = true
	op, err := q.fsyncUnlocked(segs, nil, dir)
	q.syncing = false
	if err != nil {
		q.latchLocked(op, err)
	} else if target > q.durable {
		q.durable = target
	}
	q.completeLocked(ep)
	q.syncDone.Broadcast() // Close waits for q.syncing
}

// fsyncUnlocked fsyncs the dictionary files dict, then segs in order, then
// the slot directory if dir, with q.mu released (the files are held open
// meanwhile), records the time, and returns the failed operation's name
// and error.
func (q *Queue) fsyncUnlocked(segs []*segment, dict []*genFile, dir bool) (string, error) {
	for _, s := range segs {
		s.refs++
	}
	if len(dict) > 0 {
		q.dictSyncs++ // keeps generation drops and Close off these files
	}
	q.mu.Unlock()
	start := time.Now()
	var err error
	var op string
	for _, gf := range dict {
		if err = gf.f.Sync(); err != nil {
			elapsed := time.Since(start)
			q.mu.Lock()
			q.fsyncEndLocked(segs, dict, elapsed)
			return "fsync symbol dictionary", err
		}
	}
	var dirDone chan error
	if dir && len(segs) > 0 {
		// Beside the segments' fsyncs rather than after them: on a
		// journaling file system both wait for the same journal commit,
		// and one after the other pay a second cache flush (a rotation's
		// group fsync, BENCHMARKS.md).
		dirDone = make(chan error, 1)
		go func() { dirDone <- q.fs.SyncDir(q.slot) }()
	} else if dir {
		if err = q.fs.SyncDir(q.slot); err != nil {
			op = "fsync directory " + q.slot
		}
	}
	for _, s := range segs {
		if err = s.f.Sync(); err != nil {
			op = "fsync " + filepath.Base(s.path)
			break
		}
	}
	if dirDone != nil {
		switch derr := <-dirDone; {
		case derr != nil && err == nil:
			err, op = derr, "fsync directory "+q.slot
		case derr != nil:
			err = errors.Join(err, fmt.Errorf("fsync directory %s: %w", q.slot, derr))
		}
	}
	elapsed := time.Since(start)
	q.mu.Lock()
	q.fsyncEndLocked(segs, dict, elapsed)
	return op, err
}

// fsyncEndLocked lets go of what fsyncUnlocked held and records its time.
func (q *Queue) fsyncEndLocked(segs []*segment, dict []*genFile, elapsed time.Duration) {
	for _, s := range segs {
		s.refs--
		q.closeIdleLocked(s)
	}
	if len(dict) > 0 {
		q.dictSyncs--
		q.syncDone.Broadcast()
	}
	q.st.recordFsync(elapsed)
}

// closeIdleLocked closes s's file unless it is still written or read (or
// held by a ref).
func (q *Queue) closeIdleLocked(s *segment) {
	if s.removed || (s != q.active && !slices.Contains(q.readOpen, s) && !q.heldByBatchLocked(s)) {
		s.closeFile()
	}
}

// heldByBatchLocked reports whether s took appends when the batch being
// stored began (writeLocked): should the batch fail, its undo makes s
// active again and erases the batch's frames in it, so its file (opened
// for writing) stays open until the batch is in, although a rotation
// sealed it meanwhile.
func (q *Queue) heldByBatchLocked(s *segment) bool { return q.undo != nil && q.undo.active == s }

// completeLocked releases the appends waiting on ep (nil: none) and on the
// epochs before it, with the latched error, if any, or the error their
// group write met (dropGroupLocked).
func (q *Queue) completeLocked(ep *syncEpoch) {
	for ; ep != nil; ep = ep.prev {
		if q.fatal != nil {
			ep.err = q.fatal
		}
		close(ep.done)
	}
}

// fsyncLocked fsyncs one segment while holding the lock: used at rotation,
// where the older segment must be durable before the newer one gets data.
func (q *Queue) fsyncLocked(s *segment) error {
	start := time.Now()
	err := s.f.Sync()
	q.st.recordFsync(time.Since(start))
	if err != nil {
		return q.latchLocked("fsync "+filepath.Base(s.path), err)
	}
	s.dirty = false
	return nil
}

package sfqueue

import (
	"path/filepath"
	"slices"
	"time"
)

// waitDurableLocked is group commit (flush mode): it returns once an fsync
// that started after fsn was written has completed. If no fsync is running
// the caller runs one itself, covering everything written so far; appends
// that arrive meanwhile wait and share the next one. There is no timer.
func (q *Queue) waitDurableLocked(fsn uint64) error {
	for q.durable < fsn {
		if q.fatal != nil {
			return q.fatal
		}
		if q.closed {
			return ErrClosed
		}
		if q.syncing {
			q.syncDone.Wait()
			continue
		}
		q.syncLocked()
	}
	return nil
}

// syncLocked fsyncs every segment written since its last fsync, and the slot
// directory if a segment was created, with q.mu released during the I/O.
// On success everything published before it started is durable; a failure
// latches the queue fatal and is never retried (after a failed fsync Linux
// may report later ones clean for data that never reached the disk).
func (q *Queue) syncLocked() {
	target := q.nextFSN - 1
	var segs []*segment
	for _, s := range q.segs {
		if s.dirty {
			s.dirty = false
			s.refs++
			segs = append(segs, s)
		}
	}
	dir := q.dirDirty
	q.dirDirty = false
	if len(segs) == 0 && !dir {
		if target > q.durable {
			q.durable = target
		}
		return
	}
	q.syncing = true
	q.mu.Unlock()

	start := time.Now()
	var err error
	var op string
	for _, s := range segs {
		if err = s.f.Sync(); err != nil {
			op = "fsync " + filepath.Base(s.path)
			break
		}
	}
	if err == nil && dir {
		if err = q.fs.SyncDir(q.slot); err != nil {
			op = "fsync directory " + q.slot
		}
	}
	elapsed := time.Since(start)

	q.mu.Lock()
	q.syncing = false
	for _, s := range segs {
		s.refs--
		if s.removed || (s != q.active && !slices.Contains(q.readOpen, s)) {
			s.closeFile()
		}
	}
	q.st.recordFsync(elapsed)
	if err != nil {
		q.latchLocked(op, err)
	} else if target > q.durable {
		q.durable = target
	}
	q.syncDone.Broadcast()
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

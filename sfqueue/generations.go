package sfqueue

import "go.uber.org/zap"

// Dictionary generations in use. With Options.SymbolUse set, the queue
// knows the generation of every frame appended since Open, and deletes a
// generation's dictionary as soon as no retained unacknowledged frame uses
// it and it is not the newest one (the writer's): when acks or evictions
// pass its last frame, connected or not. In SF mode the deletion (an
// .ack-watermark write that covers the generation's frames, then the
// deletion of its file) runs on the queue's background goroutine after
// acks, never on the caller of Ack, and at once after an eviction (whose
// freed bytes the append is waiting for); in memory-only mode it only
// forgets entries and runs at once. Frames recovered at Open have generations the queue does
// not track, so nothing is deleted until they are all acknowledged or
// evicted.

// genStart is the first FSN of a run of frames of one generation.
type genStart struct {
	gen uint32
	fsn uint64
}

// genTracker is the queue's view of the generations in use; guarded by q.mu.
type genTracker struct {
	starts       []genStart // runs of frames appended since Open, ascending
	unknownTo    uint64     // frames up to this FSN were recovered: generations unknown
	newest       uint32     // newest generation seen in AddSymbols or a frame
	droppedBelow uint32     // generations below this are deleted
	wake         chan struct{}
}

func newGenTracker(recoveredTo uint64, gens []uint32) genTracker {
	g := genTracker{unknownTo: recoveredTo, wake: make(chan struct{}, 1)}
	for _, gen := range gens {
		g.newest = max(g.newest, gen)
	}
	return g
}

// noteFramesLocked records the generations of payloads appended as FSNs
// first, first+1, ...
func (q *Queue) noteFramesLocked(first uint64, payloads [][]byte) {
	if q.o.SymbolUse == nil {
		return
	}
	t := &q.gens
	for i, p := range payloads {
		gen, _ := q.o.SymbolUse(p)
		if n := len(t.starts); n == 0 || t.starts[n-1].gen != gen {
			t.starts = append(t.starts, genStart{gen: gen, fsn: first + uint64(i)})
		}
		t.newest = max(t.newest, gen)
	}
	q.generationsChangedLocked()
}

// dropFrom forgets the frames from FSN first on, whose write was undone
// (dropGroupLocked).
func (t *genTracker) dropFrom(first uint64) {
	for n := len(t.starts); n > 0 && t.starts[n-1].fsn >= first; n-- {
		t.starts = t.starts[:n-1]
	}
}

// neededGenLocked is the oldest generation still in use: that of the oldest
// unacknowledged frame, or the newest generation when every frame is
// acknowledged. 0 while recovered frames (of unknown generations) remain.
func (q *Queue) neededGenLocked() uint32 {
	t := &q.gens
	first := q.acked + 1
	if first <= t.unknownTo {
		return 0
	}
	for len(t.starts) > 1 && t.starts[1].fsn <= first {
		t.starts = t.starts[1:]
	}
	if first < q.nextFSN && len(t.starts) > 0 && t.starts[0].fsn <= first {
		return min(t.starts[0].gen, t.newest)
	}
	return t.newest
}

// generationsChangedLocked runs after acks, evictions and appends: it
// deletes the generations no longer in use (memory-only mode) or wakes the
// background goroutine to (SF mode).
func (q *Queue) generationsChangedLocked() {
	if q.o.SymbolUse == nil || q.neededGenLocked() <= q.gens.droppedBelow {
		return
	}
	if !q.sf {
		q.dropUnusedGenerationsLocked()
		return
	}
	select {
	case q.gens.wake <- struct{}{}:
	default: // a wake-up is pending
	}
}

// dropUnusedGenerationsLocked deletes every generation below the oldest in
// use. In SF mode the I/O runs with q.mu released.
func (q *Queue) dropUnusedGenerationsLocked() {
	need := q.neededGenLocked()
	if need <= q.gens.droppedBelow || q.closed {
		return
	}
	if err := q.dropSymbolsBelowLocked(need); err != nil {
		q.log.Warn("sfqueue: cannot delete unused symbol dictionary generations; retried on the next ack",
			zap.String("slot", q.slot), zap.Uint32("below", need), zap.Error(err))
		return
	}
	q.gens.droppedBelow = max(q.gens.droppedBelow, need)
}

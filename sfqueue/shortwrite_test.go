package sfqueue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestShortWritesNeverSetASlotAside: a full disk that cuts segment writes
// short (ENOSPC after a random part of the write, the undo's own zeroing
// included) and refuses preallocations, in each durability mode. Every
// refused append is undone and leaves nothing behind: after a clean Close
// the slot replays exactly the frames whose appends returned, with nothing
// torn; after a power loss (names and writes kept in any prefix) every
// such frame a completed fsync covered is there. No slot is ever set
// aside. On the old code the undo's zeroing failed silently, and the
// remainder of the refused frame, in a segment sealed later, set the slot
// aside at the next Open (memory); and the zeroing was not fsynced before
// a later segment's frames, so a power loss kept the refused frames a
// rotation had fsynced (periodic).
func TestShortWritesNeverSetASlotAside(t *testing.T) {
	seeds := uint64(30)
	if testing.Short() {
		seeds = 12
	}
	for _, d := range []Durability{DurabilityMemory, DurabilityPeriodic, DurabilityFlush} {
		t.Run(d.String(), func(t *testing.T) {
			refused := 0
			for seed := range seeds {
				for _, powerLoss := range []bool{false, true} {
					refused += shortWritesRun(t, d, seed, powerLoss)
				}
			}
			if refused == 0 {
				t.Fatal("no append was refused: the test checked nothing")
			}
		})
	}
}

// shortWritesRun returns how many appends the full disk refused.
func shortWritesRun(t *testing.T, d Durability, seed uint64, powerLoss bool) int {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, uint64(d)))
	cfs := newCrashFS()
	var fmu sync.Mutex
	fr := rand.New(rand.NewPCG(seed, 99))
	cfs.shortWrite = func(name string, size int) (int, error) {
		fmu.Lock()
		defer fmu.Unlock()
		if strings.HasSuffix(name, segmentSuffix) && fr.IntN(6) == 0 {
			return fr.IntN(size + 1), syscall.ENOSPC
		}
		return 0, nil
	}
	cfs.failAlloc = func(string, int64) error {
		fmu.Lock()
		defer fmu.Unlock()
		if fr.IntN(4) == 0 {
			return syscall.ENOSPC
		}
		return nil
	}
	o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: d, SyncInterval: 5 * time.Millisecond,
		MaxSegmentBytes: 2048, AppendDeadline: time.Millisecond}
	q := mustOpen(t, o)
	returned := map[uint64]uint64{} // FSN -> payload id
	refused, refusedIDs := 0, map[uint64]bool{}
	nextID := uint64(1)
	for range 120 {
		// Now and then a batch that spans segments: its undo erases
		// frames a rotation fsynced. Not in flush durability, where a
		// batch whose last group write the disk refuses keeps the
		// frames its rotations wrote, published (an open fault).
		n, size := 1, 500
		if d != DurabilityFlush && r.IntN(4) == 0 {
			n, size = 2+r.IntN(3), 1500
		}
		var batch [][]byte
		for range n {
			batch = append(batch, testPayload(nextID, 12+r.IntN(size)))
			nextID++
		}
		last, err := q.AppendBatch(context.Background(), batch)
		var full *FullError
		switch {
		case err == nil:
			for i := range n {
				returned[last-uint64(n-1-i)] = nextID - uint64(n-i)
			}
		case errors.As(err, &full) && full.Reason == DiskFull:
			refused++
			for i := range n {
				refusedIDs[nextID-uint64(n-i)] = true
			}
		default:
			t.Fatalf("%v seed %d: append: %v", d, seed, err)
		}
	}
	if len(returned) == 0 {
		t.Fatalf("%v seed %d: every append refused", d, seed)
	}
	durable := uint64(1<<64 - 1)
	if powerLoss {
		q.mu.Lock()
		durable = q.durable
		o.FS = cfs.PowerLoss(keepNames, r)
		q.mu.Unlock()
	} else {
		cfs.mu.Lock()
		cfs.shortWrite, cfs.failAlloc = nil, nil
		cfs.mu.Unlock()
	}
	q.Close()
	q = mustOpen(t, o)
	defer q.Close()
	rep := q.Recovery()
	if rep.Unreplayable != nil || rep.LostFrames != 0 || !powerLoss && rep.TornFrames != 0 {
		t.Fatalf("%v seed %d (power loss %v): recovery after refused appends: %+v", d, seed, powerLoss, rep)
	}
	got := map[uint64]uint64{}
	for _, f := range drain(t, q.NewCursor()) {
		id, err := checkTestPayload(f.payload)
		if err != nil {
			t.Fatalf("%v seed %d: FSN %d: %v", d, seed, f.fsn, err)
		}
		if refusedIDs[id] {
			t.Fatalf("%v seed %d (power loss %v): FSN %d holds payload %x, whose append was refused", d, seed, powerLoss, f.fsn, id)
		}
		got[f.fsn] = id
	}
	for fsn, id := range returned {
		if fsn <= durable && got[fsn] != id {
			t.Fatalf("%v seed %d (power loss %v): FSN %d holds %x; its append returned for %x", d, seed, powerLoss, fsn, got[fsn], id)
		}
	}
	if !powerLoss && len(got) != len(returned) {
		t.Fatalf("%v seed %d: %d frames replayed, %d appends returned", d, seed, len(got), len(returned))
	}
	return refused
}

// TestRefusedBatchAcrossSealedSegments: in memory durability a batch of
// three segments' frames seals the segment that took appends when it
// began, and its seal fsync (run by the batch's second rotation) counts the
// batch's first frame there as durable; then the full disk refuses the
// third segment's frames. The undo must find that segment's file open for
// writing (the seal's fsync closed it: the undo panicked on the nil file,
// with the queue's lock held) and take the durable count back (it stayed
// past every published frame, so a power loss would report frames that
// never existed as DATA_LOSS). The queue then goes on.
func TestRefusedBatchAcrossSealedSegments(t *testing.T) {
	cfs := newCrashFS()
	third := "/d/s/" + segmentName(4)
	cfs.shortWrite = func(name string, size int) (int, error) {
		if name == third && size > segmentHeaderSize {
			return 0, syscall.ENOSPC
		}
		return 0, nil
	}
	o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityMemory, MaxSegmentBytes: 4096, AppendDeadline: time.Millisecond}
	q := mustOpen(t, o)
	mustAppend(t, q, testPayload(1, 100))
	batch := [][]byte{testPayload(2, 3000), testPayload(3, 3000), testPayload(4, 3000)}
	var full *FullError
	if _, err := q.AppendBatch(context.Background(), batch); !errors.As(err, &full) || full.Reason != DiskFull {
		t.Fatalf("batch whose third segment's write the disk refuses: %v; want a DiskFull *FullError", err)
	}
	if st := q.Stats(); st.DurableFSN > st.PublishedFSN {
		t.Fatalf("durable FSN %d past the published %d after the undo", st.DurableFSN, st.PublishedFSN)
	}
	cfs.mu.Lock()
	cfs.shortWrite = nil
	cfs.mu.Unlock()
	if fsn := mustAppend(t, q, testPayload(5, 100)); fsn != 2 {
		t.Fatalf("append after the refused batch got FSN %d; want 2", fsn)
	}
	q.Close()
	q = mustOpen(t, o)
	defer q.Close()
	if rep := q.Recovery(); rep.Unreplayable != nil || rep.TornFrames != 0 || rep.LostFrames != 0 {
		t.Fatalf("recovery: %+v", rep)
	}
	var ids []uint64
	for _, f := range drain(t, q.NewCursor()) {
		id, err := checkTestPayload(f.payload)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if len(ids) != 2 || ids[0] != 1 || ids[1] != 5 {
		t.Fatalf("replayed payloads %v; want [1 5]", ids)
	}
}

// TestRefusedBatchStaysRefusedAfterAPowerLoss: a batch spanning segments
// whose last segment's write the disk refuses, in each durability mode.
// The rotation fsynced the first segment with the batch's first frame in
// it; the undo's zeros over that frame must be durable before the refusal
// returns, or a power loss brings the refused frame back (replayed, a
// duplicate of the caller's retry) and, once a later append took its FSN,
// replaces that append's payload with the refused one, no loss counted.
// On the old code the zeros stayed in the page cache. After a restart the
// batch's first frame goes to a segment it created, and a seal had made
// that segment's name durable: its removal must be too (the old code left
// it in the page cache). (Flush durability writes the last segment's
// frames in the group write after the batch, whose refusal takes another
// path, dropGroupLocked.)
func TestRefusedBatchStaysRefusedAfterAPowerLoss(t *testing.T) {
	for _, d := range []Durability{DurabilityMemory, DurabilityPeriodic} {
		for _, restart := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/restart=%v", d, restart), func(t *testing.T) {
				refusedBatchPowerLoss(t, d, restart)
			})
		}
	}
}

func refusedBatchPowerLoss(t *testing.T, d Durability, restart bool) {
	cfs := newCrashFS()
	third := "/d/s/" + segmentName(4)
	frame4 := int(frameSize(len(testPayload(4, 3000))))
	cfs.shortWrite = func(name string, size int) (int, error) {
		if name == third && size == frame4 { // the frame, not the segment's creation
			return 0, syscall.ENOSPC
		}
		return 0, nil
	}
	o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: d, SyncInterval: time.Hour,
		MaxSegmentBytes: 4096, AppendDeadline: time.Millisecond}
	if d == DurabilityPeriodic && !restart {
		o.SyncInterval = 50 * time.Millisecond
	}
	q := mustOpen(t, o)
	mustAppend(t, q, testPayload(1, 100))
	if restart {
		// Closed and reopened: the first segment's name and frame
		// are durable; the batch starts a new segment.
		q.Close()
		q = mustOpen(t, o)
	} else if d == DurabilityPeriodic {
		// The first segment's name durable (a periodic fsync),
		// the batch's first frame goes into it. A periodic fsync
		// between the refusal and the power loss would hide the
		// old code's fault, not fail the fixed code.
		waitFor(t, "a periodic fsync of the first frame", func() bool { return q.Stats().DurableFSN >= 1 })
	}
	defer q.Close()
	batch := [][]byte{testPayload(2, 3000), testPayload(3, 3000), testPayload(4, 3000)}
	var full *FullError
	if _, err := q.AppendBatch(context.Background(), batch); !errors.As(err, &full) || full.Reason != DiskFull {
		t.Fatalf("batch whose third segment's write the disk refuses: %v; want a DiskFull *FullError", err)
	}
	afterRefusal := cfs.PowerLoss(dropUnsynced, nil)
	cfs.mu.Lock()
	cfs.shortWrite = nil
	cfs.mu.Unlock()
	if fsn := mustAppend(t, q, testPayload(5, 100)); fsn != 2 {
		t.Fatalf("append after the refused batch got FSN %d; want 2", fsn)
	}
	afterRetry := cfs.PowerLoss(dropUnsynced, nil)
	for name, snap := range map[string]*crashFS{"after the refusal": afterRefusal, "after the next append": afterRetry} {
		o.FS = snap
		r := mustOpen(t, o)
		if rep := r.Recovery(); rep.Unreplayable != nil {
			t.Errorf("power loss %s: recovery set the slot aside: %+v", name, rep)
		}
		for _, f := range drain(t, r.NewCursor()) {
			id, err := checkTestPayload(f.payload)
			if err != nil {
				t.Fatalf("power loss %s: FSN %d: %v", name, f.fsn, err)
			}
			if id >= 2 && id <= 4 {
				t.Errorf("power loss %s: FSN %d holds the refused payload %d", name, f.fsn, id)
			}
		}
		r.Close()
	}
}

// TestUndoThatLatchesFailsFatal: a full disk refuses a frame's write, the
// undo's zeros and its truncate fail too, so the refused frame's bytes may
// stay in the file: the undo latches the queue, and the append fails with
// that fatal error, not with a DiskFull refusal the caller would retry
// against a latched queue (the old code).
func TestUndoThatLatchesFailsFatal(t *testing.T) {
	cfs := newCrashFS()
	o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityMemory, AppendDeadline: time.Millisecond}
	q := mustOpen(t, o)
	defer q.Close()
	mustAppend(t, q, testPayload(1, 100))
	cfs.mu.Lock()
	cfs.failWrite = func(name string) error {
		if strings.HasSuffix(name, segmentSuffix) {
			return syscall.ENOSPC
		}
		return nil
	}
	cfs.failTrunc = func(string) error { return syscall.EIO }
	cfs.mu.Unlock()
	_, err := q.Append(context.Background(), testPayload(2, 100))
	var fatal *FatalError
	if !errors.As(err, &fatal) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("append whose undo could not erase its frame: %v; want the latched *FatalError", err)
	}
	if st := q.Stats(); st.Fatal == nil {
		t.Fatal("the queue did not latch")
	}
}

package sfqueue

import (
	"context"
	"errors"
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
	refused := 0
	for i := range 120 {
		id := uint64(i + 1)
		fsn, err := q.Append(context.Background(), testPayload(id, 12+r.IntN(500)))
		var full *FullError
		switch {
		case err == nil:
			returned[fsn] = id
		case errors.As(err, &full) && full.Reason == DiskFull:
			refused++
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

package sfqueue

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// Power losses after a restart: what the watermark records as fsynced must
// have been fsynced, in the process that wrote it or in the one that
// recovered it, or recovery takes an ordinary torn write for damage to the
// medium and sets the slot aside (a false DATA_LOSS that stops replay).

// kill stops q as kill -9 would: its goroutines stop and the lock goes,
// nothing of Close runs; what it wrote stays in the page cache (cfs's
// current state), and only what it fsynced survives a power loss.
func kill(q *Queue) {
	close(q.stop)
	<-q.done
	if q.flushDone != nil {
		<-q.flushDone
	}
	q.lock.Close()
}

// powerLossSeeds is how many power losses each scenario tries.
func powerLossSeeds() uint64 {
	if testing.Short() {
		return 60
	}
	return 300
}

// noSetAsideAfterPowerLoss opens many power-loss snapshots of cfs and
// fails if any recovery sets the slot aside.
func noSetAsideAfterPowerLoss(t *testing.T, cfs *crashFS, o Options) {
	t.Helper()
	for seed := range powerLossSeeds() {
		po := o
		po.FS = cfs.PowerLoss(keepSomeWrites, rand.New(rand.NewPCG(seed, 7)))
		q, err := Open(po)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		dl := q.Recovery().Unreplayable
		q.Close()
		if dl != nil {
			t.Fatalf("seed %d: an ordinary power loss set the slot aside: %v", seed, dl)
		}
	}
}

func appendN(t *testing.T, q *Queue, from, n int) {
	t.Helper()
	for i := range n {
		mustAppend(t, q, testPayload(uint64(from+i), 100))
	}
}

func TestPowerLossAfterARestart(t *testing.T) {
	never := Options{SyncInterval: 1 << 40} // periodic: no background fsync during the test
	cases := []struct {
		name string
		d    Durability
		run  func(t *testing.T, cfs *crashFS, o Options)
	}{
		// Close records its frames as written, never as fsynced; the next
		// process recovers and closes with nothing new.
		{"memory, close, reopen, close", DurabilityMemory, func(t *testing.T, cfs *crashFS, o Options) {
			q := mustOpen(t, o)
			appendN(t, q, 1, 10)
			mustClose(t, q)
			mustClose(t, mustOpen(t, o))
		}},
		{"memory, close", DurabilityMemory, func(t *testing.T, cfs *crashFS, o Options) {
			q := mustOpen(t, o)
			appendN(t, q, 1, 10)
			mustClose(t, q)
		}},
		// The killed process's frames were never fsynced; the next one
		// records them as durable only after fsyncing them.
		{"periodic, kill, reopen, close", DurabilityPeriodic, func(t *testing.T, cfs *crashFS, o Options) {
			q := mustOpen(t, o)
			appendN(t, q, 1, 10)
			kill(q)
			mustClose(t, mustOpen(t, o))
		}},
		{"periodic, kill, reopen, ack, kill", DurabilityPeriodic, func(t *testing.T, cfs *crashFS, o Options) {
			q := mustOpen(t, o)
			appendN(t, q, 1, 10)
			kill(q)
			q = mustOpen(t, o)
			q.Ack(1)
			waitFor(t, "the watermark to record the ack", func() bool { w, _, _ := readWatermark(cfs, "/d/s"); return w.acked == 1 })
			kill(q)
		}},
		{"periodic, kill, reopen, append and fsync a new segment, kill", DurabilityPeriodic, func(t *testing.T, cfs *crashFS, o Options) {
			q := mustOpen(t, o)
			appendN(t, q, 1, 10)
			kill(q)
			q = mustOpen(t, o)
			appendN(t, q, 11, 1)
			q.mu.Lock()
			q.syncLocked()
			q.mu.Unlock()
			kill(q)
		}},
		{"flush, kill, reopen, close", DurabilityFlush, func(t *testing.T, cfs *crashFS, o Options) {
			q := mustOpen(t, o)
			appendN(t, q, 1, 10)
			kill(q)
			mustClose(t, mustOpen(t, o))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfs := newCrashFS()
			o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: tc.d, SyncInterval: never.SyncInterval}
			tc.run(t, cfs, o)
			noSetAsideAfterPowerLoss(t, cfs, o)
		})
	}
}

// TestReusedFSNsAfterVanishedFrames: recovery reported FSNs 6..10 lost
// (the watermark recorded them as on disk); the next frames take those
// FSNs again, and a crash tears them before the watermark is written
// again: that is a torn write, not damage to the lost frames.
func TestReusedFSNsAfterVanishedFrames(t *testing.T) {
	cfs := newCrashFS()
	o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityPeriodic, SyncInterval: 1 << 40}
	q := mustOpen(t, o)
	appendN(t, q, 1, 10)
	off, path := q.segs[0].offsets[5], q.segs[0].path
	mustClose(t, q)
	f, err := cfs.OpenFile(path, os.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(int64(off)) // the medium lost FSN 6..10
	f.Sync()
	f.Close()
	q = mustOpen(t, o)
	if rep := q.Recovery(); rep.LostFrames != 5 || q.PublishedFSN() != 5 {
		t.Fatalf("recovery %+v; want FSN 6..10 lost", rep)
	}
	if w, _, _ := readWatermark(cfs, "/d/s"); w.synced > 5 {
		t.Fatalf("after recovery .ack-watermark still records FSN %d as on disk; FSN 6.. will be given again", w.synced)
	}
	appendN(t, q, 100, 5) // FSN 6..10 again
	cfs.SyncDir("/d/s")
	kill(q)
	noSetAsideAfterPowerLoss(t, cfs, o)
}

// TestEmptyTailBeforeCreatedSegments: the newest segment holding anything
// holds no frame, and a segment created after it (a batch creates every
// segment it needs first) follows: its FSNs, up to that segment's base,
// were written and lost, and count as torn frames, never dropped unsaid,
// as does what is left of the writes after it.
func TestEmptyTailBeforeCreatedSegments(t *testing.T) {
	for _, d := range []Durability{DurabilityPeriodic, DurabilityFlush} {
		t.Run(d.String(), func(t *testing.T) {
			o := Options{Dir: t.TempDir(), SenderID: "s", MaxSegmentBytes: 512, Durability: d}
			q := mustOpen(t, o)
			appendN(t, q, 1, 5)
			if len(q.segs) != 2 || q.segs[1].base != 5 {
				t.Fatalf("%d segments; want FSN 1..4 and 5", len(q.segs))
			}
			paths := []string{q.segs[0].path, q.segs[1].path}
			mustClose(t, q)
			slot := filepath.Join(o.Dir, o.SenderID)
			os.Remove(filepath.Join(slot, watermarkFile)) // the crash came before any save
			b, _ := os.ReadFile(paths[0])
			os.WriteFile(paths[0], b[:segmentHeaderSize], 0o600)
			b, _ = os.ReadFile(paths[1])
			flipPayload(b, segmentHeaderSize)
			os.WriteFile(paths[1], b, 0o600)
			scan, err := ScanSlot(slot)
			if err != nil {
				t.Fatal(err)
			}
			var torn []FSNRange
			for _, r := range scan.Ranges() {
				if r.Torn {
					torn = append(torn, r)
				}
			}
			q = mustOpen(t, o)
			defer q.Close()
			rep := q.Recovery()
			// FSN 5, torn in the segment after, was accepted and is lost
			// too: counted.
			if rep.Unreplayable != nil || rep.TornFirstFSN != 1 || rep.TornFrames != 5 {
				t.Fatalf("recovery %+v; want FSN 1..5 counted torn", rep)
			}
			if len(torn) != 2 || torn[0].First != 1 || torn[0].Last != 4 || torn[1].First != 5 || torn[1].Last != 5 {
				t.Fatalf("the slot tool's ranges show %v as torn; want FSN 1..4 (no frame) and 5", torn)
			}
		})
	}
}

// TestRangesCountADamagedFsyncedTailOnce: damage at the newest tail that
// the watermark records as fsynced is one unreadable range, reaching the
// watermark's on-disk FSN, and not also a vanished one.
func TestRangesCountADamagedFsyncedTailOnce(t *testing.T) {
	o := Options{Dir: t.TempDir(), SenderID: "s", Durability: DurabilityPeriodic}
	q := mustOpen(t, o)
	appendN(t, q, 1, 10)
	off, path := q.segs[0].offsets[8], q.segs[0].path
	mustClose(t, q)
	b, _ := os.ReadFile(path)
	os.WriteFile(path, b[:off+9], 0o600) // FSN 9 torn, FSN 10 gone
	scan, err := ScanSlot(filepath.Join(o.Dir, o.SenderID))
	if err != nil {
		t.Fatal(err)
	}
	var bad []FSNRange
	for _, r := range scan.Ranges() {
		if !r.Readable {
			bad = append(bad, r)
		}
	}
	if len(bad) != 1 || bad[0].First != 9 || bad[0].Last != 10 || bad[0].Torn {
		t.Fatalf("ranges %v; want one unreadable run, FSN 9..10", bad)
	}
	q = mustOpen(t, o)
	defer q.Close()
	if dl := q.Recovery().Unreplayable; dl == nil || dl.UnreadableFrames != 2 {
		t.Fatalf("recovery %+v; want the slot set aside with 2 unreadable frames", q.Recovery())
	}
}

func mustClose(t *testing.T, q *Queue) {
	t.Helper()
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
}

package sfqueue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const spareTestSegment = 4096

// spareOpts is a flush-mode slot on cfs with segments of 13 test frames
// (spareFrames' 300-byte payloads).
func spareOpts(cfs *crashFS) Options {
	return Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityFlush, MaxSegmentBytes: spareTestSegment}
}

const sparePath = "/d/s/" + spareName

func (q *Queue) spareCounts() (made, recycled, used uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.st.sparesMade, q.st.sparesRecycled, q.st.sparesUsed
}

// spareFrames appends frames id from..to (payload id = FSN on a fresh slot,
// one appender), acking with a lag of ackLag frames (0: no acks). After
// each append it waits for a spare under way, so that which spares are
// made does not depend on the background goroutine's timing.
func spareFrames(t *testing.T, q *Queue, from, to uint64, ackLag uint64, returned func(fsn, id uint64)) {
	t.Helper()
	for id := from; id <= to; id++ {
		fsn := mustAppend(t, q, testPayload(id, 300))
		if returned != nil {
			returned(fsn, id)
		}
		if ackLag > 0 && fsn > ackLag {
			q.Ack(fsn - ackLag)
		}
		waitFor(t, "the spare under way", func() bool {
			q.mu.Lock()
			defer q.mu.Unlock()
			return !q.sparing
		})
	}
}

// checkRecovered opens o and checks the slot: replayable, no spare left,
// FSNs continuous from the ack watermark, every payload the one appended
// with that FSN (a recycled segment's old frames would carry older ids),
// and every FSN in mustHave above the watermark present.
func checkRecovered(t *testing.T, o Options, mustHave map[uint64]uint64, what string) {
	t.Helper()
	q, err := Open(o)
	if err != nil {
		t.Fatalf("%s: Open: %v", what, err)
	}
	defer q.Close()
	if u := q.Recovery().Unreplayable; u != nil {
		t.Fatalf("%s: slot set aside: %v", what, u)
	}
	if slices.Contains(o.FS.(*crashFS).fileNames(), sparePath) {
		t.Fatalf("%s: recovery left the spare segment in place", what)
	}
	got := map[uint64]bool{}
	next := q.AckedFSN() + 1
	for _, f := range drain(t, q.NewCursor()) {
		id, err := checkTestPayload(f.payload)
		if f.fsn != next || err != nil || id != f.fsn {
			t.Fatalf("%s: recovered FSN %d (want %d) holds payload %d (%v)", what, f.fsn, next, id, err)
		}
		next++
		got[f.fsn] = true
	}
	for fsn := range mustHave {
		if fsn > q.AckedFSN() && !got[fsn] {
			t.Fatalf("%s: FSN %d was returned by Append before the power cut and is missing (acked %d, recovered up to %d)", what, fsn, q.AckedFSN(), next-1)
		}
	}
}

func TestSpareSegmentIsRecycledAndUsed(t *testing.T) {
	cfs := newCrashFS()
	q := mustOpen(t, spareOpts(cfs))
	// Two segments, the second less than half full: no fresh spare yet.
	spareFrames(t, q, 1, 17, 0, nil)
	first := q.Stats().PublishedFSN
	q.Ack(13) // the first segment (frames 1..13) is wholly acked
	if _, recycled, _ := q.spareCounts(); recycled != 1 {
		t.Fatalf("spares recycled after acking the first segment: %d, want 1", recycled)
	}
	names := cfs.fileNames()
	if !slices.Contains(names, sparePath) || slices.Contains(names, "/d/s/"+segmentName(1)) {
		t.Fatalf("after the ack the slot holds %v: want the spare and not segment 1", names)
	}
	b, _ := readSmallFile(cfs, sparePath, 2*spareTestSegment)
	if len(b) != spareTestSegment || nonZeroExtent(b) != 0 {
		t.Fatalf("spare is %d bytes with %d non-zero: want %d zero bytes", len(b), nonZeroExtent(b), spareTestSegment)
	}
	_, _, before := q.spareCounts()
	spareFrames(t, q, first+1, 30, 0, nil) // rotates into the spare
	if _, _, used := q.spareCounts(); used != before+1 {
		t.Fatalf("spares used by the rotation: %d, want 1", used-before)
	}
	if slices.Contains(cfs.fileNames(), sparePath) {
		t.Fatal("the spare is still there after a rotation used it")
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	checkRecovered(t, spareOpts(cfs), map[uint64]uint64{30: 30}, "reopen")
}

func TestCloseDeletesTheSpare(t *testing.T) {
	cfs := newCrashFS()
	q := mustOpen(t, spareOpts(cfs))
	spareFrames(t, q, 1, 20, 0, nil)
	q.Ack(20)
	if !slices.Contains(cfs.fileNames(), sparePath) {
		t.Fatal("no spare after acking a whole segment")
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range cfs.fileNames() {
		if n == sparePath || strings.HasSuffix(n, segmentSuffix) {
			t.Fatalf("a drained, closed slot still holds %s", n)
		}
	}
}

// TestPowerLossAtEveryFsyncWithSpares cuts the power at the start of every
// file fsync (group, rotation, spare preparation, dictionary-free
// watermark) of a run that first rotates into fresh spares (no acks), then
// into recycled ones (acks), in each crash mode, and checks every
// snapshot's recovery: nothing returned is lost, no old frame of a
// recycled segment comes back, no spare survives recovery.
func TestPowerLossAtEveryFsyncWithSpares(t *testing.T) {
	for _, mode := range []crashMode{dropUnsynced, keepSomeWrites, keepAndGarbage} {
		cfs := newCrashFS()
		var mu sync.Mutex
		returned := map[uint64]uint64{}
		type cut struct {
			fs       *crashFS
			returned map[uint64]uint64
			name     string
		}
		var cuts []cut
		r := rand.New(rand.NewPCG(uint64(mode), 14))
		cfs.mu.Lock()
		cfs.syncHook = func(name string) {
			mu.Lock()
			defer mu.Unlock()
			cuts = append(cuts, cut{cfs.PowerLoss(mode, r), maps.Clone(returned), name})
		}
		cfs.mu.Unlock()
		q := mustOpen(t, spareOpts(cfs))
		note := func(fsn, id uint64) {
			mu.Lock()
			returned[fsn] = id
			mu.Unlock()
		}
		spareFrames(t, q, 1, 60, 0, note)
		made, _, _ := q.spareCounts()
		spareFrames(t, q, 61, 150, 5, note)
		made2, recycled, used := q.spareCounts()
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		if made == 0 || recycled == 0 || made2 <= recycled || used < 4 {
			t.Fatalf("mode %d: spares made fresh %d, recycled %d, used %d: the run did not exercise both kinds", mode, made2-recycled, recycled, used)
		}
		atSpare := 0
		for i, c := range cuts {
			if c.name == sparePath {
				atSpare++
			}
			checkRecovered(t, spareOpts(c.fs), c.returned, fmt.Sprintf("mode %d, cut %d at the fsync of %s", mode, i, c.name))
		}
		if atSpare == 0 {
			t.Fatalf("mode %d: no power cut during a spare's preparation", mode)
		}
	}
}

func TestSpareLeftByADeadProcessIsDeleted(t *testing.T) {
	cfs := newCrashFS()
	q := mustOpen(t, spareOpts(cfs))
	spareFrames(t, q, 1, 30, 0, nil)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	// A spare holding valid frames (a recycled segment whose zeroing never
	// reached the disk): recovery must neither read nor keep it.
	old, err := readSmallFile(cfs, "/d/s/"+segmentName(1), 2*spareTestSegment)
	if err != nil {
		t.Fatal(err)
	}
	f, err := cfs.OpenFile(sparePath, os.O_RDWR|os.O_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(old, 0)
	f.Sync()
	f.Close()
	cfs.SyncDir("/d/s")
	checkRecovered(t, spareOpts(cfs), map[uint64]uint64{30: 30}, "a dead process's spare")
}

func TestSparePreparationFailures(t *testing.T) {
	cases := []struct {
		name string
		fail func(c *crashFS)
		made bool // fresh spares are still made
	}{
		{"ENOSPC preallocating the spare", func(c *crashFS) {
			c.failAlloc = func(name string, _ int64) error {
				if name == sparePath {
					return syscall.ENOSPC
				}
				return nil
			}
		}, false},
		{"fsync of the spare fails", func(c *crashFS) {
			c.failSync = func(name string) error {
				if name == sparePath {
					return syscall.EIO
				}
				return nil
			}
		}, false},
		{"no zeroing of a range", func(c *crashFS) {
			c.failZero = func(string) error { return errNoZeroRange }
		}, true},
		{"zeroing a range fails", func(c *crashFS) {
			c.failZero = func(string) error { return syscall.EIO }
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfs := newCrashFS()
			cfs.mu.Lock()
			tc.fail(cfs)
			cfs.mu.Unlock()
			q := mustOpen(t, spareOpts(cfs))
			spareFrames(t, q, 1, 100, 5, nil)
			made, recycled, used := q.spareCounts()
			if recycled != 0 || (made > 0) != tc.made || used > made || used+1 < made {
				t.Fatalf("spares made %d, recycled %d, used %d; want none recycled, fresh ones made: %v", made, recycled, used, tc.made)
			}
			if st := q.Stats(); st.FramesAppended != 100 || q.fatalErr() != nil {
				t.Fatalf("appended %d of 100, fatal %v: a spare's failure must cost only the spare", st.FramesAppended, q.fatalErr())
			}
			waitFor(t, "no spare file left", func() bool {
				q.mu.Lock()
				defer q.mu.Unlock()
				return q.spare != nil || !slices.Contains(cfs.fileNames(), sparePath)
			})
			segs := 0
			for _, n := range cfs.fileNames() {
				if strings.HasSuffix(n, segmentSuffix) {
					segs++
				}
			}
			if q.Stats().Segments != segs || segs > 2 {
				t.Fatalf("%d segment files for %d segments: acked ones must be deleted", segs, q.Stats().Segments)
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			checkRecovered(t, spareOpts(cfs), nil, tc.name)
		})
	}
}

// fatalErr is the latched error, if any.
func (q *Queue) fatalErr() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.fatal == nil {
		return nil
	}
	return q.fatal
}

// TestSpareCountsAgainstTheCap: a spare is made only with room for it and
// one more segment, holds its room under the cap while it waits, and is
// dropped before a batch is refused or evicts for room, so the disk never
// holds more than the cap plus the active segment's preallocated tail.
func TestSpareCountsAgainstTheCap(t *testing.T) {
	for _, onFull := range []OnFull{OnFullBlock, OnFullEvictOldest} {
		t.Run(fmt.Sprint(onFull), func(t *testing.T) {
			cfs := newCrashFS()
			o := spareOpts(cfs)
			o.MaxTotalBytes = 5 * spareTestSegment
			o.AppendDeadline = time.Millisecond
			o.OnFull = onFull
			q := mustOpen(t, o)
			defer q.Close()
			disk := func() int64 {
				cfs.mu.Lock()
				defer cfs.mu.Unlock()
				var n int64
				for name, ino := range cfs.names {
					if strings.HasSuffix(name, segmentSuffix) || name == sparePath || strings.Contains(name, ".symbol-dict") {
						n += int64(len(ino.data))
					}
				}
				return n
			}
			spareFrames(t, q, 1, 14, 0, nil)
			q.Ack(13) // recycles segment 1
			if _, recycled, _ := q.spareCounts(); recycled != 1 || !slices.Contains(cfs.fileNames(), sparePath) {
				t.Fatalf("spares recycled: %d, want 1 waiting", recycled)
			}
			// Growth without a rotation (dictionary entries): the batch fits
			// the cap only with the spare's room.
			used := q.Stats().UsedBytes
			run := symbolRun(0, 0, 16, 1000)
			b := Batch{Payloads: [][]byte{testPayload(15, 300)}, Symbols: []SymbolRun{run}}
			if need := frameSize(300) + q.dict.need(b.Symbols); used+need > o.MaxTotalBytes || used+need+spareTestSegment <= o.MaxTotalBytes {
				t.Fatalf("test setup: used %d + batch %d must fit the cap %d only without the spare", used, need, o.MaxTotalBytes)
			}
			if _, err := q.AppendWith(context.Background(), b); err != nil {
				t.Fatalf("a batch that fits once the spare is dropped: %v", err)
			}
			if st := q.Stats(); slices.Contains(cfs.fileNames(), sparePath) || st.FramesEvicted > 0 {
				t.Fatalf("after the batch: spare still there %v, frames evicted %d: want the spare dropped, nothing evicted",
					slices.Contains(cfs.fileNames(), sparePath), st.FramesEvicted)
			}
			for id := uint64(16); id < 100 && q.Stats().FramesEvicted == 0; id++ {
				_, err := q.Append(context.Background(), testPayload(id, 300))
				var fe *FullError
				if errors.As(err, &fe) {
					break
				} else if err != nil {
					t.Fatal(err)
				}
				if d := disk(); d > o.MaxTotalBytes+spareTestSegment {
					t.Fatalf("after append %d the disk holds %d bytes, above the cap plus one segment (%d)", id, d, o.MaxTotalBytes+spareTestSegment)
				}
			}
		})
	}
}

// TestZeroRangeOnDisk checks the Linux zeroing on the real file system, and
// a flush-mode queue recycling a segment there.
func TestZeroRangeOnDisk(t *testing.T) {
	dir := t.TempDir()
	probe, err := os.Create(filepath.Join(dir, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	probe.Write(make([]byte, 4096))
	zeroErr := zeroRange(probe, 0, 4096)
	probe.Close()
	if zeroErr != nil && !errors.Is(zeroErr, errNoZeroRange) {
		t.Fatalf("zeroRange on %s: %v", dir, zeroErr)
	}
	want := uint64(1) // a recycled spare; none where the file system cannot zero a range
	if zeroErr != nil {
		want = 0
	}
	q := mustOpen(t, Options{Dir: dir, SenderID: "s", Durability: DurabilityFlush, MaxSegmentBytes: 1 << 16})
	for i := range 80 {
		mustAppend(t, q, testPayload(uint64(i+1), 1000))
	}
	q.Ack(q.PublishedFSN())
	if _, recycled, _ := q.spareCounts(); recycled != want {
		t.Fatalf("spares recycled on disk: %d, want %d (zeroRange: %v)", recycled, want, zeroErr)
	}
	waitFor(t, "a spare", func() bool { made, _, _ := q.spareCounts(); return made > 0 })
	b, err := os.ReadFile(filepath.Join(dir, "s", spareName))
	if err != nil || len(b) != 1<<16 || nonZeroExtent(b) != 0 {
		t.Fatalf("the spare on disk: %d bytes, %d non-zero (%v): want %d zero bytes", len(b), nonZeroExtent(b), err, 1<<16)
	}
	for i := range 80 {
		mustAppend(t, q, testPayload(uint64(i+81), 1000))
	}
	if _, _, used := q.spareCounts(); used == 0 {
		t.Fatal("no rotation used the spare")
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestNewSegmentDuringADirectoryFsync: a batch that needs a new segment
// does not wait for a group fsync that ends with a directory fsync, which
// can make the new segment's name durable before its header; a power loss
// then leaves a torn creation, which recovery deletes, keeping every frame
// an append returned for. (The torn creation rule itself is tested in
// torncreation_test.go.)
func TestNewSegmentDuringADirectoryFsync(t *testing.T) {
	for seed := range uint64(iterations(20, 100)) {
		cfs := newCrashFS()
		o := spareOpts(cfs)
		q := mustOpen(t, o)
		returned := map[uint64]uint64{}
		spareFrames(t, q, 1, 12, 0, func(fsn, id uint64) { returned[fsn] = id })
		entered, blocked := blockingSyncs(cfs)
		release := sync.OnceFunc(func() { close(blocked) })
		q.mu.Lock()
		q.dirDirty = true // as after a rotation or a recycle
		q.mu.Unlock()
		var wg sync.WaitGroup
		wg.Go(func() { q.Append(context.Background(), testPayload(13, 300)) }) // its group fsync blocks, dir pending
		<-entered
		wg.Go(func() { q.Append(context.Background(), testPayload(14, 300)) }) // needs segment 14
		next := "/d/s/" + segmentName(14)
		waitFor(t, "segment 14 created behind the directory fsync", func() bool { return slices.Contains(cfs.fileNames(), next) })
		// The .ack-watermark's replace fsyncs the directory: the name of
		// segment 14 becomes durable before any fsync of its header.
		q.Ack(1)
		q.mu.Lock()
		err := q.saveWatermarkLocked()
		q.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		snap := cfs.PowerLoss(keepSomeWrites, rand.New(rand.NewPCG(seed, 14)))
		release()
		wg.Wait()
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		checkRecovered(t, Options{Dir: "/d", SenderID: "s", FS: snap, Durability: DurabilityFlush, MaxSegmentBytes: o.MaxSegmentBytes},
			returned, fmt.Sprintf("seed %d", seed))
	}
}

package sfqueue

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// The loss window of each durability mode (doc.go, Durability; rule.go):
// what a crash loses inside it is counted and logged, what it loses
// outside it is media damage, and nothing is lost in silence.

// waitSaved waits until .ack-watermark records published FSN fsn (the
// background save, at most every 250 ms).
func waitSaved(t *testing.T, fsys FS, slot string, fsn uint64) {
	t.Helper()
	waitFor(t, "the watermark to record the published frames", func() bool {
		w, ok, _ := readWatermark(fsys, slot)
		return ok && w.published >= fsn
	})
}

// ids reads every frame left in q and returns the ids of their testPayloads.
func ids(t *testing.T, q *Queue) []uint64 {
	t.Helper()
	var out []uint64
	for _, f := range drain(t, q.NewCursor()) {
		id, err := checkTestPayload(f.payload)
		if err != nil {
			t.Fatalf("frame %d: %v", f.fsn, err)
		}
		out = append(out, id)
	}
	return out
}

// Finding 1 of issue 23: a power loss leaves .ack-watermark (fsynced)
// ahead of the segment (not yet written back). The acked frames are
// QuestDB's; new FSNs must resume above the watermark, or the frames
// given those FSNs again are dropped as acknowledged by the recovery after
// the next crash (QuestDB down meanwhile: no ack moves the watermark).
func TestWatermarkAheadOfTheDataKeepsNewFrames(t *testing.T) {
	for _, d := range []Durability{DurabilityMemory, DurabilityPeriodic} {
		t.Run(d.String(), func(t *testing.T) {
			o := Options{Dir: t.TempDir(), SenderID: "s", Durability: d, SyncInterval: 1 << 40}
			slot := filepath.Join(o.Dir, o.SenderID)
			q := mustOpen(t, o)
			appendN(t, q, 1, 12)
			q.Ack(10)
			off, path := q.segs[0].offsets[3], q.segs[0].path
			waitFor(t, "the watermark to record the ack", func() bool { w, _, _ := readWatermark(q.fs, slot); return w.acked == 10 })
			kill(q)
			// The power loss kept FSN 1..3 of the segment only.
			if err := os.Truncate(path, int64(off)); err != nil {
				t.Fatal(err)
			}
			q = mustOpen(t, o)
			if rep := q.Recovery(); rep.Unreplayable != nil || rep.AckedFSN != 10 || rep.TornFrames != 2 || rep.TornFirstFSN != 11 {
				t.Fatalf("recovery %+v; want acked 10 kept and FSN 11..12 counted as torn", rep)
			}
			appendN(t, q, 100, 10) // QuestDB is down: nothing is acked
			kill(q)
			q = mustOpen(t, o)
			defer q.Close()
			if got, want := ids(t, q), []uint64{100, 101, 102, 103, 104, 105, 106, 107, 108, 109}; !slices.Equal(got, want) {
				t.Fatalf("after the second crash the slot holds frames %v; want every new frame %v", got, want)
			}
		})
	}
}

// Finding 1: a watermark recovery could not use is rewritten before any
// FSN is handed out again, so no stale or corrupt file outlives the Open.
func TestIgnoredWatermarkIsRewritten(t *testing.T) {
	o := Options{Dir: t.TempDir(), SenderID: "s"}
	slot := filepath.Join(o.Dir, o.SenderID)
	q := mustOpen(t, o)
	appendN(t, q, 1, 5)
	q.Ack(2)
	mustClose(t, q)
	b, _ := os.ReadFile(filepath.Join(slot, watermarkFile))
	b[5] ^= 1
	os.WriteFile(filepath.Join(slot, watermarkFile), b, 0o600)
	q = mustOpen(t, o)
	defer q.Close()
	if !q.Recovery().WatermarkIgnored {
		t.Fatalf("recovery %+v; want the corrupt watermark ignored", q.Recovery())
	}
	w, ok, err := readWatermark(q.fs, slot)
	if !ok || err != nil || w.acked != 0 || w.published != 5 {
		t.Fatalf("after Open .ack-watermark is %+v (ok %v, %v); want it rewritten: acked 0, published 5", w, ok, err)
	}
}

// Finding 2: frames published but never written back (segments that
// never reached the disk) are counted as torn and logged at Error, not
// deleted unsaid.
func TestFramesThatNeverReachedTheDiskAreCounted(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Durability
		run  func(t *testing.T, q *Queue) (appended uint64)
		// causes are the torn ranges' causes, in order.
		causes []TornCause
	}{
		// Memory durability, nothing of the active segment written back.
		{"memory", DurabilityMemory, func(t *testing.T, q *Queue) uint64 {
			appendN(t, q, 1, 50)
			return 50
		}, []TornCause{TornNeverWritten}},
		// Periodic durability: the new segment's first tick had not run.
		{"periodic, new segment", DurabilityPeriodic, func(t *testing.T, q *Queue) uint64 {
			n := uint64(0)
			for len(q.segs) < 2 {
				n++
				appendN(t, q, int(n), 1)
			}
			appendN(t, q, int(n)+1, 1)
			return n + 1
		}, []TornCause{TornNeverWritten}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfs := newCrashFS()
			o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: tc.d, SyncInterval: 1 << 40, MaxSegmentBytes: 2048}
			q := mustOpen(t, o)
			n := tc.run(t, q)
			waitSaved(t, cfs, "/d/s", n)
			snap := cfs.PowerLoss(dropUnsynced, nil)
			kill(q)
			core, logs := observer.New(zap.ErrorLevel)
			o.FS, o.Logger = snap, zap.New(core)
			q = mustOpen(t, o)
			defer q.Close()
			rep := q.Recovery()
			got := uint64(len(ids(t, q)))
			if rep.Unreplayable != nil || rep.TornFrames == 0 || got+rep.TornFrames != n || rep.TornFirstFSN != got+1 {
				t.Fatalf("%d frames appended, %d recovered, recovery %+v; want the rest counted as torn from FSN %d", n, got, rep, got+1)
			}
			if !tornLogged(logs) {
				t.Fatalf("no Error line for the torn frames: %v", logs.All())
			}
			var causes []TornCause
			for _, r := range rep.Torn {
				causes = append(causes, r.TornCause)
			}
			if !slices.Equal(causes, tc.causes) {
				t.Fatalf("torn ranges %+v: causes %q, want %q", rep.Torn, causes, tc.causes)
			}
		})
	}
}

// genSymUse reads genSymPayload: generation u32 | highest symbol id used
// (i32, -1: none).
func genSymUse(p []byte) (uint32, int64) {
	return binary.LittleEndian.Uint32(p), int64(int32(binary.LittleEndian.Uint32(p[4:])))
}

func genSymPayload(gen uint32, maxID int32) []byte {
	p := make([]byte, 16)
	binary.LittleEndian.PutUint32(p, gen)
	binary.LittleEndian.PutUint32(p[4:], uint32(maxID))
	return p
}

// Finding 4: generation 0's file is deleted once the watermark covers its
// frames; a watermark damaged afterwards must not make those acked frames
// unacked and the slot unreplayable: frames of a generation older than the
// oldest dictionary present were acknowledged.
func TestFramesOfADeletedGenerationWereAcknowledged(t *testing.T) {
	o := Options{Dir: t.TempDir(), SenderID: "s", SymbolUse: genSymUse}
	slot := filepath.Join(o.Dir, o.SenderID)
	q := mustOpen(t, o)
	addGen(t, q, 0)
	for range 3 {
		mustAppend(t, q, genSymPayload(0, 0))
	}
	addGen(t, q, 1)
	mustAppend(t, q, genSymPayload(1, 0))
	mustAppend(t, q, genSymPayload(1, 0))
	q.Ack(3)
	waitGens(t, q, 1)
	kill(q)
	b, _ := os.ReadFile(filepath.Join(slot, watermarkFile))
	b[len(b)-1] ^= 0x40 // one flipped bit in its CRC
	os.WriteFile(filepath.Join(slot, watermarkFile), b, 0o600)
	q = mustOpen(t, o)
	defer q.Close()
	rep := q.Recovery()
	if rep.Unreplayable != nil || rep.AckedFSN != 3 || rep.FramesRecovered != 2 {
		t.Fatalf("recovery %+v; want FSN 1..3 (generation 0, deleted) taken as acknowledged and FSN 4..5 replayed", rep)
	}
	if n := len(drain(t, q.NewCursor())); n != 2 {
		t.Fatalf("read %d frames; want FSN 4 and 5", n)
	}
}

// Finding 3: memory durability syncs sealed segments in the background and
// records what is durable, so a power loss that tears the unsynced
// segments is the mode's window (counted), not media damage (set aside).
func TestMemoryPowerLossIsTheWindow(t *testing.T) {
	cfs := newCrashFS()
	o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityMemory, MaxSegmentBytes: 1024}
	q := mustOpen(t, o)
	appendN(t, q, 1, 50) // about 4 segments
	if len(q.segs) < 4 {
		t.Fatalf("%d segments; want at least 4", len(q.segs))
	}
	waitSaved(t, cfs, "/d/s", 50)
	// Appended after the last save: in the window, without a record.
	appendN(t, q, 51, 3)
	defer kill(q)
	for seed := range powerLossSeeds() {
		po := o
		po.FS = cfs.PowerLoss(keepSomeWrites, rand.New(rand.NewPCG(seed, 23)))
		q2 := mustOpen(t, po)
		rep := q2.Recovery()
		got := ids(t, q2)
		q2.Close()
		if rep.Unreplayable != nil {
			t.Fatalf("seed %d: a power loss in memory durability set the slot aside: %v", seed, rep.Unreplayable)
		}
		for i, id := range got {
			if id != uint64(i+1) {
				t.Fatalf("seed %d: recovered ids %v; want a prefix of 1..53", seed, got)
			}
		}
		if n := uint64(len(got)); n < 50 && n+rep.TornFrames < 50 {
			t.Fatalf("seed %d: %d of the 50 recorded frames recovered, %d counted torn (%+v): a loss not counted", seed, n, rep.TornFrames, rep)
		}
	}
}

// The Error line of a loss in the window names its FSN range and cause.
func tornLogged(logs *observer.ObservedLogs) bool {
	for _, e := range logs.All() {
		if strings.Contains(e.Message, "loss window") && e.ContextMap()["first_fsn"] != nil {
			return true
		}
	}
	return false
}

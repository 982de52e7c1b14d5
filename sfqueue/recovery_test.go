package sfqueue

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeSlot appends n frames to a fresh slot with 512-byte segments and
// closes it, returning the options and the payloads by FSN-1.
// crashedBefore rewrites the slot's .ack-watermark as a crash before FSN
// fsn's fsync leaves it (on-disk FSN fsn-1, the acked FSN kept): a slot
// closed cleanly records every frame as on disk, so damage to its newest
// frames is damage to written data, never a torn write.
func crashedBefore(t *testing.T, o Options, fsn uint64) {
	t.Helper()
	slot := filepath.Join(o.Dir, o.SenderID)
	w, _, err := readWatermark(OSFS(), slot)
	if err != nil {
		t.Fatal(err)
	}
	w.synced = min(w.synced, fsn-1)
	if err := os.WriteFile(filepath.Join(slot, watermarkFile), encodeWatermark(w), 0o600); err != nil {
		t.Fatal(err)
	}
}

func writeSlot(t *testing.T, n int, symbolUse func([]byte) (uint32, int64)) (Options, [][]byte) {
	t.Helper()
	o := Options{Dir: t.TempDir(), SenderID: "s", MaxSegmentBytes: 512, SymbolUse: symbolUse}
	q := mustOpen(t, o)
	var payloads [][]byte
	for i := range n {
		p := testPayload(uint64(i+1), 30+(i*37)%90)
		payloads = append(payloads, p)
		mustAppend(t, q, p)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	return o, payloads
}

func segmentPaths(t *testing.T, o Options) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(o.Dir, o.SenderID, "*"+segmentSuffix))
	if err != nil || len(names) == 0 {
		t.Fatalf("no segments in %s: %v", o.Dir, err)
	}
	return names
}

func TestCorruptionNeverReturnsBadFrames(t *testing.T) {
	type damage func(b []byte, r *rand.Rand) []byte
	cases := []struct {
		name   string
		target int // segment index from the end: 0 = newest
		damage damage
		// wantLoss: the damage must cost frames; false when it may hit only
		// preallocated zeros. Any loss must be reported.
		wantLoss bool
	}{
		{"truncate mid-frame", 0, func(b []byte, r *rand.Rand) []byte { return b[:segmentHeaderSize+5+r.IntN(40)] }, true},
		{"truncate mid-header", 0, func(b []byte, r *rand.Rand) []byte { return b[:r.IntN(segmentHeaderSize)] }, true},
		{"flip payload bit", 0, func(b []byte, r *rand.Rand) []byte { b[segmentHeaderSize+8+r.IntN(10)] ^= 0x10; return b }, true},
		{"flip length bit", 0, func(b []byte, r *rand.Rand) []byte { b[segmentHeaderSize+r.IntN(4)] ^= 0x01; return b }, true},
		{"flip item count bit", 0, func(b []byte, r *rand.Rand) []byte { b[segmentHeaderSize+4+r.IntN(4)] ^= 0x01; return b }, true},
		{"flip CRC bit", 0, func(b []byte, r *rand.Rand) []byte {
			n := int(b[segmentHeaderSize]) // first frame length (< 256)
			b[segmentHeaderSize+8+n+r.IntN(4)] ^= 0x80
			return b
		}, true},
		{"flip header bit", 0, func(b []byte, r *rand.Rand) []byte { b[r.IntN(segmentHeaderSize)] ^= 0x04; return b }, true},
		{"zero a sector", 0, func(b []byte, r *rand.Rand) []byte { clear(b[:min(len(b), 512)]); return b }, true},
		{"garbage tail", 0, func(b []byte, r *rand.Rand) []byte {
			for i := range 64 {
				b = append(b, byte(r.Uint32()|uint32(i&1)))
			}
			return b
		}, false},
		{"flip in an older segment", 2, func(b []byte, r *rand.Rand) []byte { b[segmentHeaderSize+8+r.IntN(10)] ^= 0xff; return b }, true},
		{"truncate an older segment", 2, func(b []byte, r *rand.Rand) []byte { return b[:segmentHeaderSize+10] }, true},
	}
	for _, tc := range cases {
		for seed := range uint64(iterations(3, 30)) {
			t.Run(tc.name, func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 1))
				o, payloads := writeSlot(t, 40, nil)
				segs := segmentPaths(t, o)
				target := segs[len(segs)-1-tc.target]
				b, err := os.ReadFile(target)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(target, tc.damage(b, r), 0o644); err != nil {
					t.Fatal(err)
				}
				q, err := Open(o)
				if err != nil {
					t.Fatalf("Open after %s: %v", tc.name, err)
				}
				defer q.Close()
				rep := q.Recovery()
				got := drain(t, q.NewCursor())
				for i, f := range got {
					if f.fsn != q.AckedFSN()+1+uint64(i) || !bytes.Equal(f.payload, payloads[f.fsn-1]) {
						t.Fatalf("frame %d (fsn %d) differs from what was appended", i, f.fsn)
					}
				}
				lost := len(payloads) - len(got)
				if lost > 0 && rep.TornBytes == 0 && rep.TornFrames == 0 && rep.LostFrames == 0 && rep.Unreplayable == nil {
					t.Fatalf("%d frames lost without torn bytes, lost frames or a set-aside slot: %+v", lost, rep)
				}
				if lost == 0 && tc.wantLoss {
					t.Fatalf("%s cost no frame: the damage did not hit data", tc.name)
				}
				// The file is cut at the last good frame: reopening again finds
				// nothing more to cut.
				q.Close()
				q2 := mustOpen(t, o)
				defer q2.Close()
				if rep2 := q2.Recovery(); rep2.TornBytes != 0 || rep2.PublishedFSN != q.PublishedFSN() {
					t.Fatalf("second reopen: %+v; want nothing more cut and published %d", rep2, q.PublishedFSN())
				}
			})
		}
	}
}

func TestGapMakesSlotUnreplayable(t *testing.T) {
	o, _ := writeSlot(t, 40, nil)
	segs := segmentPaths(t, o)
	if err := os.Remove(segs[1]); err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 2; n++ {
		q := mustOpen(t, o)
		rep := q.Recovery()
		want := filepath.Join(o.Dir, "s.unreplayable-"+string(rune('0'+n)))
		var dl *DataLossError
		if rep.Unreplayable == nil || rep.Unreplayable.Path != want || !strings.Contains(rep.Unreplayable.Reason, "gap") {
			t.Fatalf("reopen %d: %+v; want a gap set aside as %s", n, rep.Unreplayable, want)
		}
		if dl = rep.Unreplayable; !strings.Contains(dl.Error(), "DATA_LOSS") || dl.Frames == 0 {
			t.Fatalf("DataLossError %q with %d frames", dl.Error(), dl.Frames)
		}
		if st, err := os.Stat(want); err != nil || !st.IsDir() {
			t.Fatalf("set-aside slot %s missing: %v", want, err)
		}
		if q.PublishedFSN() != 0 || len(drain(t, q.NewCursor())) != 0 {
			t.Fatalf("fresh slot is not empty")
		}
		if fsn := mustAppend(t, q, []byte("fresh")); fsn != 1 {
			t.Fatalf("first FSN on the fresh slot = %d", fsn)
		}
		q.Close()
		if n == 1 {
			// Make the fresh slot unreplayable too: a second set-aside gets -2.
			q := mustOpen(t, o)
			q.Close()
			o2 := o
			o2.MaxSegmentBytes = 512
			q = mustOpen(t, o2)
			for i := range 30 {
				mustAppend(t, q, testPayload(uint64(i), 100))
			}
			q.Close()
			segs := segmentPaths(t, o)
			os.Remove(segs[1])
		}
	}
	orphans, err := ListOrphans(o.Dir, []string{"s"})
	if err != nil || len(orphans) != 0 {
		t.Fatalf("ListOrphans listed set-aside slots: %v %v", orphans, err)
	}
}

// symUse: the first byte of a payload is the highest symbol id it uses, in
// generation 0; 0xff means none.
func symUse(p []byte) (uint32, int64) {
	if len(p) == 0 || p[0] == 0xff {
		return 0, -1
	}
	return 0, int64(p[0])
}

func TestUnbackedSymbolsMakeSlotUnreplayable(t *testing.T) {
	o := Options{Dir: t.TempDir(), SenderID: "s", SymbolUse: symUse}
	q := mustOpen(t, o)
	if err := q.AddSymbols(0, 0, [][]byte{[]byte("a"), []byte("b")}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, q, []byte{1, 'x'})    // uses ids 0..1: backed
	mustAppend(t, q, []byte{0xff, 'y'}) // no symbols
	q.Close()
	q = mustOpen(t, o)
	if rep := q.Recovery(); rep.Unreplayable != nil || rep.FramesRecovered != 2 {
		t.Fatalf("backed frames: %+v", rep)
	}
	if got := symbols(t, q, 0); len(got) != 2 || string(got[1]) != "b" {
		t.Fatalf("Symbols(0) after reopen = %q", got)
	}
	mustAppend(t, q, []byte{5, 'z'}) // id 5 was never added
	q.Close()
	q = mustOpen(t, o)
	defer q.Close()
	rep := q.Recovery()
	if rep.Unreplayable == nil || !strings.Contains(rep.Unreplayable.Reason, "symbol id 5") || rep.Unreplayable.Frames != 3 {
		t.Fatalf("frame with unbacked id 5: %+v", rep.Unreplayable)
	}
	if len(symbols(t, q, 0)) != 0 {
		t.Fatal("fresh slot kept the old dictionary")
	}
	var dl *DataLossError
	if !errors.As(error(rep.Unreplayable), &dl) {
		t.Fatal("Unreplayable is not a *DataLossError")
	}
}

func TestAckedFramesNeedNoSymbols(t *testing.T) {
	o := Options{Dir: t.TempDir(), SenderID: "s", SymbolUse: symUse}
	q := mustOpen(t, o)
	mustAppend(t, q, []byte{7, 'x'}) // unbacked, but acked below
	mustAppend(t, q, []byte{0xff})
	q.Ack(1)
	q.Close()
	q = mustOpen(t, o)
	defer q.Close()
	if rep := q.Recovery(); rep.Unreplayable != nil || rep.AckedFSN != 1 {
		t.Fatalf("an acked frame with unbacked ids made the slot unreplayable: %+v", rep)
	}
}

func TestVanishedFramesAreReportedAsLost(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, segs []string)
	}{
		{"newest segment truncated at a frame boundary", func(t *testing.T, segs []string) {
			b, _ := os.ReadFile(segs[len(segs)-1])
			n := segmentHeaderSize
			_, _, size, _ := parseFrame(b[n:], segmentVersion)
			os.WriteFile(segs[len(segs)-1], b[:n+size], 0o644) // keep one frame
		}},
		{"newest segment deleted", func(t *testing.T, segs []string) {
			os.Remove(segs[len(segs)-1])
		}},
	} {
		// Periodic: Close fsynced every frame, so the loss is the medium's
		// (DATA_LOSS). Memory: the active segment was never synced, the
		// mode's loss window: counted as torn frames.
		for _, d := range []Durability{DurabilityPeriodic, DurabilityMemory} {
			t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
				o := Options{Dir: t.TempDir(), SenderID: "s", MaxSegmentBytes: 512, Durability: d}
				q := mustOpen(t, o)
				appendN(t, q, 1, 40)
				mustClose(t, q)
				tc.damage(t, segmentPaths(t, o))
				q = mustOpen(t, o)
				defer q.Close()
				rep := q.Recovery()
				missing := uint64(40 - len(drain(t, q.NewCursor())))
				got := rep.LostFrames
				if d == DurabilityMemory {
					got = rep.TornFrames
				}
				if missing == 0 || got != missing || rep.LostFrames+rep.TornFrames != missing || rep.Unreplayable != nil {
					t.Fatalf("%d of 40 frames missing, report %+v; want them all counted, as lost (periodic) or torn (memory)", missing, rep)
				}
			})
		}
	}
}

func TestGapAgainstTheWatermark(t *testing.T) {
	for _, tc := range []struct {
		name             string
		ackPastFirst     bool // ack beyond the first segment (Ack deletes it)
		wantUnreplayable bool
	}{
		// The first segment ends at FSN a; the watermark is a-1; its last
		// frame is cut: FSN a, unacked, is missing -> set aside.
		{"hole above the watermark", false, true},
		// Everything up to a+1 is acked and the first segment deleted; a
		// power loss undid the deletion (restored, cut short): the hole
		// holds only acked FSNs -> harmless.
		{"hole below the watermark", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Dir: t.TempDir(), SenderID: "s", MaxSegmentBytes: 512}
			q := mustOpen(t, o)
			for i := range 20 {
				mustAppend(t, q, testPayload(uint64(i+1), 100))
			}
			first := q.segs[0]
			a := first.end() - 1
			saved, err := os.ReadFile(first.path)
			if err != nil {
				t.Fatal(err)
			}
			if tc.ackPastFirst {
				q.Ack(a + 1)
			} else {
				q.Ack(a - 1)
			}
			q.Close()
			// The first segment, without its last frame.
			cut := int64(first.offsets[len(first.offsets)-1])
			if err := os.WriteFile(first.path, saved[:cut], 0o644); err != nil {
				t.Fatal(err)
			}
			q = mustOpen(t, o)
			defer q.Close()
			rep := q.Recovery()
			if got := rep.Unreplayable != nil; got != tc.wantUnreplayable {
				t.Fatalf("unreplayable %v (%v), want %v", got, rep.Unreplayable, tc.wantUnreplayable)
			}
			if !tc.wantUnreplayable {
				got := drain(t, q.NewCursor())
				if len(got) == 0 || got[0].fsn != a+2 || q.AckedFSN() != a+1 {
					t.Fatalf("after a harmless hole: acked %d, first frame %v; want acked %d, replay from %d", q.AckedFSN(), got, a+1, a+2)
				}
			}
		})
	}
}

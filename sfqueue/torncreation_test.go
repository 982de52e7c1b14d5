package sfqueue

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
)

// tornSegment is the content of a newest segment (base 41, after a
// ruleSlot's 40 frames) whose creation a crash cut short: the first
// headerBytes bytes of its header, then frames 41.. (whole ones, and the
// last cut after lastBytes bytes when lastBytes > 0), in a 512-byte file
// (preallocated: zeros where nothing landed).
func tornSegment(headerBytes, frames, lastBytes int) []byte {
	b := make([]byte, 512)
	copy(b, encodeSegmentHeader(41)[:headerBytes])
	var fr []byte
	for i := range frames {
		fr = appendFrame(fr, testPayload(uint64(41+i), 40), 1)
	}
	if lastBytes > 0 {
		fr = appendFrame(fr, testPayload(uint64(41+frames), 40), 1)[:len(fr)+lastBytes]
	}
	copy(b[segmentHeaderSize:], fr)
	return b
}

// headerOnly is a 512-byte segment holding its header and nothing else.
func headerOnly(base uint64) []byte {
	return append(encodeSegmentHeader(base), make([]byte, 512-segmentHeaderSize)...)
}

// TestTornTailBeforeHeaderOnlySegments: a batch creates every segment it
// needs, headers included, before its first frame, so a power loss can
// leave a torn tail in a segment followed by segments holding a header
// (whole or torn) and nothing else. Those were never written: the tail is
// cut as the newest segment's would be, and they are deleted.
func TestTornTailBeforeHeaderOnlySegments(t *testing.T) {
	s := newRuleSlot(t, DurabilityPeriodic, 0)
	slot := filepath.Join(s.o.Dir, s.o.SenderID)
	s.edit(t, -1, func(b []byte, o []uint32) []byte { flipPayload(b, o[len(o)-1]); return b }) // FSN 40
	crashedBefore(t, s.o, 40)
	created := []string{filepath.Join(slot, segmentName(41)), filepath.Join(slot, segmentName(44))}
	os.WriteFile(created[0], headerOnly(41), 0o600)
	os.WriteFile(created[1], encodeSegmentHeader(44)[:11], 0o600)
	q, rep, got, _ := s.open(t)
	defer q.Close()
	// The segments a batch created show FSN 41..43 were handed out too:
	// lost in the window, counted.
	if rep.Unreplayable != nil || len(got) != 39 || rep.TornFirstFSN != 40 || rep.TornFrames != 4 || rep.LostFrames != 0 ||
		len(rep.Torn) != 2 || rep.Torn[0].Last != 40 || rep.Torn[1].First != 41 {
		t.Fatalf("replayed %d frames, report %+v; want FSN 40 cut as the torn tail, 41..43 never written, 39 replayed", len(got), rep)
	}
	if rep.Torn[0].TornCause != TornTail || rep.Torn[1].TornCause != TornNeverWritten {
		t.Fatalf("torn causes %q, %q; want %q (FSN 40) and %q (41..43: only their segments were created)",
			rep.Torn[0].TornCause, rep.Torn[1].TornCause, TornTail, TornNeverWritten)
	}
	for _, p := range created {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s was kept: %v", p, err)
		}
	}
}

// TestTornCreation checks the recovery rule for a newest segment with an
// unusable header (doc.go, Recovery): when no FSN of it was recorded as on
// disk it is a torn creation, deleted and counted as a torn tail; when the
// watermark recorded some of it, or cannot tell, and in any older segment,
// the header is damage and the slot is set aside unchanged.
func TestTornCreation(t *testing.T) {
	wm := func(durable uint64) func(t *testing.T, slot string) {
		return func(t *testing.T, slot string) {
			if err := os.WriteFile(filepath.Join(slot, watermarkFile), encodeWatermark(watermark{synced: durable, published: durable}), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	noWatermark := func(t *testing.T, slot string) { os.Remove(filepath.Join(slot, watermarkFile)) }
	cases := []struct {
		name      string
		seg       []byte                          // segment 41's content; nil: none
		after     []byte                          // segment 44's content (created by the same batch); nil: none
		watermark func(t *testing.T, slot string) // nil: as Close wrote it (on disk FSN 40)
		older     func(t *testing.T, s *ruleSlot) // damage to an older segment
		torn      uint64                          // frames counted torn from FSN 41 (torn creation)
		lost      uint64                          // frames reported lost below FSN 41
		aside     func(s *ruleSlot) uint64        // set aside: the first unreadable FSN
	}{
		{name: "torn header, no frame", seg: tornSegment(9, 0, 0)},
		{name: "header lost, frames kept", seg: tornSegment(0, 3, 0), torn: 3},
		{name: "torn header, frames kept, the last one torn", seg: tornSegment(17, 2, 30), torn: 3},
		{name: "header lost, frames kept, no watermark", seg: tornSegment(0, 3, 0), watermark: noWatermark, torn: 3},
		{name: "header lost, frames kept, the next segment's header written", seg: tornSegment(0, 3, 0), after: headerOnly(44), torn: 3},
		{name: "a hole before it, recorded as on disk", seg: tornSegment(0, 3, 0), torn: 3, lost: 1,
			older: func(t *testing.T, s *ruleSlot) { // FSN 40, the older segment's last frame, vanished
				s.edit(t, -1, func(b []byte, o []uint32) []byte { return b[:o[len(o)-1]] })
			}},
		{name: "watermark records the segment as on disk", seg: tornSegment(0, 3, 0), watermark: wm(41),
			aside: func(*ruleSlot) uint64 { return 41 }},
		{name: "watermark unreadable", seg: tornSegment(0, 3, 0),
			watermark: func(t *testing.T, slot string) {
				os.WriteFile(filepath.Join(slot, watermarkFile), []byte("torn"), 0o600)
			},
			aside: func(*ruleSlot) uint64 { return 41 }},
		{name: "older segment with a torn header", watermark: wm(0), older: func(t *testing.T, s *ruleSlot) {
			s.edit(t, 2, func(b []byte, _ []uint32) []byte { clear(b[5:segmentHeaderSize]); return b })
		}, aside: func(s *ruleSlot) uint64 { return s.firstFSN(2) }},
	}
	for _, d := range []Durability{DurabilityMemory, DurabilityPeriodic, DurabilityFlush} {
		for _, tc := range cases {
			t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
				s := newRuleSlot(t, d, 0)
				slot := filepath.Join(s.o.Dir, s.o.SenderID)
				if w, ok, _ := readWatermark(OSFS(), slot); !ok || w.published != 40 {
					t.Fatalf("Close left watermark %+v (%v); want on-disk FSN 40", w, ok)
				}
				torn := filepath.Join(slot, segmentName(41))
				if tc.seg != nil {
					if err := os.WriteFile(torn, tc.seg, 0o600); err != nil {
						t.Fatal(err)
					}
				}
				next := filepath.Join(slot, segmentName(44))
				if tc.after != nil {
					if err := os.WriteFile(next, tc.after, 0o600); err != nil {
						t.Fatal(err)
					}
				}
				if tc.watermark != nil {
					tc.watermark(t, slot)
				}
				if tc.older != nil {
					tc.older(t, s)
				}
				before := slotFiles(t, slot)
				q, rep, got, logs := s.open(t)
				defer q.Close()
				errorLogs := logs.FilterLevelExact(zapcore.ErrorLevel).Len()
				if tc.aside != nil {
					dl := rep.Unreplayable
					if dl == nil {
						t.Fatalf("not set aside: %+v", rep)
					}
					if dl.Unreadable[0].First != tc.aside(s) || !strings.Contains(dl.Unreadable[0].Cause, "unusable segment header") {
						t.Fatalf("unreadable %v; want an unusable header from FSN %d", dl.Unreadable, tc.aside(s))
					}
					if !sameFiles(before, slotFiles(t, dl.Path)) || errorLogs == 0 || len(got) != 0 {
						t.Fatalf("the set-aside slot differs from what recovery found, or %d error logs, %d frames", errorLogs, len(got))
					}
					return
				}
				if rep.Unreplayable != nil {
					t.Fatalf("a torn creation set the slot aside: %v", rep.Unreplayable)
				}
				for _, p := range []string{torn, next} {
					if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
						t.Fatalf("%s was kept: %v", p, err)
					}
				}
				// Every written byte of the file is torn. In memory
				// durability the active segment was never synced: what
				// it lost is torn too, not lost.
				end, first := 40-tc.lost, uint64(41)
				if d == DurabilityMemory {
					tc.torn, tc.lost, first = tc.torn+tc.lost, 0, first-tc.lost
				}
				if written := nonZeroExtent(tc.seg); uint64(len(got)) != end || q.PublishedFSN() != end || rep.LostFrames != tc.lost ||
					written == 0 || rep.TornBytes != written || rep.TornFrames != tc.torn {
					t.Fatalf("replayed %d frames, published %d, report %+v; want %d, %d torn bytes, %d torn frames, %d lost",
						len(got), q.PublishedFSN(), rep, end, written, tc.torn, tc.lost)
				}
				if tc.torn > 0 && rep.TornFirstFSN != first {
					t.Fatalf("TornFirstFSN %d, want %d", rep.TornFirstFSN, first)
				}
				for _, r := range rep.Torn {
					if r.File == filepath.Base(torn) && r.TornCause != TornCreation {
						t.Fatalf("torn range %v in the torn creation: cause %q, want %q", r, r.TornCause, TornCreation)
					}
				}
				// The torn frames are logged like a torn tail: at Error
				// unless flush answered none of them; a torn header alone
				// loses nothing.
				tail := logs.FilterMessageSnippet("sfqueue: torn frames").All()
				if wantLine := tc.torn > 0; (len(tail) == 1 || d == DurabilityMemory && len(tail) > 1) != wantLine {
					t.Fatalf("%d torn-tail log lines; want one: %v", len(tail), wantLine)
				}
				if wantErr := tc.torn > 0 && d != DurabilityFlush || tc.lost > 0; (errorLogs > 0) != wantErr {
					t.Fatalf("%d error logs in %s durability; want them: %v", errorLogs, d, wantErr)
				}
				// A segment holding no more than a (torn) header was never
				// written: deleted as such, without a log line.
				if wantLog := nonZeroExtent(tc.seg) > segmentHeaderSize; (logs.FilterMessageSnippet("a torn creation").Len() == 1) != wantLog {
					t.Fatalf("the deletion of the torn creation logged: %v, want %v", !wantLog, wantLog)
				}
				if fsn := mustAppend(t, q, testPayload(41, 40)); fsn != end+1 {
					t.Fatalf("the next append got FSN %d, want %d", fsn, end+1)
				}
			})
		}
	}
}

// TestTornCreationRanges: the slot tool's view (SlotScan.Ranges) agrees with
// recovery: a torn creation's frames are one torn run, not damage of
// unknown length, and a header the watermark recorded frames of is damage.
func TestTornCreationRanges(t *testing.T) {
	seg := segmentName(41)
	for _, tc := range []struct {
		name     string
		seg      []byte
		durable  uint64
		creation bool       // TornCreation of segment 41
		want     []FSNRange // the runs from FSN 41 on (Cause: its start)
	}{
		{"frames", tornSegment(0, 3, 0), 40, true, []FSNRange{{First: 41, Last: 43, Torn: true, File: seg, Cause: "torn creation: "}}},
		{"a torn header only", tornSegment(9, 0, 0), 40, false, nil}, // never written: holds no FSN
		{"recorded on disk", tornSegment(0, 3, 0), 41, false, []FSNRange{
			{First: 41, Last: 0, File: seg, Cause: "unusable segment header: "},
			{First: 41, Last: 41, Cause: "vanished: "},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRuleSlot(t, DurabilityPeriodic, 0)
			slot := filepath.Join(s.o.Dir, s.o.SenderID)
			os.WriteFile(filepath.Join(slot, segmentName(41)), tc.seg, 0o600)
			os.WriteFile(filepath.Join(slot, watermarkFile), encodeWatermark(watermark{synced: tc.durable, published: tc.durable}), 0o600)
			scan, err := ScanSlot(slot)
			if err != nil {
				t.Fatal(err)
			}
			if got := scan.TornCreation(len(scan.Segments) - 1); got != tc.creation {
				t.Fatalf("TornCreation = %v; want %v", got, tc.creation)
			}
			var got []FSNRange
			for _, r := range scan.Ranges() {
				if r.Last == 0 || r.Last >= 41 {
					got = append(got, r)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("ranges from FSN 41: %v; want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				g := got[i]
				if g.First != w.First || g.Last != w.Last || g.Torn != w.Torn || g.File != w.File || g.Readable || !strings.HasPrefix(g.Cause, w.Cause) {
					t.Fatalf("range %v (torn %v); want FSN %d..%d in %q, torn %v, cause %q...", g, g.Torn, w.First, w.Last, w.File, w.Torn, w.Cause)
				}
			}
		})
	}
}

// batchAcrossSegmentsPowerLoss appends 8 frames of 100 bytes as one batch
// (segments of 3 frames: 1, 4 and 7) and returns the state a power loss
// (mode) leaves when it strikes as segment 1's first fsync starts, right
// after a directory fsync (the .ack-watermark's replace) made the new
// names durable.
func batchAcrossSegmentsPowerLoss(t *testing.T, q *Queue, cfs *crashFS, mode crashMode, r *rand.Rand) *crashFS {
	t.Helper()
	var snap *crashFS
	first := "/d/s/" + segmentName(1)
	cfs.mu.Lock()
	cfs.syncHook = func(name string) {
		if name == first && snap == nil {
			if err := cfs.SyncDir("/d/s"); err != nil {
				t.Error(err)
			}
			snap = cfs.PowerLoss(mode, r)
		}
	}
	cfs.mu.Unlock()
	var batch [][]byte
	for i := range 8 {
		batch = append(batch, testPayload(uint64(i+1), 100))
	}
	if _, err := q.AppendBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestTornCreationOfNewerFormatIsRefused: a newest segment of a newer
// format is never taken for a torn creation, even where nothing recorded it
// as on disk: Open refuses the slot and changes nothing.
func TestTornCreationOfNewerFormatIsRefused(t *testing.T) {
	s := newRuleSlot(t, DurabilityPeriodic, 0)
	slot := filepath.Join(s.o.Dir, s.o.SenderID)
	seg := filepath.Join(slot, segmentName(41))
	os.WriteFile(seg, tornSegment(segmentHeaderSize, 3, 0), 0o600)
	setSegmentVersion(t, seg, segmentVersion+1)
	os.Remove(filepath.Join(slot, watermarkFile))
	before := slotFiles(t, slot)
	q, err := Open(s.o)
	if err == nil {
		q.Close()
		t.Fatal("Open accepted a newest segment of a newer format")
	}
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Version != segmentVersion+1 {
		t.Fatalf("Open: %v; want a *FormatError", err)
	}
	if !sameFiles(before, slotFiles(t, slot)) {
		t.Fatal("Open changed the slot of a newer format")
	}
}

// TestNewSegmentTornCreationAfterPowerLoss: a directory fsync (here the
// .ack-watermark's replace) makes a new segment's name durable while no
// fsync of the file has run, and a power loss keeps any prefix of its
// writes, the header's torn. Recovery takes a torn header for what it is,
// a torn creation, and never sets the slot aside: for a rotation, whose
// header fsync the crash file system skips (so the test holds with it or
// without it: every fsync of the new segment is skipped), and for the
// first segment of an empty slot, which has none.
func TestNewSegmentTornCreationAfterPowerLoss(t *testing.T) {
	const frames = 13 // fill the first segment exactly
	for _, tc := range []struct {
		name    string
		maxSeg  int64
		durable uint64 // FSNs fsynced before the power loss
		// write appends; it returns what a power loss left when it took
		// the snapshot itself (nil: after it, the loop does)
		write func(t *testing.T, q *Queue, cfs *crashFS, r *rand.Rand) *crashFS
	}{
		{"rotation", segmentHeaderSize + frames*frameSize(100), frames, func(t *testing.T, q *Queue, cfs *crashFS, _ *rand.Rand) *crashFS {
			for i := range frames {
				mustAppend(t, q, testPayload(uint64(i+1), 100))
			}
			q.mu.Lock()
			q.syncLocked()
			q.mu.Unlock()
			skip := func(f func(string) bool) {
				cfs.mu.Lock()
				cfs.skipSync = f
				cfs.mu.Unlock()
			}
			skip(func(string) bool { return true })      // by whatever handle: the spare's too
			mustAppend(t, q, testPayload(frames+1, 100)) // the rotation
			mustAppend(t, q, testPayload(frames+2, 100))
			skip(nil)
			return nil
		}},
		{"first segment", 4096, 0, func(t *testing.T, q *Queue, _ *crashFS, _ *rand.Rand) *crashFS {
			for i := range 3 {
				mustAppend(t, q, testPayload(uint64(i+1), 100))
			}
			return nil
		}},
		{"a batch across segments", segmentHeaderSize + 3*frameSize(100), 0, func(t *testing.T, q *Queue, cfs *crashFS, r *rand.Rand) *crashFS {
			// The batch creates segments 1, 4 and 7 (headers written) and
			// then writes their frames, fsyncing segment 1 before segment
			// 4's first frame. A directory fsync while that fsync runs (the
			// .ack-watermark's replace) and a power loss can leave segment
			// 1 torn, its frames kept or not, and 4 and 7 with headers only.
			return batchAcrossSegmentsPowerLoss(t, q, cfs, keepSomeWrites, r)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			met := 0 // seeds that left a segment with a torn header and written bytes
			for seed := range uint64(iterations(40, 200)) {
				cfs := newCrashFS()
				q := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityPeriodic,
					SyncInterval: time.Hour, MaxSegmentBytes: tc.maxSeg})
				r := rand.New(rand.NewPCG(seed, 7))
				snap := tc.write(t, q, cfs, r)
				if snap == nil {
					q.Ack(2)
					q.mu.Lock()
					err := q.saveWatermarkLocked() // its directory fsync
					q.mu.Unlock()
					if err != nil {
						t.Fatal(err)
					}
					snap = cfs.PowerLoss(keepSomeWrites, r)
				}
				q.Close()

				scan, err := scanSlot(snap, "/d/s", nil, false)
				if err != nil {
					t.Fatal(err)
				}
				torn := false
				for _, seg := range scan.Segments {
					torn = torn || seg.HeaderErr != nil && seg.written()
				}
				if torn {
					met++
				}
				q = mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: snap, Durability: DurabilityPeriodic})
				rep := q.Recovery()
				q.Close()
				if rep.Unreplayable != nil {
					t.Fatalf("seed %d: the slot was set aside after a power loss: %v", seed, rep.Unreplayable)
				}
				if rep.PublishedFSN < tc.durable || rep.LostFrames != 0 || torn && rep.TornBytes == 0 {
					t.Fatalf("seed %d: report %+v; want at least FSN %d, none lost, torn bytes for the torn creation", seed, rep, tc.durable)
				}
			}
			if met == 0 {
				t.Fatal("no seed left a segment with a torn header and written bytes")
			}
		})
	}
}

// TestWatermarkRecordsEachNewSegmentOnDisk: without any acknowledgement,
// the background rewrites .ack-watermark once the newest segment's first
// fsync has ended, so a header the medium damages after that is not taken
// for a torn creation (whose rule needs an on-disk FSN below the base).
func TestWatermarkRecordsEachNewSegmentOnDisk(t *testing.T) {
	for _, d := range []Durability{DurabilityPeriodic, DurabilityFlush} {
		t.Run(d.String(), func(t *testing.T) {
			cfs := newCrashFS()
			q := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: d,
				SyncInterval: MinSyncInterval, MaxSegmentBytes: 1024})
			defer q.Close()
			for i := range 6 { // 4 frames fill segment 1; 5 and 6 start segment 5
				mustAppend(t, q, testPayload(uint64(i+1), 200))
			}
			waitFor(t, ".ack-watermark recording segment 5 as on disk", func() bool {
				w, ok, _ := readWatermark(cfs, "/d/s")
				return ok && w.synced >= 5
			})
			w, _, _ := readWatermark(cfs, "/d/s")
			if w.acked != 0 {
				t.Fatalf("watermark acked %d with nothing acknowledged", w.acked)
			}
		})
	}
}

// TestUnwrittenSegmentCause: in memory durability a sealed segment whose
// frames never reached the disk while the next one's did is the loss
// window, counted as torn with the cause unwritten_segment.
func TestUnwrittenSegmentCause(t *testing.T) {
	s := newRuleSlot(t, DurabilityMemory, 0)
	i := len(s.segs) - 2
	base, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(s.segs[i]), segmentSuffix), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	s.edit(t, i, func(b []byte, _ []uint32) []byte {
		clear(b[segmentHeaderSize:]) // written back: the header, not a frame
		return b
	})
	crashedBefore(t, s.o, base)
	q, rep, _, _ := s.open(t)
	defer q.Close()
	// The next segment's frames are intact, but a replay cannot skip the
	// FSNs before them: deleted with the cut, counted apart.
	next := s.offsets[i+1]
	if rep.Unreplayable != nil || len(rep.Torn) != 2 || rep.Torn[0].First != base || rep.Torn[0].TornCause != TornUnwrittenSegment ||
		rep.Torn[1].TornCause != TornAfterCut || rep.Torn[1].Frames() != uint64(len(next)) || rep.Torn[1].Last != 40 {
		t.Fatalf("torn %v, report %+v; want FSN %d.. %q, then the next segment's %d frames %q", rep.Torn, rep, base,
			TornUnwrittenSegment, len(next), TornAfterCut)
	}
}

package sfqueue

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// slotFiles reads every file of a slot but the lock files (Open rewrites
// .lock.pid when it takes the lock), to prove a set-aside slot unchanged.
func slotFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		if e.Name() == lockFileName || e.Name() == pidFileName {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func sameFiles(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// ruleSlot is a closed slot of 40 frames in 512-byte segments (5 or more
// segments), FSNs 1..ack acknowledged.
type ruleSlot struct {
	o        Options
	payloads [][]byte
	segs     []string // segment paths, oldest first
	offsets  [][]uint32
}

func newRuleSlot(t *testing.T, d Durability, ack uint64) *ruleSlot {
	t.Helper()
	s := &ruleSlot{o: Options{Dir: t.TempDir(), SenderID: "s", MaxSegmentBytes: 512, Durability: d}}
	q := mustOpen(t, s.o)
	for i := range 40 {
		p := testPayload(uint64(i+1), 30+(i*37)%90)
		s.payloads = append(s.payloads, p)
		mustAppend(t, q, p)
	}
	for _, seg := range q.segs {
		s.segs = append(s.segs, seg.path)
		s.offsets = append(s.offsets, append([]uint32(nil), seg.offsets...))
	}
	if ack > 0 {
		q.Ack(ack)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if len(s.segs) < 5 {
		t.Fatalf("only %d segments", len(s.segs))
	}
	return s
}

// open opens the slot with its logs observed (Info and up) and reads
// what it replays, checking each frame against what was appended.
func (s *ruleSlot) open(t *testing.T) (*Queue, RecoveryReport, []frame, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	o := s.o
	o.Logger = zap.New(core)
	q := mustOpen(t, o)
	got := drain(t, q.NewCursor())
	for _, f := range got {
		if !bytes.Equal(f.payload, s.payloads[f.fsn-1]) {
			q.Close()
			t.Fatalf("FSN %d replays other bytes than were appended", f.fsn)
		}
	}
	return q, q.Recovery(), got, logs
}

// edit rewrites segment i (negative: from the end) with f.
func (s *ruleSlot) edit(t *testing.T, i int, f func(b []byte, offs []uint32) []byte) {
	t.Helper()
	if i < 0 {
		i += len(s.segs)
	}
	b, err := os.ReadFile(s.segs[i])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.segs[i], f(b, s.offsets[i]), 0o600); err != nil {
		t.Fatal(err)
	}
}

// firstFSN of segment i (negative: from the end).
func (s *ruleSlot) firstFSN(i int) uint64 {
	if i < 0 {
		i += len(s.segs)
	}
	base, _ := parseSegmentName(filepath.Base(s.segs[i]))
	return base
}

func flipPayload(b []byte, off uint32) { b[off+10] ^= 0x20 } // length, item count, then the payload

type ruleOutcome int

const (
	replayAll        ruleOutcome = iota // every unacked frame replays
	tailCut                             // the newest frames are cut and counted as torn
	vanished                            // frames are missing, reported as lost; the rest replays
	setAside                            // the slot is set aside unchanged, DATA_LOSS
	setAsideIfSynced                    // setAside, but tailCut in memory durability (nothing was fsynced)
	vanishedIfSynced                    // vanished, but torn frames in memory durability (the active segment was not fsynced)
	windowLoss                          // frames are missing inside the mode's loss window, counted as torn
)

// TestRecoveryRule checks doc.go's recovery rule case by case, in each
// durability mode: what replays, what is cut and counted, and that an
// unreplayable slot is set aside with every file exactly as recovery found
// it.
func TestRecoveryRule(t *testing.T) {
	cases := []struct {
		name   string
		ack    uint64
		damage func(t *testing.T, s *ruleSlot)
		want   ruleOutcome
		// wantTorn: the first FSN of the cut (tailCut) or of the lost range
		// (vanished), and the unreadable range's first FSN (setAside).
		first func(s *ruleSlot) uint64
	}{
		{"undamaged", 0, func(t *testing.T, s *ruleSlot) {}, replayAll, nil},
		{"bit flip in the newest tail", 0, func(t *testing.T, s *ruleSlot) {
			s.edit(t, -1, func(b []byte, o []uint32) []byte { flipPayload(b, o[len(o)-1]); return b })
			crashedBefore(t, s.o, 40)
		}, tailCut, func(s *ruleSlot) uint64 { return 40 }},
		{"newest segment truncated mid-frame", 0, func(t *testing.T, s *ruleSlot) {
			s.edit(t, -1, func(b []byte, o []uint32) []byte { return b[:o[len(o)-1]+9] })
			crashedBefore(t, s.o, 40)
		}, tailCut, func(s *ruleSlot) uint64 { return 40 }},
		{"newest segment truncated mid-frame, no watermark", 0, func(t *testing.T, s *ruleSlot) {
			s.edit(t, -1, func(b []byte, o []uint32) []byte { return b[:o[len(o)-2]+9] })
			os.Remove(filepath.Join(filepath.Dir(s.segs[0]), watermarkFile))
		}, tailCut, func(s *ruleSlot) uint64 { return 39 }},
		// A completed fsync covered these frames (.ack-watermark says so;
		// in memory durability Close records them as written only, and
		// they stay the mode's loss window): the damage was done to the
		// medium afterwards, and its evidence is kept.
		{"bit flip in the newest tail, recorded as on disk", 0, func(t *testing.T, s *ruleSlot) {
			s.edit(t, -1, func(b []byte, o []uint32) []byte { flipPayload(b, o[len(o)-1]); return b })
		}, setAsideIfSynced, func(s *ruleSlot) uint64 { return 40 }},
		{"newest segment truncated mid-frame, recorded as on disk", 0, func(t *testing.T, s *ruleSlot) {
			s.edit(t, -1, func(b []byte, o []uint32) []byte { return b[:o[len(o)-2]+9] })
			crashedBefore(t, s.o, 40)
		}, setAsideIfSynced, func(s *ruleSlot) uint64 { return 39 }},
		{"garbage after the newest frame", 0, func(t *testing.T, s *ruleSlot) {
			s.edit(t, -1, func(b []byte, o []uint32) []byte { return append(b, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3) })
		}, tailCut, func(s *ruleSlot) uint64 { return 41 }},
		{"newest segment truncated at a frame boundary", 0, func(t *testing.T, s *ruleSlot) {
			s.edit(t, -1, func(b []byte, o []uint32) []byte { return b[:o[len(o)-1]] })
		}, vanishedIfSynced, func(s *ruleSlot) uint64 { return 40 }},
		{"bit flip mid newest segment", 0, func(t *testing.T, s *ruleSlot) {
			s.edit(t, -1, func(b []byte, o []uint32) []byte { flipPayload(b, o[0]); return b })
		}, setAside, func(s *ruleSlot) uint64 { return s.firstFSN(-1) }},
		{"bit flip in the last frame of an older segment", 0, func(t *testing.T, s *ruleSlot) {
			s.edit(t, 2, func(b []byte, o []uint32) []byte { flipPayload(b, o[len(o)-1]); return b })
		}, setAside, func(s *ruleSlot) uint64 { return s.firstFSN(3) - 1 }},
		{"bit flip in frame 0 of the oldest segment", 0, func(t *testing.T, s *ruleSlot) {
			s.edit(t, 0, func(b []byte, o []uint32) []byte { flipPayload(b, o[0]); return b })
		}, setAside, func(s *ruleSlot) uint64 { return 1 }},
		{"bad header of the oldest segment", 0, func(t *testing.T, s *ruleSlot) {
			s.edit(t, 0, func(b []byte, o []uint32) []byte { b[9] ^= 1; return b })
		}, setAside, func(s *ruleSlot) uint64 { return 1 }},
		{"bad header of the newest segment", 0, func(t *testing.T, s *ruleSlot) {
			s.edit(t, -1, func(b []byte, o []uint32) []byte { b[0] ^= 1; return b })
		}, setAsideIfSynced, func(s *ruleSlot) uint64 { return s.firstFSN(-1) }},
		{"older segment truncated to its header, acks inside it", 8, func(t *testing.T, s *ruleSlot) {
			s.edit(t, 1, func(b []byte, o []uint32) []byte { return b[:segmentHeaderSize] })
		}, setAside, func(s *ruleSlot) uint64 { return s.firstFSN(1) }},
		{"newest segment never written", 0, func(t *testing.T, s *ruleSlot) {
			os.WriteFile(filepath.Join(filepath.Dir(s.segs[0]), segmentName(41)), make([]byte, 512), 0o600)
		}, replayAll, nil},
		{"deleted middle segment", 0, func(t *testing.T, s *ruleSlot) {
			os.Remove(s.segs[2])
		}, setAside, func(s *ruleSlot) uint64 { return s.firstFSN(2) }},
		{"older segment truncated at a frame boundary", 0, func(t *testing.T, s *ruleSlot) {
			s.edit(t, 1, func(b []byte, o []uint32) []byte { return b[:o[1]] })
		}, setAside, func(s *ruleSlot) uint64 { return s.firstFSN(1) + 1 }},
		{"older segment truncated to its header", 0, func(t *testing.T, s *ruleSlot) {
			s.edit(t, 1, func(b []byte, o []uint32) []byte { return b[:segmentHeaderSize] })
		}, setAside, func(s *ruleSlot) uint64 { return s.firstFSN(1) }},
		{"oldest segment truncated to its header", 0, func(t *testing.T, s *ruleSlot) {
			s.edit(t, 0, func(b []byte, o []uint32) []byte { return b[:segmentHeaderSize] })
		}, setAside, func(s *ruleSlot) uint64 { return 1 }},
		{"overlapping segments, acks inside the overlap", 10, func(t *testing.T, s *ruleSlot) {
			// Segment 2 (FSN 12..) renamed, header and all, to start at
			// FSN 10: FSN 10..11 are in two segments, and 11 is unacked.
			if s.firstFSN(2) != 12 {
				t.Fatalf("segment 2 starts at FSN %d", s.firstFSN(2))
			}
			s.edit(t, 2, func(b []byte, o []uint32) []byte { copy(b, encodeSegmentHeader(10)); return b })
			if err := os.Rename(s.segs[2], filepath.Join(filepath.Dir(s.segs[2]), segmentName(10))); err != nil {
				t.Fatal(err)
			}
		}, setAside, func(s *ruleSlot) uint64 { return 10 }},
		{"older segment truncated mid-frame", 0, func(t *testing.T, s *ruleSlot) {
			s.edit(t, 1, func(b []byte, o []uint32) []byte { return b[:o[1]+5] })
		}, setAside, func(s *ruleSlot) uint64 { return s.firstFSN(1) + 1 }},
		{"zeroed watermark", 10, func(t *testing.T, s *ruleSlot) {
			os.WriteFile(filepath.Join(filepath.Dir(s.segs[0]), watermarkFile), make([]byte, watermarkSize), 0o600)
		}, replayAll, nil},
		{"damage at or below the watermark", 0, func(t *testing.T, s *ruleSlot) {
			// Ack past segment 2 (Ack deletes segments 0..1), then a power
			// loss undoes the deletion of segment 1, damaged.
			saved, err := os.ReadFile(s.segs[1])
			if err != nil {
				t.Fatal(err)
			}
			q := mustOpen(t, s.o)
			q.Ack(s.firstFSN(2))
			q.Close()
			flipPayload(saved, s.offsets[1][0])
			os.WriteFile(s.segs[1], saved, 0o600)
		}, replayAll, nil},
	}
	for _, d := range []Durability{DurabilityMemory, DurabilityPeriodic, DurabilityFlush} {
		for _, tc := range cases {
			t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
				s := newRuleSlot(t, d, tc.ack)
				tc.damage(t, s)
				want := tc.want
				if want == setAsideIfSynced {
					want = setAside
					if d == DurabilityMemory {
						want = tailCut
					}
				}
				if want == vanishedIfSynced {
					want = vanished
					if d == DurabilityMemory {
						want = windowLoss
					}
				}
				slot := filepath.Join(s.o.Dir, s.o.SenderID)
				os.WriteFile(filepath.Join(slot, watermarkFile+".tmp"), []byte("interrupted"), 0o600)
				before := slotFiles(t, slot)
				q, rep, got, logs := s.open(t)
				defer q.Close()
				errorLogs := logs.FilterLevelExact(zapcore.ErrorLevel).Len()
				if want != setAside && rep.Unreplayable != nil {
					t.Fatalf("set aside: %v", rep.Unreplayable)
				}
				switch want {
				case replayAll:
					if n := uint64(len(got)); n != 40-q.AckedFSN() || rep.TornFrames != 0 || rep.LostFrames != 0 || errorLogs != 0 {
						t.Fatalf("replayed %d frames above %d, report %+v, %d error logs; want every frame, no loss", n, q.AckedFSN(), rep, errorLogs)
					}
				case tailCut:
					first := tc.first(s)
					if uint64(len(got)) != first-1 || rep.TornFirstFSN != first || rep.TornFrames == 0 || rep.TornBytes == 0 {
						t.Fatalf("replayed %d frames, report %+v; want a cut counted from FSN %d", len(got), rep, first)
					}
					if wantErr := d != DurabilityFlush; (errorLogs > 0) != wantErr {
						t.Fatalf("%d error logs for a tail cut in %s durability; want them: %v", errorLogs, d, wantErr)
					}
				case windowLoss:
					first := tc.first(s)
					if uint64(len(got)) != first-1 || rep.TornFrames != 41-first || rep.TornFirstFSN != first || rep.LostFrames != 0 || errorLogs == 0 {
						t.Fatalf("replayed %d frames, report %+v, %d error logs; want FSN %d.. counted torn and logged", len(got), rep, errorLogs, first)
					}
				case vanished:
					first := tc.first(s)
					if uint64(len(got)) != first-1 || rep.LostFrames != 41-first || len(rep.Lost) != 1 || rep.Lost[0].First != first || errorLogs == 0 {
						t.Fatalf("replayed %d frames, report %+v, %d error logs; want FSN %d.. lost and logged", len(got), rep, errorLogs, first)
					}
				case setAside:
					dl := rep.Unreplayable
					if dl == nil {
						t.Fatalf("not set aside: %+v", rep)
					}
					if len(got) != 0 || q.PublishedFSN() != 0 || errorLogs == 0 {
						t.Fatalf("fresh slot returns %d frames, %d error logs", len(got), errorLogs)
					}
					if dl.Unreadable[0].First != tc.first(s) || dl.Unreadable[0].Readable {
						t.Fatalf("unreadable ranges %v; want the first at FSN %d", dl.Unreadable, tc.first(s))
					}
					seen := map[uint64]bool{}
					aside, err := ScanSlot(dl.Path)
					if err != nil {
						t.Fatal(err)
					}
					strays := 0 // valid frames after a damage of unknown end: unreadable, FSN unknown
					for _, r := range dl.Unreadable {
						for _, seg := range aside.Segments {
							if r.Last == 0 && seg.Name == r.File && seg.Damage != nil {
								strays += len(seg.Damage.Stray)
							}
						}
						for fsn := max(r.First, tc.ack+1); fsn <= r.Last; fsn++ {
							if seen[fsn] {
								t.Fatalf("FSN %d is in two unreadable ranges: %v", fsn, dl.Unreadable)
							}
							seen[fsn] = true
						}
					}
					if dl.UnreadableFrames != uint64(len(seen)+strays) {
						t.Fatalf("DataLossError counts %d unreadable frames, its ranges %v hold %d and %d valid frames of unknown FSN", dl.UnreadableFrames, dl.Unreadable, len(seen), strays)
					}
					if after := slotFiles(t, dl.Path); !sameFiles(before, after) {
						t.Fatalf("the set-aside slot differs from what recovery found: %d files before, %d after", len(before), len(after))
					}
					// Readable: the scan's ranges, the valid frames after a
					// damage that the next segment's base places included.
					// Where the ranges tile the unacknowledged FSNs (no end
					// unknown, no overlap, no loss-window range), readable +
					// unreadable is all of them (issue 26 item 4).
					readable, tiled := 0, true
					covered := map[uint64]bool{}
					for _, r := range aside.Ranges() {
						tiled = tiled && r.Last != 0 && !r.Torn
						for fsn := max(r.First, tc.ack+1); fsn <= r.Last; fsn++ {
							tiled = tiled && !covered[fsn]
							covered[fsn] = true
							if r.Readable {
								readable++
							}
						}
					}
					if readable != dl.Frames || dl.Frames >= 40 {
						t.Fatalf("DataLossError counts %d readable frames, the scan's ranges hold %d (of 40)", dl.Frames, readable)
					}
					if tiled && uint64(dl.Frames)+dl.UnreadableFrames != 40-tc.ack {
						t.Fatalf("DataLossError counts %d readable + %d unreadable frames, the slot holds %d unacknowledged: %v",
							dl.Frames, dl.UnreadableFrames, 40-tc.ack, aside.Ranges())
					}
					if !strings.Contains(dl.Error(), "DATA_LOSS") || !strings.Contains(dl.Error(), dl.Path) {
						t.Fatalf("DataLossError %q", dl)
					}
				}
				if want != setAside {
					if _, err := os.Stat(filepath.Join(slot, watermarkFile+".tmp")); !errors.Is(err, os.ErrNotExist) {
						t.Fatalf("replayed slot kept the interrupted .tmp file: %v", err)
					}
				}
			})
		}
	}
}

// symPayload is a frame in generation 0 defining ids first.. as entries
// (byte 0: highest id used, 0xff none; byte 1: first id; byte 2: count;
// then 1-byte length-prefixed entries), read by symUse and symDefs.
func symPayload(first int, entries ...string) []byte {
	p := []byte{0xff, byte(first), byte(len(entries))}
	if len(entries) > 0 {
		p[0] = byte(first + len(entries) - 1)
	}
	for _, e := range entries {
		p = append(p, byte(len(e)))
		p = append(p, e...)
	}
	return p
}

func symDefs(p []byte) (uint32, int, [][]byte) {
	if len(p) < 3 {
		return 0, 0, nil
	}
	var out [][]byte
	b := p[3:]
	for range p[2] {
		out = append(out, b[1:1+int(b[0])])
		b = b[1+int(b[0]):]
	}
	return 0, int(p[1]), out
}

func TestTornDictionaryIsRebuiltFromFrames(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ack       uint64 // acked frames are deleted with their definitions
		wantAside bool
	}{
		{"definitions survive in unacked frames", 0, false},
		{"definitions went with acked frames", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Dir: t.TempDir(), SenderID: "s", MaxSegmentBytes: 256, SymbolUse: symUse, SymbolDefs: symDefs}
			q := mustOpen(t, o)
			add := func(first int, entries ...string) {
				var es [][]byte
				for _, e := range entries {
					es = append(es, []byte(e))
				}
				if err := q.AddSymbols(0, first, es); err != nil {
					t.Fatal(err)
				}
				mustAppend(t, q, append(symPayload(first, entries...), bytes.Repeat([]byte{'.'}, 150)...))
			}
			add(0, "a", "b")
			add(2, "c")
			add(3, "d", "e")
			q.Ack(tc.ack)
			q.Close()
			// Tear the dictionary after its first record: ids 1..4 are gone.
			dict := filepath.Join(o.Dir, "s", genDictName(0))
			b, _ := os.ReadFile(dict)
			first := symbolRecordHeader + 1 + 4
			os.WriteFile(dict, append(b[:first], 0xff, 0xff), 0o600)
			before := slotFiles(t, filepath.Join(o.Dir, "s"))

			q = mustOpen(t, o)
			defer q.Close()
			rep := q.Recovery()
			if tc.wantAside {
				if rep.Unreplayable == nil || !strings.Contains(rep.Unreplayable.Reason, "symbol id") {
					t.Fatalf("want set aside for unbacked ids: %+v", rep)
				}
				if !sameFiles(before, slotFiles(t, rep.Unreplayable.Path)) {
					t.Fatal("the set-aside slot's .symbol-dict was cut before it was set aside")
				}
				return
			}
			if rep.Unreplayable != nil || rep.SymbolsRebuilt != 4 || rep.FramesRecovered != 3 {
				t.Fatalf("want 4 entries rebuilt and 3 frames replayed: %+v", rep)
			}
			if got := symbols(t, q, 0); len(got) != 5 || string(got[4]) != "e" {
				t.Fatalf("Symbols(0) = %q", got)
			}
			q.Close()
			q = mustOpen(t, o) // the rebuilt entries were persisted
			defer q.Close()
			if rep := q.Recovery(); rep.SymbolsRebuilt != 0 || len(symbols(t, q, 0)) != 5 || rep.SymbolTornBytes != 0 {
				t.Fatalf("second open: %+v, %d symbols", rep, len(symbols(t, q, 0)))
			}
		})
	}
}

func TestOrphanModeMarksUnreplayableSlotFailed(t *testing.T) {
	s := newRuleSlot(t, DurabilityPeriodic, 0)
	os.Remove(s.segs[2])
	slot := filepath.Join(s.o.Dir, s.o.SenderID)
	before := slotFiles(t, slot)
	o := s.o
	o.MarkUnreplayableFailed = true
	_, err := Open(o)
	var dl *DataLossError
	if !errors.As(err, &dl) || dl.Path != slot {
		t.Fatalf("Open = %v; want a *DataLossError for %s", err, slot)
	}
	after := slotFiles(t, slot)
	marker := after[failedFile]
	delete(after, failedFile)
	if !sameFiles(before, after) || !bytes.Contains(marker, []byte("DATA_LOSS")) {
		t.Fatalf("slot changed or .failed %q lacks DATA_LOSS", marker)
	}
	if ids, err := ListOrphans(s.o.Dir, nil); err != nil || len(ids) != 0 {
		t.Fatalf("ListOrphans = %v, %v; the .failed slot must be skipped", ids, err)
	}
}

package sfqueue_test

// Corruption fuzzing: build a valid slot, damage one of its files the way a
// crash, a bad sector or a stray write would, reopen it, and check recovery
// never panics, never returns a frame that is not byte-identical to the one
// appended with that FSN, keeps FSNs continuous, and never loses data without
// saying so.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/questdbexporter/questdbexporter/sfqueue"
	"github.com/questdbexporter/questdbexporter/sfqueue/sfqueuetest"
)

const (
	fuzzSenderID = "fz"
	fuzzSegment  = 2048 // small, so a few dozen frames span several segments
	fuzzMaxFrame = 600
)

// fuzzSlot is a valid slot built for one fuzz input, and what went into it.
type fuzzSlot struct {
	dir     string
	frames  [][]byte // frames[i] has FSN i+1
	acked   uint64
	symbols map[uint32][][]byte
}

func (s *fuzzSlot) slotDir() string { return filepath.Join(s.dir, fuzzSenderID) }

func fuzzOptions(dir string) sfqueue.Options {
	return sfqueue.Options{
		Dir:             dir,
		SenderID:        fuzzSenderID,
		MaxSegmentBytes: fuzzSegment,
		SymbolUse:       payloadSymbolUse,
	}
}

// buildFuzzSlot appends n frames (n >= 1) of sizes drawn from sizes, acks
// ack of them (ack < n), registers symbols in two generations (frames of the
// first half use generation 0, the rest generation 1) and closes the queue.
func buildFuzzSlot(t *testing.T, n int, ack uint64, sizes []byte) *fuzzSlot {
	t.Helper()
	s := &fuzzSlot{dir: t.TempDir(), acked: ack, symbols: map[uint32][][]byte{}}
	q, err := sfqueue.Open(fuzzOptions(s.dir))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	ctx := context.Background()
	for i := range n {
		gen := uint32(0)
		if i >= n/2 {
			gen = 1
		}
		// Every third frame adds a symbol; the others reuse the newest.
		if i%3 == 0 {
			id := len(s.symbols[gen])
			e := symbolEntry(gen, id)
			if err := q.AddSymbols(gen, id, [][]byte{e}); err != nil {
				t.Fatalf("AddSymbols(%d, %d): %v", gen, id, err)
			}
			s.symbols[gen] = append(s.symbols[gen], e)
		}
		size := payloadHeader
		if len(sizes) > 0 {
			size += int(sizes[i%len(sizes)]) * (fuzzMaxFrame - payloadHeader) / 255
		}
		p := makePayload(uint64(i+1), size, gen, int64(len(s.symbols[gen])-1))
		fsn, err := q.Append(ctx, p)
		if err != nil {
			t.Fatalf("Append %d: %v", i+1, err)
		}
		if fsn != uint64(i+1) {
			t.Fatalf("Append %d returned FSN %d", i+1, fsn)
		}
		s.frames = append(s.frames, p)
	}
	q.Ack(ack)
	return s
}

// corruption is one damage the fuzzer applies to a file.
type corruption uint8

const (
	corruptTruncate    corruption = iota // cut the file at pos
	corruptFlipBits                      // XOR mask bytes at the offsets listed in data
	corruptZeroSector                    // zero the 512-byte sector holding pos
	corruptGarbageTail                   // append data
	corruptOverwrite                     // write data at pos
	numCorruptions
)

// corrupt applies op to the file at path. data lists, for corruptFlipBits,
// 4-byte entries: a 24-bit little-endian offset (mod the file size) and an
// XOR mask (0 means 1).
func corrupt(t *testing.T, path string, op corruption, pos uint32, data []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := func(x uint32) int { return int(x % uint32(len(b)+1)) }
	switch op % numCorruptions {
	case corruptTruncate:
		b = b[:at(pos)]
	case corruptFlipBits:
		for i := 0; i+4 <= len(data) && len(b) > 0; i += 4 {
			off := int(uint32(data[i])|uint32(data[i+1])<<8|uint32(data[i+2])<<16) % len(b)
			mask := data[i+3]
			if mask == 0 {
				mask = 1
			}
			b[off] ^= mask
		}
	case corruptZeroSector:
		start := at(pos) / 512 * 512
		clear(b[start:min(len(b), start+512)])
	case corruptGarbageTail:
		b = append(b, data...)
	case corruptOverwrite:
		p := at(pos)
		b = append(b[:p], append(data, b[min(len(b), p+len(data)):]...)...)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// segmentFiles lists the slot's segment files in FSN order.
func segmentFiles(t *testing.T, slot string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(slot, "*.sfseg"))
	if err != nil {
		t.Fatal(err)
	}
	return names // Glob sorts; names are zero-padded base FSNs
}

// recovered is what reopening a damaged slot produced.
type recovered struct {
	rep          sfqueue.RecoveryReport
	acked, pub   uint64
	firstFSN     uint64 // first FSN the cursor returned (0: none)
	count        int
	symbols      map[uint32][][]byte
	setAsidePath string
}

// reopenAndCheck opens the damaged slot and checks the invariants that hold
// whatever the damage: no error from Open, every returned frame byte-identical
// to the original with that FSN, FSNs continuous from AckedFSN+1 to
// PublishedFSN, every dictionary entry byte-identical to the original.
func reopenAndCheck(t *testing.T, s *fuzzSlot) recovered {
	t.Helper()
	q, err := sfqueue.Open(fuzzOptions(s.dir))
	if err != nil {
		t.Fatalf("Open of a damaged slot failed instead of recovering: %v", err)
	}
	defer func() {
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	r := recovered{rep: q.Recovery(), acked: q.AckedFSN(), pub: q.PublishedFSN(), symbols: map[uint32][][]byte{}}
	if r.acked > r.pub {
		t.Fatalf("AckedFSN %d above PublishedFSN %d", r.acked, r.pub)
	}
	c := q.NewCursor()
	c.Seek(r.acked + 1)
	next := r.acked + 1
	for {
		fsn, p, ok, err := c.Next()
		if err != nil {
			t.Fatalf("cursor at FSN %d: %v", next, err)
		}
		if !ok {
			break
		}
		if fsn != next {
			t.Fatalf("cursor returned FSN %d, want %d", fsn, next)
		}
		if fsn == 0 || fsn > uint64(len(s.frames)) {
			t.Fatalf("cursor returned FSN %d, only 1..%d were appended", fsn, len(s.frames))
		}
		if want := s.frames[fsn-1]; !bytes.Equal(p, want) {
			t.Fatalf("FSN %d: recovered %d bytes differ from the %d appended (first difference at %d)", fsn, len(p), len(want), firstDiff(p, want))
		}
		if r.firstFSN == 0 {
			r.firstFSN = fsn
		}
		r.count++
		next++
	}
	if next-1 != r.pub {
		t.Fatalf("cursor stopped after FSN %d, PublishedFSN is %d", next-1, r.pub)
	}
	for gen, orig := range s.symbols {
		got := sfqueuetest.Symbols(t, q, gen)
		if len(got) > len(orig) {
			t.Fatalf("generation %d: %d symbols recovered, %d were added", gen, len(got), len(orig))
		}
		for i, e := range got {
			if !bytes.Equal(e, orig[i]) {
				t.Fatalf("generation %d symbol %d recovered as %q, want %q", gen, i, e, orig[i])
			}
		}
		r.symbols[gen] = got
	}
	if dl := r.rep.Unreplayable; dl != nil {
		r.setAsidePath = dl.Path
		if r.pub != 0 && r.count != 0 {
			t.Fatalf("slot set aside (%v) but the new queue still returns %d frames", dl, r.count)
		}
		if st, err := os.Stat(dl.Path); err != nil || !st.IsDir() {
			t.Fatalf("slot set aside as %q, which is not a directory: %v", dl.Path, err)
		}
		if !strings.HasPrefix(filepath.Base(dl.Path), fuzzSenderID+".unreplayable-") {
			t.Fatalf("set-aside slot %q not named %s.unreplayable-<n>", dl.Path, fuzzSenderID)
		}
		checkSetAsideFrames(t, s, dl)
	}
	return r
}

// checkSetAsideFrames: every frame the slot tool would send from the
// set-aside slot (EachFrame: the valid frames, and the strays after a
// damage that the next segment's base places) carries the FSN it was
// appended with, and the readable frames above the watermark are the ones
// DataLossError counts.
func checkSetAsideFrames(t *testing.T, s *fuzzSlot, dl *sfqueue.DataLossError) {
	t.Helper()
	scan, err := sfqueue.ScanSlot(dl.Path)
	if err != nil {
		t.Fatal(err)
	}
	err = scan.EachFrame(func(fsn uint64, file string, off int64, p []byte) error {
		if fsn == 0 || fsn > uint64(len(s.frames)) {
			return fmt.Errorf("%s offset %d: read as FSN %d, only 1..%d were appended", file, off, fsn, len(s.frames))
		}
		if want := s.frames[fsn-1]; !bytes.Equal(p, want) {
			return fmt.Errorf("%s offset %d: read as FSN %d, but it is not the frame appended with that FSN", file, off, fsn)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("set-aside slot %s: %v (ranges %v)", dl.Path, err, scan.Ranges())
	}
}

// checkNoSilentLoss: unacked frames that recovery does not return must be
// accounted for: torn bytes, lost frames, torn frames reaching the last one
// appended, or a set-aside slot. The slot was closed cleanly, so its
// .ack-watermark records every frame as published (doc.go) and even a tail
// cut without leaving torn bytes is detectable.
func checkNoSilentLoss(t *testing.T, s *fuzzSlot, r recovered) {
	t.Helper()
	torn := r.rep.TornFrames > 0 && r.rep.TornFirstFSN <= r.pub+1 && r.rep.TornFirstFSN+r.rep.TornFrames-1 >= uint64(len(s.frames))
	if r.rep.Unreplayable != nil || r.rep.TornBytes > 0 || r.rep.LostFrames > 0 || torn {
		return
	}
	if r.acked > s.acked || r.pub < uint64(len(s.frames)) {
		t.Fatalf("frames %d..%d were appended and not acked, recovery returns FSNs %d..%d, and the report shows no torn bytes, no lost frames and no data loss: %+v",
			s.acked+1, len(s.frames), r.acked+1, r.pub, r.rep)
	}
}

func fuzzFrameCount(n uint8) int { return 1 + int(n)%40 }

// FuzzSegmentCorruption damages one segment file of a slot.
func FuzzSegmentCorruption(f *testing.F) {
	f.Add(uint8(20), uint8(0), []byte{40, 200, 7}, uint8(255), uint8(corruptTruncate), uint32(1000), []byte(nil))
	f.Fuzz(func(t *testing.T, nFrames, ackPick uint8, sizes []byte, segPick uint8, op uint8, pos uint32, data []byte) {
		n := fuzzFrameCount(nFrames)
		s := buildFuzzSlot(t, n, uint64(int(ackPick)%n), sizes)
		segs := segmentFiles(t, s.slotDir())
		if len(segs) == 0 {
			t.Fatalf("no segment files in %s after appending %d frames, %d acked", s.slotDir(), n, s.acked)
		}
		target := segs[int(segPick)%len(segs)]
		corrupt(t, target, corruption(op), pos, data)
		checkNoSilentLoss(t, s, reopenAndCheck(t, s))
	})
}

// FuzzAckWatermarkCorruption damages .ack-watermark. The watermark is only
// an optimisation: a damaged one must be ignored (reported), never trusted
// past the true ack.
func FuzzAckWatermarkCorruption(f *testing.F) {
	f.Add(uint8(20), uint8(7), []byte{10}, uint8(corruptFlipBits), uint32(0), []byte{3, 0, 0, 0x10})
	f.Fuzz(func(t *testing.T, nFrames, ackPick uint8, sizes []byte, op uint8, pos uint32, data []byte) {
		n := fuzzFrameCount(nFrames) + 1
		s := buildFuzzSlot(t, n, uint64(1+int(ackPick)%(n-1)), sizes) // 1 <= ack < n
		wm := filepath.Join(s.slotDir(), ".ack-watermark")
		before, err := os.ReadFile(wm)
		if err != nil {
			t.Fatalf("no .ack-watermark after Ack(%d) and Close: %v", s.acked, err)
		}
		corrupt(t, wm, corruption(op), pos, data)
		after, err := os.ReadFile(wm)
		if err != nil {
			t.Fatal(err)
		}
		r := reopenAndCheck(t, s)
		if r.rep.Unreplayable != nil {
			t.Fatalf("a damaged .ack-watermark set the slot aside: %v", r.rep.Unreplayable)
		}
		if r.pub != uint64(len(s.frames)) {
			t.Fatalf("PublishedFSN %d, want %d: the watermark must not change which frames exist", r.pub, len(s.frames))
		}
		switch {
		case r.acked > s.acked:
			t.Fatalf("AckedFSN %d from a damaged watermark is past the true ack %d: frames %d..%d would never be sent",
				r.acked, s.acked, s.acked+1, r.acked)
		case r.acked < s.acked && !r.rep.WatermarkIgnored && !bytes.Equal(before, after):
			t.Fatalf("AckedFSN %d below the true %d from a damaged watermark, but WatermarkIgnored is false", r.acked, s.acked)
		case bytes.Equal(before, after) && r.acked != s.acked:
			t.Fatalf("undamaged watermark: AckedFSN %d, want %d", r.acked, s.acked)
		}
	})
}

// FuzzSymbolDictCorruption damages a generation's dictionary file. Recovered entries must be a
// byte-identical prefix of what was added; if that prefix cannot back every
// unacked frame, the slot must be set aside, never replayed.
func FuzzSymbolDictCorruption(f *testing.F) {
	f.Add(uint8(30), uint8(0), []byte{100}, uint8(corruptTruncate), uint32(40), []byte(nil))
	f.Fuzz(func(t *testing.T, nFrames, ackPick uint8, sizes []byte, op uint8, pos uint32, data []byte) {
		n := fuzzFrameCount(nFrames)
		s := buildFuzzSlot(t, n, uint64(int(ackPick)%n), sizes)
		// Damage one generation's file: the second one present when ackPick
		// is odd and there is one. A generation whose frames are all
		// acknowledged is already deleted (only the newest always stays).
		files, err := filepath.Glob(filepath.Join(s.slotDir(), ".symbol-dict.*"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no dictionary file after AddSymbols: %v", err)
		}
		sd := files[0]
		if ackPick&1 == 1 && len(files) > 1 {
			sd = files[1]
		}
		corrupt(t, sd, corruption(op), pos, data)
		r := reopenAndCheck(t, s)
		if r.rep.Unreplayable != nil {
			return // set aside: checked by reopenAndCheck; nothing replays
		}
		if r.pub != uint64(len(s.frames)) {
			t.Fatalf("PublishedFSN %d, want %d: a damaged dictionary must not drop frames", r.pub, len(s.frames))
		}
		for fsn := r.acked + 1; fsn <= r.pub; fsn++ {
			gen, maxID := payloadSymbolUse(s.frames[fsn-1])
			if maxID >= int64(len(r.symbols[gen])) {
				t.Fatalf("FSN %d uses symbol %d of generation %d, the recovered dictionary has %d: replay would hit DICTIONARY_GAP, the slot should have been set aside",
					fsn, maxID, gen, len(r.symbols[gen]))
			}
		}
	})
}

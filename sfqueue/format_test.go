package sfqueue

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Segment format 2: frames carry an item count (doc.go). These tests cover
// what the count is for (evictions count the items they drop, also after a
// restart), the format 1 slots older releases left (read, drained, their
// evicted frames counted as of unknown items), the refusal of a newer
// format, and damage to the new field.

// appendItems appends payload as one frame carrying items.
func appendItems(t *testing.T, q *Queue, payload []byte, items uint32) uint64 {
	t.Helper()
	fsn, err := q.AppendBatchItems(context.Background(), [][]byte{payload}, []uint32{items})
	if err != nil {
		t.Fatalf("AppendBatchItems(%d bytes, %d items): %v", len(payload), items, err)
	}
	return fsn
}

// TestEvictionCountsItems: frame k carries k items. With 4 frames a segment
// (fillOptions), acking 2 and appending a 17th evicts segment 1 partly
// acknowledged (frames 3 and 4: 7 items, read from the segment), and the
// 21st evicts segment 2 whole (frames 5..8: 26 items, from the sum kept in
// RAM). In SF mode the same holds when the segments were recovered by a
// restart before the evictions.
func TestEvictionCountsItems(t *testing.T) {
	cases := []struct {
		name    string
		opts    func(t *testing.T) Options
		restart bool
	}{
		{"memory", bothModes[0].opts, false},
		{"sf", bothModes[1].opts, false},
		{"sf/after restart", bothModes[1].opts, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := fillOptions(c.opts(t), OnFullEvictOldest)
			q := mustOpen(t, o)
			for k := uint64(1); k <= 16; k++ {
				appendItems(t, q, testPayload(k, 200), uint32(k))
			}
			q.Ack(2)
			if c.restart {
				if err := q.Close(); err != nil {
					t.Fatal(err)
				}
				q = mustOpen(t, o)
			}
			defer q.Close()
			if st := q.Stats(); st.FramesEvicted != 0 || st.ItemsEvicted != 0 {
				t.Fatalf("evicted before the cap: %+v", st)
			}
			appendItems(t, q, testPayload(17, 200), 17)
			if st := q.Stats(); st.FramesEvicted != 2 || st.ItemsEvicted != 3+4 || st.FramesEvictedItemsUnknown != 0 {
				t.Fatalf("evicting segment 1 with frames 1..2 acked: %d frames, %d items, %d unknown; want 2 frames, 7 items, 0 unknown",
					st.FramesEvicted, st.ItemsEvicted, st.FramesEvictedItemsUnknown)
			}
			for k := uint64(18); k <= 21; k++ {
				appendItems(t, q, testPayload(k, 200), uint32(k))
			}
			if st := q.Stats(); st.FramesEvicted != 6 || st.ItemsEvicted != 7+5+6+7+8 || st.FramesEvictedItemsUnknown != 0 {
				t.Fatalf("after evicting segment 2 whole: %d frames, %d items, %d unknown; want 6 frames, 33 items, 0 unknown",
					st.FramesEvicted, st.ItemsEvicted, st.FramesEvictedItemsUnknown)
			}
			// What is left is intact and in order: frames 9..21.
			got := drain(t, q.NewCursor())
			if len(got) != 13 || got[0].fsn != 9 || got[12].fsn != 21 {
				t.Fatalf("after the evictions the cursor read %d frames from FSN %d; want 13 from 9", len(got), got[0].fsn)
			}
			for _, f := range got {
				if id, err := checkTestPayload(f.payload); err != nil || id != f.fsn {
					t.Fatalf("frame %d: id %d, %v", f.fsn, id, err)
				}
			}
		})
	}
}

// TestEvictionWalkReadsHeadsOnly: evicting a partly acknowledged segment
// counts the items of its unacknowledged frames from their 8-byte heads,
// and the counts are what the frames were appended with, whichever frame
// the acknowledgements stopped at: for frames larger than the walk's buffer
// it reads exactly those heads and no payload byte; for frames of mixed
// sizes the heads that one read spans land on every side of its end.
func TestEvictionWalkReadsHeadsOnly(t *testing.T) {
	large := func(uint64) int { return 3*itemWalkBuffer/2 + 7 } // each frame spans the buffer
	mixed := func(k uint64) int { return []int{100, 40 << 10, 30 << 10, 70 << 10, 5, itemWalkBuffer - 8}[k%6] }
	for _, c := range []struct {
		name      string
		size      func(k uint64) int
		acked     uint64
		headsOnly bool
	}{
		{"large/acked 1", large, 1, true},
		{"large/acked 2", large, 2, true},
		{"large/acked 4", large, 4, true},
		{"mixed/acked 1", mixed, 1, false},
		{"mixed/acked 6", mixed, 6, false},
		{"mixed/acked 11", mixed, 11, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			fsys := &readCountFS{FS: OSFS(), read: map[string]int64{}}
			o := Options{Dir: t.TempDir(), SenderID: "s", MaxSegmentBytes: 1 << 20, MaxTotalBytes: 3 << 20, OnFull: OnFullEvictOldest, FS: fsys}
			q := mustOpen(t, o)
			defer q.Close()
			k := uint64(1)
			for ; q.Stats().Segments < 3; k++ {
				appendItems(t, q, testPayload(k, c.size(k)), uint32(k))
			}
			q.Ack(c.acked)
			for q.Stats().FramesEvicted == 0 {
				appendItems(t, q, testPayload(k, c.size(k)), uint32(k))
				k++
			}
			st := q.Stats()
			want := uint64(0) // frames acked+1.. of segment 1 carry their FSN
			for f := c.acked + 1; f <= c.acked+st.FramesEvicted; f++ {
				want += f
			}
			if st.FramesEvicted < 2 || st.ItemsEvicted != want || st.FramesEvictedItemsUnknown != 0 {
				t.Fatalf("evicting a partly acknowledged segment: %d frames, %d items, %d unknown; want %d items",
					st.FramesEvicted, st.ItemsEvicted, st.FramesEvictedItemsUnknown, want)
			}
			heads := int64(st.FramesEvicted) * (frameOverhead - 4)
			if got := fsys.bytesRead(segmentName(1)); c.headsOnly && got != heads {
				t.Fatalf("the eviction read %d bytes of segment 1, want the %d bytes of its %d unacknowledged frame heads", got, heads, st.FramesEvicted)
			}
		})
	}
}

// readCountFS counts the bytes read from each file (by base name).
type readCountFS struct {
	FS
	mu   sync.Mutex
	read map[string]int64
}

func (c *readCountFS) OpenFile(name string, flag int) (File, error) {
	f, err := c.FS.OpenFile(name, flag)
	if err != nil {
		return nil, err
	}
	return &readCountFile{File: f, fs: c, name: filepath.Base(name)}, nil
}

func (c *readCountFS) bytesRead(name string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read[name]
}

type readCountFile struct {
	File
	fs   *readCountFS
	name string
}

func (f *readCountFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.fs.mu.Lock()
	f.fs.read[f.name] += int64(n)
	f.fs.mu.Unlock()
	return n, err
}

// TestEvictionOfUnreadableCounts: when the partly acknowledged segment an
// eviction drops cannot be read back (a frame head damaged on disk since it
// was written: its length no longer matches the frame's place), its
// unacknowledged frames are counted as frames of unknown items, with a
// warning, and never as zero items.
func TestEvictionOfUnreadableCounts(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	o := fillOptions(Options{Dir: t.TempDir(), SenderID: "s", Logger: zap.New(core)}, OnFullEvictOldest)
	q := mustOpen(t, o)
	defer q.Close()
	for k := uint64(1); k <= 16; k++ {
		appendItems(t, q, testPayload(k, 200), uint32(k))
	}
	q.Ack(2)
	// Damage frame 4's length in segment 1 behind the queue's back.
	f, err := os.OpenFile(filepath.Join(o.Dir, o.SenderID, segmentName(1)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff, 0xff}, int64(segmentHeaderSize+3*frame200)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	appendItems(t, q, testPayload(17, 200), 17)
	st := q.Stats()
	if st.FramesEvicted != 2 || st.ItemsEvicted != 0 || st.FramesEvictedItemsUnknown != 2 {
		t.Fatalf("evicting segment 1 with a damaged frame: %d frames, %d items, %d unknown; want 2 frames, 0 items, 2 unknown",
			st.FramesEvicted, st.ItemsEvicted, st.FramesEvictedItemsUnknown)
	}
	if logs.FilterMessageSnippet("cannot read the item counts").FilterField(zap.Uint64("frames", 2)).Len() != 1 {
		t.Fatalf("no warning naming the 2 frames of unknown items: %v", logs.All())
	}
}

func TestAppendBatchItemsNeedsOneCountPerPayload(t *testing.T) {
	q := mustOpen(t, Options{})
	defer q.Close()
	_, err := q.AppendBatchItems(context.Background(), [][]byte{{1}, {2}}, []uint32{1})
	if err == nil || !strings.Contains(err.Error(), "1 item counts for 2 payloads") {
		t.Fatalf("AppendBatchItems with 1 count for 2 payloads: %v", err)
	}
	if q.PublishedFSN() != 0 {
		t.Fatalf("a refused batch was appended: PublishedFSN %d", q.PublishedFSN())
	}
}

// TestItemCountsSurviveInTheScan: the scan (recovery's and the slot
// tool's) reads each frame's item count back.
func TestItemCountsSurviveInTheScan(t *testing.T) {
	o := Options{Dir: t.TempDir(), SenderID: "s", MaxSegmentBytes: 1024}
	q := mustOpen(t, o)
	for k := uint64(1); k <= 10; k++ {
		appendItems(t, q, testPayload(k, 200), uint32(100*k))
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	scan, err := ScanSlot(filepath.Join(o.Dir, o.SenderID))
	if err != nil {
		t.Fatal(err)
	}
	for k := uint64(1); k <= 10; k++ {
		if n, ok := scan.FrameItems(k); !ok || n != uint32(100*k) {
			t.Errorf("FrameItems(%d) = %d, %v; want %d", k, n, ok, 100*k)
		}
	}
	if _, ok := scan.FrameItems(11); ok {
		t.Error("FrameItems of a frame the slot does not hold reports a count")
	}
	for _, seg := range scan.Segments {
		if seg.Version != segmentVersion || len(seg.Items) != len(seg.Frames) {
			t.Errorf("%s: version %d, %d item counts for %d frames", seg.Name, seg.Version, len(seg.Items), len(seg.Frames))
		}
	}
}

// copyFixture copies the format 1 slot the exporter's tests keep
// (sender/testdata/slot-v1: one format 1 segment of 10 frames and the
// legacy single .symbol-dict) to <dir>/<id>.
func copyFixture(t *testing.T, dir, id string) {
	t.Helper()
	if err := os.CopyFS(filepath.Join(dir, id), os.DirFS(filepath.Join("..", "sender", "testdata", "slot-v1"))); err != nil {
		t.Fatal(err)
	}
}

// TestFormat1SlotRecoversAndDrains: a slot an older release wrote is read,
// new frames go to format 2 segments beside it, both replay after a
// restart, and evicting the format 1 frames counts them as frames of
// unknown items (never as zero items in silence) while the format 2
// frames' items are counted.
func TestFormat1SlotRecoversAndDrains(t *testing.T) {
	dir := t.TempDir()
	copyFixture(t, dir, "s")
	o := Options{Dir: dir, SenderID: "s", MaxSegmentBytes: 1024, MaxTotalBytes: 4096, OnFull: OnFullEvictOldest}
	q := mustOpen(t, o)
	if rep := q.Recovery(); rep.FramesRecovered != 10 || rep.Unreplayable != nil {
		t.Fatalf("recovery of the format 1 fixture: %+v; want 10 frames", rep)
	}
	old := drain(t, q.NewCursor())
	if len(old) != 10 || old[0].fsn != 1 || old[9].fsn != 10 {
		t.Fatalf("read %d format 1 frames; want FSN 1..10", len(old))
	}
	appendItems(t, q, testPayload(11, 200), 11)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	scan, err := ScanSlot(filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	var versions []uint32
	for _, seg := range scan.Segments {
		versions = append(versions, seg.Version)
	}
	if !slices.Equal(versions, []uint32{1, 2}) || scan.Segments[0].Items != nil {
		t.Fatalf("segment versions %v (format 1 item counts %v); want [1 2] and none", versions, scan.Segments[0].Items)
	}
	if _, ok := scan.FrameItems(5); ok {
		t.Error("FrameItems of a format 1 frame reports a count")
	}

	q = mustOpen(t, o)
	defer q.Close()
	got := drain(t, q.NewCursor())
	if len(got) != 11 || string(got[4].payload) != string(old[4].payload) {
		t.Fatalf("after a restart the cursor read %d frames; want the 10 format 1 frames and FSN 11", len(got))
	}
	for k := uint64(12); q.Stats().FramesEvicted <= 10; k++ {
		if k > 100 {
			t.Fatalf("no eviction past the format 1 segment: %+v", q.Stats())
		}
		appendItems(t, q, testPayload(k, 200), uint32(k))
	}
	st := q.Stats()
	want := uint64(0) // items of the format 2 frames evicted: FSN 11.. carry their FSN
	for k := uint64(11); k < 11+st.FramesEvicted-10; k++ {
		want += k
	}
	if st.FramesEvictedItemsUnknown != 10 || st.ItemsEvicted != want || want == 0 {
		t.Fatalf("evicted %d frames: %d of unknown items, %d items; want the 10 format 1 frames unknown and %d items",
			st.FramesEvicted, st.FramesEvictedItemsUnknown, st.ItemsEvicted, want)
	}
}

// treeState renders every file and directory under dir (name, mode, content) so a test
// can tell whether anything changed.
func treeState(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		b.WriteString(p + " " + fi.Mode().String() + "\n")
		if !d.IsDir() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b.Write(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// setSegmentVersion rewrites the version of the segment header at path,
// with a valid header CRC (a newer release's segment, not damage).
func setSegmentVersion(t *testing.T, path string, v uint32) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := make([]byte, segmentHeaderSize)
	if _, err := f.ReadAt(h, 0); err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(h[4:], v)
	binary.LittleEndian.PutUint32(h[20:], crc32.Checksum(h[:20], castagnoli))
	if _, err := f.WriteAt(h, 0); err != nil {
		t.Fatal(err)
	}
}

// TestNewerFormatIsRefusedUnchanged: a segment of format 3 among format 2
// ones (or alone) makes Open fail with an error naming both versions, and
// leaves the slot exactly as it was: not set aside, no .failed marker, no
// lock file written, no mode changed. The scan the slot tool uses refuses
// it the same way.
func TestNewerFormatIsRefusedUnchanged(t *testing.T) {
	for _, c := range []struct {
		name   string
		which  func(segs []string) []string
		orphan bool
	}{
		{"one segment among format 2 ones", func(segs []string) []string { return segs[1:2] }, false},
		{"every segment", func(segs []string) []string { return segs }, false},
		{"orphan drainer", func(segs []string) []string { return segs[len(segs)-1:] }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, _ := writeSlot(t, 20, nil)
			segs := segmentPaths(t, o)
			if len(segs) < 3 {
				t.Fatalf("the slot spans %d segments; want at least 3", len(segs))
			}
			for _, p := range c.which(segs) {
				setSegmentVersion(t, p, segmentVersion+1)
			}
			os.Chmod(filepath.Join(o.Dir, o.SenderID), 0o755) // a change Open would otherwise make
			before := treeState(t, o.Dir)
			o.MarkUnreplayableFailed = c.orphan
			q, err := Open(o)
			if err == nil {
				q.Close()
				t.Fatal("Open accepted a slot of a newer format")
			}
			var fe *FormatError
			if !errors.As(err, &fe) || fe.Version != 3 || fe.Newest != 2 {
				t.Fatalf("Open: %v; want a *FormatError of version 3 against 2", err)
			}
			for _, want := range []string{"format version 3", "newer than version 2", ".sfseg", "left unchanged"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if after := treeState(t, o.Dir); after != before {
				t.Errorf("Open changed the slot of a newer format:\nbefore:\n%q\nafter:\n%q", before, after)
			}
			if _, err := ScanSlot(filepath.Join(o.Dir, o.SenderID)); !errors.As(err, &fe) {
				t.Errorf("ScanSlot: %v; want a *FormatError", err)
			}
		})
	}
}

// TestItemCountDamage: the CRC covers the item count, so a flipped bit in
// it is a damaged frame like any other: cut as the torn tail of the newest
// segment, a set-aside slot in the middle. A v2 frame torn inside its item
// count is cut as a torn tail.
func TestItemCountDamage(t *testing.T) {
	itemsField := func(seg string, frame int) int64 {
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		pos := segmentHeaderSize
		for range frame {
			_, _, size, ok := parseFrame(b[pos:], segmentVersion)
			if !ok {
				t.Fatalf("%s: frame at %d does not parse", seg, pos)
			}
			pos += size
		}
		return int64(pos + 4)
	}
	lastFrame := func(t *testing.T, seg string) int {
		scan, err := ScanSlot(filepath.Dir(seg))
		if err != nil {
			t.Fatal(err)
		}
		s := scan.Segments[len(scan.Segments)-1]
		return len(s.Frames) - 1
	}
	flip := func(t *testing.T, path string, off int64) {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		c := []byte{0}
		if _, err := f.ReadAt(c, off); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte{c[0] ^ 0x10}, off); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("newest frame's count flipped", func(t *testing.T) {
		o, payloads := writeSlot(t, 20, nil)
		segs := segmentPaths(t, o)
		newest := segs[len(segs)-1]
		flip(t, newest, itemsField(newest, lastFrame(t, newest)))
		crashedBefore(t, o, 20)
		q := mustOpen(t, o)
		defer q.Close()
		rep := q.Recovery()
		if rep.Unreplayable != nil || rep.TornFrames != 1 || rep.TornFirstFSN != 20 {
			t.Fatalf("recovery: %+v; want the last frame (FSN 20) cut as the torn tail", rep)
		}
		if got := drain(t, q.NewCursor()); len(got) != 19 || string(got[18].payload) != string(payloads[18]) {
			t.Fatalf("read %d frames after the cut; want FSN 1..19 intact", len(got))
		}
	})
	t.Run("older segment's count flipped", func(t *testing.T) {
		o, _ := writeSlot(t, 20, nil)
		segs := segmentPaths(t, o)
		flip(t, segs[1], itemsField(segs[1], 1))
		q := mustOpen(t, o)
		defer q.Close()
		dl := q.Recovery().Unreplayable
		if dl == nil || !strings.Contains(dl.Reason, "CRC32C mismatch") || !strings.Contains(dl.Reason, filepath.Base(segs[1])) {
			t.Fatalf("recovery: %+v; want the slot set aside for a CRC32C mismatch in %s", q.Recovery(), filepath.Base(segs[1]))
		}
	})
	t.Run("torn inside the count", func(t *testing.T) {
		o, _ := writeSlot(t, 20, nil)
		segs := segmentPaths(t, o)
		newest := segs[len(segs)-1]
		n := lastFrame(t, newest)
		if err := os.Truncate(newest, itemsField(newest, n)+2); err != nil {
			t.Fatal(err)
		}
		crashedBefore(t, o, 20)
		q := mustOpen(t, o)
		defer q.Close()
		if rep := q.Recovery(); rep.Unreplayable != nil || rep.TornFrames != 1 || rep.TornFirstFSN != 20 || rep.TornBytes == 0 {
			t.Fatalf("recovery: %+v; want FSN 20 cut as the torn tail", rep)
		}
	})
}

// TestLargeFramesWrittenFromTheCallersSlice: payloads from directWrite up
// are written between their head and CRC instead of being copied; mixed
// with small frames in one batch they read back whole after a reopen, and a
// power loss that keeps part of those writes (torn anywhere) recovers a
// prefix of the batch whose every frame is intact.
func TestLargeFramesWrittenFromTheCallersSlice(t *testing.T) {
	sizes := []int{100, directWrite, 300, 2*directWrite + 5, 50, directWrite - 1}
	var payloads [][]byte
	var items []uint32
	for i, n := range sizes {
		payloads = append(payloads, testPayload(uint64(i+1), n))
		items = append(items, uint32(i+1))
	}
	for seed := range uint64(iterations(8, 64)) {
		cfs := newCrashFS()
		o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityMemory, MaxSegmentBytes: 1 << 20}
		q := mustOpen(t, o)
		mustAppend(t, q, testPayload(99, 10)) // the batch lands mid-segment
		if _, err := q.AppendBatchItems(context.Background(), payloads, items); err != nil {
			t.Fatal(err)
		}
		if cap(q.wbuf) > 2*directWrite {
			t.Fatalf("the write buffer grew to %d bytes: the %d-byte payload was copied into it", cap(q.wbuf), sizes[3])
		}
		o.FS = cfs.PowerLoss(keepSomeWrites, rand.New(rand.NewPCG(seed, 7)))
		q.Close()
		for _, fs := range []FS{cfs, o.FS} { // a clean close, then the power loss
			o.FS = fs
			q2 := mustOpen(t, o)
			got := drain(t, q2.NewCursor())
			q2.Close()
			if fs == cfs && len(got) != len(payloads)+1 {
				t.Fatalf("reopened after a clean close: %d frames, want %d", len(got), len(payloads)+1)
			}
			for i, f := range got[min(1, len(got)):] {
				if !bytes.Equal(f.payload, payloads[i]) {
					t.Fatalf("seed %d: frame %d (%d bytes) does not read back as written (%d bytes)", seed, f.fsn, len(f.payload), len(payloads[i]))
				}
			}
		}
	}
}

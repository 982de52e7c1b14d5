package sfqueue

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseDurabilityAndOnFull(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Durability
		wantErr bool
	}{
		{"memory", DurabilityMemory, false},
		{"periodic", DurabilityPeriodic, false},
		{"flush", DurabilityFlush, false},
		{"FLUSH", 0, true},
		{"", 0, true},
	} {
		got, err := ParseDurability(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseDurability(%q) = %v, %v; want %v, err %v", tc.in, got, err, tc.want, tc.wantErr)
		}
		if err == nil && got.String() != tc.in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), tc.in)
		}
	}
	for _, tc := range []struct {
		in      string
		want    OnFull
		wantErr bool
	}{
		{"block", OnFullBlock, false},
		{"evict_oldest", OnFullEvictOldest, false},
		{"evict", 0, true},
	} {
		got, err := ParseOnFull(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseOnFull(%q) = %v, %v; want %v, err %v", tc.in, got, err, tc.want, tc.wantErr)
		}
		if err == nil && got.String() != tc.in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), tc.in)
		}
	}
}

func TestOpenRejectsBadOptions(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"no sender id", Options{Dir: dir}, "SenderID"},
		{"separator in sender id", Options{Dir: dir, SenderID: "a/b"}, "path separators"},
		{"reserved sender id", Options{Dir: dir, SenderID: "x.unreplayable-1"}, "reserved"},
		{"tiny segment", Options{MaxSegmentBytes: 10}, "MaxSegmentBytes 10"},
		{"huge segment", Options{MaxSegmentBytes: 2 << 30}, "MaxSegmentBytes"},
		{"negative cap", Options{MaxTotalBytes: -1}, "MaxTotalBytes -1"},
		{"bad durability", Options{Durability: 7}, "Durability 7"},
		{"bad on_full", Options{OnFull: 9}, "OnFull 9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := Open(tc.o)
			if err == nil {
				q.Close()
				t.Fatalf("Open accepted %+v", tc.o)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestAppendCursorAck(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			o := m.opts(t)
			o.MaxSegmentBytes = 1024
			q := mustOpen(t, o)
			defer q.Close()
			c := q.NewCursor()
			if _, _, ok, err := c.Next(); ok || err != nil {
				t.Fatalf("Next on an empty queue = ok %v err %v", ok, err)
			}
			var want [][]byte
			for i := range 40 {
				p := testPayload(uint64(i+1), 20+i*5)
				want = append(want, p)
				if fsn := mustAppend(t, q, p); fsn != uint64(i+1) {
					t.Fatalf("Append #%d returned FSN %d", i+1, fsn)
				}
			}
			select {
			case <-q.Published():
			default:
				t.Fatal("Published() did not signal after appends")
			}
			got := drain(t, c)
			if len(got) != len(want) {
				t.Fatalf("read %d frames, want %d", len(got), len(want))
			}
			for i, f := range got {
				if f.fsn != uint64(i+1) || !bytes.Equal(f.payload, want[i]) {
					t.Fatalf("frame %d: fsn %d, payload equal %v", i, f.fsn, bytes.Equal(f.payload, want[i]))
				}
			}
			st := q.Stats()
			if st.Segments < 3 {
				t.Fatalf("40 frames of ~120 bytes in 1 KiB segments used %d segments, want >= 3", st.Segments)
			}
			// Ack is clamped to PublishedFSN and monotonic.
			q.Ack(1000)
			if q.AckedFSN() != 40 {
				t.Fatalf("Ack(1000) with 40 published: AckedFSN %d, want 40", q.AckedFSN())
			}
			q.Ack(3)
			if q.AckedFSN() != 40 {
				t.Fatalf("Ack(3) moved AckedFSN back to %d", q.AckedFSN())
			}
			st = q.Stats()
			if st.Segments != 1 || st.FramesAcked != 40 || st.FramesAppended != 40 || st.BytesAppended != 4700 || st.BytesAcked != 4700 {
				t.Fatalf("after acking all: %+v; want only the active segment left, 40 frames / 4700 payload bytes appended and acked", st)
			}
			// Seek rewinds: frames still in the active segment are readable.
			last := got[len(got)-1].fsn
			c.Seek(last)
			if fsn, _, ok, _ := c.Next(); !ok || fsn != last {
				t.Fatalf("Seek(%d) then Next = %d, %v", last, fsn, ok)
			}
			// Seek to a trimmed FSN lands on the oldest retained frame.
			c.Seek(1)
			if fsn, _, ok, _ := c.Next(); !ok || fsn <= 1 {
				t.Fatalf("Seek(1) after trim: Next = %d, %v; want the oldest retained frame", fsn, ok)
			}
		})
	}
}

func TestAppendBatchIsOneGroup(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			o := m.opts(t)
			o.MaxSegmentBytes = 512
			q := mustOpen(t, o)
			defer q.Close()
			var batch [][]byte
			for i := range 10 {
				batch = append(batch, testPayload(uint64(i+1), 100))
			}
			last, err := q.AppendBatch(context.Background(), batch)
			if err != nil || last != 10 {
				t.Fatalf("AppendBatch = %d, %v; want 10", last, err)
			}
			if _, err := q.AppendBatch(context.Background(), nil); err == nil {
				t.Fatal("AppendBatch(nil) succeeded")
			}
			got := drain(t, q.NewCursor())
			if len(got) != 10 || got[9].fsn != 10 || !bytes.Equal(got[9].payload, batch[9]) {
				t.Fatalf("batch read back as %d frames", len(got))
			}
		})
	}
}

func TestFrameLargerThanSegmentIsRefused(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			o := m.opts(t)
			o.MaxSegmentBytes = 1000
			q := mustOpen(t, o)
			defer q.Close()
			_, err := q.Append(context.Background(), make([]byte, 1000))
			var tl *FrameTooLargeError
			if !errors.As(err, &tl) {
				t.Fatalf("Append of 1000 bytes into 1000-byte segments: %v, want *FrameTooLargeError", err)
			}
			if !strings.Contains(err.Error(), "1012") || !strings.Contains(err.Error(), "1000") {
				t.Fatalf("error %q does not name the frame (1012) and segment (1000) sizes", err)
			}
			// The largest frame that fits is accepted.
			mustAppend(t, q, make([]byte, 1000-segmentHeaderSize-frameOverhead))
			if q.PublishedFSN() != 1 {
				t.Fatalf("PublishedFSN %d after a refused and an accepted append, want 1", q.PublishedFSN())
			}
		})
	}
}

func TestReopenRecoversUnackedFrames(t *testing.T) {
	for _, d := range []Durability{DurabilityMemory, DurabilityPeriodic, DurabilityFlush} {
		t.Run(d.String(), func(t *testing.T) {
			o := Options{Dir: t.TempDir(), SenderID: "s", MaxSegmentBytes: 600, Durability: d}
			q := mustOpen(t, o)
			for i := range 30 {
				mustAppend(t, q, testPayload(uint64(i+1), 50+i))
			}
			q.Ack(12)
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			q = mustOpen(t, o)
			defer q.Close()
			rep := q.Recovery()
			if rep.AckedFSN != 12 || rep.PublishedFSN != 30 || rep.FramesRecovered != 18 || rep.TornBytes != 0 || rep.Unreplayable != nil {
				t.Fatalf("recovery %+v; want acked 12 (watermark), published 30, 18 frames, no torn bytes", rep)
			}
			if q.AckedFSN() != 12 || q.PublishedFSN() != 30 {
				t.Fatalf("AckedFSN %d PublishedFSN %d after reopen", q.AckedFSN(), q.PublishedFSN())
			}
			got := drain(t, q.NewCursor())
			if len(got) != 18 || got[0].fsn != 13 {
				t.Fatalf("cursor after reopen read %d frames from %v; want 18 from 13", len(got), got[0].fsn)
			}
			for _, f := range got {
				if id, err := checkTestPayload(f.payload); err != nil || id != f.fsn {
					t.Fatalf("frame %d: id %d, %v", f.fsn, id, err)
				}
			}
			if fsn := mustAppend(t, q, testPayload(31, 40)); fsn != 31 {
				t.Fatalf("first append after reopen got FSN %d, want 31", fsn)
			}
		})
	}
}

func TestDrainedCloseLeavesNoSegmentsAndKeepsFSNs(t *testing.T) {
	o := Options{Dir: t.TempDir(), SenderID: "s", MaxSegmentBytes: 400}
	q := mustOpen(t, o)
	for i := range 20 {
		mustAppend(t, q, testPayload(uint64(i+1), 60))
	}
	q.Ack(20)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(o.Dir, "s", "*"+segmentSuffix))
	if len(names) != 0 {
		t.Fatalf("drained Close left segments %v", names)
	}
	q = mustOpen(t, o)
	defer q.Close()
	if q.AckedFSN() != 20 || q.PublishedFSN() != 20 {
		t.Fatalf("after drained reopen: acked %d published %d, want 20/20 from the watermark", q.AckedFSN(), q.PublishedFSN())
	}
	if fsn := mustAppend(t, q, testPayload(21, 30)); fsn != 21 {
		t.Fatalf("FSN after drained reopen = %d, want 21 (never reuse an FSN below the watermark)", fsn)
	}
}

// A watermark past the last frame found (a power loss kept it, fsynced,
// and not the segment's tail) records acknowledged frames: QuestDB has
// them, and new FSNs resume above it.
func TestWatermarkBeyondDataIsTrusted(t *testing.T) {
	o := Options{Dir: t.TempDir(), SenderID: "s"}
	q := mustOpen(t, o)
	for i := range 5 {
		mustAppend(t, q, testPayload(uint64(i+1), 30))
	}
	q.Close()
	slot := filepath.Join(o.Dir, "s")
	if err := replaceFile(OSFS(), slot, watermarkFile, encodeWatermark(watermark{acked: 99})); err != nil {
		t.Fatal(err)
	}
	q = mustOpen(t, o)
	defer q.Close()
	rep := q.Recovery()
	if rep.WatermarkIgnored || rep.AckedFSN != 99 || q.PublishedFSN() != 99 || rep.TornFrames != 0 || rep.LostFrames != 0 {
		t.Fatalf("watermark 99 over 5 frames: %+v; want it trusted, acked 99, nothing lost", rep)
	}
	if n := len(drain(t, q.NewCursor())); n != 0 {
		t.Fatalf("read %d frames, want none: all 5 were acknowledged", n)
	}
	if fsn := mustAppend(t, q, testPayload(6, 30)); fsn != 100 {
		t.Fatalf("the next frame got FSN %d; want 100, above the watermark", fsn)
	}
}

func TestCorruptWatermarkIsIgnored(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"torn", encodeWatermark(watermark{acked: 3})[:7]},
		{"bit flip", func() []byte { b := encodeWatermark(watermark{acked: 3}); b[5] ^= 1; return b }()},
		{"empty", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Dir: t.TempDir(), SenderID: "s"}
			q := mustOpen(t, o)
			for i := range 5 {
				mustAppend(t, q, testPayload(uint64(i+1), 30))
			}
			q.Close()
			if err := os.WriteFile(filepath.Join(o.Dir, "s", watermarkFile), tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			q = mustOpen(t, o)
			defer q.Close()
			if rep := q.Recovery(); !rep.WatermarkIgnored || rep.AckedFSN != 0 || rep.FramesRecovered != 5 {
				t.Fatalf("corrupt watermark: %+v; want ignored and all 5 frames replayed", rep)
			}
		})
	}
}

func TestClosedQueue(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			q := mustOpen(t, m.opts(t))
			mustAppend(t, q, []byte("x"))
			c := q.NewCursor()
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			if err := q.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if _, err := q.Append(context.Background(), []byte("y")); !errors.Is(err, ErrClosed) {
				t.Fatalf("Append after Close: %v, want ErrClosed", err)
			}
			if _, _, _, err := c.Next(); !errors.Is(err, ErrClosed) {
				t.Fatalf("Next after Close: %v, want ErrClosed", err)
			}
			if err := q.AddSymbols(0, 0, [][]byte{[]byte("a")}); !errors.Is(err, ErrClosed) {
				t.Fatalf("AddSymbols after Close: %v, want ErrClosed", err)
			}
		})
	}
}

func TestPublishedWakesWaitingConsumer(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			q := mustOpen(t, m.opts(t))
			defer q.Close()
			c := q.NewCursor()
			got := make(chan uint64)
			go func() {
				for {
					fsn, _, ok, err := c.Next()
					if err != nil {
						close(got)
						return
					}
					if ok {
						got <- fsn
						return
					}
					<-q.Published()
				}
			}()
			mustAppend(t, q, []byte("hello"))
			select {
			case fsn := <-got:
				if fsn != 1 {
					t.Fatalf("consumer got FSN %d, want 1", fsn)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("consumer waiting on Published() never saw the frame")
			}
		})
	}
}

func TestFrameDamagedAfterOpenIsAnErrorNotAFrame(t *testing.T) {
	o := Options{Dir: t.TempDir(), SenderID: "s"}
	q := mustOpen(t, o)
	defer q.Close()
	mustAppend(t, q, testPayload(1, 100))
	mustAppend(t, q, testPayload(2, 100))
	// Flip a payload byte of frame 2 behind the queue's back.
	p := filepath.Join(o.Dir, "s", segmentName(1))
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(segmentHeaderSize + frameSize(100) + 8 + 50) // frame 2's length and item count, then its payload
	b := []byte{0}
	f.ReadAt(b, off)
	f.WriteAt([]byte{b[0] ^ 0x01}, off)
	f.Close()
	c := q.NewCursor()
	if fsn, _, ok, err := c.Next(); !ok || err != nil || fsn != 1 {
		t.Fatalf("intact frame 1: %d %v %v", fsn, ok, err)
	}
	fsn, payload, ok, err := c.Next()
	if err == nil || ok || payload != nil || !strings.Contains(err.Error(), "CRC32C") {
		t.Fatalf("damaged frame 2: fsn %d ok %v err %v; want a CRC error and no payload", fsn, ok, err)
	}
}

func TestSealedSegmentsKeepNoFileOpen(t *testing.T) {
	for _, d := range []Durability{DurabilityMemory, DurabilityFlush} {
		t.Run(d.String(), func(t *testing.T) {
			cfs := newCrashFS()
			o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: d, MaxSegmentBytes: 512}
			openFiles := func() int {
				cfs.mu.Lock()
				defer cfs.mu.Unlock()
				return cfs.openFiles
			}
			q := mustOpen(t, o)
			for i := range 200 {
				mustAppend(t, q, testPayload(uint64(i+1), 100))
			}
			c := q.NewCursor()
			if n := len(drain(t, c)); n != 200 {
				t.Fatalf("read %d frames", n)
			}
			// 50 segments: the active one, the dictionary and at most
			// maxReadOpen sealed ones for the cursor.
			if n := openFiles(); n > 2+maxReadOpen {
				t.Fatalf("%d files open with %d segments, want <= %d", n, q.Stats().Segments, 2+maxReadOpen)
			}
			c.Seek(1) // rewinding reopens what it needs
			if n := len(drain(t, c)); n != 200 {
				t.Fatalf("reread %d frames after Seek(1)", n)
			}
			q.Close()
			if n := openFiles(); n != 0 {
				t.Fatalf("%d files still open after Close", n)
			}
			q = mustOpen(t, o)
			if n := openFiles(); n > 2 {
				t.Fatalf("%d files open after recovering %d segments", n, q.Recovery().Segments)
			}
			if n := len(drain(t, q.NewCursor())); n != 200 {
				t.Fatalf("read %d recovered frames", n)
			}
			q.Close()
			if n := openFiles(); n != 0 {
				t.Fatalf("%d files still open after the second Close", n)
			}
		})
	}
}

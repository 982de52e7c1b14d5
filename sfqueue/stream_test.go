package sfqueue

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// readStream reads st whole through pieces of the given size.
func readStream(st *Stream, piece int) ([]byte, error) {
	var out []byte
	buf := make([]byte, piece)
	for {
		n, err := st.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// TestNextStreamReadsWhatNextReads: every frame, across segments and in both
// modes, streams to the payload Next returns, whatever the buffer and piece
// sizes; Head is the payload's start.
func TestNextStreamReadsWhatNextReads(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			o := m.opts(t)
			o.MaxSegmentBytes = 64 << 10
			q := mustOpen(t, o)
			defer q.Close()
			var want [][]byte
			for i, size := range []int{12, 13, 63, 64, 65, 75, 76, 77, 1000, 4096, 40_000, 60_000, 100, 7} {
				p := testPayload(uint64(i+1), size)
				want = append(want, p)
				mustAppend(t, q, p)
			}
			if q.Stats().Segments < 2 {
				t.Fatal("set-up: the frames fit one segment")
			}
			for _, bufSize := range []int{StreamHeadBytes + frameOverhead, 1000, 128 << 10} {
				for _, piece := range []int{1, 7, 4096} {
					c := q.NewCursor()
					for i, w := range want {
						fsn, st, ok, err := c.NextStream(make([]byte, bufSize))
						if err != nil || !ok || fsn != uint64(i+1) {
							t.Fatalf("buffer %d: NextStream #%d = %d, %v, %v", bufSize, i+1, fsn, ok, err)
						}
						if st.Len() != len(w) || !bytes.Equal(st.Head(), w[:min(len(w), StreamHeadBytes)]) {
							t.Fatalf("buffer %d, frame %d: Len %d, head %x; want %d, %x", bufSize, fsn, st.Len(), st.Head(), len(w), w[:min(len(w), StreamHeadBytes)])
						}
						got, err := readStream(st, piece)
						if err != nil || !bytes.Equal(got, w) {
							t.Fatalf("buffer %d, pieces of %d, frame %d: read %d bytes (equal %v), %v", bufSize, piece, fsn, len(got), bytes.Equal(got, w), err)
						}
					}
					if _, _, ok, err := c.NextStream(make([]byte, bufSize)); ok || err != nil {
						t.Fatalf("NextStream past the end: ok %v err %v", ok, err)
					}
				}
			}
			if _, _, _, err := q.NewCursor().NextStream(make([]byte, StreamHeadBytes)); err == nil {
				t.Fatal("NextStream accepted a buffer too small for a frame head and a payload head")
			}
		})
	}
}

// flipByte flips one bit of the file at off.
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	patch(t, path, off, []byte{b[off] ^ 0x01})
}

// TestNextStreamRefusesDamagedFrame: a frame damaged on disk, in its
// length, payload or CRC32C, is an error and no Stream, as with Next.
func TestNextStreamRefusesDamagedFrame(t *testing.T) {
	const size = 5000
	frame2 := int64(segmentHeaderSize + frameSize(size))
	for _, tc := range []struct {
		name string
		off  int64
	}{
		{"length", frame2},
		{"item count", frame2 + 4},
		{"payload start", frame2 + 8},
		{"payload end", frame2 + 8 + size - 1},
		{"crc", frame2 + 8 + size + 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Dir: t.TempDir(), SenderID: "s"}
			q := mustOpen(t, o)
			defer q.Close()
			mustAppend(t, q, testPayload(1, size))
			mustAppend(t, q, testPayload(2, size))
			flipByte(t, filepath.Join(o.Dir, "s", segmentName(1)), tc.off)
			c := q.NewCursor()
			buf := make([]byte, 1000)
			if fsn, _, ok, err := c.NextStream(buf); !ok || err != nil || fsn != 1 {
				t.Fatalf("intact frame 1: %d %v %v", fsn, ok, err)
			}
			fsn, st, ok, err := c.NextStream(buf)
			if err == nil || ok || st != nil || !strings.Contains(err.Error(), "CRC32C") {
				t.Fatalf("damaged frame 2: fsn %d ok %v stream %v err %v; want a CRC error and no stream", fsn, ok, st != nil, err)
			}
		})
	}
}

// TestStreamHoldsBackAFrameDamagedAfterItsCheck: bytes that change between
// NextStream's check and Read (the disk returning other bytes the second
// time) are caught over the bytes Read hands out, and the payload's last
// piece is never handed out.
func TestStreamHoldsBackAFrameDamagedAfterItsCheck(t *testing.T) {
	const size = 50_000
	for _, at := range []int{0, size / 2, size - 1} {
		o := Options{Dir: t.TempDir(), SenderID: "s"}
		q := mustOpen(t, o)
		mustAppend(t, q, testPayload(1, size))
		c := q.NewCursor()
		_, st, ok, err := c.NextStream(make([]byte, 4096))
		if !ok || err != nil {
			t.Fatalf("NextStream: %v %v", ok, err)
		}
		flipByte(t, filepath.Join(o.Dir, "s", segmentName(1)), int64(segmentHeaderSize+8+at))
		got, err := readStream(st, 4096)
		if err == nil || !strings.Contains(err.Error(), "changed after its CRC32C check") {
			t.Fatalf("payload byte %d flipped after the check: read %d bytes, err %v; want the change reported", at, len(got), err)
		}
		if want := size - size%4096; len(got) != want {
			t.Fatalf("payload byte %d flipped after the check: %d of %d bytes handed out, want %d (all but the last piece)", at, len(got), size, want)
		}
		if n, again := st.Read(make([]byte, 16)); n != 0 || again != err {
			t.Fatalf("payload byte %d flipped: a Read after the error = %d, %v; want 0 and the same error, never a clean end", at, n, again)
		}
		q.Close()
	}
}

// TestStreamOfEvictedFrame: a frame evicted (evict_oldest) after NextStream
// verified it cannot be read on: ErrFrameGone, no bytes.
func TestStreamOfEvictedFrame(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			o := fillOptions(m.opts(t), OnFullEvictOldest)
			q := mustOpen(t, o)
			defer q.Close()
			mustAppend(t, q, testPayload(1, 200))
			c := q.NewCursor()
			_, st, ok, err := c.NextStream(make([]byte, 100))
			if !ok || err != nil {
				t.Fatalf("NextStream: %v %v", ok, err)
			}
			for i := range 40 {
				mustAppend(t, q, testPayload(uint64(i+2), 200))
			}
			if q.Stats().FramesEvicted == 0 {
				t.Fatal("set-up: nothing was evicted")
			}
			if n, err := st.Read(make([]byte, 100)); n != 0 || !errors.Is(err, ErrFrameGone) {
				t.Fatalf("Read of an evicted frame = %d, %v; want 0, ErrFrameGone", n, err)
			}
		})
	}
}

// TestStreamOfClosedQueue: Read after Close is ErrClosed.
func TestStreamOfClosedQueue(t *testing.T) {
	q := mustOpen(t, Options{})
	mustAppend(t, q, testPayload(1, 200))
	_, st, ok, err := q.NewCursor().NextStream(make([]byte, 100))
	if !ok || err != nil {
		t.Fatalf("NextStream: %v %v", ok, err)
	}
	q.Close()
	if n, err := st.Read(make([]byte, 100)); n != 0 || !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close = %d, %v; want 0, ErrClosed", n, err)
	}
}

// TestNextStreamHoldsNoFrameSizedBuffer: streaming a 1.8 MB frame through a
// 128 KiB buffer allocates a small fraction of the frame (Next keeps a
// buffer of the frame and a quarter more).
func TestNextStreamHoldsNoFrameSizedBuffer(t *testing.T) {
	const size = 1_887_436 // the exporter's default max_batch_bytes
	o := Options{Dir: t.TempDir(), SenderID: "s", MaxSegmentBytes: 4 << 20}
	q := mustOpen(t, o)
	defer q.Close()
	for i := range 3 {
		if _, err := q.Append(context.Background(), testPayload(uint64(i+1), size)); err != nil {
			t.Fatal(err)
		}
	}
	c := q.NewCursor()
	buf, piece := make([]byte, 128<<10), make([]byte, 128<<10)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 3 {
		_, st, ok, err := c.NextStream(buf)
		if !ok || err != nil {
			t.Fatalf("NextStream: %v %v", ok, err)
		}
		for {
			if _, err := st.Read(piece); err == io.EOF {
				break
			} else if err != nil {
				t.Fatal(err)
			}
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
		t.Fatalf("streaming 3 frames of %d bytes allocated %d bytes, want < 64 KiB", size, got)
	}
}

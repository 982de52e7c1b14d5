package sender

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
	"github.com/questdbexporter/questdbexporter/sfqueue/sfqueuetest"
)

// bigFrameQueue is an SF queue whose segments hold frames of several pieces.
func bigFrameQueue(t *testing.T, dir string) *sfqueue.Queue {
	t.Helper()
	q, err := sfqueue.Open(sfqueue.Options{Dir: dir, SenderID: "slot", MaxSegmentBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

// flipStoredByte flips a bit of the first segment's file at off.
func flipStoredByte(t *testing.T, dir string, off int64) {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "slot", "00000000000000000001*"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("the first segment: %v, %v", segs, err)
	}
	sfqueuetest.FlipBit(t, segs[0], off)
}

// frameOffsets are the file offsets of the stored frames' payloads in the
// first segment (a 24-byte header; per frame length, item count, payload,
// CRC32C).
func frameOffsets(payloads ...int) []int64 {
	var offs []int64
	off := int64(24)
	for _, n := range payloads {
		offs = append(offs, off+8)
		off += 12 + int64(n)
	}
	return offs
}

// TestDamagedStoredFrameIsNeverSent: a frame of several pieces damaged on
// disk stops the sender with a CRC32C error naming it; the frame before it
// is delivered, nothing of it or after it.
func TestDamagedStoredFrameIsNeverSent(t *testing.T) {
	dir := t.TempDir()
	srv := newServer(t, qwptest.Options{})
	q := bigFrameQueue(t, dir)
	f := newFeeder(t, q, true)
	var sizes []int
	for range 3 {
		p := f.encode(60_000)
		sizes = append(sizes, len(p))
		if _, err := q.AppendBatchItems(context.Background(), [][]byte{p}, []uint32{60_000}); err != nil {
			t.Fatal(err)
		}
	}
	if sizes[1] < 2*pieceBytes {
		t.Fatalf("set-up: frame 2 is %d bytes, want several pieces of %d", sizes[1], pieceBytes)
	}
	flipStoredByte(t, dir, frameOffsets(sizes...)[1]+int64(sizes[1])-10)
	s := startSender(t, q, testOptions(&recorder{}, srv.URL()))
	te := waitTerminal(t, s)
	if te.FSN != 2 || !strings.Contains(te.Error(), "CRC32C") {
		t.Fatalf("terminal error %v at FSN %d; want frame 2's CRC32C failure", te, te.FSN)
	}
	if rows := srv.RowCount(testTable); rows != 60_000 || q.AckedFSN() != 1 {
		t.Fatalf("%d rows stored, FSN %d acked; want frame 1's 60,000 rows only", rows, q.AckedFSN())
	}
}

// TestFrameChangedWhileSentIsNeverCompleted: a stored frame whose bytes
// change after the queue checked them (here between the check and the
// write, in the catch-up hook) is read again while it is sent and its last
// piece held back: the connection is dropped with the frame incomplete, the
// server stores nothing of it, and the next connection's check stops the
// sender with the CRC32C error.
func TestFrameChangedWhileSentIsNeverCompleted(t *testing.T) {
	dir := t.TempDir()
	srv := newServer(t, qwptest.Options{})
	q := bigFrameQueue(t, dir)
	f := newFeeder(t, q, true)
	p := f.encode(60_000)
	if len(p) < 2*pieceBytes {
		t.Fatalf("set-up: the frame is %d bytes, want several pieces of %d", len(p), pieceBytes)
	}
	if gen := binary.LittleEndian.Uint32(p); gen != 0 {
		t.Fatalf("set-up: generation %d", gen)
	}
	if _, err := q.AppendBatchItems(context.Background(), [][]byte{p}, []uint32{60_000}); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	s, err := New(q, testOptions(rec, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	s.beforeCatchUp = func(uint32, uint64) {
		once.Do(func() { flipStoredByte(t, dir, frameOffsets(len(p))[0]+100) })
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	te := waitTerminal(t, s)
	if te.FSN != 1 || !strings.Contains(te.Error(), "CRC32C") {
		t.Fatalf("terminal error %v at FSN %d; want frame 1's CRC32C failure", te, te.FSN)
	}
	if rows, frames := srv.RowCount(testTable), srv.Frames(); rows != 0 || q.AckedFSN() != 0 {
		t.Fatalf("%d rows stored (%d frames), FSN %d acked; want nothing of the changed frame", rows, frames, q.AckedFSN())
	}
	if srv.Accepted() < 2 {
		t.Fatalf("%d connections; want the one the torn frame ended and the one whose check found the damage", srv.Accepted())
	}
}

// TestFrameEvictedWhileSentRecycles: a frame evicted (on_full
// evict_oldest) after the cursor checked it and before it was sent cannot
// be read on; the sender reconnects at once and delivers what survived,
// without reporting a lost connection or backing off.
func TestFrameEvictedWhileSentRecycles(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	q, err := sfqueue.Open(sfqueue.Options{MaxTotalBytes: 8 << 10, MaxSegmentBytes: 1 << 10, OnFull: sfqueue.OnFullEvictOldest})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	f := newFeeder(t, q, false)
	f.frames(2, 1)
	rec := &recorder{}
	o := testOptions(rec, srv.URL())
	o.InitialBackoff, o.MaxBackoff = time.Minute, time.Minute // a lost connection would stall the test
	s, err := New(q, o)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	appended := make(chan struct{})
	s.beforeCatchUp = func(uint32, uint64) {
		once.Do(func() {
			f.frames(200, 1) // far beyond 8 KiB: frame 1's segment goes
			close(appended)
		})
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	<-appended
	waitAll(t, s, q)
	if q.Stats().FramesEvicted == 0 {
		t.Fatal("set-up: nothing was evicted")
	}
	counts := rowIDs(t, srv)
	if counts[0] != 0 || counts[201] != 1 {
		t.Fatalf("row 0 (evicted before it was sent) arrived %d times, row 201 (the newest) %d; want 0 and 1", counts[0], counts[201])
	}
	for _, st := range rec.States() {
		if st.Kind == Reconnecting {
			t.Fatalf("state %v: an eviction is not a lost connection", st)
		}
	}
	if srv.Accepted() != 2 {
		t.Fatalf("%d connections; want the first and the one after the eviction", srv.Accepted())
	}
}

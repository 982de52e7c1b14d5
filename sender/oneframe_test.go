package sender

import (
	"testing"

	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
)

// TestLargeFramesLeaveWhole: frames well over 64 KiB, and the catch-up after
// a reconnect, leave as single WebSocket frames (QuestDB closes the
// connection with 1002 on a fragment) and every row lands.
func TestLargeFramesLeaveWhole(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	p := newProxy(t, srv.Addr(), proxyOptions{})
	q := memQueue(t)
	f := newFeeder(t, q, true)
	f.frames(2, 20_000)
	f.frames(1, 150_000)
	s := startSender(t, q, testOptions(nil, p.URL()))
	waitAll(t, s, q)
	srv.DropConnections()
	f.frames(2, 20_000)
	waitAll(t, s, q)
	exactRows(t, rowIDs(t, srv), 230_000)
	if n := p.fragments.Load(); n != 0 {
		t.Fatalf("%d client frames had FIN clear; every message must be one frame", n)
	}
	if n := p.opcodes[0].Load(); n != 0 {
		t.Fatalf("%d CONTINUATION frames", n)
	}
	if l := p.largest.Load(); l <= 1<<20 {
		t.Fatalf("the largest frame was %d bytes; the test means to send one over 1 MiB", l)
	}
}

// TestStoredFrameOverMaxBatchBytes: a frame stored under a larger
// MaxBatchBytes than the sender has now outgrows the connection's write
// buffer; the sender moves to a connection whose buffer fits it (once),
// rather than splitting it or giving up, and it lands whole.
func TestStoredFrameOverMaxBatchBytes(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	p := newProxy(t, srv.Addr(), proxyOptions{})
	q := memQueue(t)
	f := newFeeder(t, q, true)
	f.frames(3, 100)
	f.frames(2, 30_000) // ~300 KB each
	f.frames(3, 100)
	o := testOptions(nil, p.URL())
	o.MaxBatchBytes = 64 << 10
	s := startSender(t, q, o)
	waitAll(t, s, q)
	exactRows(t, rowIDs(t, srv), 60_600)
	if n := p.fragments.Load(); n != 0 {
		t.Fatalf("%d client frames had FIN clear", n)
	}
	if n := len(p.arrivals()); n != 2 {
		t.Fatalf("%d connections, want 2: the first with a 64 KiB message limit, one recycle to a limit that fits the large frames", n)
	}
}

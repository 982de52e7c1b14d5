package sender

import (
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/questdbexporter/questdbexporter/qwp"
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
// MaxBatchBytes than the sender has now, but within the server's limit,
// goes out whole on the connection already open: messages are written from
// the frame itself, so no per-connection limit below the server's calls for
// a reconnect (nor a split, nor giving up).
func TestStoredFrameOverMaxBatchBytes(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	p := newProxy(t, srv.Addr(), proxyOptions{})
	q := memQueue(t)
	f := newFeeder(t, q, true)
	f.frames(3, 100)
	f.frames(2, 30_000) // ~300 KB each: FSN 4 and 5
	f.frames(3, 100)
	const maxBatch = 64 << 10
	big := max(storedSize(t, q, 4), storedSize(t, q, 5)) - 4 // less the generation prefix
	if big <= maxBatch {
		t.Fatalf("the large frames are %d bytes; the test means them over MaxBatchBytes (%d)", big, maxBatch)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	rec := &recorder{}
	o := testOptions(rec, p.URL())
	o.MaxBatchBytes = maxBatch
	o.Logger = zap.New(core)
	s := startSender(t, q, o)
	waitAll(t, s, q)
	exactRows(t, rowIDs(t, srv), 60_600)
	if n, c := p.fragments.Load(), p.opcodes[0].Load(); n != 0 || c != 0 {
		t.Fatalf("%d client frames had FIN clear, %d were CONTINUATION; every message must be one frame", n, c)
	}
	if l := p.largest.Load(); l != int64(big) {
		t.Fatalf("the largest client frame carried %d bytes; want the %d-byte stored frame in one", l, big)
	}
	if n := len(p.arrivals()); n != 1 || srv.Accepted() != 1 {
		t.Fatalf("%d connections through the proxy, %d at the server; want 1: the frame fits the connection already open", n, srv.Accepted())
	}
	if n := rec.attempts.Load(); n != 0 {
		t.Fatalf("%d reconnect attempts counted, want 0", n)
	}
	if r := logs.FilterMessageSnippet("recycl"); r.Len() != 0 {
		t.Fatalf("the connection was recycled: %v", r.All())
	}
}

// TestOversizeRefusesOverTheServersLimitOnly: oversize refuses a stored
// frame for good over the server's X-QWP-Max-Batch-Size, or over
// qwp.MaxMessageBytes when the server advertises none (WriteMessage would
// refuse it on every reconnect); anything up to the limit passes on the
// connection as it is, whatever MaxBatchBytes says.
func TestOversizeRefusesOverTheServersLimitOnly(t *testing.T) {
	for _, tc := range []struct {
		name       string
		advertised int
		size       int
		refusal    string // "" when the frame passes
	}{
		{"over the advertised limit", 4082, 4083, "larger than the 4082 bytes the server at ws://test accepts (X-QWP-Max-Batch-Size)"},
		{"at the advertised limit", 4082, 4082, ""},
		{"over the protocol's, not advertised", 0, qwp.MaxMessageBytes + 1, "larger than the 16777216 bytes any QuestDB server accepts"},
		{"at the protocol's, not advertised", 0, qwp.MaxMessageBytes, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Sender{o: Options{MaxBatchBytes: 64 << 10}}
			c := &conn{qc: &qwp.Conn{MaxBatchSize: tc.advertised}, endpoint: "ws://test"}
			e, done := s.oversize(c, 7, tc.size)
			if tc.refusal == "" {
				if done || c.recycle != "" {
					t.Fatalf("a %d-byte frame: done %v (%v), recycle %q; want it sent on this connection", tc.size, done, e.term, c.recycle)
				}
				return
			}
			if !done || e.kind != endTerminal || e.term.FSN != 7 || e.term.Category != qwp.CategoryParseError ||
				!strings.Contains(e.term.Error(), tc.refusal) || !strings.Contains(e.term.Error(), strconv.Itoa(tc.size)) {
				t.Fatalf("a %d-byte frame: done %v, %+v; want a terminal PARSE_ERROR on FSN 7 naming %d bytes and %q", tc.size, done, e.term, tc.size, tc.refusal)
			}
		})
	}
}

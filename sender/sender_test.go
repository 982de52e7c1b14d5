package sender

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

func TestSendAndTrim(t *testing.T) {
	for _, mode := range []string{"memory", "sf"} {
		t.Run(mode, func(t *testing.T) {
			srv := newServer(t, qwptest.Options{})
			var q *sfqueue.Queue
			if mode == "memory" {
				q = memQueue(t)
			} else {
				q = sfQueue(t, t.TempDir(), "slot")
				t.Cleanup(func() { _ = q.Close() })
			}
			f := newFeeder(t, q, true)
			f.frames(20, 10) // a backlog before Start
			rec := &recorder{}
			rec.dictSize.Store(-1)
			s := startSender(t, q, testOptions(rec, srv.URL()))
			waitAll(t, s, q)
			f.frames(30, 10) // picked up through Published, no polling
			waitAll(t, s, q)
			if dups := exactRows(t, rowIDs(t, srv), 500); dups != 0 {
				t.Errorf("%d duplicate rows without any failure", dups)
			}
			if q.AckedFSN() != 50 || rec.sent.Load() != 50 || rec.acked.Load() != 50 || rec.replayed.Load() != 0 {
				t.Errorf("acked FSN %d, sent %d, acked %d, replayed %d; want 50, 50, 50, 0",
					q.AckedFSN(), rec.sent.Load(), rec.acked.Load(), rec.replayed.Load())
			}
			if st := q.Stats(); st.Segments > 1 {
				t.Errorf("%d segments retained after everything was acked; trim should leave at most the active one", st.Segments)
			}
			// The first frame starts generation 0: nothing to catch up.
			if rec.dictSize.Load() != 0 {
				t.Errorf("catch-up size reported %d; want 0 (and reported)", rec.dictSize.Load())
			}
			if s.Err() != nil {
				t.Errorf("Err() = %v on a healthy run", s.Err())
			}
			if srv.Accepted() != 1 {
				t.Errorf("%d connections for a healthy run, want 1", srv.Accepted())
			}
		})
	}
}

func TestStartNeverBlocksAndCloseStopsEverything(t *testing.T) {
	q := memQueue(t)
	newFeeder(t, q, false).frames(3, 1)
	rec := &recorder{}
	// Nothing listens on port 1: every attempt fails.
	s, err := New(q, testOptions(rec, "ws://127.0.0.1:1/write/v4"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "reconnect attempts", func() bool { return rec.attempts.Load() >= 3 })
	o := s.o
	o.CloseFlushTimeout = 0
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = s.Close(ctx)
	if err == nil || !strings.Contains(err.Error(), "3 frames (FSN 1..3) not acknowledged") || !strings.Contains(err.Error(), "lost") {
		t.Fatalf("Close error %v; want it to name the 3 unacknowledged frames and say memory mode loses them", err)
	}
	if err := s.WaitAcked(context.Background(), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitAcked after Close = %v, want ErrClosed", err)
	}
	states := rec.States()
	if len(states) < 2 || states[0].Kind != Connecting || states[1].Kind != Reconnecting || states[1].Attempts != 1 {
		t.Fatalf("states %+v; want Connecting then Reconnecting with attempt 1", states)
	}
}

func TestOutageMidStream(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	q := memQueue(t)
	f := newFeeder(t, q, true)
	rec := &recorder{}
	s := startSender(t, q, testOptions(rec, srv.URL()))
	rounds := 5
	if longTests() {
		rounds = 50
	}
	for i := range rounds {
		f.frames(20, 5)
		switch i % 3 {
		case 0:
			srv.Outage(30 * time.Millisecond) // a restart: drops connections, 503 for a while
		case 1:
			srv.DropAfter(7, false) // commits a frame, then dies before its OK
		case 2:
			srv.DropConnections()
		}
	}
	waitAll(t, s, q)
	total := int64(rounds * 20 * 5)
	dups := exactRows(t, rowIDs(t, srv), total)
	// Only frames sent before a break and not acknowledged are re-sent, so
	// every duplicate row belongs to a replayed frame.
	if max := rec.replayed.Load() * 5; int64(dups) > max {
		t.Errorf("%d duplicate rows but only %d replayed frames (%d rows)", dups, rec.replayed.Load(), max)
	}
	if rec.success.Load() == 0 {
		t.Error("no reconnect was counted")
	}
	if s.Err() != nil {
		t.Fatalf("transport failures made the sender terminal: %v", s.Err())
	}
}

func TestReconnectReplaysDictionary(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	q := memQueue(t)
	f := newFeeder(t, q, true)
	f.frames(10, 10) // every symbol value appears in the first frame's delta
	rec := &recorder{}
	// Stall OKs so the break leaves frames unacked: their replay and the
	// frames after them reference ids only the catch-up registers again.
	srv.StallAcks()
	s := startSender(t, q, testOptions(rec, srv.URL()))
	waitFor(t, "10 frames on the server", func() bool { return srv.Frames() >= 10 })
	srv.DropConnections()
	srv.ReleaseAcks()
	f.frames(10, 10)
	waitAll(t, s, q)
	counts := rowIDs(t, srv) // checks each row's symbol
	exactRows(t, counts, 200)
	if rec.replayed.Load() == 0 {
		t.Error("no frame was counted as replayed after the break")
	}
	if srv.Accepted() < 2 {
		t.Errorf("%d connections, want a reconnect", srv.Accepted())
	}
}

func TestMaxInFlight(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	q := memQueue(t)
	newFeeder(t, q, false).frames(40, 2)
	srv.StallAcks()
	rec := &recorder{}
	o := testOptions(rec, srv.URL())
	o.MaxInFlight = 5
	s := startSender(t, q, o)
	waitFor(t, "5 frames in flight", func() bool { return srv.Frames() >= 5 })
	time.Sleep(50 * time.Millisecond) // give an over-eager sender the chance to send more
	if n := srv.Frames(); n != 5 {
		t.Fatalf("%d frames sent with no OK and MaxInFlight 5", n)
	}
	srv.ReleaseAcks()
	waitAll(t, s, q)
	exactRows(t, rowIDs(t, srv), 80)
	if m := rec.maxIn.Load(); m > 5 {
		t.Fatalf("in-flight reached %d with MaxInFlight 5", m)
	}
}

func TestWaitAcked(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	q := memQueue(t)
	f := newFeeder(t, q, false)
	srv.StallAcks()
	s := startSender(t, q, testOptions(nil, srv.URL()))
	fsn := f.frames(3, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	err := s.WaitAcked(ctx, fsn)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitAcked with stalled acks = %v, want the context's deadline", err)
	}
	// A network failure does not fail the wait.
	done := make(chan error, 1)
	go func() { done <- s.WaitAcked(context.Background(), fsn) }()
	srv.Outage(20 * time.Millisecond)
	srv.ReleaseAcks()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WaitAcked across an outage = %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("WaitAcked did not return after the frames were acknowledged")
	}
	if q.AckedFSN() < fsn {
		t.Fatalf("WaitAcked returned with ackedFSN %d < %d", q.AckedFSN(), fsn)
	}
}

// errorCase drives one server error through a sender with two endpoints.
type errorCase struct {
	status   qwp.Status
	override qwp.Policy // 0: contract default
	want     qwp.Policy
	category qwp.Category
}

func TestErrorCategories(t *testing.T) {
	cases := []errorCase{
		{qwp.StatusSchemaMismatch, 0, qwp.PolicyTerminal, qwp.CategorySchemaMismatch},
		{qwp.StatusParseError, 0, qwp.PolicyTerminal, qwp.CategoryParseError},
		{qwp.StatusSecurityError, 0, qwp.PolicyTerminal, qwp.CategorySecurityError},
		{qwp.StatusWriteError, 0, qwp.PolicyRetriable, qwp.CategoryWriteError},
		{qwp.StatusInternalError, 0, qwp.PolicyRetriable, qwp.CategoryInternalError},
		{qwp.StatusDictionaryGap, 0, qwp.PolicyRetriable, qwp.CategoryDictionaryGap},
		{qwp.StatusNotWritable, 0, qwp.PolicyRetriableOther, qwp.CategoryNotWritable},
		{qwp.Status(0x42), 0, qwp.PolicyRetriable, qwp.CategoryUnknown},
		{qwp.StatusSchemaMismatch, qwp.PolicyRetriable, qwp.PolicyRetriable, qwp.CategorySchemaMismatch},
		{qwp.StatusWriteError, qwp.PolicyTerminal, qwp.PolicyTerminal, qwp.CategoryWriteError},
		{qwp.StatusInternalError, qwp.PolicyRetriableOther, qwp.PolicyRetriableOther, qwp.CategoryInternalError},
		{qwp.StatusNotWritable, qwp.PolicyRetriable, qwp.PolicyRetriable, qwp.CategoryNotWritable},
	}
	for _, tc := range cases {
		name := tc.status.String() + "/default"
		if tc.override != 0 {
			name = tc.status.String() + "/" + tc.override.String()
		}
		t.Run(name, func(t *testing.T) { tc.run(t) })
	}
}

func (tc errorCase) run(t *testing.T) {
	a := newServer(t, qwptest.Options{})
	b := newServer(t, qwptest.Options{})
	q := memQueue(t)
	f := newFeeder(t, q, true)
	f.frames(10, 3)
	rec := &recorder{}
	o := testOptions(rec, a.URL(), b.URL())
	o.MaxInFlight = 1 // frames before the rejected one are acked, none after it is sent
	if tc.override != 0 {
		o.Policies = map[qwp.Category]qwp.Policy{tc.category: tc.override}
	}
	// The 4th message: FSN 4 (the frames start generation 0, so no
	// dictionary catch-up precedes them).
	if err := a.RejectFrame(4, tc.status, "injected "+tc.status.String()); err != nil {
		t.Fatal(err)
	}
	s := startSender(t, q, o)
	if tc.want == qwp.PolicyTerminal {
		te := waitTerminal(t, s)
		if te.Category != tc.category || te.FSN != 4 {
			t.Fatalf("terminal error %v: category %v FSN %d, want %v FSN 4", te, te.Category, te.FSN, tc.category)
		}
		// Frames 1-3 are acked, the rejected one and everything after stay queued.
		if q.AckedFSN() != 3 || q.PublishedFSN() != 10 {
			t.Fatalf("acked %d published %d; want 3, 10 (data kept)", q.AckedFSN(), q.PublishedFSN())
		}
		if dups := exactRows(t, rowIDs(t, a), 9); dups != 0 || b.Accepted() != 0 {
			t.Fatalf("after a terminal error: %d duplicates, %d connections to the second endpoint", dups, b.Accepted())
		}
		f.frames(1, 1)
		time.Sleep(20 * time.Millisecond)
		if a.Frames() != 4 {
			t.Fatalf("a terminal sender kept sending: %d frames", a.Frames())
		}
	} else {
		waitAll(t, s, q)
		// The server committed nothing from the rejected frame on: no duplicates.
		if dups := exactRows(t, combined(rowIDs(t, a), rowIDs(t, b)), 30); dups != 0 {
			t.Fatalf("%d duplicate rows", dups)
		}
		gotOther := b.Accepted() > 0
		if gotOther != (tc.want == qwp.PolicyRetriableOther) {
			t.Fatalf("policy %v: second endpoint connections %d", tc.want, b.Accepted())
		}
		if tc.want == qwp.PolicyRetriable && a.Accepted() < 2 {
			t.Fatalf("retriable: %d connections to the same endpoint, want a reconnect", a.Accepted())
		}
	}
	var found bool
	for _, e := range waitEvents(t, rec, 1) {
		if e.Kind == EventServerError {
			found = true
			if e.Category != tc.category || e.Policy != tc.want || e.FSN != 4 || e.Status != tc.status {
				t.Fatalf("event %+v; want category %v policy %v FSN 4", e, tc.category, tc.want)
			}
		}
	}
	if !found || rec.errCount(tc.category) != 1 {
		t.Fatalf("server error not reported (inbox %v, observer %d)", found, rec.errCount(tc.category))
	}
}

// waitEvents waits for at least n inbox entries.
func waitEvents(t testing.TB, rec *recorder, n int) []Event {
	t.Helper()
	waitFor(t, "error inbox entries", func() bool { return len(rec.Events()) >= n })
	return rec.Events()
}

// OnConnect runs once per connection, after the upgrade and before the first
// frame of that connection reaches the server.
func TestOnConnectRunsBeforeEveryConnectionsFrames(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	q := memQueue(t)
	f := newFeeder(t, q, true)
	f.frames(10, 5) // a backlog, so frames are ready the moment a connection opens
	rec := &recorder{}
	o := testOptions(rec, srv.URL())
	type call struct {
		endpoint  string
		frames    int64 // frames the server had received when the hook ran
		lastClose int64 // frames it had received when the previous connection broke
	}
	var mu sync.Mutex
	var calls []call
	var framesAtDrop atomic.Int64
	o.OnConnect = func(ctx context.Context, endpoint string) error {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, call{endpoint, srv.Frames(), framesAtDrop.Load()})
		return nil
	}
	s := startSender(t, q, o)
	waitAll(t, s, q)
	framesAtDrop.Store(srv.Frames())
	srv.DropConnections()
	f.frames(10, 5)
	waitAll(t, s, q)
	mu.Lock()
	defer mu.Unlock()
	if int64(len(calls)) != srv.Accepted() || len(calls) < 2 {
		t.Fatalf("OnConnect ran %d times for %d connections, want once per connection (>= 2)", len(calls), srv.Accepted())
	}
	for i, c := range calls {
		if c.endpoint != srv.URL() {
			t.Errorf("call %d: endpoint %q", i, c.endpoint)
		}
		if c.frames != c.lastClose {
			t.Errorf("call %d: the server had %d frames, %d more than when the previous connection ended: a frame went out before the hook",
				i, c.frames, c.frames-c.lastClose)
		}
	}
	exactRows(t, rowIDs(t, srv), 100)
}

// A connection that replaces one the sender recycled itself at a generation
// switch skips OnConnect (the same server, a moment later; under series
// churn the switches come every few seconds); one replacing a lost
// connection runs it.
func TestOnConnectSkippedAfterAPlannedRecycle(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	q := memQueue(t)
	f := newFeeder(t, q, true)
	for g := range 3 {
		if g > 0 {
			f.newGeneration()
		}
		f.frames(3, 5)
	}
	var calls atomic.Int64
	o := testOptions(nil, srv.URL())
	o.OnConnect = func(context.Context, string) error {
		calls.Add(1)
		return nil
	}
	s := startSender(t, q, o)
	waitAll(t, s, q)
	if n, conns := calls.Load(), srv.Accepted(); n != 1 || conns != 3 {
		t.Fatalf("OnConnect ran %d times over %d connections; want once over 3 (two generation switches)", n, conns)
	}
	srv.DropConnections()
	f.frames(2, 5)
	waitAll(t, s, q)
	if n := calls.Load(); n != 2 {
		t.Fatalf("OnConnect ran %d times; want a second run after the lost connection", n)
	}
	checkGenerations(t, srv, func(id int64) uint32 { return uint32(min(id/15, 2)) })
}

// An OnConnect error closes the connection unused and reconnects with
// backoff: no frame goes out until the hook succeeds.
func TestOnConnectErrorHoldsFramesAndReconnects(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	q := memQueue(t)
	f := newFeeder(t, q, true)
	f.frames(10, 5)
	rec := &recorder{}
	o := testOptions(rec, srv.URL())
	var calls atomic.Int32
	var framesAtSuccess atomic.Int64
	o.OnConnect = func(ctx context.Context, endpoint string) error {
		if calls.Add(1) <= 2 {
			return errors.New("tables not ready (503)")
		}
		framesAtSuccess.Store(srv.Frames())
		return nil
	}
	s := startSender(t, q, o)
	waitAll(t, s, q)
	if calls.Load() != 3 || srv.Accepted() != 3 {
		t.Fatalf("hook ran %d times over %d connections, want 3 and 3", calls.Load(), srv.Accepted())
	}
	if framesAtSuccess.Load() != 0 {
		t.Fatalf("%d frames reached the server on connections whose hook failed", framesAtSuccess.Load())
	}
	if rec.attempts.Load() < 2 {
		t.Fatalf("%d reconnect attempts counted, want the two refused connections", rec.attempts.Load())
	}
	exactRows(t, rowIDs(t, srv), 50)
}

// TestRecoveredFramesCountAsReplayed: frames a previous process stored and
// this one recovers from the slot are replays when sent; frames appended
// after Start are not.
func TestRecoveredFramesCountAsReplayed(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	dir := t.TempDir()
	q := sfQueue(t, dir, "slot")
	newFeeder(t, q, false).frames(12, 5)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	q = sfQueue(t, dir, "slot")
	t.Cleanup(func() { _ = q.Close() })
	if n := q.Recovery().FramesRecovered; n != 12 {
		t.Fatalf("recovered %d frames, want 12", n)
	}
	rec := &recorder{}
	s := startSender(t, q, testOptions(rec, srv.URL()))
	waitAll(t, s, q)
	newFeeder(t, q, false).frames(3, 5)
	waitAll(t, s, q)
	if rec.sent.Load() != 15 || rec.replayed.Load() != 12 {
		t.Fatalf("sent %d, replayed %d; want 15 sent of which the 12 recovered are replays", rec.sent.Load(), rec.replayed.Load())
	}
}

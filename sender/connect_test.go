package sender

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// TestRefusedCredentialsRecoverWithoutRestart: a server that refuses the
// credentials (401) or the user (403) three times, then accepts (the
// operator fixed it on the server): the sender never stops, counts each
// refusal as a SECURITY_ERROR, reports the episode once with what to fix,
// waits the credentials backoff between rounds (here 40 ms doubling, each
// wait at least half its step: 20 + 40 + 80 ms at least), and every frame
// lands without a restart. On the code before, the first 401 stopped the
// sender for good.
func TestRefusedCredentialsRecoverWithoutRestart(t *testing.T) {
	for _, code := range []int{401, 403} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			srv := newServer(t, qwptest.Options{})
			srv.RefuseUpgrades(3, qwptest.Refusal{Status: code, Message: "bad credentials"})
			q := memQueue(t)
			newFeeder(t, q, true).frames(5, 2)
			rec := &recorder{}
			o := testOptions(rec, srv.URL())
			o.AuthInitialBackoff, o.AuthMaxBackoff = 40*time.Millisecond, time.Second
			began := time.Now()
			s := startSender(t, q, o)
			waitAll(t, s, q)
			if took := time.Since(began); took < 140*time.Millisecond {
				t.Errorf("three refusals were retried within %v; the credentials backoff waits at least 140 ms", took)
			}
			if dups := exactRows(t, rowIDs(t, srv), 10); dups != 0 {
				t.Fatalf("%d duplicates", dups)
			}
			if s.Err() != nil {
				t.Fatalf("the sender latched %v", s.Err())
			}
			if n := rec.errCount(qwp.CategorySecurityError); n != 3 {
				t.Errorf("%d SECURITY_ERROR counted, want one per refusal (3)", n)
			}
			var reports []Event
			for _, e := range rec.Events() {
				if e.Category == qwp.CategorySecurityError {
					reports = append(reports, e)
				}
			}
			if len(reports) != 1 {
				t.Fatalf("%d error-inbox reports of the refusals, want 1 for the episode: %v", len(reports), reports)
			}
			fix := map[int]string{401: "fix username/password or token", 403: "grant it"}[code]
			for _, want := range []string{"bad credentials", fix, "no restart needed", "queued data is kept"} {
				if !strings.Contains(reports[0].Err.Error(), want) {
					t.Errorf("the report %q does not say %q", reports[0].Err, want)
				}
			}
			for _, st := range rec.States() {
				if st.Kind == Terminal {
					t.Fatalf("state %+v: a credentials refusal must not stop the sender", st)
				}
			}
		})
	}
}

// TestRefusedCredentialsTryTheOtherEndpoints: a refusal by one endpoint
// moves on at once to the next (it may hold other users), and the long
// credentials backoff applies only once every endpoint refused.
func TestRefusedCredentialsTryTheOtherEndpoints(t *testing.T) {
	refusing := newServer(t, qwptest.Options{})
	refusing.RefuseUpgrades(1000, qwptest.Refusal{Status: 401, Message: "unknown user"})
	good := newServer(t, qwptest.Options{})
	q := memQueue(t)
	newFeeder(t, q, true).frames(4, 2)
	o := testOptions(&recorder{}, refusing.URL(), good.URL())
	o.AuthInitialBackoff, o.AuthMaxBackoff = time.Minute, time.Minute
	s := startSender(t, q, o)
	waitAllWithin(t, s, q, 10*time.Second)
	if dups := exactRows(t, rowIDs(t, good), 8); dups != 0 {
		t.Fatalf("%d duplicates", dups)
	}
}

func TestRoleRejectMovesToNextEndpoint(t *testing.T) {
	replica := newServer(t, qwptest.Options{})
	replica.RefuseUpgrades(1000, qwptest.Refusal{Status: 421, Role: "REPLICA", Message: "read only"})
	primary := newServer(t, qwptest.Options{})
	q := memQueue(t)
	newFeeder(t, q, true).frames(10, 3)
	rec := &recorder{}
	// Long backoff: if the role reject waited a full backoff the test would
	// crawl; it must move on at once.
	o := testOptions(rec, replica.URL(), primary.URL())
	o.InitialBackoff, o.MaxBackoff = 5*time.Millisecond, time.Minute
	s := startSender(t, q, o)
	waitAll(t, s, q)
	if dups := exactRows(t, rowIDs(t, primary), 30); dups != 0 {
		t.Fatalf("%d duplicates", dups)
	}
	var sawReject bool
	for _, e := range waitEvents(t, rec, 1) {
		sawReject = sawReject || e.Kind == EventConnect && strings.Contains(e.Err.Error(), "REPLICA")
	}
	if !sawReject {
		t.Fatal("the role reject was not reported to the error inbox")
	}
}

func TestVersionMismatchAndTransientFailuresRotate(t *testing.T) {
	// A closed port (transient dial failure), then a server speaking a
	// newer protocol version, then a good server.
	newer := newServer(t, qwptest.Options{})
	p := newProxy(t, newer.Addr(), proxyOptions{version: "2"})
	good := newServer(t, qwptest.Options{})
	q := memQueue(t)
	newFeeder(t, q, false).frames(3, 1)
	rec := &recorder{}
	o := testOptions(rec, "ws://127.0.0.1:1/write/v4", p.URL(), good.URL())
	o.InitialBackoff, o.MaxBackoff = 5*time.Millisecond, time.Minute
	s := startSender(t, q, o)
	waitAll(t, s, q)
	exactRows(t, rowIDs(t, good), 3)
	if newer.RowCount(testTable) != 0 {
		t.Fatal("frames went to a server whose version was refused")
	}
	var sawVersion bool
	for _, e := range waitEvents(t, rec, 1) {
		sawVersion = sawVersion || e.Kind == EventConnect && strings.Contains(e.Err.Error(), "X-QWP-Version")
	}
	if !sawVersion {
		t.Fatalf("the version mismatch was not reported: %+v", rec.Events())
	}
}

func TestCatchUpSplitsToFrameLimit(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	q := memQueue(t)
	f := newFeeder(t, q, true)
	f.frames(4, 10) // the first frame registers all 7 symbols
	o := testOptions(nil, srv.URL())
	o.MaxBatchBytes = 32 // ~3 entries of "g0-sN" per catch-up frame
	s := startSender(t, q, o)
	waitAll(t, s, q)
	// Break the connection; the frames that follow carry no delta and rely
	// on the catch-up, which now takes several deferred frames (OK withheld
	// until the first data frame) that the FSN mapping must skip.
	srv.DropConnections()
	f.frames(4, 10)
	waitAll(t, s, q)
	exactRows(t, rowIDs(t, srv), 80)
	// 3 catch-up frames on the second connection (7 entries, 3+3+1) plus 8
	// data frames; none on the first, whose first frame defines the ids.
	if n := srv.Frames(); n != 3+8 {
		t.Fatalf("server received %d frames, want 11 (a 3-frame catch-up and 8 data frames)", n)
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	srv.RefuseUpgrades(1, qwptest.Refusal{Status: 503, RetryAfter: "1", Message: "restarting"})
	p := newProxy(t, srv.Addr(), proxyOptions{})
	q := memQueue(t)
	newFeeder(t, q, false).frames(2, 1)
	s := startSender(t, q, testOptions(nil, p.URL())) // backoff alone would retry within 5 ms
	waitAll(t, s, q)
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the close frame", func() bool { return p.closes() == 1 })
	at := p.arrivals()
	if len(at) < 2 {
		t.Fatalf("%d connection attempts, want 2", len(at))
	}
	if gap := at[1].Sub(at[0]); gap < time.Second {
		t.Fatalf("second attempt %v after the 503 with Retry-After: 1; want at least 1s", gap)
	}
}

func TestRetryAfterIsCapped(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	srv.RefuseUpgrades(1, qwptest.Refusal{Status: 429, RetryAfter: "3600", Message: "slow down"})
	q := memQueue(t)
	newFeeder(t, q, false).frames(1, 1)
	o := testOptions(nil, srv.URL())
	o.RetryAfterCap = 20 * time.Millisecond
	s := startSender(t, q, o)
	waitAll(t, s, q) // would take an hour without the cap
}

func TestOversizedStoredFrameIsTerminal(t *testing.T) {
	srv := newServer(t, qwptest.Options{RecvBufferSize: 4096})
	q := memQueue(t)
	f := newFeeder(t, q, false)
	f.frames(2, 1)
	f.frames(1, 1000) // ~9 KB of rows: above the advertised 4082 bytes
	f.frames(1, 1)
	size := storedSize(t, q, 3) - 4
	s := startSender(t, q, testOptions(nil, srv.URL()))
	te := waitTerminal(t, s)
	if te.FSN != 3 || !strings.Contains(te.Error(), "4082") || !strings.Contains(te.Error(), strconv.Itoa(size)) {
		t.Fatalf("terminal error %q (FSN %d); want FSN 3 naming %d and 4082 bytes", te, te.FSN, size)
	}
	if q.AckedFSN() != 2 || q.PublishedFSN() != 4 {
		t.Fatalf("acked %d published %d, want 2, 4", q.AckedFSN(), q.PublishedFSN())
	}
	exactRows(t, rowIDs(t, srv), 2)
}

func TestClose1009CountsAsRejection(t *testing.T) {
	srv := newServer(t, qwptest.Options{RecvBufferSize: 4096})
	p := newProxy(t, srv.Addr(), proxyOptions{hideLimit: true})
	q := memQueue(t)
	f := newFeeder(t, q, false)
	f.frames(2, 1)
	f.frames(1, 1000)
	rec := &recorder{}
	s := startSender(t, q, testOptions(rec, p.URL()))
	te := waitTerminal(t, s)
	if te.Category != qwp.CategoryProtocolViolation || te.FSN != 3 {
		t.Fatalf("terminal error %v: category %v FSN %d; want PROTOCOL_VIOLATION on FSN 3", te, te.Category, te.FSN)
	}
	if n := rec.errCount(qwp.CategoryUnknown); n != DefaultMaxFrameRejections {
		t.Fatalf("%d rejections counted, want %d", n, DefaultMaxFrameRejections)
	}
	if q.AckedFSN() != 2 {
		t.Fatalf("acked %d, want 2", q.AckedFSN())
	}
}

func TestPoisonFrameBecomesProtocolViolation(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	q := memQueue(t)
	f := newFeeder(t, q, false)
	f.frames(3, 3)
	// A frame whose id column is a UUID: every replay gets SCHEMA_MISMATCH.
	poison := qwp.NewEncoder(nil, qwp.EncoderOptions{})
	tb, _ := poison.Table(testTable)
	c, _ := tb.Column("id", qwp.TypeUUID)
	tb.UUID(c, 1, 2)
	if err := tb.EndRow(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Append(t.Context(), poison.Finish([]byte{0, 0, 0, 0})); err != nil {
		t.Fatal(err)
	}
	f.frames(2, 3)
	rec := &recorder{}
	o := testOptions(rec, srv.URL())
	o.Policies = map[qwp.Category]qwp.Policy{qwp.CategorySchemaMismatch: qwp.PolicyRetriable}
	s := startSender(t, q, o)
	te := waitTerminal(t, s)
	if te.Category != qwp.CategoryProtocolViolation || te.FSN != 4 || !strings.Contains(te.Error(), "SCHEMA_MISMATCH") {
		t.Fatalf("terminal error %v: category %v FSN %d; want PROTOCOL_VIOLATION on FSN 4 naming the last rejection", te, te.Category, te.FSN)
	}
	if n := rec.errCount(qwp.CategorySchemaMismatch); n != DefaultMaxFrameRejections {
		t.Fatalf("%d rejections before giving up, want %d", n, DefaultMaxFrameRejections)
	}
	if dups := exactRows(t, rowIDs(t, srv), 9); dups != 0 || q.AckedFSN() != 3 || q.PublishedFSN() != 6 {
		t.Fatalf("dups %d acked %d published %d; want 0, 3, 6", dups, q.AckedFSN(), q.PublishedFSN())
	}
	var terminalEvents int
	for _, e := range waitEvents(t, rec, DefaultMaxFrameRejections+1) {
		if e.Kind == EventTerminal && e.Category == qwp.CategoryProtocolViolation && e.FSN == 4 {
			terminalEvents++
		}
	}
	if terminalEvents != 1 {
		t.Fatalf("%d terminal PROTOCOL_VIOLATION events, want 1", terminalEvents)
	}
}

// storedSize is the stored payload size of frame fsn.
func storedSize(t testing.TB, q *sfqueue.Queue, fsn uint64) int {
	t.Helper()
	c := q.NewCursor()
	c.Seek(fsn)
	got, payload, ok, err := c.Next()
	if err != nil || !ok || got != fsn {
		t.Fatalf("reading FSN %d: got %d, %v, %v", fsn, got, ok, err)
	}
	return len(payload)
}

// TestNormalClosureMovesToNextEndpoint: a demoting primary closes with 1000
// instead of answering NOT_WRITABLE; the sender tries the next endpoint.
func TestNormalClosureMovesToNextEndpoint(t *testing.T) {
	up := websocket.Upgrader{}
	demoting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, http.Header{"X-Qwp-Version": {"1"}})
		if err != nil {
			return
		}
		defer ws.Close()
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "demoted"), time.Now().Add(time.Second))
		_, _, _ = ws.ReadMessage() // until the client closes
	}))
	defer demoting.Close()
	good := newServer(t, qwptest.Options{})
	q := memQueue(t)
	newFeeder(t, q, false).frames(3, 1)
	o := testOptions(nil, "ws"+strings.TrimPrefix(demoting.URL, "http")+"/write/v4", good.URL())
	o.InitialBackoff, o.MaxBackoff = time.Millisecond, 2*time.Millisecond
	s := startSender(t, q, o)
	waitAll(t, s, q)
	exactRows(t, rowIDs(t, good), 3)
}

// TestFirstFailureIsCannotConnect: a sender that never connected logs
// "cannot connect", once; one that lost a working connection logs
// "connection lost".
func TestFirstFailureIsCannotConnect(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	o := testOptions(nil, "ws://127.0.0.1:1/write/v4")
	o.Logger = zap.New(core)
	startSender(t, memQueue(t), o)
	deadline := time.Now().Add(waitTimeout)
	for logs.FilterMessageSnippet("cannot connect to questdb").Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no 'cannot connect' line: %v", logs.All())
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // several more attempts
	if n := logs.FilterMessageSnippet("cannot connect").Len(); n != 1 || logs.FilterMessageSnippet("connection lost").Len() != 0 ||
		logs.FilterMessageSnippet("still unreachable").Len() != 0 {
		t.Fatalf("never connected: %d 'cannot connect' lines, %v; want one and no 'connection lost'", n, logs.All())
	}

	srv := newServer(t, qwptest.Options{})
	core2, logs2 := observer.New(zapcore.InfoLevel)
	o = testOptions(nil, srv.URL())
	o.Logger = zap.New(core2)
	q := memQueue(t)
	s := startSender(t, q, o)
	newFeeder(t, q, true).frames(1, 1)
	waitAll(t, s, q)
	srv.Outage(time.Hour)
	for logs2.FilterMessageSnippet("connection lost").Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no 'connection lost' line after an outage: %v", logs2.All())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if logs2.FilterMessageSnippet("cannot connect").Len() != 0 {
		t.Fatalf("a lost connection was logged as 'cannot connect': %v", logs2.All())
	}
}

// TestLongOutageIsLoggedAgain: while an outage lasts, a Warn repeats it
// every OutageLogInterval with its length, attempts and backlog, and only
// then: the attempts between stay at debug level.
func TestLongOutageIsLoggedAgain(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	o := testOptions(nil, "ws://127.0.0.1:1/write/v4")
	o.InitialBackoff, o.MaxBackoff = time.Millisecond, 2*time.Millisecond
	o.OutageLogInterval = 100 * time.Millisecond
	o.Logger = zap.New(core)
	q := memQueue(t)
	newFeeder(t, q, false).frames(3, 1)
	start := time.Now()
	s := startSender(t, q, o)
	deadline := start.Add(waitTimeout)
	for logs.FilterMessageSnippet("still unreachable").Len() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than 3 reminders: %v", logs.FilterMessageSnippet("still unreachable").All())
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = s.Close(context.Background())
	elapsed := time.Since(start)
	reminders := logs.FilterMessageSnippet("still unreachable").All()
	if max := int(elapsed/o.OutageLogInterval) + 1; len(reminders) > max {
		t.Errorf("%d reminders in %v, want at most %d (one per OutageLogInterval)", len(reminders), elapsed, max)
	}
	attempts := logs.FilterMessageSnippet("attempt failed").Len()
	if attempts <= len(reminders) {
		t.Errorf("%d debug attempt lines beside %d reminders: the reminder should be rarer than attempts", attempts, len(reminders))
	}
	prev := int64(0)
	for i, e := range reminders {
		f := e.ContextMap()
		if e.Level != zapcore.WarnLevel || f["queued_bytes"].(int64) <= 0 || f["queue_capacity_bytes"].(int64) <= 0 || f["error"] == nil {
			t.Errorf("reminder %d: %v %v, want Warn with the backlog and the error", i, e.Level, f)
		}
		if a := f["attempts"].(int64); a <= prev {
			t.Errorf("reminder %d: attempts %d after %d", i, a, prev)
		} else {
			prev = a
		}
		if d := f["outage"].(time.Duration); d < time.Duration(i+1)*o.OutageLogInterval {
			t.Errorf("reminder %d: outage %v, want at least %v", i, d, time.Duration(i+1)*o.OutageLogInterval)
		}
	}
}

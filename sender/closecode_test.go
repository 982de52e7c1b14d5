package sender

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// closingServer acknowledges every message with an OK (withheld for a
// deferred one until a later message commits it, as QuestDB does) unless
// refuses says otherwise: such a message gets a WebSocket CLOSE of code
// and reason, the way
// QuestDB refuses a frame it cannot read: pending OKs first, then the
// CLOSE, then it drains what the client still sends until the client
// hangs up (hard: it hangs up at once instead). It closes that way the
// first closes times (-1: always), and acknowledges the frame afterwards.
type closingServer struct {
	refuses     func(msg []byte) bool
	code        int
	reason      string
	hard        bool
	closes      int
	mu          sync.Mutex
	closed      int
	connections atomic.Int64
	srv         *httptest.Server
	wg          sync.WaitGroup
}

func newClosingServer(t *testing.T, refuses func(msg []byte) bool, code int, reason string, closes int) *closingServer {
	t.Helper()
	cs := &closingServer{refuses: refuses, code: code, reason: reason, closes: closes}
	cs.srv = httptest.NewServer(http.HandlerFunc(cs.serve))
	t.Cleanup(func() {
		cs.srv.CloseClientConnections()
		cs.srv.Close()
		cs.wg.Wait()
	})
	return cs
}

// poisoned runs a sender on q against url until it stops, and checks that
// it stopped with PROTOCOL_VIOLATION on frame fsn after exactly
// MaxFrameRejections rejections.
func poisoned(t *testing.T, q *sfqueue.Queue, rec *recorder, url string, fsn uint64) *TerminalError {
	t.Helper()
	s := startSender(t, q, testOptions(rec, url))
	te := waitTerminal(t, s)
	if te.Category != qwp.CategoryProtocolViolation || te.FSN != fsn {
		t.Fatalf("terminal %v: category %v FSN %d; want PROTOCOL_VIOLATION on FSN %d", te, te.Category, te.FSN, fsn)
	}
	if n := rec.errCount(qwp.CategoryUnknown); n != DefaultMaxFrameRejections {
		t.Fatalf("%d rejections counted, want %d", n, DefaultMaxFrameRejections)
	}
	return te
}

// over refuses messages larger than n bytes.
func over(n int) func([]byte) bool { return func(msg []byte) bool { return len(msg) > n } }

func (cs *closingServer) URL() string {
	return "ws" + strings.TrimPrefix(cs.srv.URL, "http") + "/write/v4"
}

// refuse says whether this big frame gets a CLOSE, counting it.
func (cs *closingServer) refuse() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closes >= 0 && cs.closed >= cs.closes {
		return false
	}
	cs.closed++
	return true
}

func (cs *closingServer) serve(w http.ResponseWriter, r *http.Request) {
	cs.wg.Add(1)
	defer cs.wg.Done()
	up := websocket.Upgrader{}
	ws, err := up.Upgrade(w, r, http.Header{qwp.HeaderVersion: {"1"}})
	if err != nil {
		return
	}
	defer ws.Close()
	cs.connections.Add(1)
	ws.SetReadLimit(qwp.MaxMessageBytes)
	for seq := int64(0); ; seq++ {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			return
		}
		if cs.refuses(msg) && cs.refuse() {
			_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(cs.code, cs.reason), time.Now().Add(time.Second))
			if cs.hard {
				return
			}
			_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
			for {
				if _, _, err := ws.NextReader(); err != nil {
					return
				}
			}
		}
		if qwp.Deferred(msg) {
			continue // QuestDB withholds the OK until a frame commits the group
		}
		ok, _ := qwp.AppendOK(nil, seq, nil)
		if err := ws.WriteMessage(websocket.BinaryMessage, ok); err != nil {
			return
		}
	}
}

// TestRefusingCloseIsARejection: a CLOSE whose code refuses what the client
// sent counts against the oldest unacknowledged frame; after
// MaxFrameRejections the sender stops with PROTOCOL_VIOLATION on that frame
// (kept in the queue), each close an error event naming its code and
// reason, each reconnect counted, never an endless replay.
func TestRefusingCloseIsARejection(t *testing.T) {
	for _, tc := range []struct {
		code       int
		reason     string
		hard, syms bool // syms: each reconnect sends a dictionary catch-up first
	}{
		{1002, "fragmented WebSocket frames are not supported", false, false},
		{1002, "fragmented WebSocket frames are not supported", true, false},
		{1002, "fragmented WebSocket frames are not supported", false, true},
		{1003, "text frames are not supported", false, false},
		{1007, "invalid utf-8", false, false},
		{1009, "message too big", false, false},
		{1011, "internal error", false, false},
		{4000, "application defined", false, false},
	} {
		t.Run(fmt.Sprintf("%d/hard=%v/syms=%v", tc.code, tc.hard, tc.syms), func(t *testing.T) {
			cs := newClosingServer(t, over(1000), tc.code, tc.reason, -1)
			cs.hard = tc.hard
			q := memQueue(t)
			f := newFeeder(t, q, tc.syms)
			f.frames(2, 1)
			big := f.frames(1, 1000) // ~9 KB
			f.frames(5, 1)
			rec := &recorder{}
			te := poisoned(t, q, rec, cs.URL(), big)
			if !strings.Contains(te.Error(), fmt.Sprint(tc.code)) || !strings.Contains(te.Error(), tc.reason) {
				t.Fatalf("terminal error %q does not name the close code %d and reason %q", te, tc.code, tc.reason)
			}
			// The inbox is dispatched on its own goroutine.
			waitFor(t, "an error event per close, naming its code", func() bool {
				n := 0
				for _, e := range rec.Events() {
					if e.Kind == EventServerError && e.FSN == big && strings.Contains(e.Err.Error(), fmt.Sprintf("close %d", tc.code)) {
						n++
					}
				}
				return n == DefaultMaxFrameRejections
			})
			if n := rec.attempts.Load(); n != DefaultMaxFrameRejections-1 {
				t.Fatalf("%d reconnects counted, want %d", n, DefaultMaxFrameRejections-1)
			}
			if q.AckedFSN() != big-1 || q.PublishedFSN() != big+5 {
				t.Fatalf("acked %d published %d; want the frames before FSN %d acknowledged and the rest kept", q.AckedFSN(), q.PublishedFSN(), big)
			}
			if n := cs.connections.Load(); n != DefaultMaxFrameRejections {
				t.Fatalf("%d connections, want %d", n, DefaultMaxFrameRejections)
			}
		})
	}
}

// TestRefusedCatchUpCountsAgainstItsFrame: a server that closes on the
// dictionary catch-up may read the data frame pipelined after it or not
// before it does; either way the refusal counts against that data frame,
// so the replays add up to PROTOCOL_VIOLATION instead of alternating
// between two frames forever.
func TestRefusedCatchUpCountsAgainstItsFrame(t *testing.T) {
	cs := newClosingServer(t, qwp.Deferred, 1002, "fragmented WebSocket frames are not supported", -1)
	q := memQueue(t)
	f := newFeeder(t, q, true)
	f.frames(1, 5) // ids 0-4, delivered earlier
	q.Ack(1)
	first := f.frames(1, 5) // its connection registers ids 0-4 first
	f.frames(3, 5)
	poisoned(t, q, &recorder{}, cs.URL(), first)
	if q.AckedFSN() != 1 {
		t.Fatalf("acked %d, want 1", q.AckedFSN())
	}
}

// TestShutdownCloseIsNoRejection: a CLOSE for a reason of the server's own
// (going away, restart, try again later, a demoting primary's 1000) is a
// lost connection: more of them than MaxFrameRejections in a row do not
// stop the sender, which delivers everything once the server takes it.
func TestShutdownCloseIsNoRejection(t *testing.T) {
	for _, code := range []int{1000, 1001, 1012, 1013} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			cs := newClosingServer(t, over(1000), code, "bye", DefaultMaxFrameRejections+2)
			q := memQueue(t)
			f := newFeeder(t, q, false)
			f.frames(2, 1)
			f.frames(1, 1000)
			f.frames(2, 1)
			rec := &recorder{}
			s := startSender(t, q, testOptions(rec, cs.URL()))
			waitAll(t, s, q)
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			if n := rec.errCount(qwp.CategoryUnknown); n != 0 {
				t.Fatalf("%d closes counted as rejections", n)
			}
			if n := cs.connections.Load(); n != DefaultMaxFrameRejections+3 {
				t.Fatalf("%d connections, want %d", n, DefaultMaxFrameRejections+3)
			}
		})
	}
}

// TestCloseIsRefusalCodes: every code a server may send, and those gorilla
// reports for itself, on its side of the line.
func TestCloseIsRefusalCodes(t *testing.T) {
	for code, want := range map[int]bool{
		1000: false, 1001: false, 1005: false, 1006: false, 1012: false, 1013: false, 1014: false, 1015: false,
		1002: true, 1003: true, 1007: true, 1008: true, 1009: true, 1010: true, 1011: true, 3000: true, 4999: true,
	} {
		if got := closeIsRefusal(code); got != want {
			t.Errorf("closeIsRefusal(%d) = %v, want %v", code, got, want)
		}
	}
}

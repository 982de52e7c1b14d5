package qwptest

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// DefaultRecvBufferSize is QuestDB's default http.recv.buffer.size.
const DefaultRecvBufferSize = 2 << 20

// DefaultMaxUncommittedRows is QuestDB's default qwp.max.uncommitted.rows.
const DefaultMaxUncommittedRows = 1_000_000

// wsHeaderMax is the worst-case WebSocket frame header a client sends.
const wsHeaderMax = 14

// Options configure a Server. The zero value is a plain open-source QuestDB
// on 127.0.0.1 with the default 2 MiB receive buffer.
type Options struct {
	// Addr to listen on; "" means 127.0.0.1:0 (an ephemeral loopback port).
	Addr string
	// RecvBufferSize is http.recv.buffer.size: a WebSocket frame whose header
	// and payload exceed it gets CLOSE 1009. X-QWP-Max-Batch-Size is
	// RecvBufferSize-14. 0 means DefaultRecvBufferSize.
	RecvBufferSize int
	// DurableAck grants "X-QWP-Request-Durable-Ack: true" with
	// "X-QWP-Durable-Ack: enabled" (durable acks with status 0x02).
	DurableAck bool
	// DurableTiers grants the tier requests "local" (acks 0x0E),
	// "replicated" and "local,replicated" (acks 0x02), echoed verbatim.
	DurableTiers bool
	// AutoDurable makes every OK immediately followed by a durable ack on
	// connections that negotiated one; otherwise durable acks are sent only
	// by EmitDurableAcks.
	AutoDurable bool
	// Username and Password, or Token, require HTTP basic or bearer
	// authentication on upgrade and /exec; a request without matching
	// credentials gets 401 before any QWP processing, as from QuestDB's HTTP
	// layer. Basic credentials match as open-source QuestDB's
	// StaticHttpAuthenticator matches them: the Authorization header must be
	// exactly "Basic " + base64(user:password). Bearer tokens are QuestDB
	// Enterprise's; open-source QuestDB answers them with 401.
	Username, Password string
	Token              string
	// MaxUncommittedRows is qwp.max.uncommitted.rows: a table whose rows
	// staged by FLAG_DEFER_COMMIT frames reach it is committed early. 0 means
	// DefaultMaxUncommittedRows.
	MaxUncommittedRows int
	// Role, when set, is sent as X-QuestDB-Role in the 101 response.
	Role string
	// CountOnly decodes and validates everything but stores row counts only
	// (Rows returns no rows), for benchmarks with large backlogs.
	CountOnly bool
	// Now is the server clock for rows without a designated timestamp;
	// nil means time.Now.
	Now func() time.Time
	// Logf, when set, receives one line per connection event.
	Logf func(format string, args ...any)
}

// Refusal is how RefuseUpgrades answers an upgrade request.
type Refusal struct {
	Status     int    // HTTP status, e.g. 401, 403, 421, 429, 503
	Role       string // X-QuestDB-Role header (421), "" for none
	RetryAfter string // Retry-After header (503, 429), "" for none
	Message    string // text/plain body
}

// Server is an in-process QWP ingress server reproducing QuestDB's
// behaviour (see the package documentation). All methods are safe for
// concurrent use.
type Server struct {
	opts   Options
	ln     net.Listener
	hs     *http.Server
	served chan struct{}
	store  *store

	frames   atomic.Int64
	maxFrame atomic.Int64 // the largest binary frame's payload, in bytes
	accepted atomic.Int64

	mu           sync.Mutex
	closed       bool
	conns        map[*conn]struct{}
	nextConnID   int
	wg           sync.WaitGroup
	rejects      []*frameFault
	drops        []*frameFault
	stalled      bool
	refusals     []*refusalFault
	execFailures []ExecFailure
	outageUntil  time.Time
}

type frameFault struct {
	remaining int
	status    qwp.Status
	msg       string
	flushAcks bool
}

type refusalFault struct {
	remaining int
	r         Refusal
}

// NewServer starts a server listening on o.Addr.
func NewServer(o Options) (*Server, error) {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.RecvBufferSize == 0 {
		o.RecvBufferSize = DefaultRecvBufferSize
	}
	if o.RecvBufferSize <= wsHeaderMax {
		return nil, fmt.Errorf("qwptest: RecvBufferSize %d must exceed the %d-byte frame header", o.RecvBufferSize, wsHeaderMax)
	}
	if o.MaxUncommittedRows <= 0 {
		o.MaxUncommittedRows = DefaultMaxUncommittedRows
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("qwptest: listen on %s: %w", o.Addr, err)
	}
	s := &Server{
		opts:   o,
		ln:     ln,
		served: make(chan struct{}),
		store:  newStore(o.CountOnly, o.Now),
		conns:  map[*conn]struct{}{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/write/v4", s.serveQWP)
	mux.HandleFunc("/api/v4/write", s.serveQWP)
	mux.HandleFunc("/exec", s.serveExec)
	mux.Handle("/", s.AdminHandler())
	s.hs = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.served)
		_ = s.hs.Serve(ln) // returns http.ErrServerClosed on Close
	}()
	return s, nil
}

// Addr is the host:port the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the ws:// URL of the /write/v4 endpoint.
func (s *Server) URL() string { return "ws://" + s.Addr() + "/write/v4" }

// MaxBatchSize is the X-QWP-Max-Batch-Size the server advertises.
func (s *Server) MaxBatchSize() int {
	return min(s.opts.RecvBufferSize-wsHeaderMax, qwp.MaxPayloadBytes)
}

// Close stops listening, drops every connection (rolling back their
// uncommitted rows) and waits for all of the server's goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	err := s.hs.Close()
	<-s.served
	s.DropConnections()
	s.wg.Wait()
	return err
}

func (s *Server) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf(format, args...)
	}
}

func (s *Server) serveQWP(w http.ResponseWriter, r *http.Request) {
	if rf := s.takeRefusal(); rf != nil {
		if rf.Role != "" {
			w.Header().Set("X-QuestDB-Role", rf.Role)
			w.Header().Set("Connection", "close")
		}
		if rf.RetryAfter != "" {
			w.Header().Set("Retry-After", rf.RetryAfter)
		}
		http.Error(w, rf.Message, rf.Status)
		return
	}
	if !s.authorized(r) {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	if status, reason := handshakeRefusal(r.Header); status != 0 {
		refuseHandshake(w, status, reason)
		return
	}
	extra := []string{"X-QWP-Version: 1"}
	var durable qwp.Status
	granted, status := s.grantDurable(r.Header.Get("X-QWP-Request-Durable-Ack"))
	if granted != "" {
		extra = append(extra, "X-QWP-Durable-Ack: "+granted)
		durable = status
	}
	if s.opts.Role != "" {
		extra = append(extra, "X-QuestDB-Role: "+s.opts.Role)
	}
	extra = append(extra, "X-QWP-Max-Batch-Size: "+strconv.Itoa(s.MaxBatchSize()))
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		http.Error(w, "server closed", http.StatusServiceUnavailable)
		return
	}
	s.wg.Add(1)
	s.nextConnID++
	id := s.nextConnID
	s.mu.Unlock()
	defer s.wg.Done()
	nc, br, err := hijack(w)
	if err != nil {
		s.logf("conn %d: upgrade from %s failed: %v", id, r.RemoteAddr, err)
		return
	}
	c := newConn(s, nc, br, id, durable)
	s.mu.Lock()
	// An Outage that began while this upgrade was under way did not see the
	// connection in s.conns: drop it here, unanswered, as a restarting
	// server would.
	if s.closed || time.Now().Before(s.outageUntil) {
		s.mu.Unlock()
		_ = nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	// Counted before the 101 is written: a client that has its answer
	// finds the connection in Accepted, whatever it does next.
	s.accepted.Add(1)
	if err := switchProtocols(nc, r, extra); err != nil {
		s.logf("conn %d: upgrade from %s failed: %v", id, r.RemoteAddr, err)
		c.kill()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		return
	}
	s.logf("conn %d: open from %s (client %q, durable ack %q)", id, r.RemoteAddr, r.Header.Get("X-QWP-Client-Id"), granted)
	c.run()
	s.logf("conn %d: closed after %d frames", id, c.seq)
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// authorized checks the credentials Options require, if any.
func (s *Server) authorized(r *http.Request) bool {
	o := s.opts
	if o.Username == "" && o.Token == "" {
		return true
	}
	h := r.Header.Get("Authorization")
	if o.Username != "" {
		basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(o.Username+":"+o.Password))
		if subtle.ConstantTimeCompare([]byte(h), []byte(basic)) == 1 {
			return true
		}
	}
	token, ok := strings.CutPrefix(h, "Bearer ")
	return ok && o.Token != "" && subtle.ConstantTimeCompare([]byte(token), []byte(o.Token)) == 1
}

// grantDurable answers a durable-ack request: the response header value and
// the status of the durable-ack frames, or "" when not granted.
func (s *Server) grantDurable(req string) (string, qwp.Status) {
	switch v := strings.TrimSpace(req); {
	case strings.EqualFold(v, "true") && s.opts.DurableAck:
		return "enabled", qwp.StatusDurableAck
	case v == "local" && s.opts.DurableTiers:
		return v, qwp.StatusLocalDurableAck
	case (v == "replicated" || v == "local,replicated") && s.opts.DurableTiers:
		return v, qwp.StatusDurableAck
	}
	return "", 0
}

// inOutage reports whether an Outage is in progress.
func (s *Server) inOutage() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Before(s.outageUntil)
}

func (s *Server) takeRefusal() *Refusal {
	if s.inOutage() {
		return &Refusal{Status: http.StatusServiceUnavailable, Message: "server restarting"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.refusals) == 0 {
		return nil
	}
	rf := s.refusals[0]
	rf.remaining--
	if rf.remaining <= 0 {
		s.refusals = s.refusals[1:]
	}
	r := rf.r
	return &r
}

// frameFaults counts one received binary frame of size bytes (its payload)
// against the armed faults and returns the ones it triggers.
func (s *Server) frameFaults(size int) (reject, drop *frameFault) {
	s.frames.Add(1)
	for n := int64(size); ; {
		m := s.maxFrame.Load()
		if n <= m || s.maxFrame.CompareAndSwap(m, n) {
			break
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fire := func(list []*frameFault) ([]*frameFault, *frameFault) {
		var hit *frameFault
		kept := list[:0]
		for _, f := range list {
			f.remaining--
			if f.remaining <= 0 && hit == nil {
				hit = f
				continue
			}
			kept = append(kept, f)
		}
		return kept, hit
	}
	s.rejects, reject = fire(s.rejects)
	s.drops, drop = fire(s.drops)
	return reject, drop
}

// RejectFrame makes the n-th binary frame the server receives from now on
// (n >= 1, counted across all connections) fail with status and msg instead
// of being processed, exactly like a real refusal: pending OKs first, then
// the error frame, and the connection is poisoned. status must be an error
// status.
func (s *Server) RejectFrame(n int, status qwp.Status, msg string) error {
	if !status.IsError() {
		return fmt.Errorf("qwptest: RejectFrame status %s is not an error status", status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejects = append(s.rejects, &frameFault{remaining: n, status: status, msg: msg})
	return nil
}

// DropAfter makes the connection that receives the n-th binary frame from
// now on (n >= 1, counted across all connections) process that frame and
// then drop the TCP connection without a CLOSE frame. With flushAcks its
// pending OKs are sent first; without, they are lost (the rows stay
// committed, as when a server crashes between commit and reply).
func (s *Server) DropAfter(n int, flushAcks bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drops = append(s.drops, &frameFault{remaining: n, flushAcks: flushAcks})
}

// StallAcks holds every OK, error and durable-ack frame (frames are still
// read and committed) until ReleaseAcks.
func (s *Server) StallAcks() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stalled = true
}

// ReleaseAcks sends what StallAcks held: one cumulative OK per connection,
// then any held error frame.
func (s *Server) ReleaseAcks() {
	s.mu.Lock()
	s.stalled = false
	s.mu.Unlock()
	s.wakeAll()
}

func (s *Server) isStalled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stalled
}

// RefuseUpgrades answers the next k upgrade requests with r instead of
// upgrading.
func (s *Server) RefuseUpgrades(k int, r Refusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refusals = append(s.refusals, &refusalFault{remaining: k, r: r})
}

// Outage simulates a QuestDB restart: every connection is dropped without a
// CLOSE frame (uncommitted rows are rolled back) and upgrades get 503 for d.
// Committed tables are kept. Each call sets a new end, so Outage(0) ends an
// outage early.
func (s *Server) Outage(d time.Duration) {
	s.mu.Lock()
	s.outageUntil = time.Now().Add(d)
	s.mu.Unlock()
	s.logf("outage for %s", d)
	s.DropConnections()
}

// DropConnections drops every open connection without a CLOSE frame.
func (s *Server) DropConnections() {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.kill()
	}
}

// EmitDurableAcks makes everything committed so far durable and has every
// connection that negotiated durable acks send one for the tables whose
// durable seqTxn advanced.
func (s *Server) EmitDurableAcks() {
	s.store.makeDurable(nil)
	s.wakeAll()
}

func (s *Server) wakeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// Connections is the number of open connections.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Accepted is the number of upgrades accepted since the start, counted
// before the 101 is written (so also one whose 101 could not be written).
func (s *Server) Accepted() int64 { return s.accepted.Load() }

// Frames is the number of binary frames received since the start.
func (s *Server) Frames() int64 { return s.frames.Load() }

// MaxFrameBytes is the payload size of the largest binary frame received
// since the start: one QWP message, whatever its size (0 before the first).
func (s *Server) MaxFrameBytes() int64 { return s.maxFrame.Load() }

// Tables maps each table's canonical name to its committed row count.
func (s *Server) Tables() map[string]int64 {
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	out := make(map[string]int64, len(s.store.tables))
	for _, t := range s.store.tables {
		out[t.name] = t.rowCount
	}
	return out
}

// TableNames lists the tables' canonical names, sorted.
func (s *Server) TableNames() []string {
	tables := s.Tables()
	names := make([]string, 0, len(tables))
	for n := range tables {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// RowCount is the committed row count of a table (name case-insensitive),
// 0 when it does not exist.
func (s *Server) RowCount(table string) int64 {
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	if t := s.store.tables[strings.ToLower(table)]; t != nil {
		return t.rowCount
	}
	return 0
}

// Rows copies a table's columns and committed rows; ok is false when the
// table does not exist.
func (s *Server) Rows(table string) (td TableData, ok bool) {
	return s.rowsLimit(table, -1)
}

func (s *Server) rowsLimit(table string, limit int) (TableData, bool) {
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	t := s.store.tables[strings.ToLower(table)]
	if t == nil {
		return TableData{}, false
	}
	return t.snapshot(limit), true
}

// Snapshot copies every table, keyed by canonical name.
func (s *Server) Snapshot() map[string]TableData {
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	out := make(map[string]TableData, len(s.store.tables))
	for _, t := range s.store.tables {
		out[t.name] = t.snapshot(-1)
	}
	return out
}

// WaitRows waits until table has at least n committed rows or ctx ends.
func (s *Server) WaitRows(ctx context.Context, table string, n int64) error {
	for {
		s.store.mu.Lock()
		changed := s.store.changed
		var have int64
		if t := s.store.tables[strings.ToLower(table)]; t != nil {
			have = t.rowCount
		}
		s.store.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("qwptest: table %q has %d of %d rows: %w", table, have, n, ctx.Err())
		}
	}
}

package sender

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

const testTable = "t"

// longTests reports whether the long variants run (QDB_LONG=1, not -short).
func longTests() bool { return os.Getenv("QDB_LONG") == "1" && !testing.Short() }

// waitTimeout bounds every wait of a test; generous for -race on 2 cores.
const waitTimeout = 30 * time.Second

// feeder encodes test rows into frames and appends them to a queue the way
// the exporter's writer does: dictionary entries first, then the frame with
// its 4-byte generation prefix. Every row has a unique id; sym is a SYMBOL
// derived from the id, so the server's value proves the dictionary was
// registered right.
type feeder struct {
	t      testing.TB
	q      *sfqueue.Queue
	gen    uint32
	dict   *qwp.MemDict
	enc    *qwp.Encoder
	nextID int64
	syms   bool // rows carry a SYMBOL column
	buf    []byte
}

func newFeeder(t testing.TB, q *sfqueue.Queue, syms bool) *feeder {
	f := &feeder{t: t, q: q, syms: syms, dict: qwp.NewMemDict()}
	f.enc = qwp.NewEncoder(f.dict, qwp.EncoderOptions{DeltaSymbolDict: true, Gorilla: true})
	return f
}

// symFor is the symbol value row id carries in generation gen.
func symFor(gen uint32, id int64) string { return fmt.Sprintf("g%d-s%d", gen, id%testSyms) }

// encode builds one frame of n rows and returns the stored payload.
func (f *feeder) encode(n int) []byte {
	f.t.Helper()
	tb, err := f.enc.Table(testTable)
	if err != nil {
		f.t.Fatal(err)
	}
	idc, err := tb.Column("id", qwp.TypeLong)
	if err != nil {
		f.t.Fatal(err)
	}
	ts, err := tb.Column("", qwp.TypeTimestampNanos)
	if err != nil {
		f.t.Fatal(err)
	}
	var sym qwp.Col
	if f.syms {
		if sym, err = tb.Column("sym", qwp.TypeSymbol); err != nil {
			f.t.Fatal(err)
		}
	}
	for range n {
		id := f.nextID
		tb.Long(idc, id)
		tb.TimestampNanos(ts, 1_700_000_000_000_000_000+id)
		if f.syms {
			tb.SymbolString(sym, symFor(f.gen, id))
		}
		if err := tb.EndRow(); err != nil {
			f.t.Fatalf("row %d: %v", id, err)
		}
		f.nextID++
	}
	from, to := f.enc.SymbolRange()
	if to > from {
		entries := make([][]byte, 0, to-from)
		for id := from; id < to; id++ {
			entries = append(entries, append([]byte(nil), f.dict.Entry(id)...))
		}
		if err := f.q.AddSymbols(f.gen, from, entries); err != nil {
			f.t.Fatal(err)
		}
	}
	f.buf = binary.LittleEndian.AppendUint32(f.buf[:0], f.gen)
	return f.enc.Finish(f.buf)
}

// frames appends k frames of n rows each, each recording its n rows as the
// writer does, and returns the last FSN.
func (f *feeder) frames(k, n int) uint64 {
	f.t.Helper()
	var last uint64
	for range k {
		fsn, err := f.q.AppendBatchItems(context.Background(), [][]byte{f.encode(n)}, []uint32{uint32(n)})
		if err != nil {
			f.t.Fatal(err)
		}
		last = fsn
	}
	return last
}

// newGeneration starts the next dictionary generation with an empty dictionary.
func (f *feeder) newGeneration() {
	f.gen++
	f.dict = qwp.NewMemDict()
	f.enc.Reset(f.dict)
}

// rowIDs counts each id on the server and checks every stored symbol.
func rowIDs(t testing.TB, srv *qwptest.Server) map[int64]int {
	t.Helper()
	td, ok := srv.Rows(testTable)
	if !ok {
		return map[int64]int{}
	}
	col := map[string]int{}
	for i, c := range td.Columns {
		col[c.Name] = i
	}
	counts := make(map[int64]int, len(td.Rows))
	for _, r := range td.Rows {
		id := r[col["id"]].(int64)
		counts[id]++
		if i, ok := col["sym"]; ok && r[i] != nil {
			s := r[i].(string)
			if !strings.HasSuffix(s, fmt.Sprintf("-s%d", id%testSyms)) {
				t.Errorf("row %d carries symbol %q: the dictionary was registered wrong", id, s)
			}
		}
	}
	return counts
}

// testSyms is the number of distinct symbol values per generation.
const testSyms = 7

// exactRows checks that the ids [0, n) — and nothing else — reached the
// server at least once, and returns the number of duplicate rows.
func exactRows(t testing.TB, counts map[int64]int, n int64) (dups int) {
	t.Helper()
	for id := range n {
		if counts[id] == 0 {
			t.Errorf("row %d never reached the server", id)
		}
	}
	for id, c := range counts {
		if id < 0 || id >= n {
			t.Errorf("unexpected row %d on the server", id)
		}
		dups += c - 1
	}
	return dups
}

// combined sums the id counts of several servers.
func combined(ms ...map[int64]int) map[int64]int {
	out := map[int64]int{}
	for _, m := range ms {
		for k, v := range m {
			out[k] += v
		}
	}
	return out
}

func newServer(t testing.TB, o qwptest.Options) *qwptest.Server {
	t.Helper()
	srv, err := qwptest.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

func memQueue(t testing.TB) *sfqueue.Queue {
	t.Helper()
	q, err := sfqueue.Open(sfqueue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

func sfQueue(t testing.TB, dir, id string) *sfqueue.Queue {
	t.Helper()
	q, err := sfqueue.Open(sfqueue.Options{Dir: dir, SenderID: id, MaxSegmentBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// recorder captures events, states and telemetry for assertions.
type recorder struct {
	NopObserver
	mu          sync.Mutex
	events      []Event
	states      []State
	sent        atomic.Int64
	replayed    atomic.Int64
	acked       atomic.Int64
	maxIn       atomic.Int64
	attempts    atomic.Int64
	success     atomic.Int64
	dictSize    atomic.Int64
	oks         atomic.Int64    // OKs that covered a data frame
	drainers    [3]atomic.Int64 // started, succeeded, failed
	interrupted atomic.Int64
	errs        map[qwp.Category]int
}

func (r *recorder) FramesSent(n int)     { r.sent.Add(int64(n)) }
func (r *recorder) FramesReplayed(n int) { r.replayed.Add(int64(n)) }
func (r *recorder) FramesAcked(n int)    { r.acked.Add(int64(n)) }
func (r *recorder) InFlight(n int) {
	for {
		m := r.maxIn.Load()
		if int64(n) <= m || r.maxIn.CompareAndSwap(m, int64(n)) {
			return
		}
	}
}
func (r *recorder) AckLatency(time.Duration) { r.oks.Add(1) }
func (r *recorder) ReconnectAttempt()        { r.attempts.Add(1) }
func (r *recorder) ReconnectSuccess()        { r.success.Add(1) }
func (r *recorder) DictionarySize(n int)     { r.dictSize.Store(int64(n)) }
func (r *recorder) DrainerStarted()          { r.drainers[0].Add(1) }
func (r *recorder) DrainerSucceeded()        { r.drainers[1].Add(1) }
func (r *recorder) DrainerFailed()           { r.drainers[2].Add(1) }
func (r *recorder) DrainerInterrupted()      { r.interrupted.Add(1) }
func (r *recorder) ServerError(c qwp.Category) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.errs == nil {
		r.errs = map[qwp.Category]int{}
	}
	r.errs[c]++
}

func (r *recorder) event(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) state(s State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.states = append(r.states, s)
}

func (r *recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

func (r *recorder) States() []State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]State(nil), r.states...)
}

func (r *recorder) errCount(c qwp.Category) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errs[c]
}

// wire fills o's callbacks with r's.
func (r *recorder) wire(o *Options) {
	o.Observer = r
	o.ErrorHandler = r.event
	o.OnState = r.state
}

// testOptions are fast-retrying options for tests.
func testOptions(r *recorder, endpoints ...string) Options {
	o := Options{
		Endpoints:      endpoints,
		InitialBackoff: 5 * time.Millisecond,
		MaxBackoff:     50 * time.Millisecond,
	}
	if r != nil {
		r.wire(&o)
	}
	return o
}

// startSender starts a sender whose Close is registered as cleanup.
func startSender(t testing.TB, q *sfqueue.Queue, o Options) *Sender {
	t.Helper()
	s, err := New(q, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

// waitAll waits until everything published is acknowledged.
func waitAll(t testing.TB, s *Sender, q *sfqueue.Queue) {
	t.Helper()
	waitAllWithin(t, s, q, waitTimeout)
}

func waitAllWithin(t testing.TB, s *Sender, q *sfqueue.Queue, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := s.WaitAcked(ctx, q.PublishedFSN()); err != nil {
		t.Fatalf("waiting for FSN %d (acked %d): %v", q.PublishedFSN(), q.AckedFSN(), err)
	}
}

// waitFor polls cond (for conditions no channel announces).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitTerminal waits for the sender's terminal error.
func waitTerminal(t testing.TB, s *Sender) *TerminalError {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	err := s.WaitAcked(ctx, ^uint64(0))
	te, ok := err.(*TerminalError)
	if !ok {
		t.Fatalf("want a terminal error, got %v", err)
	}
	return te
}

// proxyOptions say how a proxy alters upgrade responses.
type proxyOptions struct {
	hideLimit bool   // drop X-QWP-Max-Batch-Size (to provoke CLOSE 1009)
	version   string // replace X-QWP-Version with this, when set
	record    bool   // keep the client's binary messages (proxy.messages)
}

// clientMessage is a binary message the client sent, unmasked, on the
// proxy's conn-th connection (from 0).
type clientMessage struct {
	conn int
	msg  []byte
}

// proxy is a TCP proxy in front of a test server that records when each
// connection arrived, counts the client's WebSocket frames by opcode and can
// alter the upgrade response's QWP headers.
type proxy struct {
	ln         net.Listener
	target     string
	o          proxyOptions
	mu         sync.Mutex
	accepted   []time.Time
	opcodes    [16]atomic.Int64 // client WebSocket frames by opcode
	fragments  atomic.Int64     // client frames with FIN clear
	largest    atomic.Int64     // the client's largest frame payload
	wg         sync.WaitGroup
	conns      map[net.Conn]struct{}
	closedDown bool
	sent       []clientMessage // with record
}

func newProxy(t testing.TB, target string, o proxyOptions) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, o: o, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) URL() string { return "ws://" + p.ln.Addr().String() + "/write/v4" }

// messages are the client's binary messages so far (proxyOptions.record).
func (p *proxy) messages() []clientMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]clientMessage(nil), p.sent...)
}

func (p *proxy) arrivals() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.accepted...)
}

// pings and closes count the client's PING and CLOSE frames.
func (p *proxy) pings() int64  { return p.opcodes[0x9].Load() }
func (p *proxy) closes() int64 { return p.opcodes[0x8].Load() }

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closedDown {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepted = append(p.accepted, time.Now())
		idx := len(p.accepted) - 1
		p.mu.Unlock()
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c) || !p.track(up) {
			c.Close()
			up.Close()
			continue
		}
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			p.clientToServer(c, up, idx)
			up.Close()
		}()
		go func() {
			defer p.wg.Done()
			p.serverToClient(up, c)
			c.Close()
		}()
	}
}

// clientToServer forwards the upgrade request, then parses WebSocket frames
// to count them by opcode, notice fragments and, with record, keep the
// binary messages of connection idx.
func (p *proxy) clientToServer(c, up net.Conn, idx int) {
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		if _, err := io.WriteString(up, line); err != nil {
			return
		}
		if line == "\r\n" {
			break
		}
	}
	hdr := make([]byte, 14)
	for {
		if _, err := io.ReadFull(r, hdr[:2]); err != nil {
			return
		}
		n := uint64(hdr[1] & 0x7f)
		h := 2
		switch n {
		case 126:
			h += 2
		case 127:
			h += 8
		}
		if hdr[1]&0x80 != 0 {
			h += 4
		}
		if _, err := io.ReadFull(r, hdr[2:h]); err != nil {
			return
		}
		switch n {
		case 126:
			n = uint64(binary.BigEndian.Uint16(hdr[2:]))
		case 127:
			n = binary.BigEndian.Uint64(hdr[2:])
		}
		p.opcodes[hdr[0]&0x0f].Add(1)
		if hdr[0]&0x80 == 0 {
			p.fragments.Add(1)
		}
		if int64(n) > p.largest.Load() {
			p.largest.Store(int64(n))
		}
		if _, err := up.Write(hdr[:h]); err != nil {
			return
		}
		if p.o.record && hdr[0]&0x0f == 0x2 && hdr[1]&0x80 != 0 {
			payload := make([]byte, n)
			if _, err := io.ReadFull(r, payload); err != nil {
				return
			}
			if _, err := up.Write(payload); err != nil {
				return
			}
			key := hdr[h-4 : h]
			for i := range payload {
				payload[i] ^= key[i%4]
			}
			p.mu.Lock()
			p.sent = append(p.sent, clientMessage{conn: idx, msg: payload})
			p.mu.Unlock()
			continue
		}
		if _, err := io.CopyN(up, r, int64(n)); err != nil {
			return
		}
	}
}

func (p *proxy) serverToClient(up, c net.Conn) {
	r := bufio.NewReader(up)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		lower := strings.ToLower(line)
		if p.o.hideLimit && strings.HasPrefix(lower, "x-qwp-max-batch-size:") {
			continue
		}
		if p.o.version != "" && strings.HasPrefix(lower, "x-qwp-version:") {
			line = "X-Qwp-Version: " + p.o.version + "\r\n"
		}
		if _, err := io.WriteString(c, line); err != nil {
			return
		}
		if line == "\r\n" {
			break
		}
	}
	_, _ = io.Copy(c, r)
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closedDown = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

package sender

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/zap"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// closeFrameTimeout bounds the courtesy close frame on a connection's end.
const closeFrameTimeout = time.Second

// terminalDrainTimeout bounds how long a sender that found an unsendable
// frame waits for the acks of the frames sent before it.
const terminalDrainTimeout = 5 * time.Second

// ErrClosed is returned by WaitAcked once the sender has been closed.
var ErrClosed = errors.New("sender: closed")

// TerminalError is the error behind the Terminal state: the sender stopped
// sending and every unacknowledged frame stays in the queue.
type TerminalError struct {
	// Category is the server's category, PROTOCOL_VIOLATION for a poison
	// frame, PARSE_ERROR for a stored
	// frame no server can take, NONE for other client-side conditions (an
	// unconfirmed durable ack, an unreadable queue).
	Category qwp.Category
	FSN      uint64 // the frame concerned, 0 when none
	Err      error
}

func (e *TerminalError) Error() string { return e.Err.Error() }
func (e *TerminalError) Unwrap() error { return e.Err }

// Sender is the I/O loop of one queue (one slot): it streams the queue's
// frames to the server in FSN order over one WebSocket connection at a
// time, advances the queue's ack watermark from the server's acks, and
// reconnects and replays after every failure. See the package doc.
type Sender struct {
	q   *sfqueue.Queue
	o   Options
	log *zap.Logger
	obs Observer
	box *inbox

	ctx          context.Context // cancelled by Close: stops the loop
	cancel       context.CancelFunc
	loopDone     chan struct{}
	dispatchStop chan struct{}
	dispatchDone chan struct{}

	lifeMu  sync.Mutex // Start/Close ordering
	started bool
	closed  bool

	mu      sync.Mutex
	ackCh   chan struct{} // closed and replaced when ackedFSN advances or the sender stops
	termErr *TerminalError
	stopped bool // the loop has exited

	// Owned by the I/O goroutine.
	cursor *sfqueue.Cursor
	// piece is the buffer a stored frame is checked and sent through
	// (Cursor.NextStream, qwp.Conn.WriteMessageFrom): no frame-sized buffer.
	piece  []byte
	bo     *backoff
	authBo *backoff // waits after every endpoint refused the credentials
	// authRefused: the server refuses the credentials since the last
	// connection; the refusal was reported once, later ones are not.
	authRefused bool
	endpoint    int    // index into o.Endpoints
	acked       uint64 // ackedFSN as this sender last set it
	// maxSent is the highest FSN sent, to count replays; it starts at the
	// frames recovered from the slot, which an earlier process stored and
	// sending now is a replay too.
	maxSent uint64
	// everConnected: a connection was established since Start, so a
	// failure is a lost connection rather than a first one never made.
	everConnected bool

	rejectFSN    uint64 // frame of the last rejection (0: a catch-up frame)
	rejects      int    // consecutive rejections of rejectFSN with no ack of it
	attempts     int    // failed attempts since the last connection
	outageStart  time.Time
	outageLogged time.Time // when the current outage was last logged

	// beforeCatchUp, set only by tests, runs on the I/O goroutine when the
	// cursor has read a connection's first frame and its generation's
	// dictionary is not yet opened: where an eviction can take the frame and
	// its generation away.
	beforeCatchUp func(gen uint32, fsn uint64)
}

// pieceBytes is the size of the pieces a stored frame is checked and sent
// in: a few reads and writes per frame of the default max_batch_bytes, and
// an eighth of its RAM.
const pieceBytes = 128 << 10

// New validates o and prepares a sender for q; nothing runs until Start.
func New(q *sfqueue.Queue, o Options) (*Sender, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sender{
		q: q, o: o, log: o.Logger, obs: o.Observer,
		box:          newInbox(o.ErrorInboxCapacity),
		ctx:          ctx,
		cancel:       cancel,
		loopDone:     make(chan struct{}),
		dispatchStop: make(chan struct{}),
		dispatchDone: make(chan struct{}),
		ackCh:        make(chan struct{}),
		bo:           newBackoff(o.InitialBackoff, o.MaxBackoff),
		authBo:       newBackoff(o.AuthInitialBackoff, o.AuthMaxBackoff),
	}
	if s.o.ErrorHandler == nil {
		s.o.ErrorHandler = s.logEvent
	}
	return s, nil
}

// Start launches the I/O and error-dispatch goroutines. It never blocks on
// the network: connecting is the loop's first step. Data loss reported by the
// queue's recovery goes to the error inbox.
func (s *Sender) Start() error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.started {
		return errors.New("sender: Start called twice")
	}
	s.started = true
	if dl := s.q.Recovery().Unreplayable; dl != nil {
		s.box.put(Event{Time: time.Now(), Kind: EventDataLoss, Category: qwp.CategoryDataLoss, Err: dl})
	}
	s.acked = s.q.AckedFSN()
	s.maxSent = s.q.Recovery().PublishedFSN
	s.cursor = s.q.NewCursor()
	s.piece = make([]byte, pieceBytes)
	go func() {
		defer close(s.dispatchDone)
		s.box.dispatch(s.dispatchStop, s.o.ErrorHandler, func(n uint64) {
			s.log.Warn("error inbox overflowed; oldest entries dropped", zap.Uint64("dropped", n))
		})
	}()
	go s.run()
	return nil
}

// Err returns the terminal error once the sender has stopped sending, else
// nil. The exporter fails later calls with a retryable error while it is set.
func (s *Sender) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.termErr == nil {
		return nil
	}
	return s.termErr
}

// DroppedErrors is how many error-inbox entries overflow discarded.
func (s *Sender) DroppedErrors() uint64 { return s.box.dropped.Load() }

// WaitAcked returns once the queue's ackedFSN reaches fsn (durably, with
// durable acks). Network failures never fail it; only ctx, a terminal error
// or Close do.
func (s *Sender) WaitAcked(ctx context.Context, fsn uint64) error {
	for {
		s.mu.Lock()
		ch, term, stopped := s.ackCh, s.termErr, s.stopped
		s.mu.Unlock()
		if s.q.AckedFSN() >= fsn {
			return nil
		}
		switch {
		case term != nil:
			return term
		case stopped:
			return ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close waits up to CloseFlushTimeout (and ctx) for every frame published so
// far to be acknowledged, then stops the loop, sends a WebSocket close frame
// and returns once no goroutine of the sender is left. Frames still
// unacknowledged are reported in the returned error: in SF mode they stay in
// the slot for the next start; in memory-only mode they are lost.
func (s *Sender) Close(ctx context.Context) error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if !s.started {
		s.cancel()
		return nil
	}
	var err error
	if s.o.CloseFlushTimeout > 0 {
		target := s.q.PublishedFSN()
		wctx, cancel := context.WithTimeout(ctx, s.o.CloseFlushTimeout)
		werr := s.WaitAcked(wctx, target)
		cancel()
		if werr != nil {
			err = s.unflushed(werr)
		}
	}
	s.cancel()
	<-s.loopDone
	close(s.dispatchStop)
	<-s.dispatchDone
	return err
}

// unflushed describes the frames Close leaves behind.
func (s *Sender) unflushed(cause error) error {
	acked, published := s.q.AckedFSN(), s.q.PublishedFSN()
	if acked >= published {
		return nil
	}
	where := "memory-only mode: they are lost"
	if s.o.SlotDir != "" {
		where = "they stay in " + s.o.SlotDir + " and are replayed by the next sender that opens it"
	}
	// Not logged: the owner knows what the frames are to its operator.
	return fmt.Errorf("sender: close: %d frames (FSN %d..%d) not acknowledged (%v); %s",
		published-acked, acked+1, published, cause, where)
}

func (s *Sender) logEvent(e Event) {
	s.log.Error("questdb sender error", zap.Stringer("kind", e.Kind), zap.Stringer("category", e.Category),
		zap.Uint64("fsn", e.FSN), zap.String("endpoint", e.Endpoint), zap.Error(e.Err))
}

// wake applies update under s.mu and wakes every WaitAcked.
func (s *Sender) wake(update func()) {
	s.mu.Lock()
	update()
	close(s.ackCh)
	s.ackCh = make(chan struct{})
	s.mu.Unlock()
}

func (s *Sender) state(st State) {
	if s.o.OnState != nil {
		s.o.OnState(st)
	}
}

// ack advances ackedFSN to fsn (never backwards).
func (s *Sender) ack(fsn uint64) {
	if fsn <= s.acked {
		return
	}
	s.obs.FramesAcked(int(fsn - s.acked))
	s.acked = fsn
	s.q.Ack(fsn)
	s.bo.reset()
	s.wake(func() {})
}

// fail latches a terminal error: the loop stops sending, frames stay queued.
// State and inbox learn of it before waiters wake.
func (s *Sender) fail(te *TerminalError, endpoint string) {
	now := time.Now()
	s.box.put(Event{Time: now, Kind: EventTerminal, Category: te.Category, FSN: te.FSN, Endpoint: endpoint, Err: te})
	s.q.SetConsumerState(sfqueue.ConsumerState{})
	s.state(State{Kind: Terminal, Reason: te.Error(), Endpoint: endpoint, Attempts: s.attempts, Since: now, Err: te})
	s.wake(func() { s.termErr = te })
}

// lost records a failed attempt or a lost connection.
func (s *Sender) lost(err error, endpoint string) {
	s.attempts++
	now := time.Now()
	switch {
	case s.attempts == 1:
		s.outageStart, s.outageLogged = now, now
		msg := "questdb connection lost; reconnecting"
		if !s.everConnected {
			msg = "cannot connect to questdb; retrying (data is queued meanwhile)"
		}
		s.log.Warn(msg, zap.String("endpoint", endpoint), zap.Error(err))
	case now.Sub(s.outageLogged) >= s.o.OutageLogInterval:
		s.outageLogged = now
		st := s.q.Stats()
		s.log.Warn("questdb still unreachable; data is queued", zap.String("endpoint", endpoint),
			zap.Duration("outage", now.Sub(s.outageStart)), zap.Int("attempts", s.attempts),
			zap.Int64("queued_bytes", st.UnackedBytes), zap.Int64("queue_capacity_bytes", st.CapacityBytes),
			zap.Error(err))
	default:
		s.log.Debug("questdb connection attempt failed", zap.String("endpoint", endpoint),
			zap.Int("attempts", s.attempts), zap.Error(err))
	}
	s.q.SetConsumerState(sfqueue.ConsumerState{Reconnecting: true, Attempts: s.attempts, OutageStart: s.outageStart})
	s.state(State{Kind: Reconnecting, Reason: err.Error(), Endpoint: endpoint, Attempts: s.attempts, Since: s.outageStart, Err: err})
}

func (s *Sender) connected(c *conn) {
	if s.attempts > 0 {
		s.log.Info("questdb connection restored", zap.String("endpoint", c.endpoint),
			zap.Int("attempts", s.attempts), zap.Duration("outage", time.Since(s.outageStart)))
	}
	s.attempts = 0
	s.authRefused = false
	s.authBo.reset()
	s.q.SetConsumerState(sfqueue.ConsumerState{})
	s.state(State{Kind: Connected, Endpoint: c.endpoint, Since: c.opened})
}

// sleep waits d unless the sender closes first.
func (s *Sender) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

func (s *Sender) rotate() { s.endpoint = (s.endpoint + 1) % len(s.o.Endpoints) }

func (s *Sender) dialOptions(url string) qwp.DialOptions {
	return qwp.DialOptions{
		URL: url, TLS: s.o.TLS, Username: s.o.Username, Password: s.o.Password, Token: s.o.Token,
		ClientID: s.o.ClientID, DurableAck: s.o.DurableAck, HandshakeTimeout: s.o.HandshakeTimeout,
	}
}

// run is the I/O goroutine: connect, serve, and decide what comes next.
func (s *Sender) run() {
	defer func() {
		s.wake(func() { s.stopped = true })
		close(s.loopDone)
	}()
	s.state(State{Kind: Connecting, Endpoint: s.o.Endpoints[0], Since: time.Now()})
	rejectsThisRound := 0 // endpoints that refused us by role or version in a row
	// recycled is the server the last connection reached when it ended in
	// a planned recycle (a reason of the sender's own: a generation
	// switch, a broken chain of delta sections, evicted frames), the zero
	// serverID otherwise. A replacement that reaches the same server
	// skips the hook, which ran for the first connection of such a chain:
	// the server was there a moment ago, as it is between two frames of
	// one connection. One that reaches another (another endpoint, another
	// address, another 101) runs it: the tables may not exist there, and
	// rows would go into auto-created tables without dedup keys.
	var recycled serverID
	for s.ctx.Err() == nil {
		url := s.o.Endpoints[s.endpoint]
		after := recycled
		recycled = serverID{}
		if s.everConnected || s.attempts > 0 {
			s.obs.ReconnectAttempt()
		}
		qc, err := qwp.Dial(s.ctx, s.dialOptions(url))
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			delay, te, cause := s.dialFailed(err, url, &rejectsThisRound)
			if te != nil {
				s.fail(te, url)
				<-s.ctx.Done()
				return
			}
			s.lost(cause, url)
			if !s.sleep(delay) {
				return
			}
			continue
		}
		rejectsThisRound = 0
		if s.everConnected || s.attempts > 0 {
			s.obs.ReconnectSuccess()
		}
		s.everConnected = true
		server := serverOf(url, qc)
		if s.o.OnConnect != nil && !s.sameServer(after, server) {
			if err := s.o.OnConnect(s.ctx, url); err != nil {
				// The hook could not finish its work for a passing reason:
				// no frame goes out on this connection; retry with a new one.
				_ = qc.WS.Close()
				if s.ctx.Err() != nil {
					return
				}
				s.lost(fmt.Errorf("sender: before the first frame on %s: %w", url, err), url)
				if !s.sleep(s.bo.next()) {
					return
				}
				continue
			}
		}
		c := newConn(s.ctx, qc, url)
		s.connected(c)
		end := s.serve(c)
		c.close()
		if s.ctx.Err() != nil {
			return // closing: whatever broke, it was us
		}
		if time.Since(c.opened) >= s.o.MaxBackoff {
			// A connection that lived this long was healthy; start over.
			s.bo.reset()
		}
		switch end.kind {
		case endStop:
			return
		case endTerminal:
			s.fail(end.term, url)
			<-s.ctx.Done()
			return
		case endRecycle:
			recycled = server
			continue
		case endRetriableOther:
			s.rotate()
		}
		s.lost(end.err, url)
		if !s.sleep(s.bo.next()) {
			return
		}
	}
}

// serverID is what tells QuestDB servers apart from the client: the
// endpoint dialled, the address its name resolved to (the socket's peer),
// and what the server announced in its 101. QuestDB sends no identity of
// its own; servers behind one load balancer or proxy address, configured
// alike, look the same.
type serverID struct {
	endpoint, addr string
	role           string
	version        int
	maxBatchSize   int
	durableAck     string
}

func serverOf(endpoint string, qc *qwp.Conn) serverID {
	return serverID{
		endpoint: endpoint, addr: qc.WS.RemoteAddr().String(),
		role: qc.Role, version: qc.Version, maxBatchSize: qc.MaxBatchSize, durableAck: qc.DurableAck,
	}
}

// sameServer reports whether a connection to server replaces, at once,
// one to recycled that the sender recycled itself (recycled is not the
// zero serverID) and reaches the same server.
func (s *Sender) sameServer(recycled, server serverID) bool {
	if recycled == (serverID{}) {
		return false
	}
	if recycled != server {
		s.log.Debug("the connection replacing a recycled one reached another server; running the connect hook",
			zap.String("endpoint", server.endpoint), zap.String("address", server.addr),
			zap.String("recycled_endpoint", recycled.endpoint), zap.String("recycled_address", recycled.addr))
		return false
	}
	return true
}

// dialFailed classifies a failed upgrade: the delay before the next
// attempt and the failure to report, or a terminal error.
func (s *Sender) dialFailed(err error, url string, rejectsThisRound *int) (delay time.Duration, te *TerminalError, cause error) {
	var ue *qwp.UpgradeError
	if !errors.As(err, &ue) {
		s.rotate()
		return s.bo.next(), nil, err
	}
	switch ue.Kind {
	case qwp.UpgradeTerminal:
		if ue.StatusCode == http.StatusUnauthorized || ue.StatusCode == http.StatusForbidden {
			delay, cause := s.credentialsRefused(err, ue.StatusCode, url, rejectsThisRound)
			return delay, nil, cause
		}
		// An unconfirmed durable ack is no server error.
		s.box.put(Event{Time: time.Now(), Kind: EventConnect, Category: qwp.CategoryNone, Endpoint: url, Err: err})
		return 0, &TerminalError{Category: qwp.CategoryNone, Err: fmt.Errorf(
			"sender: connecting to %s: %w; fix the cause and restart the collector: the sender does not retry this, and the queued data is kept", url, err)}, nil
	case qwp.UpgradeRoleReject, qwp.UpgradeVersionMismatch:
		// Another endpoint may serve us right away; back off only once
		// every endpoint has refused.
		s.box.put(Event{Time: time.Now(), Kind: EventConnect, Endpoint: url, Err: err})
		return s.nextEndpointDelay(rejectsThisRound, s.bo.next), nil, err
	}
	s.rotate()
	if ue.RetryAfter > 0 {
		return retryAfterDelay(ue.RetryAfter, s.o.RetryAfterCap, s.bo.next()), nil, err
	}
	return s.bo.next(), nil, err
}

// nextEndpointDelay moves to the next endpoint after a refusal that another
// endpoint may not share: at once (jittered) until every endpoint of the
// round refused, then after wait().
func (s *Sender) nextEndpointDelay(rejectsThisRound *int, wait func() time.Duration) time.Duration {
	s.rotate()
	*rejectsThisRound++
	if *rejectsThisRound < len(s.o.Endpoints) {
		return s.bo.jitter(s.o.InitialBackoff)
	}
	*rejectsThisRound = 0
	return wait()
}

// credentialsRefused handles a 401 or 403 on the upgrade. It is not
// terminal: the fix is often on the server's side (a user created, a grant,
// a token renewed), and a sender that stopped would need a restart after
// it. It is counted as a SECURITY_ERROR each time, reported once per
// episode (until a connection succeeds) with what to fix, and retried on
// the other endpoints and then after the long credentials backoff (30 s
// doubling to 5 min by default), so a refused sender knocks a few times an
// hour, not ten times a second. The data stays queued meanwhile.
func (s *Sender) credentialsRefused(err error, code int, url string, rejectsThisRound *int) (time.Duration, error) {
	s.obs.ServerError(qwp.CategorySecurityError)
	what := "the server refused the credentials: fix username/password or token (on the server, or in the configuration and restart)"
	if code == http.StatusForbidden {
		what = "the user may not write over QWP: grant it on the server (or use another user)"
	}
	cause := fmt.Errorf("sender: connecting to %s: %w; %s; retrying every %v to %v until accepted, no restart needed for a fix on the server; the queued data is kept",
		url, err, what, s.o.AuthInitialBackoff, s.o.AuthMaxBackoff)
	if !s.authRefused {
		s.authRefused = true
		s.box.put(Event{Time: time.Now(), Kind: EventConnect, Category: qwp.CategorySecurityError, Endpoint: url, Err: cause})
	}
	return s.nextEndpointDelay(rejectsThisRound, s.authBo.nextLong), cause
}

type endKind int

const (
	endStop           endKind = iota // the sender is closing
	endBroken                        // transport failure: back off, same endpoint
	endRetriable                     // retriable server error: back off, same endpoint
	endRetriableOther                // back off, next endpoint
	endRecycle                       // planned: reconnect at once
	endTerminal
)

type end struct {
	kind endKind
	err  error
	term *TerminalError
}

func terminal(cat qwp.Category, fsn uint64, err error) end {
	return end{kind: endTerminal, term: &TerminalError{Category: cat, FSN: fsn, Err: err}}
}

// serve runs one connection until it ends.
func (s *Sender) serve(c *conn) end {
	s.acked = max(s.acked, s.q.AckedFSN()) // eviction may have moved it
	c.win = newWindow(s.acked+1, s.o.MaxInFlight)
	s.cursor.Seek(s.acked + 1)
	var keepalive <-chan time.Time
	if s.o.DurableAck != "" {
		c.stash = newDurableStash()
		t := time.NewTicker(s.o.DurableAckKeepalive)
		defer t.Stop()
		keepalive = t.C
	}
	var resps []qwp.Response
	var drainTimeout <-chan time.Time
	for {
		var readErr error
		resps, readErr = c.take(resps[:0])
		for i := range resps {
			if e, done := s.handle(c, &resps[i]); done {
				return e
			}
		}
		if readErr != nil {
			return s.readFailed(c, readErr)
		}
		if c.stopping != nil {
			// A frame cannot be sent: collect the acks of those before it
			// so that they are not replayed, then stop.
			if c.win.inFlight() == 0 && (c.stash == nil || !c.stash.pending()) {
				return *c.stopping
			}
		} else if e, done := s.send(c); done {
			if e.kind == endBroken {
				return s.writeFailed(c, e)
			}
			if e.kind != endTerminal || c.win.inFlight() == 0 && (c.stash == nil || !c.stash.pending()) {
				return e
			}
			c.stopping = &e
			if _, broken := s.commitTail(c); broken {
				return e // the acks cannot come either
			}
			t := time.NewTimer(terminalDrainTimeout)
			defer t.Stop()
			drainTimeout = t.C
		}
		if c.recycle != "" && s.acked+1 >= c.win.nextFSN() {
			s.log.Debug("recycling the connection", zap.String("reason", c.recycle))
			return end{kind: endRecycle}
		}
		select {
		case <-s.ctx.Done():
			return end{kind: endStop}
		case <-s.q.Published():
		case <-c.wake:
		case <-drainTimeout:
			return *c.stopping
		case <-keepalive:
			if c.stash.pending() && time.Since(c.lastSend) >= s.o.DurableAckKeepalive {
				if err := c.ping(); err != nil {
					return end{kind: endBroken, err: fmt.Errorf("sender: keepalive ping to %s: %w", c.endpoint, err)}
				}
			}
		}
	}
}

// send writes frames while the in-flight limit allows.
func (s *Sender) send(c *conn) (end, bool) {
	for c.recycle == "" && c.win.inFlight() < s.o.MaxInFlight {
		fsn, st, ok, err := s.cursor.NextStream(s.piece)
		if err != nil {
			return terminal(qwp.CategoryNone, c.win.nextFSN(), fmt.Errorf("sender: reading the frame after FSN %d from the queue: %w", c.win.nextFSN()-1, err)), true
		}
		if !ok {
			// The queue's end: a deferred last frame would keep its OK,
			// and with it Close and WaitAcked, waiting for a frame that
			// may never come.
			return s.commitTail(c)
		}
		if want := c.win.nextFSN(); fsn != want {
			if c.win.sent > c.win.catchUp {
				// Eviction removed frames under us: the wire mapping cannot
				// skip FSNs, so start a fresh window. Debug: a queue at its
				// cap evicts for nearly every append, and the queue's owner
				// reports the evictions (rate-limited).
				s.log.Debug("queue skipped frames (evicted); recycling the connection", zap.Uint64("expected_fsn", want), zap.Uint64("fsn", fsn))
				return end{kind: endRecycle}, true
			}
			c.win.fsnAtZero = fsn
		}
		if st.Len() < 4+qwp.HeaderSize {
			return terminal(qwp.CategoryParseError, fsn, fmt.Errorf("sender: stored frame FSN %d is %d bytes, shorter than the 4-byte generation prefix and the %d-byte QWP header", fsn, st.Len(), qwp.HeaderSize)), true
		}
		// The message is read from the queue while it is sent; head is
		// its start (header and delta section counts), msgLen its length.
		gen, head, msgLen := binary.LittleEndian.Uint32(st.Head()), st.Head()[4:], st.Len()-4
		if e, done := s.oversize(c, fsn, msgLen); done {
			return e, true
		}
		// A message whose delta section cannot be read is sent as it is
		// (the server judges it) and registers nothing.
		deltaStart, deltaEnd, deltaErr := qwp.DeltaDictRangeHead(head, msgLen)
		switch {
		case !c.genKnown:
			if e, done := s.catchUp(c, gen, fsn, deltaStart, deltaEnd, deltaErr); done {
				return e, true
			}
		case gen != c.gen:
			// The connection recycles once everything sent is
			// acknowledged; a deferred last frame never would be.
			s.cursor.Seek(fsn)
			c.recycle = fmt.Sprintf("dictionary generation switch from %d", c.gen)
			return s.commitTail(c)
		case deltaErr == nil && deltaStart > c.known:
			// The chain of delta sections is broken: ids [known, start)
			// are in the queue's dictionary but defined by no frame sent
			// here (entries an earlier process stored after its last
			// frame). A new connection's catch-up registers them.
			s.cursor.Seek(fsn)
			c.recycle = fmt.Sprintf("frame FSN %d defines symbol ids from %d; this connection registered %d", fsn, deltaStart, c.known)
			return s.commitTail(c)
		}
		if err := c.writeStored(st, s.piece); err != nil {
			if errors.Is(err, sfqueue.ErrFrameGone) {
				// Evicted while being sent (the socket is closed if part
				// of it left): go on from the queue's new start at once,
				// as after any eviction; the connection was not lost.
				s.log.Debug("frame evicted while being sent; reconnecting", zap.Uint64("fsn", fsn))
				return end{kind: endRecycle}, true
			}
			return end{kind: endBroken, err: fmt.Errorf("sender: sending frame FSN %d to %s: %w", fsn, c.endpoint, err)}, true
		}
		if deltaErr == nil {
			c.known = max(c.known, deltaEnd)
		}
		now := time.Now()
		c.win.sendData(now)
		c.lastSend = now
		c.tailDeferred = qwp.Deferred(head)
		s.obs.FramesSent(1)
		if fsn <= s.maxSent {
			s.obs.FramesReplayed(1)
		} else {
			s.maxSent = fsn
		}
		s.obs.InFlight(c.win.inFlight())
	}
	return end{}, false
}

// oversize checks that a stored frame can leave as one WebSocket frame:
// QuestDB closes the connection on a fragmented message and on one over its
// receive buffer, so an oversized frame could only be replayed forever. A
// frame over the server's limit is refused for good. One over MaxBatchBytes
// (stored under a larger setting) but within the server's limit is sent as
// it is: a message is streamed from the queue, with no buffer sized to
// MaxBatchBytes for it to outgrow.
func (s *Sender) oversize(c *conn, fsn uint64, msgLen int) (end, bool) {
	if limit := c.qc.MaxBatchSize; limit > 0 && msgLen > limit {
		return terminal(qwp.CategoryParseError, fsn, fmt.Errorf(
			"sender: stored frame FSN %d is %d bytes, larger than the %d bytes the server at %s accepts (X-QWP-Max-Batch-Size); frames on disk are never re-split: raise the server's http.recv.buffer.size or move the slot aside",
			fsn, msgLen, limit, c.endpoint)), true
	}
	if msgLen > qwp.MaxMessageBytes {
		return terminal(qwp.CategoryParseError, fsn, fmt.Errorf(
			"sender: stored frame FSN %d is %d bytes, larger than the %d bytes any QuestDB server accepts; frames on disk are never re-split: move the slot aside",
			fsn, msgLen, qwp.MaxMessageBytes)), true
	}
	return end{}, false
}

// commitTail sends a bare commit when the last frame sent was deferred
// (FLAG_DEFER_COMMIT): the server withholds the OK of a deferred group until
// a later frame commits it, and at a generation boundary, at the queue's end
// or before stopping no later frame may come. Slots written before the
// writer closed such groups itself end generations on deferred dictionary
// frames.
func (s *Sender) commitTail(c *conn) (end, bool) {
	if !c.tailDeferred {
		return end{}, false
	}
	c.tailDeferred = false
	c.commitBuf = qwp.AppendCommit(c.commitBuf[:0])
	if err := c.write(c.commitBuf); err != nil {
		return end{kind: endBroken, err: fmt.Errorf("sender: sending a commit to %s: %w", c.endpoint, err)}, true
	}
	c.win.sendCommit()
	c.lastSend = time.Now()
	s.obs.InFlight(c.win.inFlight())
	return end{}, false
}

// catchUp registers on a new connection, before its first data frame
// (FSN fsn, delta section [deltaStart, deltaEnd)), the ids of generation gen
// that the frame uses without defining them: [0, deltaStart). The frames
// after it define their own: each frame's delta section starts where the
// previous stored frame's ended (the writer's rowless catch-up frames after
// a failed group keep the chain), and send recycles the connection where a
// frame's starts past what the connection registered. So a connection
// starting a fresh generation registers nothing, and at a generation switch
// the entries the queued frames define again do not cross the wire twice.
// A frame whose delta section cannot be read gets the whole generation.
// The entries are streamed from the queue one catch-up frame at a time: a
// full generation never sits in RAM.
func (s *Sender) catchUp(c *conn, gen uint32, fsn uint64, deltaStart, deltaEnd int, deltaErr error) (end, bool) {
	c.gen, c.genKnown, c.known = gen, true, 0
	if s.beforeCatchUp != nil {
		s.beforeCatchUp(gen, fsn)
	}
	if deltaErr == nil && deltaStart == 0 {
		c.known = deltaEnd
		s.obs.DictionarySize(0)
		return end{}, false
	}
	dict, err := s.q.OpenSymbols(gen)
	if err != nil {
		return terminal(qwp.CategoryNone, fsn, fmt.Errorf("sender: reading symbol dictionary generation %d: %w", gen, err)), true
	}
	defer dict.Close()
	need := deltaStart
	if deltaErr != nil {
		need = dict.Len()
	}
	if need > dict.Len() {
		// The queue deletes a generation once no unacknowledged frame uses
		// it: this frame was evicted after the cursor read it.
		if s.q.AckedFSN() >= fsn {
			s.log.Debug("first frame evicted during the catch-up; recycling", zap.Uint64("fsn", fsn))
			return end{kind: endRecycle}, true
		}
		return terminal(qwp.CategoryParseError, fsn, fmt.Errorf(
			"sender: stored frame FSN %d references symbol ids up to %d of dictionary generation %d, which holds %d: the slot's dictionary file lost entries",
			fsn, need-1, gen, dict.Len())), true
	}
	s.obs.DictionarySize(need)
	limit := min(s.o.MaxBatchBytes, c.qc.MessageLimit())
	var writeErr error
	readErr, err := streamDictionary(dict, need, limit, func(frame []byte) error {
		if writeErr = c.write(frame); writeErr != nil {
			return writeErr
		}
		c.win.sendCatchUp()
		c.lastSend = time.Now()
		return nil
	})
	switch {
	case writeErr != nil:
		return end{kind: endBroken, err: fmt.Errorf("sender: sending the symbol dictionary to %s: %w", c.endpoint, writeErr)}, true
	case readErr != nil:
		return terminal(qwp.CategoryNone, fsn, fmt.Errorf("sender: reading symbol dictionary generation %d: %w", gen, readErr)), true
	case err != nil:
		return terminal(qwp.CategoryParseError, 0, fmt.Errorf("sender: symbol dictionary generation %d cannot be registered: %w", gen, err)), true
	}
	c.known = need
	if deltaErr == nil {
		c.known = max(need, deltaEnd)
	}
	return end{}, false
}

// streamDictionary passes dict's first n entries (n <= dict.Len()) to emit
// as catch-up frames of at most limit bytes, one frame in memory at a time.
// readErr is a dictionary that could not be read; err is an entry no frame
// can carry or emit's error.
func streamDictionary(dict *sfqueue.SymbolReader, n, limit int, emit func(frame []byte) error) (readErr, err error) {
	enc := qwp.NewCatchUpEncoder(0, limit, emit)
	for range n {
		e, err := dict.Next()
		if err != nil {
			return err, nil
		}
		if err := enc.Add(e); err != nil {
			return nil, err
		}
	}
	return nil, enc.Flush()
}

// handle applies one server response.
func (s *Sender) handle(c *conn, r *qwp.Response) (end, bool) {
	switch r.Status {
	case qwp.StatusOK:
		fsn, latency, err := c.win.ok(r.Seq, time.Now())
		if err != nil {
			return end{kind: endBroken, err: fmt.Errorf("sender: %s: %w", c.endpoint, err)}, true
		}
		if fsn == 0 {
			return end{}, false
		}
		s.obs.AckLatency(latency)
		s.obs.InFlight(c.win.inFlight())
		if s.rejects > 0 && (s.rejectFSN == 0 || fsn >= s.rejectFSN) {
			s.rejects = 0 // the frame rejected before has now been accepted
		}
		if c.stash == nil {
			s.ack(fsn)
			return end{}, false
		}
		c.stash.add(fsn, r.Tables)
	case qwp.StatusDurableAck, qwp.StatusLocalDurableAck:
		if c.stash == nil || r.Status != s.trimStatus() {
			// Progress of a tier that does not drive trim.
			s.log.Debug("durable ack progress", zap.Stringer("status", r.Status), zap.Int("tables", len(r.Tables)))
			return end{}, false
		}
		c.stash.durableAck(r.Tables)
	default:
		return s.rejected(c, r), true
	}
	s.ack(c.stash.take())
	return end{}, false
}

// trimStatus is the durable-ack status that drives trim.
func (s *Sender) trimStatus() qwp.Status {
	if s.o.DurableAck == "local" {
		return qwp.StatusLocalDurableAck
	}
	return qwp.StatusDurableAck
}

// rejected applies the policy of an error response. The server ignores every
// later frame on the connection, so the connection always ends.
func (s *Sender) rejected(c *conn, r *qwp.Response) end {
	fsn, isData, err := c.win.rejected(r.Seq)
	if err != nil {
		return end{kind: endBroken, err: fmt.Errorf("sender: %s: %w", c.endpoint, err)}
	}
	cat := r.Status.Category()
	policy := s.o.policy(cat)
	what := "a frame without rows (symbol dictionary or commit)"
	if isData {
		what = fmt.Sprintf("frame FSN %d", fsn)
	}
	err = fmt.Errorf("sender: %s rejected %s: %v: %s", c.endpoint, what, r.Status, r.Message)
	s.obs.ServerError(cat)
	s.box.put(Event{Time: time.Now(), Kind: EventServerError, Category: cat, Status: r.Status, Policy: policy, FSN: fsn, Endpoint: c.endpoint, Err: err})
	return s.rejection(fsn, cat, policy, err)
}

// rejection applies policy to a rejection of frame fsn (0: dictionary) and
// runs the poison-frame detector.
func (s *Sender) rejection(fsn uint64, cat qwp.Category, policy qwp.Policy, err error) end {
	if policy == qwp.PolicyTerminal {
		return terminal(cat, fsn, err)
	}
	if s.rejects > 0 && s.rejectFSN == fsn {
		s.rejects++
	} else {
		s.rejectFSN, s.rejects = fsn, 1
	}
	if s.rejects >= s.o.MaxFrameRejections {
		return terminal(qwp.CategoryProtocolViolation, fsn, fmt.Errorf(
			"sender: PROTOCOL_VIOLATION: the same frame was rejected %d times in a row with no acknowledgement in between, so replaying it cannot succeed; last: %w",
			s.rejects, err))
	}
	if policy == qwp.PolicyRetriableOther {
		return end{kind: endRetriableOther, err: err}
	}
	return end{kind: endRetriable, err: err}
}

// readFailed handles the end of the read side. A CLOSE frame that is not a
// shutdown or a role change (closeIsRefusal) is the server refusing the
// oldest unacknowledged frame, and counts as its rejection: replaying the
// frame that provoked it could only provoke it again.
func (s *Sender) readFailed(c *conn, cause error) end {
	if s.ctx.Err() != nil {
		return end{kind: endStop}
	}
	err := fmt.Errorf("sender: connection to %s: %w", c.endpoint, cause)
	if websocket.IsCloseError(cause, websocket.CloseNormalClosure) {
		// How a demoting primary says it no longer takes writes (the
		// reserved NOT_WRITABLE): try the next endpoint.
		return end{kind: endRetriableOther, err: err}
	}
	var ce *websocket.CloseError
	if !errors.As(cause, &ce) || !closeIsRefusal(ce.Code) || c.win.okSeq+1 >= c.win.sent {
		return end{kind: endBroken, err: err}
	}
	// A CLOSE names no frame, and with frames pipelined it may answer any
	// of those after the last OK: the oldest data frame without an OK, or
	// a catch-up frame or commit sent before or after it. The rejection is
	// counted against that data frame (the next one to send when only
	// frames without rows are out), the same frame on every replay of the
	// same sequence, so the poison-frame detector sees one frame refused
	// again and again, whichever of them the server choked on.
	fsn := c.win.fsnAtZero + uint64(c.win.okData)
	what := fmt.Sprintf("frame FSN %d", fsn)
	if c.win.nextFSN() == fsn {
		what = fmt.Sprintf("a frame without rows (symbol dictionary or commit) before frame FSN %d", fsn)
	}
	err = fmt.Errorf("sender: %s refused %s by closing the connection: %w", c.endpoint, what, cause)
	s.obs.ServerError(qwp.CategoryUnknown)
	s.box.put(Event{Time: time.Now(), Kind: EventServerError, Category: qwp.CategoryUnknown, Policy: qwp.PolicyRetriable, FSN: fsn, Endpoint: c.endpoint, Err: err})
	return s.rejection(fsn, qwp.CategoryUnknown, qwp.PolicyRetriable, err)
}

// closeIsRefusal says whether a server's CLOSE code refuses what the client
// sent (QuestDB: 1002 for a fragmented or malformed frame, 1003 for a TEXT
// frame, 1009 for one over its receive buffer; 1007, 1008, 1010, 1011 and
// unassigned codes likewise) rather than end the connection for a reason of
// the server's own: 1000 (normal, a demoting primary's), 1001 (going away),
// 1012 (restart), 1013 (try again later), 1014 (bad gateway), or 1005, 1006
// and 1015, which gorilla reports for a close without a code, a connection
// lost without a CLOSE and a TLS failure.
func closeIsRefusal(code int) bool {
	switch code {
	case websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseServiceRestart,
		websocket.CloseTryAgainLater, 1014, websocket.CloseNoStatusReceived,
		websocket.CloseAbnormalClosure, websocket.CloseTLSHandshake:
		return false
	}
	return true
}

// writeFailed handles a failed write. A write fails when the server closed
// the connection, and its CLOSE frame, which says why, may not have been
// read yet: give the reader a moment, so that a refusal is counted as one
// and not mistaken for a lost connection replayed forever.
func (s *Sender) writeFailed(c *conn, e end) end {
	t := time.NewTimer(closeFrameTimeout)
	defer t.Stop()
	select {
	case <-c.readerDone:
	case <-t.C:
		return e
	case <-s.ctx.Done():
		return end{kind: endStop}
	}
	resps, readErr := c.take(nil)
	for i := range resps {
		if e, done := s.handle(c, &resps[i]); done {
			return e
		}
	}
	var ce *websocket.CloseError
	if errors.As(readErr, &ce) {
		return s.readFailed(c, readErr)
	}
	return e
}

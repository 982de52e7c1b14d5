package qwp

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// HTTP headers of the upgrade handshake.
const (
	HeaderMaxVersion        = "X-QWP-Max-Version"         // request: highest version spoken
	HeaderClientID          = "X-QWP-Client-Id"           // request: free-form client name
	HeaderRequestDurableAck = "X-QWP-Request-Durable-Ack" // request: durable-ack opt-in
	HeaderVersion           = "X-QWP-Version"             // response: negotiated version
	HeaderMaxBatchSize      = "X-QWP-Max-Batch-Size"      // response: per-message byte cap
	HeaderDurableAck        = "X-QWP-Durable-Ack"         // response: durable-ack confirmation
	HeaderRole              = "X-QuestDB-Role"            // response: the node's replication role
)

// Durable-ack tiers a client may request (DialOptions.DurableAck).
const (
	DurableAckNone            = ""
	DurableAckLocal           = "local"
	DurableAckReplicated      = "replicated"
	DurableAckLocalReplicated = "local,replicated"
)

// MaxResponseBytes is the read limit set on connections. The largest
// legitimate response is an OK naming every table a connection may write
// (10,000 by default) with 127-character names: about 5 MiB at 4 bytes per
// character, so this leaves room and still bounds a misbehaving peer.
const MaxResponseBytes = 8 << 20

// DefaultHandshakeTimeout applies when DialOptions.HandshakeTimeout is 0.
const DefaultHandshakeTimeout = 10 * time.Second

// MaxMessageBytes is the largest message a Conn can write: the most a
// QuestDB server advertises in X-QWP-Max-Batch-Size (its receive buffer
// less the frame header, capped at 16 MiB) and the largest payload_length
// it accepts.
const MaxMessageBytes = MaxPayloadBytes

// DialOptions configure Dial.
type DialOptions struct {
	// URL is ws://host:port/write/v4 or wss://…; the path is used as given.
	URL string
	// TLS configures wss connections; nil means the defaults.
	TLS *tls.Config
	// Username and Password select HTTP basic auth; Token selects a bearer
	// token. At most one of the two may be set.
	Username, Password string
	Token              string
	// ClientID is sent as X-QWP-Client-Id when not empty.
	ClientID string
	// DurableAck is one of the DurableAck* tiers. Dial fails unless the
	// server confirms every tier asked for.
	DurableAck string
	// HandshakeTimeout bounds the upgrade; 0 means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
}

// Conn is an upgraded QWP connection.
type Conn struct {
	// WS is the WebSocket connection, for reading, closing and its
	// handlers. Messages, control frames and write deadlines go through
	// Conn's methods, never through WS: gorilla/websocket splits a message
	// larger than its write buffer into frames, which QuestDB refuses, and
	// Conn writes every frame to the socket itself. The frames gorilla
	// writes on its own while reading (a CLOSE on a protocol error or over
	// the read limit) take Conn's write lock (gorillaConn).
	WS      *websocket.Conn
	Version int
	// MaxBatchSize is the server's per-message payload cap, 0 when not
	// advertised.
	MaxBatchSize int
	// DurableAck is the confirmed tier, DurableAckNone when not requested.
	DurableAck string
	// Role is X-QuestDB-Role of the 101 response, "" when absent.
	Role string

	// nc is the socket under WS (TLS included): every frame is written to
	// it directly (writeHead), gorilla's through gorillaConn.
	nc net.Conn
	// wmu serialises every write to the socket: messages, control frames
	// (WriteControl, and the replies of the ping and close handlers Dial
	// installs) and the frames gorilla writes on its own. A channel, so
	// that a control frame can give up at its deadline.
	wmu           chan struct{}
	writeDeadline time.Time
	closeSent     bool
	// writeErr is the error of a failed message write, returned by every
	// write after it: a failed write can leave part of a frame on the
	// wire, and a frame after it would be read as the rest of that
	// frame's payload.
	writeErr error
	hdr      [maxFrameHeader]byte
	ctl      [maxControlPayload]byte // a control frame's masked payload
	iov      [2][]byte
}

// maxFrameHeader is a client frame's largest header: 2 bytes, an 8-byte
// extended length and the 4-byte masking key.
const maxFrameHeader = 14

// Close closes the underlying connection without a close handshake.
func (c *Conn) Close() error { return c.WS.Close() }

// ErrMessageTooLarge is returned by WriteMessage for a message over
// MessageLimit.
var ErrMessageTooLarge = errors.New("qwp: message too large for one WebSocket frame on this connection")

// MessageLimit is the largest message WriteMessage sends: the server's
// X-QWP-Max-Batch-Size, or MaxMessageBytes when it advertises none (or
// more). No buffer of the client's bounds a message: WriteMessage writes
// the caller's.
func (c *Conn) MessageLimit() int {
	if c.MaxBatchSize > 0 && c.MaxBatchSize < MaxMessageBytes {
		return c.MaxBatchSize
	}
	return MaxMessageBytes
}

// WriteMessage sends msg as one binary WebSocket frame with FIN set: QuestDB
// refuses a fragmented message with CLOSE 1002. A message over MessageLimit
// is refused with ErrMessageTooLarge before anything is written, never split.
// The payload is masked in place, written after the frame header (one
// writev over plain TCP) and unmasked again: no frame-sized copy, and msg
// holds what it held on return, but nothing else may read it while
// WriteMessage runs. It must not run concurrently with another
// WriteMessage; WriteControl may.
func (c *Conn) WriteMessage(msg []byte) error {
	if err := c.beginMessage(len(msg)); err != nil {
		return err
	}
	defer c.unlock()
	return c.writeFrame(msg)
}

// beginMessage takes the write lock for a message of n bytes, or says why
// the message cannot be written (over MessageLimit, an earlier failed
// write, a close frame sent) without holding it.
func (c *Conn) beginMessage(n int) error {
	if n > c.MessageLimit() {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrMessageTooLarge, n, c.MessageLimit())
	}
	c.wmu <- struct{}{}
	if err := c.writable(); err != nil {
		c.unlock()
		return err
	}
	return nil
}

// lock takes the write lock, waiting for it until deadline (zero: no
// limit). A deadline already past fails at once: a write under it could
// only time out, and a timed-out write ends every write on a TLS
// connection.
func (c *Conn) lock(deadline time.Time) error {
	if deadline.IsZero() {
		c.wmu <- struct{}{}
		return nil
	}
	wait := time.Until(deadline)
	if wait <= 0 {
		return errControlDeadline
	}
	select {
	case c.wmu <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case c.wmu <- struct{}{}:
		return nil
	case <-t.C:
		return errControlDeadline
	}
}

var errControlDeadline = fmt.Errorf("qwp: control frame: %w", os.ErrDeadlineExceeded)

func (c *Conn) unlock() { <-c.wmu }

// writable says why no frame may be written (an earlier failed write, a
// close frame sent), nil when one may; the write lock is held.
func (c *Conn) writable() error {
	if c.writeErr != nil {
		return c.writeErr
	}
	if c.closeSent {
		return websocket.ErrCloseSent
	}
	return nil
}

// WriteMessageFrom sends the n bytes r yields as one binary WebSocket frame
// with FIN set, like WriteMessage, without holding the whole message: the
// header, then the bytes read into buf piece by piece, each masked for its
// place in the frame. The first piece is read before anything is written,
// so a failing r leaves the connection as it was; if r fails after that,
// the frame can never be completed, so the socket is closed (the server
// never receives a message from a torn frame) and r's error returned. A
// message over MessageLimit is refused like WriteMessage's. buf must not be
// empty when n > 0.
func (c *Conn) WriteMessageFrom(n int, r io.Reader, buf []byte) error {
	if n > 0 && len(buf) == 0 {
		return errors.New("qwp: WriteMessageFrom needs a buffer")
	}
	if err := c.beginMessage(n); err != nil {
		return err
	}
	defer c.unlock()
	piece := buf[:min(n, len(buf))]
	if _, err := io.ReadFull(r, piece); err != nil {
		return err
	}
	h, key := c.frameHeader(websocket.BinaryMessage, n)
	maskBytes(piece, key)
	err := c.writeHead(c.writeDeadline, h, piece)
	for off := len(piece); err == nil && off < n; off += len(piece) {
		piece = buf[:min(n-off, len(buf))]
		if _, err = io.ReadFull(r, piece); err != nil {
			// A torn frame: the server must never see it completed, nor
			// anything after it as its payload.
			c.nc.Close()
			break
		}
		maskBytes(piece, bits.RotateLeft32(key, -8*(off&3)))
		_, err = c.nc.Write(piece)
	}
	if err != nil {
		c.writeErr = err
	}
	return err
}

// writeFrame writes msg as one masked binary frame (RFC 6455 section 5.2)
// to the socket; the write lock is held.
func (c *Conn) writeFrame(msg []byte) error {
	h, key := c.frameHeader(websocket.BinaryMessage, len(msg))
	maskBytes(msg, key)
	defer maskBytes(msg, key)
	return c.writeHead(c.writeDeadline, h, msg)
}

// writeHead writes a frame's header h and its first (or only) masked bytes
// with one writev by deadline; the write lock is held. A failure is kept
// in writeErr: part of the frame may be on the wire.
func (c *Conn) writeHead(deadline time.Time, h, first []byte) error {
	err := c.nc.SetWriteDeadline(deadline)
	if err == nil {
		c.iov = [2][]byte{h, first}
		bufs := net.Buffers(c.iov[:])
		_, err = bufs.WriteTo(c.nc)
		c.iov = [2][]byte{} // the bytes are the caller's: keep no reference to them
	}
	if err != nil {
		c.writeErr = err
	}
	return err
}

// writeGorillaFrame writes a frame gorilla built (gorillaConn.Write) by
// deadline, under the write lock, unless no frame may be written any more.
func (c *Conn) writeGorillaFrame(frame []byte, deadline time.Time) error {
	if err := c.lock(deadline); err != nil {
		return err
	}
	defer c.unlock()
	if err := c.writable(); err != nil {
		return err
	}
	if len(frame) > 0 && frame[0]&0x0f == websocket.CloseMessage {
		c.closeSent = true
	}
	return c.writeHead(deadline, frame, nil)
}

// frameHeader builds, in c.hdr, the header of a masked frame of opcode op
// with FIN set carrying n bytes, and returns it with its new masking key;
// the write lock is held.
func (c *Conn) frameHeader(op byte, n int) ([]byte, uint32) {
	h := c.hdr[:2]
	h[0] = 0x80 | op // FIN
	switch {
	case n < 126:
		h[1] = 0x80 | byte(n)
	case n <= 0xffff:
		h[1] = 0x80 | 126
		h = binary.BigEndian.AppendUint16(h, uint16(n))
	default:
		h[1] = 0x80 | 127
		h = binary.BigEndian.AppendUint64(h, uint64(n))
	}
	key := rand.Uint32()
	return binary.LittleEndian.AppendUint32(h, key), key
}

// maskBytes XORs b with the masking key, whose little-endian bytes apply
// to b[0], b[1], b[2], b[3], b[4], …; applied twice it restores b.
func maskBytes(b []byte, key uint32) {
	k8 := uint64(key) | uint64(key)<<32
	i := 0
	for ; len(b)-i >= 32; i += 32 { // unrolled: a frame is masked twice per write
		w := b[i : i+32 : i+32]
		binary.LittleEndian.PutUint64(w[0:], binary.LittleEndian.Uint64(w[0:])^k8)
		binary.LittleEndian.PutUint64(w[8:], binary.LittleEndian.Uint64(w[8:])^k8)
		binary.LittleEndian.PutUint64(w[16:], binary.LittleEndian.Uint64(w[16:])^k8)
		binary.LittleEndian.PutUint64(w[24:], binary.LittleEndian.Uint64(w[24:])^k8)
	}
	for ; i < len(b); i++ {
		b[i] ^= byte(key >> (8 * (i & 3)))
	}
}

// SetWriteDeadline sets the deadline of the writes that follow, messages
// and control frames without their own.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.wmu <- struct{}{}
	c.writeDeadline = t
	<-c.wmu
	return nil
}

// WriteControl writes a control frame (websocket.CloseMessage,
// PingMessage or PongMessage) by deadline (zero: none, as in gorilla); it
// may run concurrently with WriteMessage, and waits for a message being
// written at most until deadline. After a close frame, every write fails
// with websocket.ErrCloseSent; after a failed write, with its error.
func (c *Conn) WriteControl(messageType int, data []byte, deadline time.Time) error {
	switch {
	case messageType != websocket.CloseMessage && messageType != websocket.PingMessage && messageType != websocket.PongMessage:
		return fmt.Errorf("qwp: WriteControl: %d is not a control frame type", messageType)
	case len(data) > maxControlPayload:
		return fmt.Errorf("qwp: WriteControl: %d bytes of payload, a control frame carries at most %d", len(data), maxControlPayload)
	}
	if err := c.lock(deadline); err != nil {
		return err
	}
	defer c.unlock()
	if err := c.writable(); err != nil {
		return err
	}
	if messageType == websocket.CloseMessage {
		c.closeSent = true
	}
	h, key := c.frameHeader(byte(messageType), len(data))
	payload := append(c.ctl[:0], data...)
	maskBytes(payload, key)
	return c.writeHead(deadline, h, payload)
}

// maxControlPayload is the most a control frame carries (RFC 6455 section
// 5.5).
const maxControlPayload = 125

// controlHandlers replaces gorilla's ping and close handlers, which write
// their replies through gorilla's own lock, with the same replies through
// WriteControl.
func (c *Conn) controlHandlers() {
	c.WS.SetPingHandler(func(data string) error {
		err := c.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(controlReplyTimeout))
		var ne net.Error
		if err == nil || errors.Is(err, websocket.ErrCloseSent) || errors.Is(err, os.ErrDeadlineExceeded) ||
			(errors.As(err, &ne) && ne.Timeout()) {
			return nil
		}
		return err
	})
	c.WS.SetCloseHandler(func(code int, _ string) error {
		_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), time.Now().Add(controlReplyTimeout))
		return nil
	})
}

// controlReplyTimeout bounds a pong or a close reply, as gorilla's own
// handlers do.
const controlReplyTimeout = time.Second

// unusedWritePool is gorilla's write buffer pool, which only its data
// writes borrow from; Conn never makes those.
var unusedWritePool sync.Pool

// UpgradeErrorKind says what a failed upgrade means for reconnecting.
type UpgradeErrorKind int

const (
	// UpgradeTransient: retry, with backoff (honouring RetryAfter).
	UpgradeTransient UpgradeErrorKind = iota
	// UpgradeTerminal: retrying cannot help (authentication refused, or a
	// durable ack that was asked for not confirmed).
	UpgradeTerminal
	// UpgradeRoleReject: the node's role (Role) cannot take writes; try
	// the next endpoint.
	UpgradeRoleReject
	// UpgradeVersionMismatch: the endpoint speaks no version this client
	// does; try the next endpoint.
	UpgradeVersionMismatch
)

// String names the kind for logs.
func (k UpgradeErrorKind) String() string {
	switch k {
	case UpgradeTransient:
		return "transient"
	case UpgradeTerminal:
		return "terminal"
	case UpgradeRoleReject:
		return "role_reject"
	case UpgradeVersionMismatch:
		return "version_mismatch"
	}
	return fmt.Sprintf("UpgradeErrorKind(%d)", int(k))
}

// UpgradeError is a failed connection attempt.
type UpgradeError struct {
	StatusCode int // HTTP status; 0 when no response arrived
	Kind       UpgradeErrorKind
	RetryAfter time.Duration // from Retry-After on 429 and 503; 0 otherwise
	Role       string        // X-QuestDB-Role of a 421
	Msg        string
	Err        error // the underlying dial error, if any
}

// Error describes the failure with its kind.
func (e *UpgradeError) Error() string {
	return fmt.Sprintf("qwp: upgrade failed (%s): %s", e.Kind, e.Msg)
}

// Unwrap returns the underlying dial error, if any.
func (e *UpgradeError) Unwrap() error { return e.Err }

// Dial opens a QWP connection: the WebSocket upgrade with version, client
// id, authentication and durable-ack headers, then the checks of the 101
// response. Configuration mistakes are plain errors; everything that went
// wrong with the server is an *UpgradeError. The proxy is the
// environment's (HTTP_PROXY, HTTPS_PROXY, NO_PROXY): http://, socks5:// or
// socks5h:// (see dialThrough).
func Dial(ctx context.Context, o DialOptions) (*Conn, error) {
	return dial(ctx, o, nil, http.ProxyFromEnvironment)
}

// dial is Dial through netDial (nil: net.Dialer's; a test's byte counter)
// and the proxy proxy chooses.
func dial(ctx context.Context, o DialOptions, netDial netDialer, proxy func(*http.Request) (*url.URL, error)) (*Conn, error) {
	u, err := url.Parse(o.URL)
	if err != nil {
		return nil, fmt.Errorf("qwp: endpoint URL %q: %w", o.URL, err)
	}
	if u.Scheme != "ws" && u.Scheme != "wss" {
		return nil, fmt.Errorf("qwp: endpoint URL %q: scheme must be ws or wss", o.URL)
	}
	if o.Token != "" && (o.Username != "" || o.Password != "") {
		return nil, errors.New("qwp: set either a username and password or a token, not both")
	}
	h := http.Header{}
	h.Set(HeaderMaxVersion, strconv.Itoa(int(Version)))
	if o.ClientID != "" {
		h.Set(HeaderClientID, o.ClientID)
	}
	switch {
	case o.Token != "":
		h.Set("Authorization", "Bearer "+o.Token)
	case o.Username != "" || o.Password != "":
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(o.Username+":"+o.Password)))
	}
	switch o.DurableAck {
	case DurableAckNone:
	case DurableAckReplicated:
		h.Set(HeaderRequestDurableAck, "true")
	case DurableAckLocal, DurableAckLocalReplicated:
		h.Set(HeaderRequestDurableAck, o.DurableAck)
	default:
		return nil, fmt.Errorf("qwp: durable ack %q is not one of local, replicated, local,replicated", o.DurableAck)
	}
	d := websocket.Dialer{
		HandshakeTimeout: o.HandshakeTimeout,
		// Conn frames every message and control frame itself; the pool
		// keeps gorilla from allocating a write buffer per connection
		// that nothing borrows.
		WriteBufferPool: &unusedWritePool,
	}
	if d.HandshakeTimeout <= 0 {
		d.HandshakeTimeout = DefaultHandshakeTimeout
	}
	// The socket under gorilla is a gorillaConn, TLS included: gorilla
	// would otherwise put TLS over it, and its writes could not be
	// ordered with Conn's. The proxy is dialThrough's, for ws as for wss,
	// so that both take the same schemes and send the same credentials.
	proxyScheme := "http" // the scheme gorilla would ask the proxy for
	if u.Scheme == "wss" {
		proxyScheme = "https"
	}
	proxyURL, err := proxy(&http.Request{URL: &url.URL{Scheme: proxyScheme, Host: u.Host}})
	if err != nil {
		return nil, classifyUpgrade(o.URL, nil, err, time.Now())
	}
	if u.Scheme == "ws" {
		d.NetDialContext = func(ctx context.Context, _, addr string) (net.Conn, error) {
			nc, err := dialThrough(ctx, netDial, proxyURL, addr)
			if err != nil {
				return nil, err
			}
			return &gorillaConn{Conn: nc}, nil
		}
	} else {
		d.NetDialTLSContext = func(ctx context.Context, _, addr string) (net.Conn, error) {
			return dialTLS(ctx, netDial, proxyURL, o.TLS, addr)
		}
	}
	ws, resp, err := d.DialContext(ctx, o.URL, h)
	if err != nil {
		return nil, classifyUpgrade(o.URL, resp, err, time.Now())
	}
	c, err := checkUpgrade(o, resp)
	if err != nil {
		_ = ws.Close()
		return nil, err
	}
	g := ws.NetConn().(*gorillaConn) // both dial functions return one
	ws.SetReadLimit(MaxResponseBytes)
	c.WS = ws
	c.nc, c.wmu = g.Conn, make(chan struct{}, 1)
	g.c = c
	c.controlHandlers()
	return c, nil
}

// checkUpgrade validates the 101 response's QWP headers.
func checkUpgrade(o DialOptions, resp *http.Response) (*Conn, error) {
	c := &Conn{Version: int(Version), Role: resp.Header.Get(HeaderRole)}
	fail := func(kind UpgradeErrorKind, format string, args ...any) error {
		return &UpgradeError{StatusCode: resp.StatusCode, Kind: kind, Msg: o.URL + ": " + fmt.Sprintf(format, args...)}
	}
	// Servers always send X-QWP-Version; one that does not predates
	// negotiation and speaks version 1.
	if v := resp.Header.Get(HeaderVersion); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > int(Version) {
			return nil, fail(UpgradeVersionMismatch, "server selected %s %q; this client speaks 1..%d", HeaderVersion, v, Version)
		}
		c.Version = n
	}
	if v := resp.Header.Get(HeaderMaxBatchSize); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n <= 0 {
			return nil, fail(UpgradeTransient, "%s %q is not a positive byte count", HeaderMaxBatchSize, v)
		}
		c.MaxBatchSize = n
	}
	if o.DurableAck != DurableAckNone {
		got, present := resp.Header.Get(HeaderDurableAck), len(resp.Header.Values(HeaderDurableAck)) > 0
		var ok bool
		sent := o.DurableAck
		if o.DurableAck == DurableAckReplicated {
			sent = "true"
			ok = strings.EqualFold(strings.TrimSpace(got), "enabled")
		} else {
			ok = strings.TrimSpace(got) == o.DurableAck
		}
		if !ok {
			answer := fmt.Sprintf("%s: %q", HeaderDurableAck, got)
			if !present {
				answer = "no " + HeaderDurableAck + " header"
			}
			return nil, fail(UpgradeTerminal, "asked for durable ack %q (%s: %s) but the server answered with %s",
				o.DurableAck, HeaderRequestDurableAck, sent, answer)
		}
		c.DurableAck = o.DurableAck
	}
	return c, nil
}

// classifyUpgrade turns a failed dial into an *UpgradeError.
func classifyUpgrade(rawURL string, resp *http.Response, err error, now time.Time) *UpgradeError {
	if resp == nil {
		return &UpgradeError{Kind: UpgradeTransient, Msg: rawURL + ": " + err.Error(), Err: err}
	}
	ue := &UpgradeError{StatusCode: resp.StatusCode, Kind: UpgradeTransient, Err: err}
	ue.Msg = fmt.Sprintf("%s: HTTP %s", rawURL, resp.Status)
	if body := responseText(resp); body != "" {
		ue.Msg += ": " + body
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		ue.Kind = UpgradeTerminal
	case http.StatusMisdirectedRequest:
		if role := resp.Header.Get(HeaderRole); role != "" {
			ue.Kind, ue.Role = UpgradeRoleReject, role
			ue.Msg += " (role " + role + ")"
		}
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		ue.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), now)
	}
	return ue
}

// responseText is the start of a refusal's body, which servers use for the
// reason.
func responseText(resp *http.Response) string {
	if resp.Body == nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	return strings.TrimSpace(strings.ToValidUTF8(string(b), "?"))
}

// parseRetryAfter reads Retry-After as delay-seconds or an HTTP-date; 0
// when absent, malformed or in the past.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, int64(time.Duration(1<<63-1)/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

package sender

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// conn is the I/O goroutine's state for one WebSocket connection. Only the
// reader goroutine touches ws's read side; it hands decoded responses over
// through the mailbox, which never blocks it: a reader stuck behind a busy
// sender would stop draining OKs, the server would stop reading frames, and
// both sides would wait for each other.
type conn struct {
	qc       *qwp.Conn
	ws       *websocket.Conn
	endpoint string
	opened   time.Time

	win   *window
	stash *durableStash // nil without durable acks

	gen      uint32 // dictionary generation registered on this connection
	genKnown bool
	known    int // ids [0, known) of gen are registered on this connection
	// recycle, when set, says why the next frame needs a new connection
	// (a newer dictionary generation): nothing more is sent, and the
	// connection recycles once all sent is acked.
	recycle string

	tailDeferred bool   // the last frame sent is deferred and no commit followed it
	commitBuf    []byte // a bare commit, reused

	lastSend time.Time
	stopping *end // a terminal condition found while sending, once in-flight acks are in

	mu         sync.Mutex
	responses  []qwp.Response
	readErr    error
	wake       chan struct{}
	readerDone chan struct{}

	// When the sender closes, stopWrites says goodbye and closes the socket
	// from outside the I/O goroutine, which may be blocked writing to a peer
	// that stopped reading; writesStopped is closed once it has run.
	stopWrites    func() bool
	writesStopped chan struct{}
}

func newConn(ctx context.Context, qc *qwp.Conn, endpoint string) *conn {
	c := &conn{
		qc: qc, ws: qc.WS, endpoint: endpoint, opened: time.Now(),
		wake: make(chan struct{}, 1), readerDone: make(chan struct{}),
		writesStopped: make(chan struct{}),
	}
	c.stopWrites = context.AfterFunc(ctx, func() {
		defer close(c.writesStopped)
		c.goodbye()
		_ = c.ws.NetConn().Close()
	})
	go c.read()
	return c
}

// read decodes server messages until the connection fails.
func (c *conn) read() {
	defer close(c.readerDone)
	for {
		typ, data, err := c.ws.ReadMessage()
		if err == nil && typ != websocket.BinaryMessage {
			err = fmt.Errorf("server sent a WebSocket message of type %d; QWP responses are binary", typ)
		}
		var r qwp.Response
		if err == nil {
			if derr := qwp.DecodeResponse(data, &r); derr != nil {
				err = fmt.Errorf("malformed server response: %w", derr)
			}
		}
		c.mu.Lock()
		if err != nil {
			c.readErr = err
		} else {
			c.responses = append(c.responses, r)
		}
		c.mu.Unlock()
		select {
		case c.wake <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

// take returns the responses received so far (reusing dst) and, once every
// response before it has been taken, the error that ended the reader.
func (c *conn) take(dst []qwp.Response) ([]qwp.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	dst = append(dst, c.responses...)
	clear(c.responses)
	c.responses = c.responses[:0]
	return dst, c.readErr
}

func (c *conn) write(msg []byte) error {
	if err := c.qc.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return err
	}
	return c.qc.WriteMessage(msg)
}

// writeStored sends a stored frame's message as one WebSocket frame, read
// from the queue through piece while it is written: st's 4-byte generation
// prefix is skipped. A frame that fails its check on this second read is
// never completed on the wire (qwp.Conn.WriteMessageFrom closes the socket).
func (c *conn) writeStored(st *sfqueue.Stream, piece []byte) error {
	var prefix [4]byte
	if _, err := io.ReadFull(st, prefix[:]); err != nil {
		return err
	}
	if err := c.qc.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return err
	}
	return c.qc.WriteMessageFrom(st.Len()-len(prefix), st, piece)
}

func (c *conn) ping() error {
	return c.qc.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeTimeout))
}

// close says goodbye (unless the sender's close already did), closes the
// socket and waits for the reader.
func (c *conn) close() {
	if c.stopWrites() {
		c.goodbye()
	} else {
		<-c.writesStopped
	}
	_ = c.ws.Close()
	<-c.readerDone
}

// goodbye sends a WebSocket close frame, best effort: the peer may be gone,
// or a blocked write may hold the connection past closeFrameTimeout.
// WriteControl may run concurrently with the I/O goroutine's writes.
func (c *conn) goodbye() {
	msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
	_ = c.qc.WriteControl(websocket.CloseMessage, msg, time.Now().Add(closeFrameTimeout))
}

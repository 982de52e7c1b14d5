package qwptest

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// event is what the test client observed, in arrival order.
type event struct {
	kind string // "resp", "pong", "close", "gone"
	resp qwp.Response
	code int
}

// client is a minimal raw QWP client over gorilla/websocket: it sends
// frames as given and records responses, PONGs and the server's CLOSE.
type client struct {
	t      *testing.T
	ws     *websocket.Conn
	header http.Header
	events chan event
	done   chan struct{}
}

// clientWritePool lends the test clients their 2 MiB write buffers per
// message.
var clientWritePool sync.Pool

func newServer(t *testing.T, o Options) *Server {
	t.Helper()
	s, err := NewServer(o)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func dialPath(t *testing.T, s *Server, path string, h http.Header) (*client, *http.Response, error) {
	t.Helper()
	d := websocket.Dialer{
		HandshakeTimeout: 5 * time.Second,
		// Every message leaves in one frame, as QuestDB requires.
		WriteBufferSize: DefaultRecvBufferSize,
		WriteBufferPool: &clientWritePool,
	}
	ws, resp, err := d.Dial("ws://"+s.Addr()+path, h)
	if err != nil {
		return nil, resp, err
	}
	c := &client{t: t, ws: ws, header: resp.Header, events: make(chan event, 1024), done: make(chan struct{})}
	ws.SetPongHandler(func(string) error {
		c.events <- event{kind: "pong"}
		return nil
	})
	ws.SetCloseHandler(func(int, string) error { return nil })
	go c.readLoop()
	t.Cleanup(c.close)
	return c, resp, nil
}

func dial(t *testing.T, s *Server, h http.Header) *client {
	t.Helper()
	c, _, err := dialPath(t, s, "/write/v4", h)
	require.NoError(t, err)
	return c
}

func (c *client) readLoop() {
	defer close(c.done)
	for {
		_, b, err := c.ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) && ce.Code != websocket.CloseAbnormalClosure {
				c.events <- event{kind: "close", code: ce.Code}
			} else {
				c.events <- event{kind: "gone"}
			}
			return
		}
		var r qwp.Response
		if err := qwp.DecodeResponse(b, &r); err != nil {
			c.events <- event{kind: "bad response: " + err.Error()}
			continue
		}
		c.events <- event{kind: "resp", resp: r}
	}
}

func (c *client) close() {
	_ = c.ws.Close()
	<-c.done
}

func (c *client) send(frames ...[]byte) {
	c.t.Helper()
	for _, f := range frames {
		require.NoError(c.t, c.ws.WriteMessage(websocket.BinaryMessage, f))
	}
}

func (c *client) ping() {
	c.t.Helper()
	require.NoError(c.t, c.ws.WriteControl(websocket.PingMessage, []byte("p"), time.Now().Add(5*time.Second)))
}

// next returns the next event, failing the test after 10 s.
func (c *client) next() event {
	c.t.Helper()
	select {
	case e := <-c.events:
		return e
	case <-time.After(10 * time.Second):
		c.t.Fatal("no event from the server within 10 s")
		return event{}
	}
}

// resp expects the next event to be a response.
func (c *client) resp() qwp.Response {
	c.t.Helper()
	e := c.next()
	require.Equal(c.t, "resp", e.kind, "expected a response, got %+v", e)
	return e.resp
}

// expect asserts the next event's kind (and close code for "close").
func (c *client) expect(kind string, code ...int) {
	c.t.Helper()
	e := c.next()
	require.Equal(c.t, kind, e.kind, "event %+v", e)
	if len(code) > 0 {
		require.Equal(c.t, code[0], e.code)
	}
}

// ackedThrough reads OKs until one covers seq and returns the table entries
// of the last one; OKs must be cumulative and increasing.
func (c *client) ackedThrough(seq int64) []qwp.TableTxn {
	c.t.Helper()
	last := int64(-1)
	for {
		r := c.resp()
		require.Equal(c.t, qwp.StatusOK, r.Status, r.Message)
		require.Greater(c.t, r.Seq, last, "OKs are cumulative")
		last = r.Seq
		if r.Seq >= seq {
			require.Equal(c.t, seq, r.Seq)
			return r.Tables
		}
	}
}

package qwp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// rawFrame is one WebSocket frame as read off the wire.
type rawFrame struct {
	fin, masked bool
	rsv, opcode byte
	payload     []byte // unmasked
}

// rawPeer is the server side of a connection upgraded by hand, so that the
// test sees the client's frames exactly as written: no WebSocket library
// reassembles them.
type rawPeer struct {
	conn net.Conn
	br   *bufio.Reader
}

// rawServer accepts one connection, answers its upgrade with the QWP
// headers in kv, and hands the connection over.
func rawServer(t testing.TB, kv ...string) (string, <-chan *rawPeer) {
	t.Helper()
	return rawServerTLS(t, nil, kv...)
}

// rawServerTLS is rawServer behind TLS with cfg (wss), or without when cfg
// is nil.
func rawServerTLS(t testing.TB, cfg *tls.Config, kv ...string) (string, <-chan *rawPeer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	scheme := "ws://"
	if cfg != nil {
		ln, scheme = tls.NewListener(ln, cfg), "wss://"
	}
	peers := make(chan *rawPeer, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(peers)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		br := bufio.NewReader(conn)
		req, err := http.ReadRequest(br)
		if err != nil {
			_ = conn.Close()
			return
		}
		h := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		resp := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
			"Sec-WebSocket-Accept: " + base64.StdEncoding.EncodeToString(h[:]) + "\r\n" + HeaderVersion + ": 1\r\n"
		for i := 0; i+1 < len(kv); i += 2 {
			resp += kv[i] + ": " + kv[i+1] + "\r\n"
		}
		if _, err := io.WriteString(conn, resp+"\r\n"); err != nil {
			_ = conn.Close()
			return
		}
		peers <- &rawPeer{conn: conn, br: br}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
	})
	return scheme + ln.Addr().String() + "/write/v4", peers
}

// readFrame parses one frame (RFC 6455 section 5.2).
func (p *rawPeer) readFrame() (rawFrame, error) {
	var h [2]byte
	if _, err := io.ReadFull(p.br, h[:]); err != nil {
		return rawFrame{}, err
	}
	f := rawFrame{fin: h[0]&0x80 != 0, rsv: h[0] & 0x70, opcode: h[0] & 0x0f, masked: h[1]&0x80 != 0}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(p.br, b[:]); err != nil {
			return f, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(p.br, b[:]); err != nil {
			return f, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	var key [4]byte
	if f.masked {
		if _, err := io.ReadFull(p.br, key[:]); err != nil {
			return f, err
		}
	}
	if n > MaxMessageBytes+1<<20 {
		return f, fmt.Errorf("frame length %d", n)
	}
	f.payload = make([]byte, n)
	if _, err := io.ReadFull(p.br, f.payload); err != nil {
		return f, err
	}
	if f.masked {
		for i := range f.payload {
			f.payload[i] ^= key[i&3]
		}
	}
	return f, nil
}

func dialRaw(t *testing.T, kv ...string) (*Conn, *rawPeer) {
	t.Helper()
	url, peers := rawServer(t, kv...)
	return dialPeer(t, url, peers, nil)
}

// dialRawTLS is dialRaw over wss, with httptest's certificate.
func dialRawTLS(t *testing.T, kv ...string) (*Conn, *rawPeer) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	url, peers := rawServerTLS(t, srv.TLS, kv...)
	return dialPeer(t, url, peers, srv.Client().Transport.(*http.Transport).TLSClientConfig)
}

// dialPeer dials url with cfg and returns the connection and the raw
// server's side of it, both closed when the test ends.
func dialPeer(t *testing.T, url string, peers <-chan *rawPeer, cfg *tls.Config) (*Conn, *rawPeer) {
	t.Helper()
	c, err := Dial(context.Background(), DialOptions{URL: url, TLS: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	p := <-peers
	if p == nil {
		t.Fatal("no connection reached the raw server")
	}
	t.Cleanup(func() { _ = p.conn.Close() })
	return c, p
}

// writeAsync writes msg while the test reads the wire: a message larger
// than the socket buffers only leaves as fast as the peer reads it.
func writeAsync(c *Conn, msg []byte) <-chan error {
	errc := make(chan error, 1)
	go func() {
		_ = c.SetWriteDeadline(time.Now().Add(time.Minute))
		errc <- c.WriteMessage(msg)
	}()
	return errc
}

// sendFrame writes msg while p reads the frame it makes; what names the
// case in failures.
func sendFrame(t *testing.T, c *Conn, p *rawPeer, msg []byte, what string) rawFrame {
	t.Helper()
	errc := writeAsync(c, msg)
	f, err := p.readFrame()
	if err != nil {
		t.Fatalf("%s: reading the frame: %v", what, err)
	}
	if werr := <-errc; werr != nil {
		t.Fatalf("%s: WriteMessage: %v", what, werr)
	}
	return f
}

// TestWriteMessageIsOneFrame reads what a dialled connection puts on the
// wire: every message, whatever its size up to the largest a server
// advertises, is one masked BINARY frame with FIN set and the payload
// intact. QuestDB answers FIN=0 and CONTINUATION frames with CLOSE 1002.
func TestWriteMessageIsOneFrame(t *testing.T) {
	const defaultMaxBatchBytes = 1_887_436 // the exporter's default max_batch_bytes
	c, p := dialRaw(t, HeaderMaxBatchSize, strconv.Itoa(MaxMessageBytes))
	for _, size := range []int{0, 1 << 10, 65_535, 65_536, 65_537, defaultMaxBatchBytes, MaxMessageBytes} {
		msg := make([]byte, size)
		for i := range msg {
			msg[i] = byte(i*7 + i>>11)
		}
		f := sendFrame(t, c, p, msg, fmt.Sprintf("%d bytes", size))
		if !f.fin || f.opcode != 2 || !f.masked || f.rsv != 0 {
			t.Fatalf("%d bytes: frame FIN=%v opcode=%d masked=%v rsv=%#x; want one masked BINARY frame with FIN set (%d of %d bytes in it)",
				size, f.fin, f.opcode, f.masked, f.rsv, len(f.payload), size)
		}
		if !bytes.Equal(f.payload, msg) {
			t.Fatalf("%d bytes: the frame carries %d bytes that differ from the message", size, len(f.payload))
		}
	}
}

// TestWriteMessageRefusesOversize: a message over the server's
// X-QWP-Max-Batch-Size, or over MaxMessageBytes (no server takes more), is
// refused before a byte is written, not split; the connection stays usable,
// and a message of exactly the limit leaves whole.
func TestWriteMessageRefusesOversize(t *testing.T) {
	for _, tc := range []struct {
		name       string
		advertised string
		limit      int
	}{
		{"advertised", "70000", 70000},
		{"advertised over the protocol's", strconv.Itoa(MaxMessageBytes + 1), MaxMessageBytes},
		{"not advertised", "", MaxMessageBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var kv []string
			if tc.advertised != "" {
				kv = []string{HeaderMaxBatchSize, tc.advertised}
			}
			c, p := dialRaw(t, kv...)
			if got := c.MessageLimit(); got != tc.limit {
				t.Fatalf("MessageLimit = %d, want %d", got, tc.limit)
			}
			if err := c.WriteMessage(make([]byte, tc.limit+1)); !errors.Is(err, ErrMessageTooLarge) {
				t.Fatalf("WriteMessage of limit+1 bytes = %v, want ErrMessageTooLarge", err)
			}
			msg := bytes.Repeat([]byte{0xa5}, tc.limit)
			errc := writeAsync(c, msg)
			f, err := p.readFrame()
			if err != nil || <-errc != nil {
				t.Fatalf("after the refusal: read %v", err)
			}
			if !f.fin || !bytes.Equal(f.payload, msg) {
				t.Fatalf("the first frame on the wire is FIN=%v with %d bytes; want the %d-byte message that followed the refused one, whole", f.fin, len(f.payload), tc.limit)
			}
		})
	}
}

// countingConn counts the bytes and Write calls reaching the socket.
type countingConn struct {
	net.Conn
	bytes, writes int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.bytes += int64(len(p))
	c.writes++
	return c.Conn.Write(p)
}

// BenchmarkWriteMessage sends one message per op to a peer that discards
// it: "old" is the write path before messages became single frames
// (gorilla's client with a 64 KiB write buffer, which fragments), "new" is
// Conn.WriteMessage. wire-B/op and writes/op are what reached the socket;
// B/op and allocs/op are the heap cost per message.
func BenchmarkWriteMessage(b *testing.B) {
	for _, size := range []int{1 << 10, 65_537, 1_887_436} {
		for _, path := range []string{"old", "new"} {
			b.Run(fmt.Sprintf("size=%d/%s", size, path), func(b *testing.B) {
				url, peers := rawServer(b, HeaderMaxBatchSize, strconv.Itoa(MaxMessageBytes))
				var cc *countingConn
				netDial := func(ctx context.Context, network, addr string) (net.Conn, error) {
					c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
					cc = &countingConn{Conn: c}
					return cc, err
				}
				var write func([]byte) error
				var closer io.Closer
				if path == "old" {
					d := websocket.Dialer{NetDialContext: netDial, WriteBufferSize: 64 << 10}
					ws, _, err := d.Dial(url, http.Header{HeaderMaxVersion: {"1"}})
					if err != nil {
						b.Fatal(err)
					}
					write = func(m []byte) error { return ws.WriteMessage(websocket.BinaryMessage, m) }
					closer = ws
				} else {
					c, err := dial(context.Background(), DialOptions{URL: url}, netDial, http.ProxyFromEnvironment)
					if err != nil {
						b.Fatal(err)
					}
					write, closer = c.WriteMessage, c
				}
				p := <-peers
				drained := make(chan struct{})
				go func() {
					defer close(drained)
					_, _ = io.Copy(io.Discard, p.br)
				}()
				msg := make([]byte, size)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				bytes0, writes0 := cc.bytes, cc.writes
				for range b.N {
					if err := write(msg); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(cc.bytes-bytes0)/float64(b.N), "wire-B/op")
				b.ReportMetric(float64(cc.writes-writes0)/float64(b.N), "writes/op")
				_ = closer.Close()
				_ = p.conn.Close()
				<-drained
			})
		}
	}
}

// TestWriteMessageLeavesMessageIntact: WriteMessage masks the caller's
// buffer in place while it writes; on return the buffer holds the message
// again, so a frame written twice (a replay after a reconnect, read from
// the same buffer) reaches the wire byte-identical both times.
func TestWriteMessageLeavesMessageIntact(t *testing.T) {
	c, p := dialRaw(t, HeaderMaxBatchSize, strconv.Itoa(MaxMessageBytes))
	for _, size := range []int{0, 1, 7, 125, 126, 65_535, 65_536, 1_887_437} {
		msg := make([]byte, size)
		for i := range msg {
			msg[i] = byte(i*31 + i>>9)
		}
		want := bytes.Clone(msg)
		for send := 1; send <= 2; send++ {
			f := sendFrame(t, c, p, msg, fmt.Sprintf("%d bytes, send %d", size, send))
			if !f.masked || !bytes.Equal(f.payload, want) {
				t.Fatalf("%d bytes, send %d: the frame (masked=%v) carries %d bytes that differ from the message", size, send, f.masked, len(f.payload))
			}
			if !bytes.Equal(msg, want) {
				t.Fatalf("%d bytes, send %d: the caller's buffer differs from the message after WriteMessage returned", size, send)
			}
		}
	}
}

// TestMaskBytes checks the word-wise masking against the RFC's byte-wise
// rule at every length and offset of the key.
func TestMaskBytes(t *testing.T) {
	for n := range 100 { // the unrolled 32-byte loop, the word tail and the byte tail
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i * 13)
		}
		key := uint32(0x9e3779b9)
		k := [4]byte{0xb9, 0x79, 0x37, 0x9e}
		maskBytes(b, key)
		for i := range b {
			if want := byte(i*13) ^ k[i%4]; b[i] != want {
				t.Fatalf("length %d: byte %d = %#x, want %#x", n, i, b[i], want)
			}
		}
	}
}

// TestControlRepliesGoThroughConn: the server's PING is answered with a
// PONG and its CLOSE with a CLOSE of the same code, written by the handlers
// Dial installs (serialised with WriteMessage); after the close reply no
// message is written.
func TestControlRepliesGoThroughConn(t *testing.T) {
	c, p := dialRaw(t)
	readErr := make(chan error, 1)
	go func() {
		_, _, err := c.WS.ReadMessage()
		readErr <- err
	}()
	// A message being written holds the socket: the PONG waits for it
	// (gorilla's own handler would write it in the middle of the message).
	c.wmu <- struct{}{}
	if _, err := p.conn.Write([]byte{0x89, 2, 'h', 'i'}); err != nil {
		t.Fatal(err)
	}
	_ = p.conn.SetReadDeadline(time.Now().Add(150 * time.Millisecond))
	if b, err := p.br.Peek(1); err == nil {
		t.Fatalf("a control reply (first byte %#x) was written while a message held the connection", b[0])
	}
	_ = p.conn.SetReadDeadline(time.Time{})
	<-c.wmu
	f, err := p.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	if f.opcode != 0xa || !f.fin || !f.masked || string(f.payload) != "hi" {
		t.Fatalf("reply to PING: opcode %#x fin=%v masked=%v payload %q; want a masked PONG \"hi\"", f.opcode, f.fin, f.masked, f.payload)
	}
	if _, err := p.conn.Write([]byte{0x88, 2, 0x03, 0xe8}); err != nil { // CLOSE 1000
		t.Fatal(err)
	}
	f, err = p.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	if f.opcode != 0x8 || !f.masked || len(f.payload) != 2 || binary.BigEndian.Uint16(f.payload) != 1000 {
		t.Fatalf("reply to CLOSE 1000: opcode %#x masked=%v payload %x; want a masked CLOSE 1000", f.opcode, f.masked, f.payload)
	}
	var ce *websocket.CloseError
	if err := <-readErr; !errors.As(err, &ce) || ce.Code != 1000 {
		t.Fatalf("ReadMessage = %v, want CloseError 1000", err)
	}
	if err := c.WriteMessage([]byte("late")); !errors.Is(err, websocket.ErrCloseSent) {
		t.Fatalf("WriteMessage after the close reply = %v, want ErrCloseSent", err)
	}
}

// TestWriteControlGivesUpAtDeadline: a control frame waits for a message
// being written to a peer that does not read only until its deadline (the
// sender's goodbye on close), and the message's write is left intact.
func TestWriteControlGivesUpAtDeadline(t *testing.T) {
	c, p := dialRaw(t, HeaderMaxBatchSize, strconv.Itoa(MaxMessageBytes))
	errc := writeAsync(c, make([]byte, MaxMessageBytes)) // more than the socket buffers hold
	for len(c.wmu) == 0 {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	err := c.WriteControl(websocket.PingMessage, nil, start.Add(100*time.Millisecond))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("WriteControl behind a blocked message = %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("WriteControl returned after %v, its deadline was 100ms", d)
	}
	go func() { _, _ = io.Copy(io.Discard, p.br) }()
	if err := <-errc; err != nil {
		t.Fatalf("the message's write, once the peer reads: %v", err)
	}
}

// TestWriteMessageOverTLS: over wss the frame's header and payload go
// through the TLS connection as two writes; the peer still reads one masked
// BINARY frame with the message intact, and the buffer is restored.
func TestWriteMessageOverTLS(t *testing.T) {
	c, p := dialRawTLS(t, HeaderMaxBatchSize, strconv.Itoa(MaxMessageBytes))
	for _, size := range []int{3, 70_000, 1_887_436} {
		msg := make([]byte, size)
		for i := range msg {
			msg[i] = byte(i*5 + i>>10)
		}
		want := bytes.Clone(msg)
		f := sendFrame(t, c, p, msg, fmt.Sprintf("%d bytes", size))
		if !f.fin || f.opcode != 2 || !f.masked || !bytes.Equal(f.payload, want) || !bytes.Equal(msg, want) {
			t.Fatalf("%d bytes: frame FIN=%v opcode=%d masked=%v, payload intact %v, buffer restored %v",
				size, f.fin, f.opcode, f.masked, bytes.Equal(f.payload, want), bytes.Equal(msg, want))
		}
		// The same message in pieces (WriteMessageFrom), as the sender
		// sends stored frames.
		errc := writeFromAsync(c, size, bytes.NewReader(msg), make([]byte, 4093))
		f, err := p.readFrame()
		if werr := <-errc; err != nil || werr != nil {
			t.Fatalf("%d bytes in pieces: read %v, write %v", size, err, werr)
		}
		if !f.fin || f.opcode != 2 || !f.masked || !bytes.Equal(f.payload, want) {
			t.Fatalf("%d bytes in pieces: frame FIN=%v opcode=%d masked=%v, payload intact %v", size, f.fin, f.opcode, f.masked, bytes.Equal(f.payload, want))
		}
	}
}

// TestFailedWriteEndsWrites: a message whose write fails part way (here its
// deadline passes while the peer does not read) leaves a partial frame on
// the wire. The caller's buffer is unmasked all the same, and every later
// write fails with that error: a frame written after it would be read as
// the rest of the partial frame's payload, its bytes taken for the first
// message's. (gorilla fails a connection's writes after any write error.)
func TestFailedWriteEndsWrites(t *testing.T) {
	c, p := dialRaw(t, HeaderMaxBatchSize, strconv.Itoa(MaxMessageBytes))
	msg := make([]byte, MaxMessageBytes) // more than the socket buffers hold; zeros, masked they are not
	want := make([]byte, len(msg))
	_ = c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	err := c.WriteMessage(msg)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("WriteMessage to a peer that does not read = %v, want a timeout", err)
	}
	if !bytes.Equal(msg, want) {
		t.Fatal("the caller's buffer is still masked after the failed write")
	}
	go func() { _, _ = io.Copy(io.Discard, p.br) }()
	_ = c.SetWriteDeadline(time.Now().Add(time.Minute))
	if err := c.WriteMessage([]byte("next")); err == nil {
		t.Fatal("WriteMessage after a partial frame succeeded: its frame lands inside the first one's payload")
	}
	if err := c.WriteControl(websocket.PingMessage, nil, time.Now().Add(time.Second)); err == nil {
		t.Fatal("WriteControl after a partial frame succeeded")
	}
}

// TestWriteControlWithoutDeadline: a zero deadline means none, as in
// gorilla: the control frame is written, never refused at once.
func TestWriteControlWithoutDeadline(t *testing.T) {
	c, p := dialRaw(t)
	for i := range 40 {
		if err := c.WriteControl(websocket.PingMessage, []byte{byte(i)}, time.Time{}); err != nil {
			t.Fatalf("ping %d with a zero deadline: %v", i, err)
		}
		f, err := p.readFrame()
		if err != nil {
			t.Fatal(err)
		}
		if f.opcode != 0x9 || len(f.payload) != 1 || f.payload[0] != byte(i) {
			t.Fatalf("ping %d: opcode %#x payload %x", i, f.opcode, f.payload)
		}
	}
}

// TestWriteControlRefusesNonControl: a data opcode or a payload over 125
// bytes is refused before anything is written (RFC 6455 section 5.5); the
// connection stays usable.
func TestWriteControlRefusesNonControl(t *testing.T) {
	c, p := dialRaw(t)
	if err := c.WriteControl(websocket.BinaryMessage, nil, time.Time{}); err == nil {
		t.Fatal("WriteControl of a BINARY frame succeeded")
	}
	if err := c.WriteControl(websocket.PingMessage, make([]byte, 126), time.Time{}); err == nil {
		t.Fatal("WriteControl of a 126-byte PING succeeded")
	}
	f := sendFrame(t, c, p, []byte("after"), "message after the refusals")
	if f.opcode != 2 || string(f.payload) != "after" {
		t.Fatalf("first frame after the refusals: opcode %#x payload %q", f.opcode, f.payload)
	}
}

// TestWriteControlPastDeadline: a control frame whose deadline has passed
// is refused before anything is written, and leaves the connection usable
// (a write that timed out would end every later write over TLS).
func TestWriteControlPastDeadline(t *testing.T) {
	c, p := dialRawTLS(t)
	err := c.WriteControl(websocket.PingMessage, nil, time.Now().Add(-time.Millisecond))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("WriteControl past its deadline = %v, want a deadline error", err)
	}
	f := sendFrame(t, c, p, []byte("after"), "message after the refused ping")
	if f.opcode != 2 || string(f.payload) != "after" {
		t.Fatalf("first frame after the refused ping: opcode %#x payload %q", f.opcode, f.payload)
	}
}

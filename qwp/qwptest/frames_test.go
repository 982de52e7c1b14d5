package qwptest

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// rfcKey and rfcAccept are the Sec-WebSocket-Key / Sec-WebSocket-Accept
// example pair of RFC 6455 section 1.3.
const (
	rfcKey    = "dGhlIHNhbXBsZSBub25jZQ=="
	rfcAccept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
)

// rawClient speaks WebSocket by hand over TCP, to send the frames no
// library would.
type rawClient struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

// rawRequest sends an HTTP request to /write/v4 with the given header
// lines and reads the response.
func rawRequest(t *testing.T, s *Server, headers ...string) (*rawClient, *http.Response) {
	t.Helper()
	return rawRequestThen(t, s, nil, headers...)
}

// rawRequestThen is rawRequest with early written right behind the request,
// in the same write.
func rawRequestThen(t *testing.T, s *Server, early []byte, headers ...string) (*rawClient, *http.Response) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", s.Addr(), 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = nc.Close() })
	require.NoError(t, nc.SetDeadline(time.Now().Add(20*time.Second)))
	req := "GET /write/v4 HTTP/1.1\r\nHost: qwptest\r\n" + strings.Join(headers, "\r\n") + "\r\n\r\n"
	_, err = nc.Write(append([]byte(req), early...))
	require.NoError(t, err)
	c := &rawClient{t: t, nc: nc, br: bufio.NewReader(nc)}
	resp, err := http.ReadResponse(c.br, nil)
	require.NoError(t, err)
	return c, resp
}

// upgradeHeaders are the header lines of a valid upgrade request.
var upgradeHeaders = []string{
	"Upgrade: websocket", "Connection: Upgrade",
	"Sec-WebSocket-Key: " + rfcKey, "Sec-WebSocket-Version: 13",
}

// dialRawWS upgrades a raw connection.
func dialRawWS(t *testing.T, s *Server) *rawClient {
	t.Helper()
	c, resp := rawRequest(t, s, upgradeHeaders...)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	require.Equal(t, rfcAccept, resp.Header.Get("Sec-WebSocket-Accept"))
	return c
}

// frameSpec is one hand-built client frame. The zero value of every flag is
// the well-formed choice: FIN set, no RSV bits, masked, shortest length.
type frameSpec struct {
	op       byte
	payload  []byte
	noFin    bool
	rsv      byte   // RSV bits, within 0x70
	unmasked bool   // omit the mask
	lenForm  byte   // 126 or 127 forces that length encoding
	declare  uint64 // when non-zero: send only a header declaring this length
}

var testMask = [4]byte{0x37, 0xfa, 0x21, 0x3d}

// bytes encodes the frame.
func (f frameSpec) bytes() []byte {
	b0 := f.op | f.rsv
	if !f.noFin {
		b0 |= 0x80
	}
	n := uint64(len(f.payload))
	if f.declare != 0 {
		n = f.declare
	}
	var maskBit byte
	if !f.unmasked {
		maskBit = 0x80
	}
	out := []byte{b0}
	form := f.lenForm
	if form == 0 {
		switch {
		case n <= 125:
		case n <= 0xFFFF:
			form = 126
		default:
			form = 127
		}
	}
	switch form {
	case 126:
		out = binary.BigEndian.AppendUint16(append(out, maskBit|126), uint16(n))
	case 127:
		out = binary.BigEndian.AppendUint64(append(out, maskBit|127), n)
	default:
		out = append(out, maskBit|byte(n))
	}
	if !f.unmasked {
		out = append(out, testMask[:]...)
	}
	if f.declare != 0 {
		return out
	}
	start := len(out)
	out = append(out, f.payload...)
	if !f.unmasked {
		for i := range f.payload {
			out[start+i] ^= testMask[i&3]
		}
	}
	return out
}

func (c *rawClient) send(frames ...frameSpec) {
	c.t.Helper()
	for _, f := range frames {
		_, err := c.nc.Write(f.bytes())
		require.NoError(c.t, err)
	}
}

// sendMessage sends msg as one well-formed BINARY frame.
func (c *rawClient) sendMessage(msg []byte) { c.send(frameSpec{op: opBinary, payload: msg}) }

// readFrame reads one server frame, which must be unmasked, with FIN set
// and no RSV bits.
func (c *rawClient) readFrame() (byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(c.br, h[:]); err != nil {
		return 0, nil, err
	}
	require.Equal(c.t, byte(0x80), h[0]&0xF0, "FIN set, no RSV bits")
	require.Zero(c.t, h[1]&0x80, "server frames are not masked")
	n := uint64(h[1] & 0x7F)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(c.br, b[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(c.br, b[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	p := make([]byte, n)
	_, err := io.ReadFull(c.br, p)
	return h[0] & 0x0F, p, err
}

// expectOK reads an OK covering seq.
func (c *rawClient) expectOK(seq int64) {
	c.t.Helper()
	op, p, err := c.readFrame()
	require.NoError(c.t, err)
	require.Equal(c.t, byte(opBinary), op)
	var r qwp.Response
	require.NoError(c.t, qwp.DecodeResponse(p, &r))
	require.Equal(c.t, qwp.StatusOK, r.Status, r.Message)
	require.Equal(c.t, seq, r.Seq)
}

// expectClose reads a CLOSE frame with code and reason, then the end of
// the stream.
func (c *rawClient) expectClose(code int, reason string) {
	c.t.Helper()
	op, p, err := c.readFrame()
	require.NoError(c.t, err)
	require.Equal(c.t, byte(opClose), op, "payload %q", p)
	require.GreaterOrEqual(c.t, len(p), 2)
	assert.Equal(c.t, code, int(binary.BigEndian.Uint16(p)))
	assert.Equal(c.t, reason, string(p[2:]))
	c.expectEnd()
}

// expectEnd asserts that the stream ends (FIN or reset) with no more bytes.
func (c *rawClient) expectEnd() {
	c.t.Helper()
	b, err := c.br.ReadByte()
	require.Error(c.t, err, "unexpected byte 0x%02x", b)
	var ne net.Error
	require.False(c.t, errors.As(err, &ne) && ne.Timeout(), "the server kept the connection open: %v", err)
}

// sized is a valid message of LONG rows padded to exactly size bytes
// (bytes after the message are ignored), with its row count.
func sized(t *testing.T, table string, size int) ([]byte, int) {
	t.Helper()
	one := len(longRows(0, table, 1))
	n := (size-one)/8 + 1
	m := longRows(0, table, n)
	for len(m) > size { // varint row counts may add a byte
		n--
		m = longRows(0, table, n)
	}
	require.Positive(t, n)
	return append(m, make([]byte, size-len(m))...), n
}

func TestFragmentedMessageRefused(t *testing.T) {
	s := newServer(t, Options{})
	c := dialRawWS(t, s)
	c.sendMessage(longRows(0, "before", 1))
	m := longRows(0, "t", 100)
	half := len(m) / 2
	c.send(frameSpec{op: opBinary, payload: m[:half], noFin: true},
		frameSpec{op: opContinuation, payload: m[half:]})
	c.expectOK(0) // pending OKs go before the CLOSE
	c.expectClose(closeProtocolError, "fragmented WebSocket frames are not supported")
	assert.Zero(t, s.RowCount("t"), "nothing of the split message is stored")
	assert.Equal(t, int64(1), s.Frames(), "a fragment takes no seq")
}

func TestDataFrameRefusals(t *testing.T) {
	msg := longRows(0, "t", 3)
	cases := []struct {
		name   string
		frame  frameSpec
		code   int
		reason string
	}{
		{"lone CONTINUATION", frameSpec{op: opContinuation, payload: msg}, closeProtocolError, reasonFragmented},
		{"empty BINARY without FIN", frameSpec{op: opBinary, noFin: true}, closeProtocolError, reasonFragmented},
		{"TEXT", frameSpec{op: opText, payload: []byte("hello")}, closeUnsupportedData, "text frames are not supported, QWP requires binary frames"},
		{"TEXT without FIN", frameSpec{op: opText, payload: []byte("hel"), noFin: true}, closeUnsupportedData, reasonText},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, Options{})
			c := dialRawWS(t, s)
			c.send(tc.frame)
			c.expectClose(tc.code, tc.reason)
			assert.Zero(t, s.RowCount("t"))
		})
	}
}

// TestHeaderViolationsDropTheConnection covers what QuestDB's
// WebSocketFrameParser refuses: the connection is closed without a CLOSE
// frame, after the pending OK.
func TestHeaderViolationsDropTheConnection(t *testing.T) {
	msg := longRows(0, "t", 1)
	cases := []struct {
		name  string
		frame frameSpec
	}{
		{"unmasked", frameSpec{op: opBinary, payload: msg, unmasked: true}},
		{"RSV1", frameSpec{op: opBinary, payload: msg, rsv: 0x40}},
		{"RSV2", frameSpec{op: opBinary, payload: msg, rsv: 0x20}},
		{"RSV3", frameSpec{op: opBinary, payload: msg, rsv: 0x10}},
		{"PING over 125 bytes", frameSpec{op: opPing, payload: make([]byte, 126)}},
		{"CLOSE over 125 bytes", frameSpec{op: opClose, payload: make([]byte, 126)}},
		{"fragmented PING", frameSpec{op: opPing, payload: []byte("p"), noFin: true}},
		{"fragmented PONG", frameSpec{op: opPong, noFin: true}},
		{"fragmented CLOSE", frameSpec{op: opClose, payload: []byte{3, 232}, noFin: true}},
		{"1-byte CLOSE payload", frameSpec{op: opClose, payload: []byte{3}}},
		{"64-bit length with the top bit set", frameSpec{op: opBinary, lenForm: 127, declare: 1 << 63}},
	}
	for _, op := range []byte{3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF} {
		cases = append(cases, struct {
			name  string
			frame frameSpec
		}{fmt.Sprintf("reserved opcode 0x%X", op), frameSpec{op: op, payload: msg}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, Options{})
			c := dialRawWS(t, s)
			c.sendMessage(longRows(0, "before", 1))
			c.expectOK(0)
			c.sendMessage(longRows(0, "before", 1))
			c.send(tc.frame)
			c.expectOK(1) // the pending OK is flushed before the drop
			c.expectEnd() // no CLOSE frame
			assert.Zero(t, s.RowCount("t"))
			assert.Equal(t, int64(2), s.RowCount("before"))
		})
	}
}

// TestOversizedFrameRefusedFromItsHeader sends headers only: the 1009 comes
// without the payload, counting the header's actual size.
func TestOversizedFrameRefusedFromItsHeader(t *testing.T) {
	const recv = 1024
	cases := []struct {
		name   string
		frame  frameSpec
		tooBig bool
	}{
		{"16-bit length, 8+1017 bytes", frameSpec{op: opBinary, declare: recv - 8 + 1}, true},
		{"64-bit length, 14+1011 bytes", frameSpec{op: opBinary, declare: recv - 14 + 1, lenForm: 127}, true},
		{"64-bit length of 2^40", frameSpec{op: opBinary, declare: 1 << 40}, true},
		{"CONTINUATION too big", frameSpec{op: opContinuation, declare: 1 << 20}, true},
		{"TEXT too big", frameSpec{op: opText, declare: 1 << 20}, true},
		{"16-bit length, 8+1011 bytes, fits", frameSpec{op: opBinary, declare: recv - 14 + 1}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, Options{RecvBufferSize: recv})
			c := dialRawWS(t, s)
			c.sendMessage(longRows(0, "t", 1))
			c.send(tc.frame)
			c.expectOK(0)
			if !tc.tooBig {
				require.NoError(t, c.nc.SetReadDeadline(time.Now().Add(200*time.Millisecond)))
				_, err := c.br.ReadByte()
				var ne net.Error
				require.True(t, errors.As(err, &ne) && ne.Timeout(), "the server waits for the payload: %v", err)
				return
			}
			c.expectClose(closeMessageTooBig, "frame payload exceeds maximum size")
			assert.Equal(t, int64(1), s.RowCount("t"))
		})
	}
}

func TestPingPong(t *testing.T) {
	s := newServer(t, Options{})
	c := dialRawWS(t, s)
	p := make([]byte, 125)
	for i := range p {
		p[i] = byte(i * 7)
	}
	c.sendMessage(longRows(0, "t", 1))
	c.send(frameSpec{op: opPing, payload: p})
	c.expectOK(0) // PING flushes the pending OK first
	op, got, err := c.readFrame()
	require.NoError(t, err)
	assert.Equal(t, byte(opPong), op)
	assert.Equal(t, p, got, "the PONG carries the PING's payload")

	c.send(frameSpec{op: opPing})
	op, got, err = c.readFrame()
	require.NoError(t, err)
	assert.Equal(t, byte(opPong), op)
	assert.Empty(t, got)

	c.send(frameSpec{op: opPong, payload: []byte("unsolicited")}) // ignored
	c.sendMessage(longRows(0, "t", 1))
	c.expectOK(1)
}

// TestClientCloseAnswered checks handleClose: OKs, then a CLOSE carrying
// the normalised code and no reason, then the end of the stream.
func TestClientCloseAnswered(t *testing.T) {
	code := func(c int, reason string) []byte { return closePayload(c, reason) }
	cases := []struct {
		name    string
		payload []byte
		want    int
	}{
		{"no code", nil, 1000},
		{"1000", code(1000, "bye"), 1000},
		{"1001", code(1001, ""), 1001},
		{"1004 reserved", code(1004, ""), 1002},
		{"2000 extension range", code(2000, ""), 1002},
		{"2999 extension range", code(2999, ""), 1002},
		{"999 below the range", code(999, ""), 1000},
		{"5000 above the range", code(5000, ""), 1000},
		{"1005 never on the wire", code(1005, ""), 1000},
		{"1006 never on the wire", code(1006, ""), 1000},
		{"1015 never on the wire", code(1015, ""), 1000},
		{"1016 unassigned, echoed", code(1016, ""), 1016},
		{"3000", code(3000, ""), 3000},
		{"4999", code(4999, ""), 4999},
		{"reason not valid UTF-8", code(1000, "\xff\xfe"), 1000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, Options{})
			c := dialRawWS(t, s)
			c.sendMessage(longRows(0, "t", 1))
			c.send(frameSpec{op: opClose, payload: tc.payload})
			c.expectOK(0)
			c.expectClose(tc.want, "")
			assert.Equal(t, int64(1), s.RowCount("t"))
		})
	}
}

// TestLengthEncodingsAccepted sends single-frame messages in every length
// encoding, non-minimal ones included (QuestDB's parser is not strict).
func TestLengthEncodingsAccepted(t *testing.T) {
	s := newServer(t, Options{})
	cases := []struct {
		name    string
		size    int
		lenForm byte
	}{
		{"7-bit", 100, 0},
		{"16-bit, 1 KiB", 1 << 10, 0},
		{"16-bit, 65,535 B", 0xFFFF, 0},
		{"64-bit, 65,537 B", 65_537, 0},
		{"64-bit, default max_batch_bytes", 1_887_436, 0},
		{"64-bit, X-QWP-Max-Batch-Size", s.MaxBatchSize(), 0},
		{"non-minimal 16-bit", 100, 126},
		{"non-minimal 64-bit", 100, 127},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			table := fmt.Sprintf("t%d", i)
			m, rows := sized(t, table, tc.size)
			c := dialRawWS(t, s)
			c.send(frameSpec{op: opBinary, payload: m, lenForm: tc.lenForm})
			c.expectOK(0)
			assert.Equal(t, int64(rows), s.RowCount(table))
		})
	}
}

// TestGorillaClientRoundTrips sends through the project's client, one frame
// per message, at the sizes that matter.
func TestGorillaClientRoundTrips(t *testing.T) {
	s := newServer(t, Options{})
	c, err := qwp.Dial(context.Background(), qwp.DialOptions{URL: s.URL()})
	require.NoError(t, err)
	defer c.Close()
	want := int64(0)
	for i, size := range []int{1 << 10, 65_537, s.MaxBatchSize()} {
		m, rows := sized(t, "t", size)
		require.NoError(t, c.WriteMessage(m))
		want += int64(rows)
		_, b, err := c.WS.ReadMessage()
		require.NoError(t, err)
		var r qwp.Response
		require.NoError(t, qwp.DecodeResponse(b, &r))
		require.Equal(t, qwp.Response{Status: qwp.StatusOK, Seq: int64(i), Tables: []qwp.TableTxn{{Name: "t", SeqTxn: int64(i + 1)}}}, r)
		assert.Equal(t, want, s.RowCount("t"), "size %d", size)
	}
}

// TestGorillaFragmentingClientRefused: a plain gorilla client splits a
// message larger than its write buffer, which QuestDB refuses.
func TestGorillaFragmentingClientRefused(t *testing.T) {
	s := newServer(t, Options{})
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, WriteBufferSize: 1024}
	ws, _, err := d.Dial(s.URL(), nil)
	require.NoError(t, err)
	defer ws.Close()
	require.NoError(t, ws.WriteMessage(websocket.BinaryMessage, longRows(0, "t", 1000)))
	_, _, err = ws.ReadMessage()
	var ce *websocket.CloseError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, websocket.CloseProtocolError, ce.Code)
	assert.Equal(t, reasonFragmented, ce.Text)
	assert.Zero(t, s.RowCount("t"))
}

func TestHandshakeRefusals(t *testing.T) {
	without := func(name string) []string {
		var out []string
		for _, h := range upgradeHeaders {
			if !strings.HasPrefix(h, name+":") {
				out = append(out, h)
			}
		}
		return out
	}
	with := func(lines ...string) []string { return append(append([]string{}, upgradeHeaders...), lines...) }
	replace := func(name, value string) []string { return append(without(name), name+": "+value) }
	cases := []struct {
		name    string
		headers []string
		status  int
		body    string
	}{
		{"Origin", with("Origin: http://example.com"), 400, "Origin header not allowed on QWP WebSocket"},
		{"no Upgrade", without("Upgrade"), 400, "Missing Upgrade header"},
		{"Upgrade not websocket", replace("Upgrade", "h2c"), 400, "Invalid Upgrade header value"},
		{"no Connection", without("Connection"), 400, "Missing Connection header"},
		{"Connection without upgrade", replace("Connection", "keep-alive, upgraded"), 400, "Connection header must contain 'upgrade'"},
		{"no key", without("Sec-WebSocket-Key"), 400, "Missing Sec-WebSocket-Key header"},
		{"short key", replace("Sec-WebSocket-Key", "dGhlIHNhbXBsZQ=="), 400, "Invalid Sec-WebSocket-Key (must be 24-character base64 key)"},
		{"key outside base64", replace("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ-_"), 400, "Invalid Sec-WebSocket-Key (must be 24-character base64 key)"},
		{"no version", without("Sec-WebSocket-Version"), 426, ""},
		{"version 8", replace("Sec-WebSocket-Version", "8"), 426, ""},
		{"version +13", replace("Sec-WebSocket-Version", "+13"), 426, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, Options{})
			_, resp := rawRequest(t, s, tc.headers...)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tc.status, resp.StatusCode)
			assert.Equal(t, tc.body, string(body))
			if tc.status == http.StatusUpgradeRequired {
				assert.Equal(t, "13", resp.Header.Get("Sec-WebSocket-Version"))
			}
			assert.Zero(t, s.Accepted())
		})
	}
	t.Run("Connection token in a list, any case", func(t *testing.T) {
		s := newServer(t, Options{})
		_, resp := rawRequest(t, s, append(without("Connection"), "Connection: keep-alive, UPGRADE")...)
		assert.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	})
}

// TestFramesBehindTheUpgradeRequest: frames the client pipelines behind its
// request, before the 101, are read as frames.
func TestFramesBehindTheUpgradeRequest(t *testing.T) {
	s := newServer(t, Options{})
	early := append(frameSpec{op: opBinary, payload: longRows(0, "t", 2)}.bytes(), frameSpec{op: opPing, payload: []byte("x")}.bytes()...)
	c, resp := rawRequestThen(t, s, early, upgradeHeaders...)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	c.expectOK(0)
	op, p, err := c.readFrame()
	require.NoError(t, err)
	assert.Equal(t, byte(opPong), op)
	assert.Equal(t, "x", string(p))
	assert.Equal(t, int64(2), s.RowCount("t"))
}

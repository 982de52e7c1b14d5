package qwp

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestGorillaFramesAreWholeOverTLS: gorilla writes a CLOSE of its own when
// the server's frames break the protocol (1002) or a message is over the
// read limit (1009). Over wss a message's frame is many writes to the TLS
// connection (piece by piece, or header then payload); the server must
// still read whole frames only: every message intact, then the CLOSE with
// gorilla's code, and nothing after it. Before gorilla's writes took
// Conn's lock, its CLOSE landed inside a message's payload.
func TestGorillaFramesAreWholeOverTLS(t *testing.T) {
	tooLarge := binary.BigEndian.AppendUint64([]byte{0x82, 127}, MaxResponseBytes+1)
	for _, tc := range []struct {
		name    string
		bad     []byte // what the server sends while the client writes
		code    int
		readErr func(error) bool
	}{
		{"bad opcode", []byte{0x83, 0}, websocket.CloseProtocolError,
			func(err error) bool { return err != nil && strings.Contains(err.Error(), "bad opcode 3") }},
		{"reserved close code", []byte{0x88, 2, 0x03, 0xed}, websocket.CloseProtocolError,
			func(err error) bool { return err != nil && strings.Contains(err.Error(), "bad close code 1005") }},
		{"message over the read limit", tooLarge, websocket.CloseMessageTooBig,
			func(err error) bool { return errors.Is(err, websocket.ErrReadLimit) }},
	} {
		t.Run(tc.name, func(t *testing.T) { checkGorillaFrameWhole(t, tc.bad, tc.code, tc.readErr) })
	}
}

// streamedMessage is the k-th message the client streams.
func streamedMessage(k int) []byte {
	msg := make([]byte, 256<<10)
	for i := range msg {
		msg[i] = byte(k + i*7 + i>>9)
	}
	return msg
}

func checkGorillaFrameWhole(t *testing.T, bad []byte, code int, readErrOK func(error) bool) {
	c, p := dialRawTLS(t, HeaderMaxBatchSize, strconv.Itoa(MaxMessageBytes))

	readErr := make(chan error, 1)
	go func() {
		_, _, err := c.WS.ReadMessage()
		readErr <- err
	}()
	// Made before: the writer is always writing. WriteMessage masks its
	// argument in place until it returns, and the server may read the whole
	// frame before then: what arrived is compared with a fresh copy.
	msgs := make([][]byte, 40)
	for k := range msgs {
		msgs[k] = streamedMessage(k)
	}
	writeErr := make(chan error, 1)
	go func() {
		defer c.Close() // the server reads to the end of the stream
		_ = c.SetWriteDeadline(time.Now().Add(time.Minute))
		buf := make([]byte, 4093)
		for k, msg := range msgs {
			var err error
			if k%2 == 1 { // piece by piece, as the sender sends stored frames
				err = c.WriteMessageFrom(len(msg), bytes.NewReader(msg), buf)
			} else {
				err = c.WriteMessage(msg)
			}
			if err != nil {
				writeErr <- err
				return
			}
		}
		writeErr <- nil
	}()

	_ = p.conn.SetReadDeadline(time.Now().Add(time.Minute))
	if f, err := p.readFrame(); err != nil {
		t.Fatalf("first message: %v", err)
	} else if !bytes.Equal(f.payload, streamedMessage(0)) {
		t.Fatal("first message: not the one written")
	}
	// Part of the next frame, then the bad frame while the client is in
	// the middle of writing it (piece by piece: a TLS write of a piece
	// holds the connection, but not the message's next).
	head := make([]byte, 10_000)
	if _, err := io.ReadFull(p.br, head); err != nil {
		t.Fatal(err)
	}
	if _, err := p.conn.Write(bad); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	rest := &rawPeer{conn: p.conn, br: bufio.NewReader(io.MultiReader(bytes.NewReader(head), p.br))}
	var closes int
	for k := 1; ; k++ {
		f, err := rest.readFrame()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("frame %d: %v: the stream is not whole frames", k, err)
		}
		if closes > 0 {
			t.Fatalf("frame %d (opcode %#x) after the CLOSE", k, f.opcode)
		}
		if f.opcode == websocket.CloseMessage {
			if len(f.payload) < 2 || int(binary.BigEndian.Uint16(f.payload)) != code {
				t.Fatalf("CLOSE payload %x, want code %d", f.payload, code)
			}
			closes++
			continue
		}
		intact := k < len(msgs) && bytes.Equal(f.payload, streamedMessage(k))
		if !f.fin || !f.masked || f.opcode != websocket.BinaryMessage || !intact {
			t.Fatalf("frame %d: FIN=%v masked=%v opcode %#x, %d bytes, message %d intact: %v",
				k, f.fin, f.masked, f.opcode, len(f.payload), k, intact)
		}
	}
	if closes != 1 {
		t.Fatalf("the server received %d CLOSE frames, want gorilla's one", closes)
	}
	if err := <-writeErr; !errors.Is(err, websocket.ErrCloseSent) {
		t.Fatalf("writing after gorilla's CLOSE: %v, want ErrCloseSent", err)
	}
	if err := <-readErr; !readErrOK(err) {
		t.Fatalf("ReadMessage = %v", err)
	}
}

package qwp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"testing"
	"testing/iotest"
	"time"
)

// writeFromAsync is writeAsync for WriteMessageFrom.
func writeFromAsync(c *Conn, n int, r io.Reader, buf []byte) <-chan error {
	errc := make(chan error, 1)
	go func() {
		_ = c.SetWriteDeadline(time.Now().Add(time.Minute))
		errc <- c.WriteMessageFrom(n, r, buf)
	}()
	return errc
}

// TestWriteMessageFromIsOneFrame: a message written piece by piece is still
// one masked BINARY frame with FIN set and the payload intact, whatever the
// piece size (pieces not a multiple of 4 move the masking key's offset) and
// however the reader splits its bytes.
func TestWriteMessageFromIsOneFrame(t *testing.T) {
	const defaultMaxBatchBytes = 1_887_436 // the exporter's default max_batch_bytes
	c, p := dialRaw(t, HeaderMaxBatchSize, strconv.Itoa(MaxMessageBytes))
	for _, size := range []int{0, 1, 7, 125, 126, 65_535, 65_536, 65_537, defaultMaxBatchBytes} {
		msg := make([]byte, size)
		for i := range msg {
			msg[i] = byte(i*7 + i>>11)
		}
		for _, piece := range []int{1, 3, 4, 4093, 128 << 10} {
			if size > 70_000 && piece < 4093 {
				continue // millions of one-byte writes: the small pieces are covered by the smaller sizes
			}
			for ri, r := range []io.Reader{bytes.NewReader(msg), iotest.HalfReader(bytes.NewReader(msg))} {
				what := fmt.Sprintf("%d bytes in pieces of %d, reader %d", size, piece, ri)
				errc := writeFromAsync(c, size, r, make([]byte, piece))
				f, err := p.readFrame()
				if err != nil {
					t.Fatalf("%s: reading the frame: %v", what, err)
				}
				if werr := <-errc; werr != nil {
					t.Fatalf("%s: WriteMessageFrom: %v", what, werr)
				}
				if !f.fin || f.opcode != 2 || !f.masked || f.rsv != 0 {
					t.Fatalf("%s: frame FIN=%v opcode=%d masked=%v rsv=%#x; want one masked BINARY frame with FIN set", what, f.fin, f.opcode, f.masked, f.rsv)
				}
				if !bytes.Equal(f.payload, msg) {
					t.Fatalf("%s: the frame carries %d bytes that differ from the message", what, len(f.payload))
				}
			}
		}
	}
}

// failAfter yields n bytes of r, then fails.
type failAfter struct {
	r   io.Reader
	n   int
	err error
}

func (f *failAfter) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, f.err
	}
	k, err := f.r.Read(p[:min(len(p), f.n)])
	f.n -= k
	return k, err
}

// TestWriteMessageFromTornReader: a reader that fails before the first
// piece leaves nothing on the wire and the connection usable; one that
// fails later leaves a frame that can never be completed, so the socket is
// closed: the peer reads a short frame and then the end of the stream,
// never a whole message.
func TestWriteMessageFromTornReader(t *testing.T) {
	boom := errors.New("frame damaged")
	msg := bytes.Repeat([]byte{0x5a}, 300_000)

	c, p := dialRaw(t, HeaderMaxBatchSize, strconv.Itoa(MaxMessageBytes))
	if err := c.WriteMessageFrom(len(msg), &failAfter{r: bytes.NewReader(msg), n: 100, err: boom}, make([]byte, 4096)); !errors.Is(err, boom) {
		t.Fatalf("a reader failing inside the first piece: WriteMessageFrom = %v, want its error", err)
	}
	next := []byte("the next message")
	f := sendFrame(t, c, p, next, "after a failure before the first write")
	if !f.fin || !bytes.Equal(f.payload, next) {
		t.Fatalf("the first frame on the wire is FIN=%v %q; want the message that followed the failed one", f.fin, f.payload)
	}

	c, p = dialRaw(t, HeaderMaxBatchSize, strconv.Itoa(MaxMessageBytes))
	errc := writeFromAsync(c, len(msg), &failAfter{r: bytes.NewReader(msg), n: 200_000, err: boom}, make([]byte, 4096))
	if _, err := p.readFrame(); err == nil {
		t.Fatal("the peer read a whole frame from a reader that failed after 200,000 of 300,000 bytes")
	}
	if err := <-errc; !errors.Is(err, boom) {
		t.Fatalf("WriteMessageFrom = %v, want the reader's error", err)
	}
	if err := c.WriteMessage(next); err == nil {
		t.Fatal("WriteMessage after a torn frame succeeded; the socket must be closed")
	}
}

// TestWriteMessageFromRefusesOversize: the limit applies to the stated
// length, before anything is read or written.
func TestWriteMessageFromRefusesOversize(t *testing.T) {
	c, _ := dialRaw(t, HeaderMaxBatchSize, "70000")
	r := &failAfter{err: errors.New("read")}
	if err := c.WriteMessageFrom(70001, r, make([]byte, 4096)); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("WriteMessageFrom of limit+1 bytes = %v, want ErrMessageTooLarge", err)
	}
}

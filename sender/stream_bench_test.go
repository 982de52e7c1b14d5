package sender

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// BenchmarkStoredFrameToWire sends a stored frame of the default
// max_batch_bytes from an SF queue to a peer that discards it: read whole
// into a frame-sized buffer and written with WriteMessage, against checked
// and sent in pieces (NextStream, WriteMessageFrom). Run with -benchmem;
// the CPU per frame is the cost of not holding the frame.
func BenchmarkStoredFrameToWire(b *testing.B) {
	const size = 1_887_436
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, http.Header{qwp.HeaderVersion: {"1"}})
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, ws.UnderlyingConn())
		_ = ws.Close()
	}))
	defer srv.Close()
	q, err := sfqueue.Open(sfqueue.Options{Dir: b.TempDir(), SenderID: "s", MaxSegmentBytes: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	payload := make([]byte, size+4)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	for range 16 {
		if _, err := q.Append(context.Background(), payload); err != nil {
			b.Fatal(err)
		}
	}
	for _, mode := range []string{"whole", "pieces"} {
		b.Run(mode, func(b *testing.B) {
			c, err := qwp.Dial(context.Background(), qwp.DialOptions{URL: "ws" + strings.TrimPrefix(srv.URL, "http") + "/write/v4"})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			cur := q.NewCursor()
			piece := make([]byte, pieceBytes)
			b.SetBytes(size)
			b.ResetTimer()
			for i := range b.N {
				if i%16 == 0 {
					cur.Seek(1)
				}
				_ = c.SetWriteDeadline(time.Now().Add(time.Minute))
				if mode == "whole" {
					_, p, ok, err := cur.Next()
					if !ok || err != nil {
						b.Fatal(ok, err)
					}
					err = c.WriteMessage(p[4:])
				} else {
					_, st, ok, err := cur.NextStream(piece)
					if !ok || err != nil {
						b.Fatal(ok, err)
					}
					var prefix [4]byte
					if _, err := io.ReadFull(st, prefix[:]); err != nil {
						b.Fatal(err)
					}
					err = c.WriteMessageFrom(st.Len()-4, st, piece)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

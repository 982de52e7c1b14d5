package sender

import (
	"encoding/binary"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
)

// tableEntries is the table list of an OK or durable ack: one table.
func tableEntries(b []byte, table string, seqTxn int64) []byte {
	b = binary.LittleEndian.AppendUint16(b, 1)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(table)))
	b = append(b, table...)
	return binary.LittleEndian.AppendUint64(b, uint64(seqTxn))
}

// TestRoleChangeCloseAfterDurableAck plays QuestDB's role-change close on
// a durable-ack connection (QwpIngressUpgradeProcessor
// roleChangeCloseWithUploadGrace): the OK, the final durable ack, then
// CLOSE 1000, after which the server waits for the client's CLOSE echo. The
// sender echoes 1000, trims the durably acknowledged frames (so nothing is
// replayed to the next endpoint, where it would land twice without dedup
// keys), and moves on without counting a rejection.
func TestRoleChangeCloseAfterDurableAck(t *testing.T) {
	const frames = 3
	echo := make(chan error, 1)
	up := websocket.Upgrader{}
	demoting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, http.Header{qwp.HeaderVersion: {"1"}, qwp.HeaderDurableAck: {"enabled"}})
		if err != nil {
			return
		}
		defer ws.Close()
		ws.SetCloseHandler(func(int, string) error { return nil }) // the echo closes the handshake; no reply
		for range frames {
			if _, _, err := ws.ReadMessage(); err != nil {
				echo <- err
				return
			}
		}
		ok := binary.LittleEndian.AppendUint64([]byte{byte(qwp.StatusOK)}, frames-1)
		durable := []byte{byte(qwp.StatusDurableAck)}
		for _, m := range [][]byte{tableEntries(ok, "T", 7), tableEntries(durable, "t", 7)} {
			if err := ws.WriteMessage(websocket.BinaryMessage, m); err != nil {
				echo <- err
				return
			}
		}
		if err := ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "role change"), time.Now().Add(time.Second)); err != nil {
			echo <- err
			return
		}
		_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second)) // QuestDB's close-echo wait
		_, _, err = ws.ReadMessage()
		echo <- err
	}))
	defer demoting.Close()
	next := newServer(t, qwptest.Options{DurableAck: true})
	q := memQueue(t)
	newFeeder(t, q, false).frames(frames, 1)
	rec := &recorder{}
	o := testOptions(rec, "ws"+strings.TrimPrefix(demoting.URL, "http")+"/write/v4", next.URL())
	o.DurableAck = qwp.DurableAckReplicated
	s := startSender(t, q, o)
	waitAll(t, s, q)
	var ce *websocket.CloseError
	if err := <-echo; !errors.As(err, &ce) || ce.Code != websocket.CloseNormalClosure {
		t.Fatalf("the demoting server read %v after its CLOSE; want the client's CLOSE 1000 echo", err)
	}
	for deadline := time.Now().Add(waitTimeout); next.Accepted() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the sender did not move to the next endpoint after the role-change close")
		}
	}
	if n := next.Frames(); n != 0 {
		t.Fatalf("the next endpoint received %d frames; the durably acknowledged ones must not be replayed", n)
	}
	if n := rec.errCount(qwp.CategoryUnknown); n != 0 {
		t.Fatalf("%d rejections counted for an orderly role-change close", n)
	}
}

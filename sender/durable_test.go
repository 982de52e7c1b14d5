package sender

import (
	"strings"
	"testing"
	"time"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
)

func TestDurableAckTrim(t *testing.T) {
	for _, tier := range []string{qwp.DurableAckLocal, qwp.DurableAckReplicated, qwp.DurableAckLocalReplicated} {
		t.Run(tier, func(t *testing.T) {
			srv := newServer(t, qwptest.Options{DurableAck: true, DurableTiers: true})
			p := newProxy(t, srv.Addr(), proxyOptions{})
			q := memQueue(t)
			newFeeder(t, q, true).frames(10, 4)
			rec := &recorder{}
			o := testOptions(rec, p.URL())
			o.DurableAck = tier
			o.DurableAckKeepalive = 5 * time.Millisecond
			s := startSender(t, q, o)
			// Every frame committed and OK'd, but nothing durable yet: the
			// sender must hold the trim and keep the server's flush path
			// awake with PINGs.
			waitFor(t, "40 rows", func() bool { return srv.RowCount(testTable) == 40 })
			waitFor(t, "OKs for every frame", func() bool { return rec.oks.Load() > 0 && p.pings() >= 3 })
			if q.AckedFSN() != 0 || rec.acked.Load() != 0 {
				t.Fatalf("ackedFSN %d before any durable ack: OKs must not trim in durable mode", q.AckedFSN())
			}
			srv.EmitDurableAcks()
			waitAll(t, s, q)
			if dups := exactRows(t, rowIDs(t, srv), 40); dups != 0 {
				t.Fatalf("%d duplicates", dups)
			}
			// Once nothing is pending the keepalive stops.
			n := p.pings()
			time.Sleep(30 * time.Millisecond)
			if extra := p.pings() - n; extra > 1 {
				t.Fatalf("%d PINGs with no confirmation pending", extra)
			}
		})
	}
}

func TestDurableAckNotConfirmedFailsConnect(t *testing.T) {
	srv := newServer(t, qwptest.Options{}) // no durable-ack support
	q := memQueue(t)
	newFeeder(t, q, false).frames(2, 1)
	o := testOptions(nil, srv.URL())
	o.DurableAck = qwp.DurableAckLocal
	s := startSender(t, q, o)
	te := waitTerminal(t, s)
	if !strings.Contains(te.Error(), "durable ack") || q.AckedFSN() != 0 || srv.RowCount(testTable) != 0 {
		t.Fatalf("terminal error %v, acked %d, rows %d; want a durable-ack refusal that sends nothing", te, q.AckedFSN(), srv.RowCount(testTable))
	}
}

// TestDurableTierSelectsTrimStatus feeds responses straight into the loop:
// qwptest never sends 0x0E on a local,replicated connection.
func TestDurableTierSelectsTrimStatus(t *testing.T) {
	for _, tc := range []struct {
		tier       string
		trim, skip qwp.Status
	}{
		{qwp.DurableAckLocal, qwp.StatusLocalDurableAck, qwp.StatusDurableAck},
		{qwp.DurableAckReplicated, qwp.StatusDurableAck, qwp.StatusLocalDurableAck},
		{qwp.DurableAckLocalReplicated, qwp.StatusDurableAck, qwp.StatusLocalDurableAck},
	} {
		t.Run(tc.tier, func(t *testing.T) {
			q := memQueue(t)
			newFeeder(t, q, false).frames(3, 1)
			o := testOptions(nil, "ws://127.0.0.1:1/write/v4")
			o.DurableAck = tc.tier
			s, err := New(q, o)
			if err != nil {
				t.Fatal(err)
			}
			c := &conn{win: newWindow(1, 8), stash: newDurableStash()}
			now := time.Now()
			for range 3 {
				c.win.sendData(now)
			}
			feed := func(r qwp.Response) {
				if e, done := s.handle(c, &r); done {
					t.Fatalf("response %v ended the connection: %+v", r.Status, e)
				}
			}
			feed(qwp.Response{Status: qwp.StatusOK, Seq: 1, Tables: []qwp.TableTxn{{Name: "t", SeqTxn: 2}}})
			feed(qwp.Response{Status: qwp.StatusOK, Seq: 2, Tables: []qwp.TableTxn{{Name: "t", SeqTxn: 3}}})
			feed(qwp.Response{Status: tc.skip, Seq: -1, Tables: []qwp.TableTxn{{Name: "t", SeqTxn: 3}}})
			if q.AckedFSN() != 0 {
				t.Fatalf("%v trimmed on a %q connection", tc.skip, tc.tier)
			}
			feed(qwp.Response{Status: tc.trim, Seq: -1, Tables: []qwp.TableTxn{{Name: "T", SeqTxn: 2}}})
			if q.AckedFSN() != 2 {
				t.Fatalf("after %v up to seqTxn 2: acked %d, want 2", tc.trim, q.AckedFSN())
			}
			feed(qwp.Response{Status: tc.trim, Seq: -1, Tables: []qwp.TableTxn{{Name: "t", SeqTxn: 3}}})
			if q.AckedFSN() != 3 {
				t.Fatalf("after %v up to seqTxn 3: acked %d, want 3", tc.trim, q.AckedFSN())
			}
		})
	}
}

package sender

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// TestOutageFillsQueueWhileReconnecting runs a server outage (1 s; two
// minutes with QDB_LONG=1) against a small queue: appends fail with a full
// error that says the sender is reconnecting, and once the server is back
// every row that was accepted arrives.
func TestOutageFillsQueueWhileReconnecting(t *testing.T) {
	outage := time.Second
	if longTests() {
		outage = 2 * time.Minute
	}
	srv := newServer(t, qwptest.Options{})
	q, err := sfqueue.Open(sfqueue.Options{MaxTotalBytes: 64 << 10, MaxSegmentBytes: 8 << 10, AppendDeadline: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	f := newFeeder(t, q, true)
	rec := &recorder{}
	o := testOptions(rec, srv.URL())
	o.MaxBackoff = 100 * time.Millisecond
	s := startSender(t, q, o)
	f.frames(5, 10)
	waitAll(t, s, q)

	srv.Outage(outage)
	waitFor(t, "the sender to notice the outage", func() bool {
		states := rec.States()
		return states[len(states)-1].Kind == Reconnecting
	})
	var full *sfqueue.FullError
	for full == nil {
		// A rejected append leaves the encoder's rows behind; only count
		// rows the queue took.
		payload := f.encode(10)
		_, err := q.Append(context.Background(), payload)
		switch {
		case errors.As(err, &full):
			f.nextID -= 10
		case err != nil:
			t.Fatal(err)
		}
	}
	if full.Reason != sfqueue.Reconnecting || full.Attempts < 1 || full.OutageStart.IsZero() {
		t.Fatalf("full error during the outage: %v (reason %v, attempts %d); want it to say the sender is reconnecting", full, full.Reason, full.Attempts)
	}
	waitAllWithin(t, s, q, outage+waitTimeout)
	exactRows(t, rowIDs(t, srv), f.nextID)
	var reconnecting, connectedAgain bool
	for _, st := range rec.States() {
		reconnecting = reconnecting || st.Kind == Reconnecting && st.Attempts >= 1
		connectedAgain = connectedAgain || reconnecting && st.Kind == Connected
	}
	if !reconnecting || !connectedAgain {
		t.Fatalf("states %+v; want Reconnecting then Connected", rec.States())
	}
}

// TestManyRestarts restarts the server repeatedly while a producer appends
// (10 restarts; 200 with QDB_LONG=1); nothing is lost.
func TestManyRestarts(t *testing.T) {
	restarts := 10
	if longTests() {
		restarts = 200
	}
	srv := newServer(t, qwptest.Options{})
	q := memQueue(t)
	f := newFeeder(t, q, true)
	rec := &recorder{}
	s := startSender(t, q, testOptions(rec, srv.URL()))
	for range restarts {
		f.frames(10, 3)
		srv.Outage(time.Duration(1+len(rec.States())%5) * time.Millisecond)
	}
	waitAll(t, s, q)
	dups := exactRows(t, rowIDs(t, srv), int64(restarts*30))
	if max := rec.replayed.Load() * 3; int64(dups) > max {
		t.Errorf("%d duplicate rows but only %d replayed frames", dups, rec.replayed.Load())
	}
}

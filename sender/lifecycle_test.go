package sender

import (
	"context"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
	"github.com/questdbexporter/questdbexporter/sfqueue/sfqueuetest"
)

// symbolUse reads a stored payload's generation and highest symbol id, as
// the exporter's writer tells the queue.
func symbolUse(p []byte) (uint32, int64) {
	if len(p) < 4 {
		return 0, -1
	}
	_, end, err := qwp.DeltaDictRange(p[4:])
	if err != nil {
		return 0, -1
	}
	return binary.LittleEndian.Uint32(p), int64(end) - 1
}

// genOf maps each row id to the generation prefix of its symbol.
func checkGenerations(t *testing.T, srv *qwptest.Server, genOf func(id int64) uint32) {
	t.Helper()
	td, _ := srv.Rows(testTable)
	idc, symc := -1, -1
	for i, c := range td.Columns {
		switch c.Name {
		case "id":
			idc = i
		case "sym":
			symc = i
		}
	}
	for _, r := range td.Rows {
		id := r[idc].(int64)
		if want := symFor(genOf(id), id); r[symc] != want {
			t.Errorf("row %d carries %v, want %q", id, r[symc], want)
		}
	}
}

func TestGenerationSwitchRecyclesConnection(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	q, err := sfqueue.Open(sfqueue.Options{SymbolUse: symbolUse})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	f := newFeeder(t, q, true)
	f.frames(5, 10) // generation 0: ids 0-49
	f.newGeneration()
	f.frames(5, 10) // generation 1: ids 50-99, symbol ids restart at 0
	rec := &recorder{}
	s := startSender(t, q, testOptions(rec, srv.URL()))
	waitAll(t, s, q)
	if srv.Accepted() != 2 {
		t.Fatalf("%d connections; want exactly one recycle at the generation boundary", srv.Accepted())
	}
	// The queue deleted it once its last frame was acknowledged.
	if n := len(sfqueuetest.Symbols(t, q, 0)); n != 0 {
		t.Fatalf("generation 0 still holds %d entries after all its frames were acked", n)
	}
	// Break the connection: the catch-up must register generation 1, whose
	// ids the next frames reference without a delta.
	srv.DropConnections()
	f.frames(5, 10)
	waitAll(t, s, q)
	exactRows(t, rowIDs(t, srv), 150)
	checkGenerations(t, srv, func(id int64) uint32 {
		if id < 50 {
			return 0
		}
		return 1
	})
	if rec.dictSize.Load() != testSyms {
		t.Fatalf("dictionary size reported %d, want %d", rec.dictSize.Load(), testSyms)
	}
}

func TestCloseTimeoutLeavesFramesInSlot(t *testing.T) {
	dir := t.TempDir()
	stalled := newServer(t, qwptest.Options{})
	stalled.StallAcks()
	q := sfQueue(t, dir, "slot")
	newFeeder(t, q, true).frames(5, 2)
	o := testOptions(nil, stalled.URL())
	o.SlotDir = filepath.Join(dir, "slot")
	o.CloseFlushTimeout = 50 * time.Millisecond
	s, err := New(q, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	// The five frames (they start generation 0: no catch-up before them).
	waitFor(t, "frames on the stalled server", func() bool { return stalled.Frames() >= 5 })
	err = s.Close(context.Background())
	if err == nil || !strings.Contains(err.Error(), "5 frames (FSN 1..5) not acknowledged") || !strings.Contains(err.Error(), o.SlotDir) {
		t.Fatalf("Close = %v; want the 5 frames named and the slot %s", err, o.SlotDir)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	// The next sender on the slot delivers them.
	good := newServer(t, qwptest.Options{})
	q2 := sfQueue(t, dir, "slot")
	defer q2.Close()
	if q2.PublishedFSN() != 5 || q2.AckedFSN() != 0 {
		t.Fatalf("reopened slot: published %d acked %d, want 5, 0", q2.PublishedFSN(), q2.AckedFSN())
	}
	s2 := startSender(t, q2, testOptions(nil, good.URL()))
	waitAll(t, s2, q2)
	exactRows(t, rowIDs(t, good), 10)
}

func TestCloseSkipsWaitWhenNegative(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	srv.StallAcks()
	q := memQueue(t)
	newFeeder(t, q, false).frames(2, 1)
	o := testOptions(nil, srv.URL())
	o.CloseFlushTimeout = -1
	s, err := New(q, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "frames sent", func() bool { return srv.Frames() >= 2 })
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close with the wait disabled = %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Close waited although CloseFlushTimeout is negative")
	}
}

func TestRecoveryDataLossReachesInbox(t *testing.T) {
	dir := t.TempDir()
	q := sfQueue(t, dir, "slot")
	newFeeder(t, q, true).frames(3, 2)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	// Lose the dictionary: the frames' symbol ids are no longer backed.
	if err := os.Remove(filepath.Join(dir, "slot", ".symbol-dict.0000000000")); err != nil {
		t.Fatal(err)
	}
	q2, err := sfqueue.Open(sfqueue.Options{Dir: dir, SenderID: "slot", SymbolUse: symbolUse})
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Close()
	if q2.Recovery().Unreplayable == nil {
		t.Fatal("recovery did not set the slot aside; the test needs an unreplayable slot")
	}
	rec := &recorder{}
	srv := newServer(t, qwptest.Options{})
	startSender(t, q2, testOptions(rec, srv.URL()))
	var found bool
	for _, e := range waitEvents(t, rec, 1) {
		found = found || e.Kind == EventDataLoss && e.Category == qwp.CategoryDataLoss && e.Err != nil
	}
	if !found {
		t.Fatalf("no DATA_LOSS entry in the error inbox: %+v", rec.Events())
	}
}

// TestCloseInterruptsBlockedWrite: a server that upgrades and then never
// reads fills the socket buffers; Close must still stop the loop (the
// blocked write is interrupted) and leave no goroutine behind.
func TestCloseInterruptsBlockedWrite(t *testing.T) {
	up := websocket.Upgrader{}
	release := make(chan struct{})
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, http.Header{"X-Qwp-Version": {"1"}})
		if err != nil {
			return
		}
		defer ws.Close()
		<-release // never reads
	}))
	defer stuck.Close()
	defer close(release)
	q := memQueue(t)
	big := make([]byte, 4+1<<20)
	for range 32 {
		if _, err := q.Append(context.Background(), big); err != nil {
			t.Fatal(err)
		}
	}
	rec := &recorder{}
	o := testOptions(rec, "ws"+strings.TrimPrefix(stuck.URL, "http")+"/write/v4")
	o.CloseFlushTimeout = 20 * time.Millisecond
	s, err := New(q, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "some frames written", func() bool { return rec.sent.Load() >= 1 })
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	err = s.Close(ctx)
	if err == nil || !strings.Contains(err.Error(), "32 frames (FSN 1..32) not acknowledged") {
		t.Fatalf("Close = %v; want the 32 unacknowledged frames reported", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Close hung on the blocked write")
	}
}

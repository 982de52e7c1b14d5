package sender

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// catchUpFrames appends the stored frames a writer leaves after a failed
// dictionary write: the current generation's whole dictionary re-registered
// in rowless FLAG_DEFER_COMMIT frames, whose OK a real server withholds
// until a later frame of the connection commits.
func (f *feeder) catchUpFrames() {
	f.t.Helper()
	err := qwp.CatchUpFrames(f.dict, 0, f.dict.Len(), 40, func(frame []byte) error {
		p := binary.LittleEndian.AppendUint32(nil, f.gen)
		_, err := f.q.Append(context.Background(), append(p, frame...))
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// deferredEnds fills q with two generations that each end on deferred
// frames, as slots written before the writer closed such groups do: the
// end of generation 0 and the end of the queue both wait on an OK that
// only a later commit can bring. It returns the number of rows.
func deferredEnds(f *feeder) int64 {
	f.frames(3, 10)
	f.catchUpFrames()
	f.newGeneration()
	f.frames(3, 10)
	f.catchUpFrames()
	return 60
}

func TestDeferredGenerationEndDoesNotWedge(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	q := memQueue(t)
	rows := deferredEnds(newFeeder(t, q, true))
	s := startSender(t, q, testOptions(nil, srv.URL()))
	// A sender waiting for the OK of generation 0's last frame before it
	// recycles would wait forever: every frame must be acknowledged.
	waitAll(t, s, q)
	exactRows(t, rowIDs(t, srv), rows)
	if srv.Accepted() != 2 {
		t.Fatalf("%d connections; want one recycle at the generation boundary", srv.Accepted())
	}
}

func TestCloseReturnsAtOnceAfterDeferredTail(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	q := memQueue(t)
	f := newFeeder(t, q, true)
	f.frames(3, 10)
	f.catchUpFrames() // the queue ends on deferred frames
	const rows = 30
	o := testOptions(nil, srv.URL())
	o.CloseFlushTimeout = waitTimeout
	s, err := New(q, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := srv.WaitRows(ctx, testTable, rows); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("Close with every row on the server: %v", err)
	}
	// Everything was delivered: Close must not sit out its flush timeout
	// waiting for the OK of the deferred frames at the queue's end.
	if d := time.Since(start); d > waitTimeout/3 {
		t.Fatalf("Close took %v with everything delivered (close_flush_timeout %v)", d, waitTimeout)
	}
	if q.AckedFSN() != q.PublishedFSN() {
		t.Fatalf("acked %d of %d frames", q.AckedFSN(), q.PublishedFSN())
	}
}

func TestDrainOrphanWithDeferredEnds(t *testing.T) {
	dir := t.TempDir()
	q := sfQueue(t, dir, "dead")
	rows := deferredEnds(newFeeder(t, q, true))
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, qwptest.Options{})
	rec := &recorder{}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	rep, err := DrainOrphans(ctx, dir, nil, 1, DrainOptions{Sender: testOptions(rec, srv.URL())})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Drained, []string{"dead"}) {
		t.Fatalf("report %+v; want the slot drained (a drainer waiting on a withheld OK holds its slot until shutdown)", rep)
	}
	exactRows(t, rowIDs(t, srv), rows)
}

func TestCatchUpRefusesAFrameWhoseDictionaryIsShort(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	// The frames' symbols are registered in another queue: this one's
	// dictionary lacks the ids the second frame references and the first
	// defined. (A frame defining every id it uses needs no catch-up.)
	f := newFeeder(t, memQueue(t), true)
	f.encode(5)
	payload := f.encode(5)
	q := memQueue(t)
	if _, err := q.Append(context.Background(), payload); err != nil {
		t.Fatal(err)
	}
	s := startSender(t, q, testOptions(nil, srv.URL()))
	te := waitTerminal(t, s)
	if te.Category != qwp.CategoryParseError || te.FSN != 1 || !strings.Contains(te.Error(), "lost entries") {
		t.Fatalf("terminal %v (category %v, FSN %d); want PARSE_ERROR naming FSN 1 and the lost entries", te, te.Category, te.FSN)
	}
	if srv.Frames() != 0 {
		t.Fatalf("%d frames reached the server; a frame with unknown ids must never be sent", srv.Frames())
	}
}

// copyDir copies the regular files of src into a new directory dst (0700).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.Mkdir(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// testdata/slot-v1 was written by the release before per-generation
// dictionary files (one .symbol-dict for every generation) with the frames
// of deferredEnds: generation 0 and the queue end on deferred catch-up
// frames, as slots of that release can after a failed dictionary write. It
// must recover and drain.
func TestOldSlotWithDeferredEndsDrains(t *testing.T) {
	dir := t.TempDir()
	copyDir(t, filepath.Join("testdata", "slot-v1"), filepath.Join(dir, "slot"))
	q, err := sfqueue.Open(sfqueue.Options{Dir: dir, SenderID: "slot", SymbolUse: symbolUse})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if rep := q.Recovery(); rep.Unreplayable != nil || rep.FramesRecovered == 0 {
		t.Fatalf("recovery of the old slot: %+v", rep)
	}
	srv := newServer(t, qwptest.Options{})
	s := startSender(t, q, testOptions(nil, srv.URL()))
	waitAll(t, s, q)
	exactRows(t, rowIDs(t, srv), 60)
}

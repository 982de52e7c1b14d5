package sender

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// TestCatchUpStopsOnADamagedDictionaryRecord: a dictionary record damaged
// after the slot was opened is found while the catch-up streams the
// generation from disk. The sender stops with an error naming the file and
// the record's offset, no data frame goes out, and every frame stays queued.
func TestCatchUpStopsOnADamagedDictionaryRecord(t *testing.T) {
	dir := t.TempDir()
	q := sfQueue(t, dir, "s")
	t.Cleanup(func() { _ = q.Close() }) // after the sender's Close
	f := newFeeder(t, q, true)
	f.frames(3, 10)
	q.Ack(1) // the connection starts at FSN 2, which needs ids 0-6 registered
	// Flip a byte of the third record (ids 0 and 1 are "g0-s0", "g0-s1":
	// records of 12 + 5 + 4 bytes).
	path := filepath.Join(dir, "s", fmt.Sprintf(".symbol-dict.%010d", 0))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const third = 2 * (12 + 5 + 4)
	data[third+12] ^= 0xff
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, qwptest.Options{})
	s := startSender(t, q, testOptions(nil, srv.URL()))
	te := waitTerminal(t, s)
	if want := fmt.Sprintf("%s: record at offset %d", path, third); te.Category != qwp.CategoryNone || te.FSN != 2 || !strings.Contains(te.Error(), want) {
		t.Fatalf("terminal %v (category %v, FSN %d); want one naming FSN 2 and %q", te, te.Category, te.FSN, want)
	}
	if rows := srv.RowCount(testTable); rows != 0 || q.AckedFSN() != 1 {
		t.Fatalf("%d rows on the server, %d frames acknowledged; want none", rows, q.AckedFSN())
	}
}

// TestCatchUpOfAnEvictedFirstFrame drives the branch where the frame a new
// connection starts with is evicted (on_full evict_oldest) after the
// cursor read it and before its catch-up: the queue has deleted the frame's
// generation, so its dictionary reads as empty. The frame is mid-generation
// (it references ids earlier frames defined), so sending it without them
// would be refused. The sender must recycle and start again from the oldest
// frame left, registering that frame's generation; every frame not evicted
// lands exactly once and no evicted one does.
func TestCatchUpOfAnEvictedFirstFrame(t *testing.T) {
	for _, sf := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "sf"}[sf], func(t *testing.T) {
			o := sfqueue.Options{MaxTotalBytes: 8 << 10, MaxSegmentBytes: 1 << 10,
				OnFull: sfqueue.OnFullEvictOldest, SymbolUse: symbolUse}
			if sf {
				o.Dir, o.SenderID = t.TempDir(), "s"
			}
			q, err := sfqueue.Open(o)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = q.Close() }) // after the senders' Close
			var refusals serverLog
			srv := newServer(t, qwptest.Options{Logf: refusals.logf})
			f := newFeeder(t, q, true)

			// A first sender delivers frames 1-7 (rows 0-6, which define the
			// 7 symbol ids of generation 0) and stops.
			f.frames(testSyms, 1)
			first := startSender(t, q, testOptions(nil, srv.URL()))
			waitAll(t, first, q)
			if err := first.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			// Frames 8-10 reference generation 0's ids without defining any.
			last0 := f.frames(3, 1)
			framesBefore := srv.Frames()

			rec := &recorder{}
			s, err := New(q, testOptions(rec, srv.URL()))
			if err != nil {
				t.Fatal(err)
			}
			reached, resume := make(chan uint64), make(chan struct{})
			var once sync.Once
			s.beforeCatchUp = func(gen uint32, fsn uint64) {
				once.Do(func() {
					reached <- uint64(gen)<<32 | fsn
					<-resume
				})
			}
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close(context.Background()) })
			if at := <-reached; at != last0-2 {
				t.Fatalf("the first catch-up is of generation %d for FSN %d; want generation 0 for FSN %d", at>>32, at&0xffffffff, last0-2)
			}
			// The sender holds frame 8. Generation 1's frames evict it, the
			// rest of generation 0 and the 7 frames defining generation 1's
			// ids: the oldest frame left defines none.
			f.newGeneration()
			for i := 0; q.AckedFSN() < last0+testSyms; i++ {
				if i == 1000 {
					t.Fatalf("1000 frames appended and only FSN %d evicted", q.AckedFSN())
				}
				f.frames(1, 1)
			}
			if slices.Contains(q.SymbolGenerations(), 0) {
				t.Fatalf("generation 0 is still held (%v) with its frames evicted", q.SymbolGenerations())
			}
			evictedTo := q.AckedFSN()
			close(resume)

			waitAll(t, s, q)
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			// The server has processed every frame once it closed them all.
			waitFor(t, "the server to close every connection", func() bool { return srv.Connections() == 0 })
			counts := rowIDs(t, srv)
			for id := range int64(q.PublishedFSN()) {
				want := 1 // one row per frame: row id = FSN - 1
				if id >= testSyms && id < int64(evictedTo) {
					want = 0
				}
				if counts[id] != want {
					t.Errorf("row %d arrived %d times, want %d", id, counts[id], want)
				}
			}
			checkGenerations(t, srv, func(id int64) uint32 {
				if id <= int64(last0-1) {
					return 0
				}
				return 1
			})
			if r := refusals.refused(); len(r) != 0 || s.Err() != nil {
				t.Fatalf("the server refused %q (sender terminal: %v): a frame went out with ids it was never given", r, s.Err())
			}
			// One catch-up frame (generation 1's 7 entries), then each frame
			// left once; nothing on the connection that found frame 8 gone.
			if got, want := srv.Frames()-framesBefore, 1+int64(q.PublishedFSN()-evictedTo); got != want {
				t.Fatalf("the server received %d frames from the second sender, want %d", got, want)
			}
			connected := 0
			for _, st := range rec.States() {
				if st.Kind == Connected {
					connected++
				}
			}
			if rec.dictSize.Load() != testSyms || connected != 2 {
				t.Fatalf("catch-up registered %d entries over %d connections; want generation 1's %d after one recycle",
					rec.dictSize.Load(), connected, testSyms)
			}
		})
	}
}

// serverLog keeps a qwptest server's log lines that report a refused frame.
type serverLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *serverLog) logf(format string, args ...any) {
	if line := fmt.Sprintf(format, args...); strings.Contains(line, " refused with ") {
		l.mu.Lock()
		l.lines = append(l.lines, line)
		l.mu.Unlock()
	}
}

func (l *serverLog) refused() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

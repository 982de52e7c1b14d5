package sender

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// idRange is a delta section's ids [from, to).
type idRange struct{ from, to int }

// catchUps returns, per connection, the delta sections of the rowless
// messages (catch-up frames) the client sent, in order.
func catchUps(t *testing.T, msgs []clientMessage) map[int][]idRange {
	t.Helper()
	out := map[int][]idRange{}
	for _, m := range msgs {
		if len(m.msg) < qwp.HeaderSize || binary.LittleEndian.Uint16(m.msg[6:]) != 0 {
			continue // a frame with rows
		}
		from, to, err := qwp.DeltaDictRange(m.msg)
		if err != nil {
			t.Fatalf("connection %d sent an unreadable message: %v", m.conn, err)
		}
		if to > from {
			out[m.conn] = append(out[m.conn], idRange{from, to})
		}
	}
	return out
}

// trimSetup is a queue with a feeder, a stand-in behind a recording proxy,
// and the stand-in's refusals.
type trimSetup struct {
	q        *sfqueue.Queue
	f        *feeder
	srv      *qwptest.Server
	p        *proxy
	refusals *serverLog
}

func newTrimSetup(t *testing.T, sf bool) *trimSetup {
	t.Helper()
	o := sfqueue.Options{SymbolUse: symbolUse}
	if sf {
		o.Dir, o.SenderID, o.MaxSegmentBytes = t.TempDir(), "s", 64<<10
	}
	q, err := sfqueue.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() }) // after the senders' Close
	ts := &trimSetup{q: q, f: newFeeder(t, q, true), refusals: &serverLog{}}
	ts.srv = newServer(t, qwptest.Options{Logf: ts.refusals.logf})
	ts.p = newProxy(t, ts.srv.Addr(), proxyOptions{record: true})
	return ts
}

// run sends the whole queue and checks that no frame was refused.
func (ts *trimSetup) run(t *testing.T, rec *recorder) {
	t.Helper()
	s := startSender(t, ts.q, testOptions(rec, ts.p.URL()))
	waitAll(t, s, ts.q)
	if r := ts.refusals.refused(); len(r) != 0 || s.Err() != nil {
		t.Fatalf("the server refused %q (sender terminal: %v)", r, s.Err())
	}
}

// TestCatchUpRegistersOnlyIdsBeforeTheFirstFrame: a connection that starts
// mid-generation, where the queue's dictionary already holds the entries
// that later frames define (the writer runs ahead of the sender), registers
// only the ids below its first frame's delta section; the frames bring the
// rest themselves. Every row lands once with its symbol.
func TestCatchUpRegistersOnlyIdsBeforeTheFirstFrame(t *testing.T) {
	for _, sf := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "sf"}[sf], func(t *testing.T) {
			ts := newTrimSetup(t, sf)
			ts.f.frames(testSyms, 1) // FSN k defines id k-1
			ts.f.frames(3, 1)        // FSNs 8-10 define none
			ts.q.Ack(3)              // an earlier connection delivered FSNs 1-3
			rec := &recorder{}
			ts.run(t, rec)
			if got, want := catchUps(t, ts.p.messages()), map[int][]idRange{0: {{0, 3}}}; !equalRanges(got, want) {
				t.Fatalf("catch-up %v; want %v: ids 3-6 come with frames 4-7", got, want)
			}
			counts := rowIDs(t, ts.srv)
			for id := range int64(10) {
				if want := map[bool]int{true: 0, false: 1}[id < 3]; counts[id] != want {
					t.Errorf("row %d arrived %d times, want %d", id, counts[id], want)
				}
			}
			checkGenerations(t, ts.srv, func(int64) uint32 { return 0 })
			if rec.dictSize.Load() != 3 {
				t.Fatalf("catch-up size reported %d, want 3", rec.dictSize.Load())
			}
		})
	}
}

// TestGenerationSwitchNeedsNoCatchUp: at a generation switch the new
// connection starts with the new generation's first frame, which defines
// its ids from 0: nothing is registered twice, though the queue's
// dictionary of that generation is complete by then.
func TestGenerationSwitchNeedsNoCatchUp(t *testing.T) {
	ts := newTrimSetup(t, true)
	ts.f.frames(testSyms+2, 1)
	ts.f.newGeneration()
	ts.f.frames(testSyms+2, 1)
	ts.run(t, nil)
	if got := catchUps(t, ts.p.messages()); len(got) != 0 {
		t.Fatalf("catch-up %v; want none", got)
	}
	if n := len(ts.p.arrivals()); n != 2 {
		t.Fatalf("%d connections; want 2 (one recycle at the switch)", n)
	}
	exactRows(t, rowIDs(t, ts.srv), 2*(testSyms+2))
	checkGenerations(t, ts.srv, func(id int64) uint32 { return uint32(id / (testSyms + 2)) })
}

// TestCatchUpAcrossABrokenDeltaChain: the queue's dictionary holds an entry
// that no frame defines, and the frames after it start their delta sections
// past it (a writer restarted after storing it: loadGenDict counts every
// stored entry as registered). The connection that reaches that frame
// cannot send it (DICTIONARY_GAP); it recycles, and the next one registers
// the ids below the frame from the queue.
func TestCatchUpAcrossABrokenDeltaChain(t *testing.T) {
	ts := newTrimSetup(t, true)
	f := ts.f
	f.frames(3, 1) // ids 0-2
	extra := f.dict.ID([]byte("no frame defines me"))
	if err := ts.q.AddSymbols(0, int(extra), [][]byte{[]byte("no frame defines me")}); err != nil {
		t.Fatal(err)
	}
	f.enc.Reset(f.dict) // the next frame's delta section starts at 4
	f.frames(6, 1)
	ts.run(t, nil)
	if got, want := catchUps(t, ts.p.messages()), map[int][]idRange{1: {{0, 4}}}; !equalRanges(got, want) {
		t.Fatalf("catch-up %v; want %v", got, want)
	}
	exactRows(t, rowIDs(t, ts.srv), 9)
	checkGenerations(t, ts.srv, func(int64) uint32 { return 0 })
}

// TestReconnectsAcrossGenerationsKeepSymbols: connections dropped at many
// points, mid-generation and around switches, with OKs lost; every row
// lands with its generation's symbol and the server refuses nothing.
func TestReconnectsAcrossGenerationsKeepSymbols(t *testing.T) {
	for _, sf := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "sf"}[sf], func(t *testing.T) {
			ts := newTrimSetup(t, sf)
			const gens, perGen = 4, 12
			for g := range gens {
				if g > 0 {
					ts.f.newGeneration()
				}
				ts.f.frames(perGen/2, 1)
				ts.f.frames(perGen/4, 2) // two rows a frame
			}
			rows := int64(gens * (perGen/2 + 2*(perGen/4)))
			for _, n := range []int{2, 5, 9, 14, 20, 27} {
				ts.srv.DropAfter(n, n%2 == 0)
			}
			o := testOptions(nil, ts.p.URL())
			o.MaxInFlight = 3
			s := startSender(t, ts.q, o)
			waitAll(t, s, ts.q)
			if r := ts.refusals.refused(); len(r) != 0 || s.Err() != nil {
				t.Fatalf("the server refused %q (sender terminal: %v)", r, s.Err())
			}
			exactRows(t, rowIDs(t, ts.srv), rows)
			genOf := func(id int64) uint32 { return uint32(id / (rows / gens)) }
			checkGenerations(t, ts.srv, genOf)
			if n := len(ts.p.arrivals()); n < gens+3 {
				t.Fatalf("%d connections; the drops should have made more", n)
			}
			// Every catch-up registers a prefix of its generation.
			for conn, rs := range catchUps(t, ts.p.messages()) {
				if rs[0].from != 0 {
					t.Fatalf("connection %d's catch-up starts at id %d", conn, rs[0].from)
				}
			}
		})
	}
}

func equalRanges(a, b map[int][]idRange) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

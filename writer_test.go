package questdbexporter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
	"github.com/questdbexporter/questdbexporter/sfqueue/sfqueuetest"
)

// tinyEncoder is a batchEncoder for writer tests, independent of the data
// model: one row per gauge data point in table "t" (symbol "name" = metric
// name, symbol "sym" = attribute sym, long "id" = attribute id) and one row
// per log record in table "l" (long "id", varchar "body"), and one row per
// span in table "l" too (its name as the body). A metric named "fail" makes
// the batch fail after the rows before it.
type tinyEncoder struct {
	enc              *qwp.Encoder
	t, l             *qwp.Table
	ts, name, sym, n qwp.Col
	lts, lid, body   qwp.Col
	out              *[]byte // finishInto's buffer
	gap              int
}

func newTinyEncoder(t testing.TB, dict qwp.SymbolDict, maxFrame int) *tinyEncoder {
	t.Helper()
	e := &tinyEncoder{enc: qwp.NewEncoder(dict, qwp.EncoderOptions{MaxFrameBytes: maxFrame, DeltaSymbolDict: true})}
	var err error
	must := func(c qwp.Col, e error) qwp.Col {
		if e != nil {
			err = e
		}
		return c
	}
	e.t, _ = e.enc.Table("t")
	e.l, _ = e.enc.Table("l")
	e.ts = must(e.t.Column("", qwp.TypeTimestampNanos))
	e.name = must(e.t.Column("name", qwp.TypeSymbol))
	e.sym = must(e.t.Column("sym", qwp.TypeSymbol))
	e.n = must(e.t.Column("id", qwp.TypeLong))
	e.lts = must(e.l.Column("", qwp.TypeTimestampNanos))
	e.lid = must(e.l.Column("id", qwp.TypeLong))
	e.body = must(e.l.Column("body", qwp.TypeVarchar))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *tinyEncoder) row(tb *qwp.Table, set func(), emit func([]byte) error) error {
	for {
		set()
		err := tb.EndRow()
		if !errors.Is(err, qwp.ErrFrameFull) {
			return err
		}
		if err := e.finish(emit); err != nil {
			return err
		}
	}
}

// finish hands emit the frame, finished where finishInto says.
func (e *tinyEncoder) finish(emit func([]byte) error) error {
	start := len(*e.out) + e.gap
	*e.out = e.enc.Finish(append(*e.out, make([]byte, e.gap)...))
	return emit((*e.out)[start:])
}

func (e *tinyEncoder) encodeMetrics(md pmetric.Metrics, emit func([]byte) error) (int, error) {
	rows := 0
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		sms := rms.At(i).ScopeMetrics()
		for j := range sms.Len() {
			ms := sms.At(j).Metrics()
			for k := range ms.Len() {
				m := ms.At(k)
				if m.Name() == "fail" {
					return rows, errors.New("metric named fail")
				}
				dps := m.Gauge().DataPoints()
				for p := range dps.Len() {
					dp := dps.At(p)
					id, _ := dp.Attributes().Get("id")
					sym, _ := dp.Attributes().Get("sym")
					err := e.row(e.t, func() {
						e.t.TimestampNanos(e.ts, int64(dp.Timestamp()))
						e.t.SymbolString(e.name, m.Name())
						e.t.SymbolString(e.sym, sym.Str())
						e.t.Long(e.n, id.Int())
					}, emit)
					if err != nil {
						return rows, err
					}
					rows++
				}
			}
		}
	}
	return rows, nil
}

func (e *tinyEncoder) encodeLogs(ld plog.Logs, emit func([]byte) error) (int, error) {
	rows := 0
	rls := ld.ResourceLogs()
	for i := range rls.Len() {
		sls := rls.At(i).ScopeLogs()
		for j := range sls.Len() {
			lrs := sls.At(j).LogRecords()
			for k := range lrs.Len() {
				lr := lrs.At(k)
				id, _ := lr.Attributes().Get("id")
				err := e.row(e.l, func() {
					e.l.TimestampNanos(e.lts, int64(lr.Timestamp()))
					e.l.Long(e.lid, id.Int())
					e.l.VarcharString(e.body, lr.Body().Str())
				}, emit)
				if err != nil {
					return rows, err
				}
				rows++
			}
		}
	}
	return rows, nil
}

func (e *tinyEncoder) encodeTraces(td ptrace.Traces, emit func([]byte) error) (int, error) {
	rows := 0
	rss := td.ResourceSpans()
	for i := range rss.Len() {
		sss := rss.At(i).ScopeSpans()
		for j := range sss.Len() {
			spans := sss.At(j).Spans()
			for k := range spans.Len() {
				sp := spans.At(k)
				id, _ := sp.Attributes().Get("id")
				err := e.row(e.l, func() {
					e.l.TimestampNanos(e.lts, int64(sp.StartTimestamp()))
					e.l.Long(e.lid, id.Int())
					e.l.VarcharString(e.body, sp.Name())
				}, emit)
				if err != nil {
					return rows, err
				}
				rows++
			}
		}
	}
	return rows, nil
}

func (e *tinyEncoder) flush(emit func([]byte) error) error {
	if e.enc.Rows() == 0 {
		return nil
	}
	return e.finish(emit)
}

func (e *tinyEncoder) finishInto(buf *[]byte, gap int) { e.out, e.gap = buf, gap }

func (e *tinyEncoder) reset(dict qwp.SymbolDict) { e.enc.Reset(dict) }

func (e *tinyEncoder) frameRows() int { return e.enc.FinishedRows() }

// countingObserver records the writer's telemetry calls.
type countingObserver struct {
	groups, callers, frames, rows, failed, stalls atomic.Int64
}

func (o *countingObserver) groupAppended(callers, frames, rows int, _ uint64) {
	o.groups.Add(1)
	o.callers.Add(int64(callers))
	o.frames.Add(int64(frames))
	o.rows.Add(int64(rows))
}

func (o *countingObserver) groupStalled() { o.stalls.Add(1) }

func (o *countingObserver) groupFailed(int, error) { o.failed.Add(1) }

func (o *countingObserver) dictBoundReached(float64, int, int, dictEnd) {}

// testSpans is a traces batch of n spans with ids base..base+n-1.
func testSpans(base, n int) ptrace.Traces {
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	for i := range n {
		sp := spans.AppendEmpty()
		sp.SetStartTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + int64(base+i)))
		sp.SetName("span")
		sp.Attributes().PutInt("id", int64(base+i))
	}
	return td
}

// testGauge is a gauge batch of n points with ids base..base+n-1 and the
// symbol sym(id) on each.
func testGauge(name string, base, n int, sym func(id int) string) pmetric.Metrics {
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(name)
	dps := m.SetEmptyGauge().DataPoints()
	for i := range n {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + int64(base+i)))
		dp.SetDoubleValue(float64(i))
		dp.Attributes().PutInt("id", int64(base+i))
		dp.Attributes().PutStr("sym", sym(base+i))
	}
	return md
}

func testLogs(base, n int) plog.Logs {
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for i := range n {
		lr := lrs.AppendEmpty()
		lr.SetTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + int64(base+i)))
		lr.Attributes().PutInt("id", int64(base+i))
		lr.Body().SetStr(fmt.Sprintf("record %d", base+i))
	}
	return ld
}

// checkingQueue wraps a queue and fails the test when a frame arrives
// without the dictionary entries it defines or references (stored before,
// or in its own batch), or references an id of another generation.
type checkingQueue struct {
	*sfqueue.Queue
	t        testing.TB
	appends  atomic.Int64
	failNext atomic.Int64  // fail this many AppendWith calls
	failSyms atomic.Int64  // fail this many AppendWith calls that carry dictionary entries
	block    chan struct{} // when non-nil, AppendWith waits for it
	entered  chan struct{} // receives when AppendWith starts waiting on block
	// items is the item count appended with each FSN (the writer's
	// goroutine writes it; read it once the writes returned).
	items sync.Map // uint64 -> uint32
}

var errInjected = errors.New("injected append failure")

func (c *checkingQueue) AppendWith(ctx context.Context, b sfqueue.Batch) (uint64, error) {
	for _, p := range b.Payloads {
		gen, msg, err := splitPayload(p)
		if err != nil {
			c.t.Errorf("stored payload: %v", err)
			continue
		}
		_, end, err := qwp.DeltaDictRange(msg)
		if err != nil {
			c.t.Errorf("stored message: %v", err)
			continue
		}
		stored, err := c.OpenSymbols(gen)
		if err != nil {
			c.t.Errorf("stored generation %d: %v", gen, err)
			continue
		}
		have := stored.Len()
		stored.Close()
		for _, r := range b.Symbols {
			if r.Gen == gen && r.FirstID == have {
				have += len(r.Entries)
			}
		}
		if end > have {
			c.t.Errorf("frame of generation %d defines ids up to %d, but only %d are stored or come with it", gen, end, have)
		}
	}
	if c.block != nil {
		c.entered <- struct{}{}
		select {
		case <-c.block:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if c.failNext.Load() > 0 {
		c.failNext.Add(-1)
		return 0, errInjected
	}
	if len(b.Symbols) > 0 && c.failSyms.Load() > 0 {
		c.failSyms.Add(-1)
		return 0, errInjected
	}
	c.appends.Add(1)
	last, err := c.Queue.AppendWith(ctx, b)
	if err == nil {
		if len(b.Items) != len(b.Payloads) {
			c.t.Errorf("AppendWith of %d payloads with %d item counts", len(b.Payloads), len(b.Items))
		}
		for i, n := range b.Items {
			c.items.Store(last-uint64(len(b.Items)-1-i), n)
		}
	}
	return last, err
}

// decodedQueue is every row in a queue, decoded as a server would: one
// connection per generation, starting with an empty dictionary.
type decodedQueue struct {
	ids   map[int64]int            // row id -> times seen
	rows  map[uint64]int           // FSN -> rows its frame holds
	syms  map[int64]string         // metric row id -> its sym value
	gens  []uint32                 // generation of each frame
	dicts map[uint32]*qwptest.Dict // server dictionary at the end of each generation
}

func decodeQueue(t testing.TB, q *sfqueue.Queue) decodedQueue {
	t.Helper()
	out := decodedQueue{ids: map[int64]int{}, rows: map[uint64]int{}, syms: map[int64]string{}, dicts: map[uint32]*qwptest.Dict{}}
	cur := q.NewCursor()
	var dec *qwptest.Decoder
	for {
		fsn, payload, ok, err := cur.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		gen, msg, err := splitPayload(payload)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(out.gens); n == 0 || out.gens[n-1] != gen {
			if n > 0 && gen < out.gens[n-1] {
				t.Fatalf("frame %d has generation %d after generation %d", n, gen, out.gens[n-1])
			}
			dec = &qwptest.Decoder{}
			out.dicts[gen] = &dec.Dict
		}
		out.gens = append(out.gens, gen)
		m, err := dec.Decode(msg)
		if err != nil {
			t.Fatalf("frame %d (generation %d) does not decode on a fresh connection of its generation: %v", len(out.gens)-1, gen, err)
		}
		out.rows[fsn] = 0
		for _, b := range m.Tables {
			out.rows[fsn] += b.Rows
			var ids, syms []any
			for _, c := range b.Columns {
				switch c.Name {
				case "id":
					ids = c.Values
				case "sym":
					syms = c.Values
				}
			}
			for i, v := range ids {
				id := v.(int64)
				out.ids[id]++
				if syms != nil && syms[i] != nil {
					out.syms[id] = syms[i].(string)
				}
			}
		}
	}
	return out
}

// checkCommittedEnds fails the test when a generation or the queue ends on
// a FLAG_DEFER_COMMIT frame: a real server withholds its OK until a later
// frame of the connection commits, and none comes there.
func checkCommittedEnds(t testing.TB, q *sfqueue.Queue) {
	t.Helper()
	cur := q.NewCursor()
	var last []byte
	var lastGen uint32
	for {
		fsn, payload, ok, err := cur.Next()
		if err != nil {
			t.Fatal(err)
		}
		gen, msg, _ := splitPayload(payload)
		if last != nil && (!ok || gen != lastGen) && qwp.Deferred(last) {
			where := "the queue"
			if ok {
				where = fmt.Sprintf("generation %d (before FSN %d)", lastGen, fsn)
			}
			t.Fatalf("%s ends on a deferred frame", where)
		}
		if !ok {
			return
		}
		last, lastGen = slices.Clone(msg), gen
	}
}

type writerFixture struct {
	q   *checkingQueue
	w   *writer
	obs *countingObserver
}

func newWriterFixture(t *testing.T, o sfqueue.Options, maxEntries, maxFrame int) *writerFixture {
	t.Helper()
	q, err := sfqueue.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	cq := &checkingQueue{Queue: q, t: t, entered: make(chan struct{}, 100)}
	dict, err := loadGenDict(cq, maxEntries, 1<<30, 1<<30, 0)
	if err != nil {
		t.Fatal(err)
	}
	obs := &countingObserver{}
	w := newWriter(cq, dict, newTinyEncoder(t, dict, maxFrame), obs, q.Fits, maxFrame)
	t.Cleanup(func() {
		w.close()
		q.Close()
	})
	return &writerFixture{q: cq, w: w, obs: obs}
}

func symOf(id int) string { return fmt.Sprintf("s%d", id%50) }

func TestWriterConcurrentCallersEachStoredOnce(t *testing.T) {
	callers, perCaller := 16, 20
	if testing.Short() {
		callers, perCaller = 8, 10
	}
	const points = 7
	f := newWriterFixture(t, sfqueue.Options{}, 1_000_000, 4096)
	var wg sync.WaitGroup
	var okIDs sync.Map
	var fsnErr atomic.Value
	for c := range callers {
		wg.Go(func() {
			for i := range perCaller {
				base := (c*perCaller + i) * points
				var fsn uint64
				var err error
				switch i % 4 {
				case 2:
					fsn, err = f.w.writeLogs(context.Background(), testLogs(base, points))
				case 3:
					fsn, err = f.w.writeTraces(context.Background(), testSpans(base, points))
				default:
					fsn, err = f.w.writeMetrics(context.Background(), testGauge("g", base, points, symOf))
				}
				if err != nil {
					fsnErr.Store(err)
					return
				}
				if fsn == 0 || fsn > f.q.PublishedFSN() {
					fsnErr.Store(fmt.Errorf("batch %d: fsn %d outside the published range 1..%d", base, fsn, f.q.PublishedFSN()))
				}
				okIDs.Store(base, true)
			}
		})
	}
	wg.Wait()
	if err, _ := fsnErr.Load().(error); err != nil {
		t.Fatal(err)
	}
	got := decodeQueue(t, f.q.Queue)
	total := 0
	okIDs.Range(func(k, _ any) bool {
		base := k.(int)
		for id := base; id < base+points; id++ {
			if n := got.ids[int64(id)]; n != 1 {
				t.Errorf("row %d stored %d times, want exactly once", id, n)
			}
		}
		total += points
		return true
	})
	if total != callers*perCaller*points || len(got.ids) != total {
		t.Fatalf("%d rows acknowledged, %d distinct rows stored, want %d", total, len(got.ids), callers*perCaller*points)
	}
	if g, c := f.obs.groups.Load(), f.obs.callers.Load(); c != int64(callers*perCaller) || g > c {
		t.Fatalf("%d groups for %d callers", g, c)
	}
	if f.obs.rows.Load() != int64(total) {
		t.Fatalf("observer counted %d rows, want %d", f.obs.rows.Load(), total)
	}
}

func TestWriterGroupsWaitingCallers(t *testing.T) {
	// Hold the first group inside AppendWith while more callers queue up:
	// they must all be committed by one following group.
	f := newWriterFixture(t, sfqueue.Options{}, 1_000_000, 64<<10)
	f.q.block = make(chan struct{})
	const waiting = 10
	var wg sync.WaitGroup
	errs := make(chan error, waiting+1)
	wg.Go(func() {
		_, err := f.w.writeMetrics(context.Background(), testGauge("g", 0, 1, symOf))
		errs <- err
	})
	<-f.q.entered
	for i := range waiting {
		wg.Go(func() {
			_, err := f.w.writeMetrics(context.Background(), testGauge("g", 100+i, 1, symOf))
			errs <- err
		})
	}
	waitFor(t, func() bool { return len(f.w.reqs) == waiting })
	close(f.q.block)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if g := f.obs.groups.Load(); g != 2 {
		t.Fatalf("%d groups for 1 + %d callers, want 2 (the waiting callers share one group)", g, waiting)
	}
	if a := f.q.appends.Load(); a != 2 {
		t.Fatalf("%d AppendWith calls, want 2", a)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWriterDictionaryGenerations(t *testing.T) {
	const maxEntries = 7
	f := newWriterFixture(t, sfqueue.Options{}, maxEntries, 300)
	uniq := func(id int) string { return fmt.Sprintf("sym-%d", id) }
	const batches, points = 12, 5
	for b := range batches {
		if _, err := f.w.writeMetrics(context.Background(), testGauge(fmt.Sprintf("m%d", b%3), b*points, points, uniq)); err != nil {
			t.Fatal(err)
		}
	}
	got := decodeQueue(t, f.q.Queue)
	if len(got.ids) != batches*points {
		t.Fatalf("%d rows stored, want %d", len(got.ids), batches*points)
	}
	for id, s := range got.syms {
		if want := uniq(int(id)); s != want {
			t.Fatalf("row %d decoded sym %q, want %q", id, s, want)
		}
	}
	last := got.gens[len(got.gens)-1]
	if last < 3 {
		t.Fatalf("last generation %d: %d distinct symbols with a %d-entry limit should need more generations", last, batches*points, maxEntries)
	}
	for gen, d := range got.dicts {
		persisted := sfqueuetest.Symbols(t, f.q, gen)
		if d.Len() != len(persisted) {
			t.Fatalf("generation %d: server dictionary has %d ids, .symbol-dict %d", gen, d.Len(), len(persisted))
		}
		for id := range d.Len() {
			if d.Entry(id) != string(persisted[id]) {
				t.Fatalf("generation %d id %d: server %q, persisted %q", gen, id, d.Entry(id), persisted[id])
			}
		}
		// A generation may pass the limit by one frame's new symbols only.
		if gen != last && d.Len() > maxEntries+points*2 {
			t.Fatalf("generation %d holds %d ids, far above the %d limit", gen, d.Len(), maxEntries)
		}
	}
}

func TestWriterFailedGroupCatchUp(t *testing.T) {
	f := newWriterFixture(t, sfqueue.Options{}, 1_000_000, 64<<10)
	uniq := func(id int) string { return fmt.Sprintf("sym-%d", id) }
	if _, err := f.w.writeMetrics(context.Background(), testGauge("g", 0, 3, uniq)); err != nil {
		t.Fatal(err)
	}
	f.q.failNext.Store(1)
	if _, err := f.w.writeMetrics(context.Background(), testGauge("g", 10, 3, uniq)); !errors.Is(err, errInjected) {
		t.Fatalf("failed append returned %v, want the injected error", err)
	}
	// The ids of the lost frame were assigned; the next group must define
	// them again before using any id above them.
	if _, err := f.w.writeMetrics(context.Background(), testGauge("g", 20, 3, func(id int) string { return uniq(id - 10) })); err != nil {
		t.Fatal(err)
	}
	// One connection over the whole queue: no reconnect catch-up helps here.
	got := decodeQueue(t, f.q.Queue)
	for _, id := range []int64{0, 1, 2, 20, 21, 22} {
		if got.ids[id] != 1 {
			t.Fatalf("row %d stored %d times, want once", id, got.ids[id])
		}
	}
	for _, id := range []int64{10, 11, 12} {
		if got.ids[id] != 0 {
			t.Fatalf("row %d of the failed group is in the queue", id)
		}
	}
	if got.syms[20] != uniq(10) {
		t.Fatalf("row 20 sym %q, want %q", got.syms[20], uniq(10))
	}
}

// TestWriterStoresRowsPerFrame: every frame goes to the queue with the
// rows it holds (what an eviction counts), across frames split by size,
// dictionary generations, and the rowless catch-up and commit frames after
// a failed group.
func TestWriterStoresRowsPerFrame(t *testing.T) {
	f := newWriterFixture(t, sfqueue.Options{}, 40, 512)
	uniq := func(id int) string { return fmt.Sprintf("sym-%d", id) }
	f.q.failNext.Store(1)
	if _, err := f.w.writeMetrics(context.Background(), testGauge("g", 0, 5, uniq)); !errors.Is(err, errInjected) {
		t.Fatalf("failed append returned %v, want the injected error", err)
	}
	for i := range 6 {
		if _, err := f.w.writeMetrics(context.Background(), testGauge("g", 100*(i+1), 30, uniq)); err != nil {
			t.Fatal(err)
		}
		if _, err := f.w.writeLogs(context.Background(), testLogs(10_000+100*i, 7)); err != nil {
			t.Fatal(err)
		}
	}
	got := decodeQueue(t, f.q.Queue)
	var rowless, total int
	for fsn, rows := range got.rows {
		n, ok := f.q.items.Load(fsn)
		if !ok || int(n.(uint32)) != rows {
			t.Errorf("FSN %d holds %d rows, appended with item count %v (recorded %v)", fsn, rows, n, ok)
		}
		if rows == 0 {
			rowless++
		}
		total += rows
	}
	if len(got.gens) < 4 || got.gens[len(got.gens)-1] == 0 || rowless == 0 || total != 6*(30+7) {
		t.Fatalf("%d frames in generations up to %d, %d rowless, %d rows; want several frames, a rotation, catch-up frames and %d rows",
			len(got.gens), got.gens[len(got.gens)-1], rowless, total, 6*(30+7))
	}
}

func TestWriterPerCallerResults(t *testing.T) {
	f := newWriterFixture(t, sfqueue.Options{}, 1_000_000, 64<<10)
	f.q.block = make(chan struct{})
	type result struct {
		name string
		err  error
	}
	results := make(chan result, 3)
	var wg sync.WaitGroup
	submit := func(name string, base int) {
		wg.Go(func() {
			_, err := f.w.writeMetrics(context.Background(), testGauge(name, base, 2, symOf))
			results <- result{name, err}
		})
	}
	submit("first", 0) // holds the writer in AppendWith
	<-f.q.entered
	submit("ok", 10)
	submit("fail", 20)
	waitFor(t, func() bool { return len(f.w.reqs) == 2 })
	close(f.q.block)
	wg.Wait()
	close(results)
	for r := range results {
		switch r.name {
		case "fail":
			if r.err == nil || !consumererror.IsPermanent(r.err) {
				t.Fatalf("a batch that cannot be converted returned %v, want a permanent error", r.err)
			}
		default:
			if r.err != nil {
				t.Fatalf("%s: %v", r.name, r.err)
			}
		}
	}
	got := decodeQueue(t, f.q.Queue)
	if got.ids[0] != 1 || got.ids[10] != 1 || got.ids[11] != 1 {
		t.Fatalf("rows of the successful callers missing: %v", got.ids)
	}
}

func TestWriterGroupFailureFailsEveryCaller(t *testing.T) {
	f := newWriterFixture(t, sfqueue.Options{}, 1_000_000, 64<<10)
	f.q.failNext.Store(1)
	f.q.block = make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := range 4 {
		wg.Go(func() {
			_, err := f.w.writeMetrics(context.Background(), testGauge("g", i*10, 2, symOf))
			errs <- err
		})
	}
	<-f.q.entered
	close(f.q.block)
	wg.Wait()
	close(errs)
	var nilCount int
	for err := range errs {
		if err == nil {
			nilCount++
		} else if !errors.Is(err, errInjected) {
			t.Fatalf("unexpected error %v", err)
		}
	}
	got := decodeQueue(t, f.q.Queue)
	if stored := len(got.ids) / 2; stored != nilCount {
		t.Fatalf("%d callers got nil but %d batches are stored", nilCount, stored)
	}
	if f.obs.failed.Load() != 1 {
		t.Fatalf("%d failed groups observed, want 1", f.obs.failed.Load())
	}
}

func TestWriterCallerDeadline(t *testing.T) {
	f := newWriterFixture(t, sfqueue.Options{}, 1_000_000, 64<<10)
	f.q.block = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := f.w.writeMetrics(ctx, testGauge("g", 0, 1, symOf))
		done <- err
	}()
	<-f.q.entered
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("caller whose context ended got %v, want context.Canceled", err)
	}
	close(f.q.block)
}

func TestWriterAbandonedBeforeEncodingIsNotRead(t *testing.T) {
	f := newWriterFixture(t, sfqueue.Options{}, 1_000_000, 64<<10)
	f.q.block = make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := f.w.writeMetrics(context.Background(), testGauge("g", 0, 1, symOf))
		first <- err
	}()
	<-f.q.entered
	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() {
		_, err := f.w.writeMetrics(ctx, testGauge("g", 10, 1, symOf))
		second <- err
	}()
	waitFor(t, func() bool { return len(f.w.reqs) == 1 })
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned call returned %v, want context.Canceled", err)
	}
	close(f.q.block)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// A later call makes sure the abandoned request went through the loop.
	if _, err := f.w.writeMetrics(context.Background(), testGauge("g", 20, 1, symOf)); err != nil {
		t.Fatal(err)
	}
	got := decodeQueue(t, f.q.Queue)
	if got.ids[0] != 1 || got.ids[20] != 1 || got.ids[10] != 0 {
		t.Fatalf("stored rows %v: want 0 and 20 once, and nothing of the abandoned batch", got.ids)
	}
}

func TestWriterClosed(t *testing.T) {
	f := newWriterFixture(t, sfqueue.Options{}, 1_000_000, 64<<10)
	f.w.close()
	if _, err := f.w.writeLogs(context.Background(), testLogs(0, 1)); !errors.Is(err, errWriterClosed) {
		t.Fatalf("write after close returned %v, want errWriterClosed", err)
	}
}

func TestWriterFlushDurabilityReturnsAfterFsync(t *testing.T) {
	f := newWriterFixture(t, sfqueue.Options{Dir: t.TempDir(), SenderID: "w", Durability: sfqueue.DurabilityFlush}, 1_000_000, 64<<10)
	var wg sync.WaitGroup
	var bad atomic.Value
	for i := range 8 {
		wg.Go(func() {
			fsn, err := f.w.writeMetrics(context.Background(), testGauge("g", i*10, 3, symOf))
			if err != nil {
				bad.Store(err)
				return
			}
			if st := f.q.Stats(); st.DurableFSN < fsn || st.Fsyncs == 0 {
				bad.Store(fmt.Errorf("call returned fsn %d with durable fsn %d after %d fsyncs", fsn, st.DurableFSN, st.Fsyncs))
			}
		})
	}
	wg.Wait()
	if err, _ := bad.Load().(error); err != nil {
		t.Fatal(err)
	}
	if st := f.q.Stats(); st.Fsyncs > uint64(f.obs.groups.Load())*2 {
		t.Fatalf("%d fsyncs for %d groups", st.Fsyncs, f.obs.groups.Load())
	}
}

func TestWriterFullQueueBlock(t *testing.T) {
	f := newWriterFixture(t, sfqueue.Options{MaxTotalBytes: 2048, MaxSegmentBytes: 1024, AppendDeadline: 20 * time.Millisecond}, 1_000_000, 600)
	var full *sfqueue.FullError
	for i := range 100 {
		_, err := f.w.writeMetrics(context.Background(), testGauge("g", i*10, 5, symOf))
		if errors.As(err, &full) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if full == nil {
		t.Fatal("a queue that is never acked never reported full")
	}
	if full.Reason != sfqueue.Publishing {
		t.Fatalf("reason %v, want publishing", full.Reason)
	}
	stalls := f.obs.stalls.Load()
	if stalls < 1 {
		t.Fatal("the refused append was not counted as a stall")
	}
	// Free exactly enough room while an append waits: it stalls, then
	// succeeds, and the stall is counted.
	f.q.block = make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := f.w.writeMetrics(context.Background(), testGauge("g", 5000, 5, symOf))
		done <- err
	}()
	<-f.q.entered
	f.q.Ack(f.q.PublishedFSN())
	close(f.q.block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := f.obs.stalls.Load(); got != stalls+1 {
		t.Fatalf("%d stalls counted, want %d", got, stalls+1)
	}
}

func TestWriterRotationFailureThenCatchUp(t *testing.T) {
	// A generation fills inside a group but cannot be persisted: the group
	// fails. The next group must first re-register the ids of the lost
	// frames, then rotate, and every stored frame must decode.
	const maxEntries = 4
	f := newWriterFixture(t, sfqueue.Options{}, maxEntries, 64<<10)
	// Catch-up frames of one entry each, so the catch-up spans frames.
	f.w.maxFrameBytes = 40
	uniq := func(id int) string { return fmt.Sprintf("symbol-number-%d", id) }
	f.q.failSyms.Store(1)
	if _, err := f.w.writeMetrics(context.Background(), testGauge("g", 0, 3, uniq)); !errors.Is(err, errInjected) {
		t.Fatalf("group whose dictionary could not be stored returned %v", err)
	}
	for b := 1; b <= 3; b++ {
		if _, err := f.w.writeMetrics(context.Background(), testGauge("g", b*10, 3, uniq)); err != nil {
			t.Fatal(err)
		}
	}
	got := decodeQueue(t, f.q.Queue)
	for b := 1; b <= 3; b++ {
		for id := b * 10; id < b*10+3; id++ {
			if got.ids[int64(id)] != 1 || got.syms[int64(id)] != uniq(id) {
				t.Fatalf("row %d: stored %d times with sym %q", id, got.ids[int64(id)], got.syms[int64(id)])
			}
		}
	}
	if got.ids[0] != 0 {
		t.Fatal("a row of the failed group is in the queue")
	}
	if last := got.gens[len(got.gens)-1]; last == 0 {
		t.Fatal("no rotation happened with 4-entry generations")
	}
	checkCommittedEnds(t, f.q.Queue)
}

func TestWriterCatchUpNeverEndsTheQueueDeferred(t *testing.T) {
	// A group fails after assigning ids; the next group brings no rows at
	// all. Its catch-up frames are then the queue's last frames, and a
	// sender waiting for their OK (Close, an orphan drainer) would wait for
	// ever unless they are committed.
	f := newWriterFixture(t, sfqueue.Options{}, 1_000_000, 64<<10)
	uniq := func(id int) string { return fmt.Sprintf("symbol-number-%d", id) }
	f.q.failSyms.Store(1)
	if _, err := f.w.writeMetrics(context.Background(), testGauge("g", 0, 3, uniq)); !errors.Is(err, errInjected) {
		t.Fatalf("group whose dictionary could not be stored returned %v", err)
	}
	if _, err := f.w.writeMetrics(context.Background(), pmetric.NewMetrics()); err != nil {
		t.Fatal(err)
	}
	if f.q.PublishedFSN() == 0 {
		t.Fatal("the ids of the failed group were not re-registered")
	}
	checkCommittedEnds(t, f.q.Queue)
}

// TestWriterEmitTakesFramesInPlace: emit takes a frame only where
// finishInto put it, the arena's tail after the generation prefix's room;
// anything else, and a tail that is no message, fails the group and leaves
// the arena as it was before the frame.
func TestWriterEmitTakesFramesInPlace(t *testing.T) {
	w := &writer{enc: newTinyEncoder(t, qwp.NewMemDict(), 1<<16)}
	w.arena = append(w.arena, "earlier payloads"...)
	if err := w.emit(bytes.Repeat([]byte{1}, qwp.HeaderSize)); err == nil || w.groupErr == nil {
		t.Fatalf("emit of a frame outside the arena = %v, want the group failed", err)
	}
	if string(w.arena) != "earlier payloads" || len(w.ends) != 0 {
		t.Fatalf("after the refusal the arena is %q with %d payloads; want it unchanged", w.arena, len(w.ends))
	}
	w.groupErr = nil
	w.arena = append(w.arena, 0, 0, 0, 0, 'n', 'o', 't', ' ', 'Q', 'W', 'P')
	if err := w.emit(w.arena[len(w.arena)-7:]); err == nil || w.groupErr == nil {
		t.Fatalf("emit of an unreadable message = %v, want the group failed", err)
	}
	if string(w.arena) != "earlier payloads" || len(w.ends) != 0 {
		t.Fatalf("after the unreadable message the arena is %q with %d payloads; want its tail cut off", w.arena, len(w.ends))
	}
}

// TestWriterRecycledGenerationsKeepSymbols: generations of long new symbols
// that rotate at their byte limit, each lending its memory to the next
// (qwp.MemDict.Recycle) once its group is stored, in memory-only and SF
// queues: every row decodes, on a fresh connection per generation, to its
// own symbol, and each generation's stored dictionary is what the frames
// defined.
func TestWriterRecycledGenerationsKeepSymbols(t *testing.T) {
	long := func(id int) string { return fmt.Sprintf("sym-%07d-%s", id, strings.Repeat("x", 180)) }
	for _, o := range []sfqueue.Options{{}, {Dir: t.TempDir(), SenderID: "s1"}} {
		q, err := sfqueue.Open(o)
		if err != nil {
			t.Fatal(err)
		}
		cq := &checkingQueue{Queue: q, t: t, entered: make(chan struct{}, 100)}
		dict, err := loadGenDict(cq, 1_000_000, 600<<10, 600<<10, 0)
		if err != nil {
			t.Fatal(err)
		}
		w := newWriter(cq, dict, newTinyEncoder(t, dict, 16<<10), &countingObserver{}, q.Fits, 16<<10) // frames of ~80 rows: generations rotate mid-batch
		const batches, points = 12, 1000                                                               // a group holds a rotation, and new symbols after it
		for b := range batches {
			if _, err := w.writeMetrics(context.Background(), testGauge("m", b*points, points, long)); err != nil {
				t.Fatal(err)
			}
		}
		w.close()
		got := decodeQueue(t, q)
		if len(got.syms) != batches*points {
			t.Fatalf("%d rows with a symbol, want %d", len(got.syms), batches*points)
		}
		for id, s := range got.syms {
			if want := long(int(id)); s != want {
				t.Fatalf("row %d decoded %.20q..., want %.20q...", id, s, want)
			}
		}
		if last := got.gens[len(got.gens)-1]; last < 3 {
			t.Fatalf("%d generations, want at least 4 of 600 KiB for %d symbols", last+1, batches*points)
		}
		for gen, d := range got.dicts {
			// The queue may hold a few ids more than the frames define: the
			// symbols of rows that moved on to the next generation's first
			// frame after looking their symbol up in this one.
			persisted := sfqueuetest.Symbols(t, q, gen)
			if d.Len() > len(persisted) || len(persisted) > d.Len()+200 {
				t.Fatalf("generation %d: frames define %d ids, the queue holds %d", gen, d.Len(), len(persisted))
			}
			for id, e := range persisted {
				var n int
				_, err := fmt.Sscanf(string(e), "sym-%07d-", &n)
				if id < d.Len() && d.Entry(id) != string(e) || id >= d.Len() && (err != nil || string(e) != long(n)) {
					t.Fatalf("generation %d id %d: the queue holds %.30q", gen, id, e)
				}
			}
		}
		q.Close()
	}
}

// paddedSpans is testSpans with a pad-byte string attribute on every span,
// so that the batch's pdata is large beside the rows it makes.
func paddedSpans(n, pad int) ptrace.Traces {
	td := testSpans(0, n)
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := range n {
		spans.At(i).Attributes().PutStr("pad", strings.Repeat(string(rune('a'+i%26)), pad))
	}
	return td
}

func TestWriterLetsGoOfEncodedBatches(t *testing.T) {
	// Once its rows are in the group's frames, a caller's batch must not
	// stay reachable from the writer while the group is stored (here: held
	// inside AppendWith). The caller's own frames keep it only as long as
	// they must (the receiver's handler does not use it after the call).
	f := newWriterFixture(t, sfqueue.Options{}, 1_000_000, 64<<10)
	f.q.block = make(chan struct{})
	const spans = 20_000
	base := int64(liveHeap())
	td := paddedSpans(spans, 512)
	batch := int64(liveHeap()) - base
	done := make(chan error, 1)
	go func(td ptrace.Traces) {
		_, err := f.w.writeTraces(context.Background(), td)
		done <- err
	}(td)
	<-f.q.entered
	held := int64(liveHeap()) - base
	close(f.q.block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if held > batch/4 {
		t.Errorf("while its group was being stored, %d B more than before the batch were live; the batch is %d B: the writer kept the encoded batch", held, batch)
	}
	if got := decodeQueue(t, f.q.Queue); len(got.ids) != spans {
		t.Fatalf("%d distinct span ids stored, want %d", len(got.ids), spans)
	}
}

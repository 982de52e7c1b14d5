package datamodel

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
)

// exportTime is the fixed clock of the tests.
var exportTime = time.Unix(0, 1_700_000_999_000_000_000)

// harness encodes batches through a real qwp.Encoder and decodes every
// emitted frame with the strict qwptest decoder, as a server would.
type harness struct {
	t        testing.TB
	dict     *qwp.MemDict
	enc      *qwp.Encoder
	re       *Encoder
	maxFrame int
	frames   [][]byte
	dec      qwptest.Decoder
	tables   map[string]*decodedTable
}

// decodedTable is every row a table received, in order.
type decodedTable struct {
	types map[string]qwp.ColumnType
	rows  []map[string]any // column -> value; absent or nil = NULL
}

func newHarness(t testing.TB, maxFrame int, cfg EncoderConfig) *harness {
	t.Helper()
	if cfg.Tables == (Tables{}) {
		cfg.Tables = DefaultTables()
	}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return exportTime }
	}
	h := &harness{t: t, dict: qwp.NewMemDict(), maxFrame: maxFrame, tables: map[string]*decodedTable{}}
	h.enc = qwp.NewEncoder(h.dict, qwp.EncoderOptions{MaxFrameBytes: maxFrame, Gorilla: true, DeltaSymbolDict: true})
	re, err := NewEncoder(h.enc, cfg)
	if err != nil {
		t.Fatalf("NewEncoder: %v", err)
	}
	h.re = re
	return h
}

func (h *harness) emit(frame []byte) error {
	if h.maxFrame > 0 && len(frame) > h.maxFrame {
		h.t.Fatalf("frame of %d bytes exceeds MaxFrameBytes %d", len(frame), h.maxFrame)
	}
	h.frames = append(h.frames, append([]byte(nil), frame...))
	msg, err := h.dec.Decode(frame)
	if err != nil {
		h.t.Fatalf("frame %d refused by the strict decoder: %v", len(h.frames), err)
	}
	for _, b := range msg.Tables {
		dt := h.tables[b.Table]
		if dt == nil {
			dt = &decodedTable{types: map[string]qwp.ColumnType{}}
			h.tables[b.Table] = dt
		}
		first := len(dt.rows)
		for range b.Rows {
			dt.rows = append(dt.rows, map[string]any{})
		}
		for _, c := range b.Columns {
			if prev, ok := dt.types[c.Name]; ok && prev != c.Type {
				h.t.Fatalf("table %s column %q is %s in one frame and %s in another", b.Table, c.Name, prev, c.Type)
			}
			dt.types[c.Name] = c.Type
			for i, v := range c.Values {
				if v != nil {
					dt.rows[first+i][c.Name] = v
				}
			}
		}
	}
	return nil
}

func (h *harness) metrics(md pmetric.Metrics) Stats {
	h.t.Helper()
	st, err := h.re.EncodeMetrics(md, h.emit)
	if err != nil {
		h.t.Fatalf("encodeMetrics: %v", err)
	}
	h.flush()
	return st
}

func (h *harness) logs(ld plog.Logs) Stats {
	h.t.Helper()
	st, err := h.re.EncodeLogs(ld, h.emit)
	if err != nil {
		h.t.Fatalf("encodeLogs: %v", err)
	}
	h.flush()
	return st
}

func (h *harness) flush() {
	h.t.Helper()
	if err := h.re.Flush(h.emit); err != nil {
		h.t.Fatalf("flush: %v", err)
	}
	if h.enc.Rows() != 0 {
		h.t.Fatalf("flush left %d rows in the encoder", h.enc.Rows())
	}
}

func (h *harness) table(name string) *decodedTable {
	h.t.Helper()
	dt := h.tables[name]
	if dt == nil {
		h.t.Fatalf("no rows reached table %s", name)
	}
	return dt
}

// oneRow returns the only row of a table.
func (h *harness) oneRow(name string) map[string]any {
	h.t.Helper()
	dt := h.table(name)
	if len(dt.rows) != 1 {
		h.t.Fatalf("table %s has %d rows, want 1", name, len(dt.rows))
	}
	return dt.rows[0]
}

// checkRow compares a decoded row with want exactly: same columns set, same
// values (NaN equals NaN); columns absent from want must be NULL.
func checkRow(t testing.TB, got map[string]any, want map[string]any) {
	t.Helper()
	for col, w := range want {
		g, ok := got[col]
		if !ok {
			t.Errorf("column %q is NULL, want %#v", col, w)
			continue
		}
		if !sameValue(g, w) {
			t.Errorf("column %q = %#v, want %#v", col, g, w)
		}
	}
	for col, g := range got {
		if _, ok := want[col]; !ok {
			t.Errorf("column %q = %#v, want NULL", col, g)
		}
	}
}

func sameValue(got, want any) bool {
	switch w := want.(type) {
	case float64:
		g, ok := got.(float64)
		return ok && (g == w && math.Signbit(g) == math.Signbit(w) || math.IsNaN(g) && math.IsNaN(w))
	case []float64:
		a, ok := got.(qwptest.Array)
		if !ok || len(a.Shape) != 1 || int(a.Shape[0]) != len(w) || len(a.Doubles) != len(w) {
			return false
		}
		for i := range w {
			if !sameValue(a.Doubles[i], w[i]) {
				return false
			}
		}
		return true
	}
	return fmt.Sprint(got) == fmt.Sprint(want) && fmt.Sprintf("%T", got) == fmt.Sprintf("%T", want)
}

func TestMetricEncoderConfigErrors(t *testing.T) {
	tests := []struct {
		name    string
		cfg     EncoderConfig
		wantErr string
	}{
		{"bad table name", EncoderConfig{Tables: func() Tables { n := DefaultTables(); n.Sum = "a/b"; return n }()}, "sum table"},
		{"shared table", EncoderConfig{Tables: func() Tables { n := DefaultTables(); n.Logs = "OTEL_metrics_gauge"; return n }()}, "used for both gauge and logs"},
		{"empty table", EncoderConfig{Tables: func() Tables { n := DefaultTables(); n.Summary = ""; return n }()}, "summary table"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			enc := qwp.NewEncoder(qwp.NewMemDict(), qwp.EncoderOptions{DeltaSymbolDict: true})
			_, err := NewEncoder(enc, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestMetricEmitErrorAbortsBatch(t *testing.T) {
	h := newHarness(t, 2048, EncoderConfig{})
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("g")
	dps := m.SetEmptyGauge().DataPoints()
	for i := range 200 {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(1)
		dp.Attributes().PutInt("i", int64(i))
	}
	boom := errors.New("queue closed")
	calls := 0
	st, err := h.re.EncodeMetrics(md, func([]byte) error { calls++; return boom })
	if !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("err = %v after %d emits, want the emit error after the first", err, calls)
	}
	if st.Rows[tableGauge] == 0 || st.Rows[tableGauge] >= 200 {
		t.Fatalf("rows written before the failure = %d, want some but not all", st.Rows[tableGauge])
	}
}

// emit may start a new dictionary generation (Encoder.Reset with an empty
// dictionary) between frames, as the writer does when a generation is full:
// the row that found the frame full is written again against the new
// dictionary, and every frame decodes on a fresh connection of its own
// generation.
func TestMetricEmitMayResetDictionary(t *testing.T) {
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("gen")
	dps := m.SetEmptyGauge().DataPoints()
	const n = 300
	for i := range n {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(pcommon.Timestamp(testT1 + int64(i)))
		dp.SetDoubleValue(float64(i))
		dp.Attributes().PutInt("series", int64(i)) // a new symbol in every row
	}
	const limit = 1024
	enc := qwp.NewEncoder(qwp.NewMemDict(), qwp.EncoderOptions{MaxFrameBytes: limit, Gorilla: true, DeltaSymbolDict: true})
	re, err := NewEncoder(enc, EncoderConfig{Tables: DefaultTables()})
	if err != nil {
		t.Fatal(err)
	}
	var values []float64
	generations := 0
	emit := func(frame []byte) error {
		var dec qwptest.Decoder // a new connection: the server knows no symbols
		msg, err := dec.Decode(frame)
		if err != nil {
			t.Fatalf("frame of generation %d refused: %v", generations, err)
		}
		if msg.DeltaStart != 0 {
			t.Fatalf("generation %d frame's delta starts at %d, want 0", generations, msg.DeltaStart)
		}
		for _, b := range msg.Tables {
			for _, c := range b.Columns {
				if c.Name == "value" {
					for _, v := range c.Values {
						values = append(values, v.(float64))
					}
				}
			}
		}
		generations++
		enc.Reset(qwp.NewMemDict())
		return nil
	}
	st, err := re.EncodeMetrics(md, emit)
	if err != nil {
		t.Fatal(err)
	}
	if err := re.Flush(emit); err != nil {
		t.Fatal(err)
	}
	if st.Rows[tableGauge] != n || len(values) != n || generations < 5 {
		t.Fatalf("%d rows counted, %d decoded over %d generations", st.Rows[tableGauge], len(values), generations)
	}
	for i, v := range values {
		if v != float64(i) {
			t.Fatalf("row %d has value %v: a row was lost or repeated across a generation switch", i, v)
		}
	}
}

// singlePointBatches splits md into batches of one data point each, keeping
// the point's resource, scope and metric.
func singlePointBatches(md pmetric.Metrics) []pmetric.Metrics {
	var out []pmetric.Metrics
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		sms := rms.At(i).ScopeMetrics()
		for j := range sms.Len() {
			ms := sms.At(j).Metrics()
			for k := range ms.Len() {
				for p := range dataPointCount(ms.At(k)) {
					one := pmetric.NewMetrics()
					rm := one.ResourceMetrics().AppendEmpty()
					rms.At(i).Resource().CopyTo(rm.Resource())
					sm := rm.ScopeMetrics().AppendEmpty()
					sms.At(j).Scope().CopyTo(sm.Scope())
					m := sm.Metrics().AppendEmpty()
					ms.At(k).CopyTo(m)
					n := 0
					otherPoint := func() bool { n++; return n-1 != p } // RemoveIf drops every other point
					switch m.Type() {
					case pmetric.MetricTypeGauge:
						m.Gauge().DataPoints().RemoveIf(func(pmetric.NumberDataPoint) bool { return otherPoint() })
					case pmetric.MetricTypeSum:
						m.Sum().DataPoints().RemoveIf(func(pmetric.NumberDataPoint) bool { return otherPoint() })
					case pmetric.MetricTypeHistogram:
						m.Histogram().DataPoints().RemoveIf(func(pmetric.HistogramDataPoint) bool { return otherPoint() })
					case pmetric.MetricTypeExponentialHistogram:
						m.ExponentialHistogram().DataPoints().RemoveIf(func(pmetric.ExponentialHistogramDataPoint) bool { return otherPoint() })
					case pmetric.MetricTypeSummary:
						m.Summary().DataPoints().RemoveIf(func(pmetric.SummaryDataPoint) bool { return otherPoint() })
					}
					out = append(out, one)
				}
			}
		}
	}
	return out
}

// The row bound (fits) must be an upper bound of a row's one-row frame: a
// row that the encoder itself would refuse as too large has to be caught
// before its symbols enter the dictionary. For every row of the golden
// batches: with the frame limit one byte below the row's exact one-row frame
// size the row is skipped with the dictionary untouched. The bound counts
// the schema of every column of the table, so it may exceed the real size
// by up to boundSlack bytes, which is nothing against a 1.8 MiB frame: at
// that much above the real size the row is written.
func TestMetricRowBoundIsUpperBound(t *testing.T) {
	promoted, err := PromotedColumns([]string{"host.name", "http.status_code"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := EncoderConfig{Promoted: promoted}
	sizeOf := func(encode func(h *harness) Stats) int {
		h := newHarness(t, 0, cfg)
		if st := encode(h); st.Skipped != [NumSkipReasons]int{} || len(h.frames) != 1 {
			t.Fatalf("reference encoding: stats %+v, %d frames", st, len(h.frames))
		}
		return len(h.frames[0])
	}
	check := func(name string, encode func(h *harness) Stats) {
		const boundSlack = 1024
		size := sizeOf(encode)
		h := newHarness(t, size+boundSlack, cfg)
		if st := encode(h); st.Skipped != [NumSkipReasons]int{} {
			t.Errorf("%s: skipped at a limit of %d bytes, %d over its own size: %+v", name, size+boundSlack, boundSlack, st)
		}
		h = newHarness(t, size-1, cfg)
		st := encode(h)
		if st.Skipped[skipRowTooLarge] != 1 || len(h.frames) != 0 {
			t.Errorf("%s: at limit %d: stats %+v, %d frames; want one too-large skip", name, size-1, st, len(h.frames))
		}
		if h.dict.Len() != 0 {
			t.Errorf("%s: the skipped row left %d symbols in the dictionary", name, h.dict.Len())
		}
	}
	for i, md := range singlePointBatches(goldenMetrics()) {
		if md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Name() == "" {
			continue
		}
		check(fmt.Sprintf("metric point %d", i), func(h *harness) Stats { return h.metrics(md) })
	}
	lrs := goldenLogs()
	for i := range lrs.LogRecordCount() {
		ld := plog.NewLogs()
		n := 0
		for r := range lrs.ResourceLogs().Len() {
			rl := lrs.ResourceLogs().At(r)
			for s := range rl.ScopeLogs().Len() {
				sl := rl.ScopeLogs().At(s)
				for k := range sl.LogRecords().Len() {
					if n == i {
						nrl := ld.ResourceLogs().AppendEmpty()
						rl.Resource().CopyTo(nrl.Resource())
						nsl := nrl.ScopeLogs().AppendEmpty()
						sl.Scope().CopyTo(nsl.Scope())
						sl.LogRecords().At(k).CopyTo(nsl.LogRecords().AppendEmpty())
					}
					n++
				}
			}
		}
		check(fmt.Sprintf("log record %d", i), func(h *harness) Stats { return h.logs(ld) })
	}
}

// TestSymbolsFollowResourceScopeAndMetric writes rows of several resources,
// scopes and metrics (and the same again as a second batch) into one frame
// per table: the encoder reuses a SYMBOL id while a resource's, scope's or
// metric's value stays the same (qwp.SymbolKeyed), so each row must still
// carry its own resource's, scope's and metric's values.
func TestSymbolsFollowResourceScopeAndMetric(t *testing.T) {
	const n = 2 // resources, scopes per resource, metrics per scope, points per metric
	type want struct{ service, res, scope, version, scopeAttrs, metric, unit, desc, temporality string }
	var wants []want
	md := pmetric.NewMetrics()
	ld := plog.NewLogs()
	temporalities := []pmetric.AggregationTemporality{pmetric.AggregationTemporalityDelta, pmetric.AggregationTemporalityCumulative}
	for r := range n {
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", fmt.Sprintf("svc-%d", r))
		rl := ld.ResourceLogs().AppendEmpty()
		rm.Resource().Attributes().CopyTo(rl.Resource().Attributes())
		for s := range n {
			sm := rm.ScopeMetrics().AppendEmpty()
			sm.Scope().SetName(fmt.Sprintf("scope-%d-%d", r, s))
			sm.Scope().SetVersion(fmt.Sprintf("v%d", s))
			sm.Scope().Attributes().PutInt("s", int64(s))
			sl := rl.ScopeLogs().AppendEmpty()
			sm.Scope().CopyTo(sl.Scope())
			for m := range n {
				metric := sm.Metrics().AppendEmpty()
				metric.SetName(fmt.Sprintf("metric-%d", m)) // the same names under every scope
				metric.SetUnit(fmt.Sprintf("unit-%d-%d-%d", r, s, m))
				metric.SetDescription(fmt.Sprintf("desc-%d", m))
				sum := metric.SetEmptySum()
				sum.SetAggregationTemporality(temporalities[(r+s+m)%2])
				for p := range n {
					dp := sum.DataPoints().AppendEmpty()
					dp.SetTimestamp(pcommon.Timestamp(testT1))
					dp.SetIntValue(int64(p))
					lr := sl.LogRecords().AppendEmpty()
					lr.SetTimestamp(pcommon.Timestamp(testT1))
					lr.Body().SetInt(int64(p))
					wants = append(wants, want{
						service: fmt.Sprintf("svc-%d", r), res: fmt.Sprintf(`{"service.name":"svc-%d"}`, r),
						scope: fmt.Sprintf("scope-%d-%d", r, s), version: fmt.Sprintf("v%d", s), scopeAttrs: fmt.Sprintf(`{"s":%d}`, s),
						metric: fmt.Sprintf("metric-%d", m), unit: fmt.Sprintf("unit-%d-%d-%d", r, s, m), desc: fmt.Sprintf("desc-%d", m),
						temporality: temporalityName(temporalities[(r+s+m)%2]),
					})
				}
			}
		}
	}
	h := newHarness(t, 0, EncoderConfig{})
	for range 2 { // two batches sharing the frames
		for _, encode := range []func() (Stats, error){
			func() (Stats, error) { return h.re.EncodeMetrics(md, h.emit) },
			func() (Stats, error) { return h.re.EncodeLogs(ld, h.emit) },
		} {
			if _, err := encode(); err != nil {
				t.Fatal(err)
			}
		}
	}
	h.flush()
	if len(h.frames) != 1 {
		t.Fatalf("%d frames, want 1", len(h.frames))
	}
	sums, logs := h.table("otel_metrics_sum").rows, h.table("otel_logs").rows
	if len(sums) != 2*len(wants) || len(logs) != 2*len(wants) {
		t.Fatalf("%d sum rows and %d log rows, want %d each", len(sums), len(logs), 2*len(wants))
	}
	for i := range sums {
		w := wants[i%len(wants)]
		for _, c := range []struct {
			row       map[string]any
			col, want string
		}{
			{sums[i], colServiceName, w.service}, {sums[i], colResourceAttributes, w.res},
			{sums[i], colScopeName, w.scope}, {sums[i], colScopeVersion, w.version}, {sums[i], colScopeAttributes, w.scopeAttrs},
			{sums[i], colMetricName, w.metric}, {sums[i], colMetricUnit, w.unit}, {sums[i], colMetricDescription, w.desc},
			{sums[i], colTemporality, w.temporality},
			{logs[i], colServiceName, w.service}, {logs[i], colResourceAttributes, w.res},
			{logs[i], colScopeName, w.scope}, {logs[i], colScopeVersion, w.version}, {logs[i], colScopeAttributes, w.scopeAttrs},
		} {
			if got := c.row[c.col]; got != c.want {
				t.Fatalf("row %d column %s = %v, want %q", i, c.col, got, c.want)
			}
		}
	}
}

// TestFinishIntoSameFrames: frames finished into the caller's buffer
// (FinishInto) are byte for byte the frames of the encoder's own buffer,
// each appended after what the buffer held and a zeroed gap, and emit gets
// exactly that tail; the caller may truncate the buffer between frames.
func TestFinishIntoSameFrames(t *testing.T) {
	const maxFrame = 2048 // several frames per batch
	own := newHarness(t, maxFrame, EncoderConfig{})
	into := newHarness(t, maxFrame, EncoderConfig{})
	buf := []byte("kept")
	into.re.FinishInto(&buf, 4)
	emitInto := func(frame []byte) error {
		n := len(buf)
		if n < len(frame)+4+4 || !bytes.Equal(buf[n-len(frame):], frame) || &buf[n-1] != &frame[len(frame)-1] {
			t.Fatalf("emit got %d bytes that are not the tail of the %d-byte buffer", len(frame), n)
		}
		if !bytes.Equal(buf[n-len(frame)-4:n-len(frame)], make([]byte, 4)) || string(buf[:4]) != "kept" {
			t.Fatalf("the gap is %x and the buffer starts %q; want zeros after what it kept", buf[n-len(frame)-4:n-len(frame)], buf[:4])
		}
		err := into.emit(frame)
		if len(into.frames)%2 == 0 {
			buf = buf[:4] // the caller truncates between frames
		}
		return err
	}
	for _, h := range []*harness{own, into} {
		emit := h.emit
		if h == into {
			emit = emitInto
		}
		if _, err := h.re.EncodeTraces(goldenTraces(), emit); err != nil {
			t.Fatal(err)
		}
		if _, err := h.re.EncodeMetrics(goldenMetrics(), emit); err != nil {
			t.Fatal(err)
		}
		if err := h.re.Flush(emit); err != nil {
			t.Fatal(err)
		}
	}
	if len(own.frames) < 3 || len(own.frames) != len(into.frames) {
		t.Fatalf("%d frames from the encoder's buffer, %d finished into the caller's; want the same, at least 3", len(own.frames), len(into.frames))
	}
	for i := range own.frames {
		if !bytes.Equal(own.frames[i], into.frames[i]) {
			t.Fatalf("frame %d differs when finished into the caller's buffer", i)
		}
	}
}

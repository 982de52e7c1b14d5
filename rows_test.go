package questdbexporter

import (
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
	re       *rowEncoder
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

func newHarness(t testing.TB, maxFrame int, cfg rowEncoderConfig) *harness {
	t.Helper()
	if cfg.Tables == (tableNames{}) {
		cfg.Tables = defaultTableNames()
	}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return exportTime }
	}
	h := &harness{t: t, dict: qwp.NewMemDict(), maxFrame: maxFrame, tables: map[string]*decodedTable{}}
	h.enc = qwp.NewEncoder(h.dict, qwp.EncoderOptions{MaxFrameBytes: maxFrame, Gorilla: true, DeltaSymbolDict: true})
	re, err := newRowEncoder(h.enc, cfg)
	if err != nil {
		t.Fatalf("newRowEncoder: %v", err)
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

func (h *harness) metrics(md pmetric.Metrics) encodeStats {
	h.t.Helper()
	st, err := h.re.encodeMetrics(md, h.emit)
	if err != nil {
		h.t.Fatalf("encodeMetrics: %v", err)
	}
	h.flush()
	return st
}

func (h *harness) logs(ld plog.Logs) encodeStats {
	h.t.Helper()
	st, err := h.re.encodeLogs(ld, h.emit)
	if err != nil {
		h.t.Fatalf("encodeLogs: %v", err)
	}
	h.flush()
	return st
}

func (h *harness) flush() {
	h.t.Helper()
	if err := h.re.flush(h.emit); err != nil {
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
		cfg     rowEncoderConfig
		wantErr string
	}{
		{"bad table name", rowEncoderConfig{Tables: func() tableNames { n := defaultTableNames(); n.Sum = "a/b"; return n }()}, "sum table"},
		{"shared table", rowEncoderConfig{Tables: func() tableNames { n := defaultTableNames(); n.Logs = "OTEL_metrics_gauge"; return n }()}, "used for both gauge and logs"},
		{"empty table", rowEncoderConfig{Tables: func() tableNames { n := defaultTableNames(); n.Summary = ""; return n }()}, "summary table"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			enc := qwp.NewEncoder(qwp.NewMemDict(), qwp.EncoderOptions{DeltaSymbolDict: true})
			_, err := newRowEncoder(enc, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestMetricEmitErrorAbortsBatch(t *testing.T) {
	h := newHarness(t, 2048, rowEncoderConfig{})
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
	st, err := h.re.encodeMetrics(md, func([]byte) error { calls++; return boom })
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
	re, err := newRowEncoder(enc, rowEncoderConfig{Tables: defaultTableNames()})
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
	st, err := re.encodeMetrics(md, emit)
	if err != nil {
		t.Fatal(err)
	}
	if err := re.flush(emit); err != nil {
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

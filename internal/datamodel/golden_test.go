package datamodel

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// goldenMetrics is the fixed metrics batch of the golden tests: two
// resources (one without attributes), three scopes, every metric kind, every
// data point field, absent and empty values, exemplars, a nameless metric.
func goldenMetrics() pmetric.Metrics {
	const t1, t0 = 1_700_000_000_000_000_000, 1_699_999_940_000_000_000
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	ra := rm.Resource().Attributes()
	ra.PutStr("service.name", "checkout")
	ra.PutStr("host.name", "h1")
	ra.PutInt("process.pid", 4242)
	ra.PutEmptySlice("tags").FromRaw([]any{"a", int64(1), true})

	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("io.otel.http")
	sm.Scope().SetVersion("1.2.3")
	sm.Scope().Attributes().PutStr("lib", "x")

	g := sm.Metrics().AppendEmpty()
	g.SetName("cpu.temp")
	g.SetUnit("Cel")
	g.SetDescription("CPU temperature")
	gdps := g.SetEmptyGauge().DataPoints()
	dp := gdps.AppendEmpty()
	dp.SetTimestamp(t1)
	dp.SetDoubleValue(61.5)
	dp.Attributes().PutStr("core", "0")
	dp.Attributes().PutDouble("ratio", 0.25)
	ex := dp.Exemplars().AppendEmpty()
	ex.SetTimestamp(t1 - 1)
	ex.SetDoubleValue(62)
	ex.SetTraceID(pcommon.TraceID{0x01, 0x02, 15: 0x0f})
	ex.SetSpanID(pcommon.SpanID{0xaa, 7: 0xbb})
	ex.FilteredAttributes().PutStr("thread", "7")
	dp = gdps.AppendEmpty()
	dp.SetTimestamp(t1)
	dp.SetIntValue(-3)
	dp.SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
	dp = gdps.AppendEmpty()
	dp.SetTimestamp(t1 + 1)
	dp.SetDoubleValue(math.NaN())
	dp.Attributes().PutEmptyBytes("raw").FromRaw([]byte{0xde, 0xad})
	dp.Attributes().PutEmptyMap("nested").PutEmpty("nothing")

	s := sm.Metrics().AppendEmpty()
	s.SetName("http.requests")
	s.SetUnit("{request}")
	sum := s.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	sdp := sum.DataPoints().AppendEmpty()
	sdp.SetTimestamp(t1)
	sdp.SetStartTimestamp(t0)
	sdp.SetIntValue(1234)
	sdp.Attributes().PutInt("http.status_code", 200)
	sdp = sum.DataPoints().AppendEmpty()
	sdp.SetTimestamp(t1)
	sdp.SetDoubleValue(math.Inf(1))
	sdp.Attributes().PutInt("http.status_code", 500)

	nameless := sm.Metrics().AppendEmpty()
	nameless.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(1)

	sm2 := rm.ScopeMetrics().AppendEmpty() // a scope with no name, version or attributes
	h := sm2.Metrics().AppendEmpty()
	h.SetName("http.duration")
	h.SetUnit("ms")
	hist := h.SetEmptyHistogram()
	hist.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	hdp := hist.DataPoints().AppendEmpty()
	hdp.SetTimestamp(t1)
	hdp.SetStartTimestamp(t0)
	hdp.SetCount(6)
	hdp.SetSum(31.5)
	hdp.SetMin(0.5)
	hdp.SetMax(20)
	hdp.BucketCounts().FromRaw([]uint64{1, 3, 2})
	hdp.ExplicitBounds().FromRaw([]float64{1, 10})
	hdp.Exemplars().AppendEmpty().SetIntValue(7)
	hdp = hist.DataPoints().AppendEmpty()
	hdp.SetTimestamp(t1)
	hdp.SetCount(0)

	rm2 := md.ResourceMetrics().AppendEmpty() // no resource attributes at all
	sm3 := rm2.ScopeMetrics().AppendEmpty()
	sm3.Scope().SetName("io.otel.runtime")
	e := sm3.Metrics().AppendEmpty()
	e.SetName("gc.pause")
	eh := e.SetEmptyExponentialHistogram()
	eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	edp := eh.DataPoints().AppendEmpty()
	edp.SetTimestamp(t1)
	edp.SetStartTimestamp(t0)
	edp.SetCount(5)
	edp.SetSum(2.5)
	edp.SetScale(2)
	edp.SetZeroCount(1)
	edp.SetZeroThreshold(0.001)
	edp.Positive().SetOffset(-1)
	edp.Positive().BucketCounts().FromRaw([]uint64{2, 2})
	edp = eh.DataPoints().AppendEmpty()
	edp.SetTimestamp(t1)

	sy := sm3.Metrics().AppendEmpty()
	sy.SetName("rpc.latency")
	sy.SetDescription("summary")
	ydp := sy.SetEmptySummary().DataPoints().AppendEmpty()
	ydp.SetTimestamp(t1)
	ydp.SetStartTimestamp(t0)
	ydp.SetCount(3)
	ydp.SetSum(0.75)
	for _, q := range [][2]float64{{0, 0.1}, {0.5, 0.2}, {1, 0.45}} {
		v := ydp.QuantileValues().AppendEmpty()
		v.SetQuantile(q[0])
		v.SetValue(q[1])
	}
	return md
}

// goldenLogs is the fixed logs batch of the golden test.
func goldenLogs() plog.Logs {
	const t1 = 1_700_000_000_000_000_000
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "checkout")
	rl.Resource().Attributes().PutStr("host.name", "h1")
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("app.logger")
	sl.Scope().SetVersion("0.1")
	sl.Scope().Attributes().PutBool("structured", true)
	lr := sl.LogRecords().AppendEmpty()
	lr.SetTimestamp(t1)
	lr.SetObservedTimestamp(t1 + 1000)
	lr.SetSeverityNumber(plog.SeverityNumberWarn)
	lr.SetSeverityText("WARN")
	lr.Body().SetStr("disk almost full")
	lr.Attributes().PutStr("disk", "/dev/sda1")
	lr.Attributes().PutDouble("used", 0.97)
	lr.SetTraceID(pcommon.TraceID{0xde, 0xad, 0xbe, 0xef, 15: 0x01})
	lr.SetSpanID(pcommon.SpanID{0xca, 0xfe, 7: 0x02})
	lr.SetFlags(plog.DefaultLogRecordFlags.WithIsSampled(true))
	lr.SetEventName("disk.pressure")
	lr.CopyTo(sl.LogRecords().AppendEmpty()) // a genuine repeat: another record_id
	lr = sl.LogRecords().AppendEmpty()
	lr.SetObservedTimestamp(t1 + 2000) // designated falls back to the observed time
	body := lr.Body().SetEmptyMap()
	body.PutStr("msg", "structured")
	body.PutEmptySlice("items").FromRaw([]any{int64(1), 2.5, nil})
	lr = sl.LogRecords().AppendEmpty() // nothing set: export time, NULLs

	rl2 := ld.ResourceLogs().AppendEmpty()
	lr = rl2.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetTimestamp(t1 + 3000)
	lr.SetSeverityNumber(plog.SeverityNumberDebug)
	lr.Body().SetEmptyBytes().FromRaw([]byte("bin"))
	return ld
}

// goldenTraces is the fixed traces batch of the golden test: every span
// field, an exact repeat, bad input (zero ids, end before start, invalid
// UTF-8, a nameless event), kinds and status codes outside the enums, and a
// resource without attributes.
func goldenTraces() ptrace.Traces {
	const t1 = 1_700_000_000_000_000_000
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "checkout")
	rs.Resource().Attributes().PutStr("host.name", "h1")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("io.otel.http")
	ss.Scope().SetVersion("1.2.3")
	ss.Scope().Attributes().PutStr("lib", "x")
	sp := ss.Spans().AppendEmpty()
	sp.SetTraceID(pcommon.TraceID{0xde, 0xad, 0xbe, 0xef, 15: 0x01})
	sp.SetSpanID(pcommon.SpanID{0xca, 0xfe, 7: 0x02})
	sp.SetParentSpanID(pcommon.SpanID{0xba, 0xbe, 7: 0x03})
	sp.TraceState().FromRaw("congo=t61rcWkgMzE")
	sp.SetFlags(0x101)
	sp.SetName("GET /api/items/{id}")
	sp.SetKind(ptrace.SpanKindServer)
	sp.SetStartTimestamp(t1)
	sp.SetEndTimestamp(t1 + 2_500_001)
	sp.Attributes().PutStr("http.request.method", "GET")
	sp.Attributes().PutInt("http.status_code", 503)
	sp.Attributes().PutDouble("ratio", 0.5)
	sp.SetDroppedAttributesCount(1)
	ev := sp.Events().AppendEmpty()
	ev.SetTimestamp(t1 + 123_456_789)
	ev.SetName("exception")
	ev.Attributes().PutStr("exception.message", "line1\nline2")
	ev.SetDroppedAttributesCount(1)
	sp.Events().AppendEmpty().SetTimestamp(t1 + 2) // a nameless event
	sp.SetDroppedEventsCount(2)
	l := sp.Links().AppendEmpty()
	l.SetTraceID(pcommon.TraceID{0x11, 15: 0x22})
	l.SetSpanID(pcommon.SpanID{0x33, 7: 0x44})
	l.TraceState().FromRaw("a=1")
	l.Attributes().PutStr("link.kind", "follows")
	l.SetFlags(0x301)
	sp.SetDroppedLinksCount(3)
	sp.Status().SetCode(ptrace.StatusCodeError)
	sp.Status().SetMessage("upstream unavailable")
	sp.CopyTo(ss.Spans().AppendEmpty()) // a genuine repeat: another span_key

	sp = ss.Spans().AppendEmpty() // zero ids, end before start, bad UTF-8
	sp.SetName("bad\xffname")
	sp.SetKind(ptrace.SpanKindClient)
	sp.SetStartTimestamp(t1 + 10)
	sp.SetEndTimestamp(t1 + 5)
	sp.Attributes().PutStr("q", "\xfe")
	sp.Status().SetCode(ptrace.StatusCodeOk)
	sp = ss.Spans().AppendEmpty() // only an end: it is the designated timestamp
	sp.SetName("late")
	sp.SetKind(ptrace.SpanKindConsumer)
	sp.SetEndTimestamp(t1 + 20)
	ss.Spans().AppendEmpty() // nothing set: export time, NULLs

	rs2 := td.ResourceSpans().AppendEmpty() // no resource attributes, an empty scope
	sp = rs2.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName("wire")
	sp.SetKind(42)
	sp.Status().SetCode(7)
	sp.SetStartTimestamp(t1 + 30)
	sp.SetEndTimestamp(t1 + 31)
	sp = rs2.ScopeSpans().At(0).Spans().AppendEmpty()
	sp.SetName("producer")
	sp.SetKind(ptrace.SpanKindProducer)
	sp.SetStartTimestamp(t1 + 40)
	sp.Attributes().PutInt("http.status_code", 200) // promoted
	return td
}

// goldenValue makes a decoded value JSON-representable: NaN and ±Inf as
// strings, arrays as their values.
func goldenValue(v any) any {
	switch x := v.(type) {
	case float64:
		switch {
		case math.IsNaN(x):
			return "NaN"
		case math.IsInf(x, 1):
			return "+Inf"
		case math.IsInf(x, -1):
			return "-Inf"
		}
	case qwptest.Array:
		out := make([]any, len(x.Doubles))
		for i, d := range x.Doubles {
			out[i] = goldenValue(d)
		}
		return map[string]any{"shape": x.Shape, "values": out}
	}
	return v
}

func TestGoldenTables(t *testing.T) {
	promoted, err := PromotedColumns([]string{"host.name", "http.status_code"})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, 0, EncoderConfig{Promoted: promoted})
	st := h.metrics(goldenMetrics())
	if st.Skipped[skipEmptyMetricName] != 1 {
		t.Fatalf("stats = %+v, want the nameless metric skipped", st)
	}
	h.logs(goldenLogs())
	if st := h.traces(goldenTraces()); st.Rows[tableTraces] != 7 {
		t.Fatalf("trace stats = %+v, want 7 spans", st)
	}
	names := DefaultTables()
	for k := range numTables {
		name := names.of(k)
		t.Run(name, func(t *testing.T) {
			dt := h.table(name)
			types := map[string]string{}
			for col, typ := range dt.types {
				types[col] = typ.String()
			}
			rows := make([]map[string]any, len(dt.rows))
			for i, row := range dt.rows {
				rows[i] = map[string]any{}
				for col, v := range row {
					rows[i][col] = goldenValue(v)
				}
			}
			got, err := json.MarshalIndent(map[string]any{"table": name, "columns": types, "rows": rows}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", "golden", name+".json")
			if *updateGolden {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run Golden -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("rows of %s differ from %s (rerun with -update after checking the change):\n%s", name, path, got)
			}
		})
	}
}

package datamodel

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// canon builds a canonical identity encoding by hand, independently of
// hash.go's appenders: a string is field(x), a byte itself, uint32 and uint64
// little-endian, []byte raw.
func canon(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch v := p.(type) {
		case string:
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		case byte:
			b = append(b, v)
		case uint32:
			b = binary.LittleEndian.AppendUint32(b, v)
		case uint64:
			b = binary.LittleEndian.AppendUint64(b, v)
		case []byte:
			b = append(b, v...)
		default:
			panic(fmt.Sprintf("canon: unsupported part %T", p))
		}
	}
	return b
}

func wantSeriesID(resJSON, scopeName, scopeVersion, scopeJSON string, kind metricKind, name, attrs string) int64 {
	seed := xxh64(0, canon(seriesTag, resJSON, scopeName, scopeVersion, scopeJSON, byte(kind), name))
	return int64(xxh64(seed, []byte(attrs)))
}

// oneMetric returns a batch with one resource, one scope and one metric.
func oneMetric(name string) (pmetric.Metrics, pmetric.Metric) {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "checkout")
	rm.Resource().Attributes().PutStr("host.name", "h1")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("io.test")
	sm.Scope().SetVersion("1.0")
	m := sm.Metrics().AppendEmpty()
	m.SetName(name)
	m.SetUnit("ms")
	m.SetDescription("latency")
	return md, m
}

const (
	testResJSON = `{"host.name":"h1","service.name":"checkout"}`
	testT1      = int64(1_700_000_000_000_000_001)
	testT0      = int64(1_699_999_000_000_000_000)
)

// commonCols are the columns oneMetric gives every row.
func commonCols(kind metricKind, name, attrs string) map[string]any {
	m := map[string]any{
		"":                    testT1,
		"service_name":        "checkout",
		"metric_name":         name,
		"metric_unit":         "ms",
		"metric_description":  "latency",
		"scope_name":          "io.test",
		"scope_version":       "1.0",
		"resource_attributes": testResJSON,
		"series_id":           wantSeriesID(testResJSON, "io.test", "1.0", "", kind, name, attrs),
		"flags":               int32(0),
	}
	if attrs != "" {
		m["attributes"] = attrs
	}
	return m
}

func with(m map[string]any, kv ...any) map[string]any {
	out := make(map[string]any, len(m)+len(kv)/2)
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
			continue
		}
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

func TestMetricGaugeRows(t *testing.T) {
	md, m := oneMetric("temp")
	dps := m.SetEmptyGauge().DataPoints()
	set := func(f func(dp pmetric.NumberDataPoint)) {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(pcommon.Timestamp(testT1))
		dp.SetStartTimestamp(pcommon.Timestamp(testT0)) // gauges have no start_timestamp column
		f(dp)
	}
	set(func(dp pmetric.NumberDataPoint) { dp.SetDoubleValue(1.5); dp.Attributes().PutStr("k", "a") })
	set(func(dp pmetric.NumberDataPoint) { dp.SetIntValue(-7); dp.Attributes().PutStr("k", "b") })
	set(func(dp pmetric.NumberDataPoint) { dp.SetDoubleValue(math.NaN()); dp.Attributes().PutStr("k", "c") })
	set(func(dp pmetric.NumberDataPoint) {
		dp.SetDoubleValue(math.Inf(-1))
		dp.SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
	})
	set(func(dp pmetric.NumberDataPoint) { dp.Attributes().PutBool("no_value", true) })
	set(func(dp pmetric.NumberDataPoint) {
		dp.SetDoubleValue(2)
		dp.Attributes().PutStr("k", "ex")
		ex := dp.Exemplars().AppendEmpty()
		ex.SetTimestamp(42)
		ex.SetDoubleValue(math.Inf(1))
		ex.FilteredAttributes().PutStr("user", "u\"1")
		ex.SetTraceID(pcommon.TraceID{0: 0xab, 15: 0x01})
		ex.SetSpanID(pcommon.SpanID{0: 0xcd, 7: 0x02})
		ex2 := dp.Exemplars().AppendEmpty()
		ex2.SetIntValue(3)
	})
	set(func(dp pmetric.NumberDataPoint) {
		dp.SetTimestamp(0)
		dp.SetDoubleValue(9)
		dp.Attributes().PutStr("k", "no time")
	})

	h := newHarness(t, 0, EncoderConfig{})
	st := h.metrics(md)
	if st.Rows[tableGauge] != 7 || st.Skipped != [NumSkipReasons]int{} || len(h.frames) != 1 {
		t.Fatalf("stats = %+v in %d frames, want 7 gauge rows in 1 frame, no skips", st, len(h.frames))
	}
	rows := h.table("otel_metrics_gauge").rows
	base := func(attrs string) map[string]any { return commonCols(kindGauge, "temp", attrs) }
	checkRow(t, rows[0], with(base(`{"k":"a"}`), "value", 1.5))
	checkRow(t, rows[1], with(base(`{"k":"b"}`), "value", -7.0))
	checkRow(t, rows[2], with(base(`{"k":"c"}`), "value", math.NaN()))
	checkRow(t, rows[3], with(base(""), "value", math.Inf(-1), "flags", int32(1)))
	checkRow(t, rows[4], base(`{"no_value":true}`))
	checkRow(t, rows[5], with(base(`{"k":"ex"}`), "value", 2.0, "exemplars",
		`[{"time_unix_nano":42,"value":"+Inf","filtered_attributes":{"user":"u\"1"},`+
			`"trace_id":"ab000000000000000000000000000001","span_id":"cd00000000000002"},`+
			`{"time_unix_nano":0,"value":3}]`))
	checkRow(t, rows[6], with(base(`{"k":"no time"}`), "", exportTime.UnixNano(), "value", 9.0))
	wantTypes := map[string]qwp.ColumnType{
		"": qwp.TypeTimestampNanos, "service_name": qwp.TypeSymbol, "metric_name": qwp.TypeSymbol,
		"metric_unit": qwp.TypeSymbol, "metric_description": qwp.TypeSymbol, "scope_name": qwp.TypeSymbol,
		"scope_version": qwp.TypeSymbol, "resource_attributes": qwp.TypeSymbol, "attributes": qwp.TypeSymbol,
		"series_id": qwp.TypeLong, "flags": qwp.TypeInt, "value": qwp.TypeDouble, "exemplars": qwp.TypeVarchar,
	}
	checkTypes(t, h.table("otel_metrics_gauge").types, wantTypes)
}

func checkTypes(t *testing.T, got, want map[string]qwp.ColumnType) {
	t.Helper()
	for name, typ := range want {
		if got[name] != typ {
			t.Errorf("column %q has type %v, want %v", name, got[name], typ)
		}
	}
	for name, typ := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected column %q (%v)", name, typ)
		}
	}
}

func TestMetricSumRows(t *testing.T) {
	tests := []struct {
		temporality pmetric.AggregationTemporality
		monotonic   bool
		want        string
	}{
		{pmetric.AggregationTemporalityDelta, true, "delta"},
		{pmetric.AggregationTemporalityCumulative, false, "cumulative"},
		{pmetric.AggregationTemporalityUnspecified, true, "unspecified"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			md, m := oneMetric("requests")
			sum := m.SetEmptySum()
			sum.SetAggregationTemporality(tc.temporality)
			sum.SetIsMonotonic(tc.monotonic)
			dp := sum.DataPoints().AppendEmpty()
			dp.SetTimestamp(pcommon.Timestamp(testT1))
			dp.SetStartTimestamp(pcommon.Timestamp(testT0))
			dp.SetIntValue(1 << 40)
			dp.Attributes().PutInt("code", 200)
			noStart := sum.DataPoints().AppendEmpty()
			noStart.SetTimestamp(pcommon.Timestamp(testT1))
			noStart.SetDoubleValue(0.5)

			h := newHarness(t, 0, EncoderConfig{})
			if st := h.metrics(md); st.Rows[tableSum] != 2 {
				t.Fatalf("stats = %+v", st)
			}
			rows := h.table("otel_metrics_sum").rows
			checkRow(t, rows[0], with(commonCols(kindSum, "requests", `{"code":200}`),
				"start_timestamp", testT0, "value", float64(1<<40), "is_monotonic", tc.monotonic, "temporality", tc.want))
			checkRow(t, rows[1], with(commonCols(kindSum, "requests", ""),
				"value", 0.5, "is_monotonic", tc.monotonic, "temporality", tc.want))
		})
	}
}

func TestMetricHistogramRows(t *testing.T) {
	md, m := oneMetric("latency")
	hist := m.SetEmptyHistogram()
	hist.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	full := hist.DataPoints().AppendEmpty()
	full.SetTimestamp(pcommon.Timestamp(testT1))
	full.SetStartTimestamp(pcommon.Timestamp(testT0))
	full.SetCount(10)
	full.SetSum(12.5)
	full.SetMin(0.5)
	full.SetMax(math.Inf(1))
	full.BucketCounts().FromRaw([]uint64{1, 2, 7})
	full.ExplicitBounds().FromRaw([]float64{1, 5})
	full.Attributes().PutStr("route", "/a")
	full.Exemplars().AppendEmpty().SetDoubleValue(0.7)
	bare := hist.DataPoints().AppendEmpty() // no sum/min/max, no buckets
	bare.SetTimestamp(pcommon.Timestamp(testT1))
	bare.SetCount(math.MaxUint64)

	h := newHarness(t, 0, EncoderConfig{})
	if st := h.metrics(md); st.Rows[tableHistogram] != 2 {
		t.Fatalf("stats = %+v", st)
	}
	rows := h.table("otel_metrics_histogram").rows
	checkRow(t, rows[0], with(commonCols(kindHistogram, "latency", `{"route":"/a"}`),
		"start_timestamp", testT0, "count", int64(10), "sum", 12.5, "min", 0.5, "max", math.Inf(1),
		"bucket_counts", []float64{1, 2, 7}, "explicit_bounds", []float64{1, 5}, "temporality", "cumulative",
		"exemplars", `[{"time_unix_nano":0,"value":0.7}]`))
	checkRow(t, rows[1], with(commonCols(kindHistogram, "latency", ""),
		"count", int64(math.MaxInt64), "bucket_counts", []float64{}, "explicit_bounds", []float64{}, "temporality", "cumulative"))
	checkTypes(t, h.table("otel_metrics_histogram").types, map[string]qwp.ColumnType{
		"": qwp.TypeTimestampNanos, "start_timestamp": qwp.TypeTimestampNanos, "service_name": qwp.TypeSymbol,
		"metric_name": qwp.TypeSymbol, "metric_unit": qwp.TypeSymbol, "metric_description": qwp.TypeSymbol,
		"scope_name": qwp.TypeSymbol, "scope_version": qwp.TypeSymbol, "resource_attributes": qwp.TypeSymbol,
		"attributes": qwp.TypeSymbol, "series_id": qwp.TypeLong, "flags": qwp.TypeInt, "count": qwp.TypeLong,
		"sum": qwp.TypeDouble, "min": qwp.TypeDouble, "max": qwp.TypeDouble, "bucket_counts": qwp.TypeDoubleArray,
		"explicit_bounds": qwp.TypeDoubleArray, "temporality": qwp.TypeSymbol, "exemplars": qwp.TypeVarchar,
	})
}

func TestMetricExpHistogramRows(t *testing.T) {
	md, m := oneMetric("size")
	eh := m.SetEmptyExponentialHistogram()
	eh.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	dp := eh.DataPoints().AppendEmpty()
	dp.SetTimestamp(pcommon.Timestamp(testT1))
	dp.SetStartTimestamp(pcommon.Timestamp(testT0))
	dp.SetCount(9)
	dp.SetSum(-3)
	dp.SetMin(-2)
	dp.SetMax(4)
	dp.SetScale(-3)
	dp.SetZeroCount(2)
	dp.SetZeroThreshold(1e-9)
	dp.Positive().SetOffset(-2)
	dp.Positive().BucketCounts().FromRaw([]uint64{1, 0, 3})
	dp.Negative().SetOffset(5)
	dp.Negative().BucketCounts().FromRaw([]uint64{3})
	dp.SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
	empty := eh.DataPoints().AppendEmpty()
	empty.SetTimestamp(pcommon.Timestamp(testT1))

	h := newHarness(t, 0, EncoderConfig{})
	if st := h.metrics(md); st.Rows[tableExpHistogram] != 2 {
		t.Fatalf("stats = %+v", st)
	}
	rows := h.table("otel_metrics_exp_histogram").rows
	checkRow(t, rows[0], with(commonCols(kindExpHistogram, "size", ""),
		"start_timestamp", testT0, "flags", int32(1), "count", int64(9), "sum", -3.0, "min", -2.0, "max", 4.0,
		"scale", int32(-3), "zero_count", int64(2), "zero_threshold", 1e-9,
		"positive_offset", int32(-2), "positive_bucket_counts", []float64{1, 0, 3},
		"negative_offset", int32(5), "negative_bucket_counts", []float64{3}, "temporality", "delta"))
	checkRow(t, rows[1], with(commonCols(kindExpHistogram, "size", ""),
		"count", int64(0), "scale", int32(0), "zero_count", int64(0), "zero_threshold", 0.0,
		"positive_offset", int32(0), "positive_bucket_counts", []float64{},
		"negative_offset", int32(0), "negative_bucket_counts", []float64{}, "temporality", "delta"))
}

func TestMetricSummaryRows(t *testing.T) {
	md, m := oneMetric("rpc")
	dp := m.SetEmptySummary().DataPoints().AppendEmpty()
	dp.SetTimestamp(pcommon.Timestamp(testT1))
	dp.SetStartTimestamp(pcommon.Timestamp(testT0))
	dp.SetCount(4)
	dp.SetSum(math.NaN())
	for _, q := range [][2]float64{{0.5, 1}, {0.99, 8}} {
		qv := dp.QuantileValues().AppendEmpty()
		qv.SetQuantile(q[0])
		qv.SetValue(q[1])
	}
	empty := m.Summary().DataPoints().AppendEmpty()
	empty.SetTimestamp(pcommon.Timestamp(testT1))

	h := newHarness(t, 0, EncoderConfig{})
	if st := h.metrics(md); st.Rows[tableSummary] != 2 {
		t.Fatalf("stats = %+v", st)
	}
	rows := h.table("otel_metrics_summary").rows
	checkRow(t, rows[0], with(commonCols(kindSummary, "rpc", ""),
		"start_timestamp", testT0, "count", int64(4), "sum", math.NaN(),
		"quantiles", []float64{0.5, 0.99}, "quantile_values", []float64{1, 8}))
	checkRow(t, rows[1], with(commonCols(kindSummary, "rpc", ""),
		"count", int64(0), "sum", 0.0, "quantiles", []float64{}, "quantile_values", []float64{}))
}

func TestMetricEmptyNameSkipped(t *testing.T) {
	md, m := oneMetric("")
	for range 3 {
		m.SetEmptyGauge()
		m.Gauge().DataPoints().AppendEmpty().SetDoubleValue(1)
	}
	ok := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().AppendEmpty()
	ok.SetName("kept")
	ok.SetEmptySum().DataPoints().AppendEmpty().SetDoubleValue(2)
	empty := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().AppendEmpty()
	empty.SetName("no data") // MetricTypeEmpty: nothing to write, nothing skipped

	h := newHarness(t, 0, EncoderConfig{})
	st := h.metrics(md)
	if st.Skipped[skipEmptyMetricName] != 1 || st.Rows[tableSum] != 1 || st.Rows[tableGauge] != 0 {
		t.Fatalf("stats = %+v, want 1 empty-name skip and the sum row", st)
	}
	if got := h.oneRow("otel_metrics_sum")["metric_name"]; got != "kept" {
		t.Fatalf("metric_name = %v", got)
	}
}

func TestMetricOversizedValueSkipped(t *testing.T) {
	const limit = 4096
	md, m := oneMetric("g")
	dps := m.SetEmptyGauge().DataPoints()
	for i := range 50 {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(pcommon.Timestamp(testT1 + int64(i)))
		dp.SetDoubleValue(float64(i))
		if i == 20 {
			dp.Attributes().PutStr("huge", strings.Repeat("x", 2*limit))
		}
		if i == 30 {
			// Fits with its row only just: must not be refused.
			dp.Attributes().PutStr("big", strings.Repeat("y", limit/2))
		}
	}
	h := newHarness(t, limit, EncoderConfig{})
	st := h.metrics(md)
	if st.Skipped[skipRowTooLarge] != 1 || st.Rows[tableGauge] != 49 {
		t.Fatalf("stats = %+v, want 49 rows and 1 too-large skip", st)
	}
	rows := h.table("otel_metrics_gauge").rows
	if len(rows) != 49 {
		t.Fatalf("%d rows decoded", len(rows))
	}
	for i, row := range rows {
		want := float64(i)
		if i >= 20 {
			want++
		}
		if row["value"] != want {
			t.Fatalf("row %d value = %v, want %v", i, row["value"], want)
		}
	}
	for id := range h.dict.Len() {
		if len(h.dict.Entry(id)) > limit {
			t.Fatalf("the oversized attribute JSON entered the symbol dictionary (id %d)", id)
		}
	}
}

func TestMetricFrameSplitEveryRowOnce(t *testing.T) {
	n := 2000
	if testing.Short() {
		n = 400
	}
	md := pmetric.NewMetrics()
	for r := range 3 {
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutInt("r", int64(r))
		for s := range 2 {
			sm := rm.ScopeMetrics().AppendEmpty()
			sm.Scope().SetName("scope" + string(rune('a'+s)))
			m := sm.Metrics().AppendEmpty()
			m.SetName("split")
			dps := m.SetEmptySum().DataPoints()
			for i := range n / 6 {
				dp := dps.AppendEmpty()
				dp.SetTimestamp(pcommon.Timestamp(testT1 + int64(i)))
				dp.SetIntValue(int64(r*1_000_000 + s*100_000 + i))
				dp.Attributes().PutInt("i", int64(i%17))
			}
		}
	}
	const limit = 700
	h := newHarness(t, limit, EncoderConfig{})
	st := h.metrics(md)
	total := 6 * (n / 6)
	if st.Rows[tableSum] != total || st.Skipped != [NumSkipReasons]int{} {
		t.Fatalf("stats = %+v, want %d rows", st, total)
	}
	if len(h.frames) < 10 {
		t.Fatalf("%d frames for %d rows under %d bytes; expected many", len(h.frames), total, limit)
	}
	seen := map[float64]bool{}
	for _, row := range h.table("otel_metrics_sum").rows {
		v := row["value"].(float64)
		if seen[v] {
			t.Fatalf("value %v written twice", v)
		}
		seen[v] = true
	}
	if len(seen) != total {
		t.Fatalf("%d distinct rows decoded, want %d", len(seen), total)
	}
}

func TestMetricAttributesVarcharOption(t *testing.T) {
	md, m := oneMetric("g")
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(pcommon.Timestamp(testT1))
	dp.Attributes().PutStr("k", "v")
	h := newHarness(t, 0, EncoderConfig{AttributesVarchar: true})
	h.metrics(md)
	dt := h.table("otel_metrics_gauge")
	if dt.types["attributes"] != qwp.TypeVarchar || dt.rows[0]["attributes"] != `{"k":"v"}` {
		t.Fatalf("attributes column %v = %v, want VARCHAR {\"k\":\"v\"}", dt.types["attributes"], dt.rows[0]["attributes"])
	}
	for id := range h.dict.Len() {
		if string(h.dict.Entry(id)) == `{"k":"v"}` {
			t.Fatal("VARCHAR attributes were registered as a symbol")
		}
	}
}

func TestMetricPromotedAttributes(t *testing.T) {
	promoted, err := PromotedColumns([]string{"host.name", "k8s.pod-name", "region", "code", "absent"})
	if err != nil {
		t.Fatal(err)
	}
	md, m := oneMetric("g")
	sm := md.ResourceMetrics().At(0).ScopeMetrics().At(0)
	sm.Scope().Attributes().PutStr("region", "from-scope")
	md.ResourceMetrics().At(0).Resource().Attributes().PutStr("region", "from-resource")
	md.ResourceMetrics().At(0).Resource().Attributes().PutStr("k8s.pod-name", "pod-1")
	dps := m.SetEmptyGauge().DataPoints()
	p0 := dps.AppendEmpty()
	p0.SetTimestamp(pcommon.Timestamp(testT1))
	p0.Attributes().PutStr("host.name", "point-host") // point beats resource
	p0.Attributes().PutInt("code", 503)               // non-string: its text form
	p1 := dps.AppendEmpty()
	p1.SetTimestamp(pcommon.Timestamp(testT1))
	p1.Attributes().PutEmpty("region") // an empty value is NULL, even over the scope's
	p1.Attributes().PutStr("code", "") // so is an empty string
	md.ResourceMetrics().At(0).Resource().Attributes().PutStr("absent", "")

	h := newHarness(t, 0, EncoderConfig{Promoted: promoted})
	h.metrics(md)
	rows := h.table("otel_metrics_gauge").rows
	want := []map[string]any{
		{"host_name": "point-host", "k8s_pod_name": "pod-1", "region": "from-scope", "code": "503"},
		{"host_name": "h1", "k8s_pod_name": "pod-1"},
	}
	for i, w := range want {
		for _, col := range []string{"host_name", "k8s_pod_name", "region", "code", "absent"} {
			got, ok := rows[i][col]
			if wv, wok := w[col]; ok != wok || got != wv {
				t.Errorf("row %d %s = %v (set %v), want %v (set %v)", i, col, got, ok, wv, wok)
			}
		}
	}
	if typ := h.table("otel_metrics_gauge").types["host_name"]; typ != qwp.TypeSymbol {
		t.Fatalf("promoted column type %v, want SYMBOL", typ)
	}
	// Promoted attributes stay in the attributes JSON: series identity is unchanged.
	if rows[0]["attributes"] != `{"code":503,"host.name":"point-host"}` {
		t.Fatalf("attributes = %v", rows[0]["attributes"])
	}
}

func TestMetricNoAllocSteadyState(t *testing.T) {
	md := benchGaugeBatch(100, 0)
	h := newHarness(t, 0, EncoderConfig{})
	emit := func([]byte) error { return nil }
	encode := func() {
		if _, err := h.re.EncodeMetrics(md, emit); err != nil {
			t.Fatal(err)
		}
		if err := h.re.Flush(emit); err != nil {
			t.Fatal(err)
		}
	}
	encode()
	if allocs := testing.AllocsPerRun(20, encode); allocs != 0 {
		t.Fatalf("encoding a warm 100-point gauge batch allocates %.1f times", allocs)
	}
}

// DESIGN.md's size budget: the benchmark gauge batch costs at most 40 bytes
// per data point in the frames once its symbols are known to the server (the
// steady state of a scrape repeated every interval). Sizes are deterministic,
// so the budget is a test, not only a benchmark figure.
func TestMetricGaugeBytesPerPoint(t *testing.T) {
	const points = 1000
	h := newHarness(t, 1_887_436, EncoderConfig{})
	h.metrics(benchGaugeBatch(points, 0))
	cold := 0
	for _, f := range h.frames {
		cold += len(f)
	}
	h.frames = nil
	h.metrics(benchGaugeBatch(points, 1))
	warm := 0
	for _, f := range h.frames {
		warm += len(f)
	}
	if perPoint := float64(warm) / points; perPoint > 40 {
		t.Fatalf("steady state: %.1f bytes per data point, budget 40", perPoint)
	}
	if warm >= cold {
		t.Fatalf("the second scrape (%d bytes) is not smaller than the first (%d): symbols are re-sent", warm, cold)
	}
	if rows := len(h.table("otel_metrics_gauge").rows); rows != 2*points {
		t.Fatalf("%d rows decoded, want %d", rows, 2*points)
	}
}

// TestBuiltValuesNeedNoRecheck: the values the data model builds itself and
// hands to qwp's *Valid setters, which skip the UTF-8 check (attributes and
// exemplar JSON, promoted values, log bodies and trace ids), are valid UTF-8
// for every kind of invalid input: the strict decoder, which refuses bad
// UTF-8 as a server does, accepts every frame (the harness fails the test
// otherwise), and each value carries the repair.
func TestBuiltValuesNeedNoRecheck(t *testing.T) {
	bads := []struct{ name, s string }{
		{"stray continuation", "a\x80b"},
		{"invalid byte", "\xff"},
		{"truncated sequence", "\xe2\x82"},
		{"overlong", "\xc0\xaf"},
		{"surrogate", "\xed\xa0\x80"},
		{"above U+10FFFF", "\xf4\x90\x80\x80"},
		{"after 8 plain bytes", "01234567\xfe"},
	}
	promoted, err := PromotedColumns([]string{"p"})
	if err != nil {
		t.Fatal(err)
	}
	for _, varchar := range []bool{false, true} {
		for _, bad := range bads {
			t.Run(fmt.Sprintf("varchar=%v/%s", varchar, bad.name), func(t *testing.T) {
				md := pmetric.NewMetrics()
				sm := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty()
				gauge := sm.Metrics().AppendEmpty()
				gauge.SetName("g")
				sum := sm.Metrics().AppendEmpty()
				sum.SetName("s")
				for _, dp := range []pmetric.NumberDataPoint{
					gauge.SetEmptyGauge().DataPoints().AppendEmpty(),
					sum.SetEmptySum().DataPoints().AppendEmpty(),
				} {
					dp.SetTimestamp(1)
					a := dp.Attributes()
					a.PutStr("p", bad.s)
					a.PutStr(bad.s, bad.s)
					a.PutEmptyMap("m").PutStr(bad.s, bad.s)
					a.PutEmptySlice("l").AppendEmpty().SetStr(bad.s)
					dp.Exemplars().AppendEmpty().FilteredAttributes().PutStr(bad.s, bad.s)
				}
				ld := plog.NewLogs()
				lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
				lr := lrs.AppendEmpty()
				lr.Body().SetStr(bad.s)
				lr.Attributes().PutStr(bad.s, bad.s)
				lr.Attributes().PutStr("p", bad.s)
				lrs.AppendEmpty().Body().SetEmptyMap().PutStr(bad.s, bad.s)

				h := newHarness(t, 0, EncoderConfig{Promoted: promoted, AttributesVarchar: varchar})
				h.metrics(md)
				h.logs(ld)
				var got []any
				for _, table := range []string{"otel_metrics_gauge", "otel_metrics_sum"} {
					r := h.oneRow(table)
					got = append(got, r["attributes"], r["exemplars"], r["p"])
				}
				logs := h.table("otel_logs").rows
				if len(logs) != 2 {
					t.Fatalf("%d log rows, want 2", len(logs))
				}
				got = append(got, logs[0]["body"], logs[0]["attributes"], logs[0]["p"], logs[1]["body"])
				for i, v := range got {
					s, ok := v.(string)
					if !ok || !utf8.ValidString(s) || !strings.Contains(s, "\uFFFD") {
						t.Errorf("value %d = %#v, want a valid string with the repair U+FFFD", i, v)
					}
				}
			})
		}
	}
}

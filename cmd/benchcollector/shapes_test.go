package main

import (
	"encoding/json"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// seriesOf decodes a metrics request and adds each point's series (metric
// name and point attributes) and (series, timestamp) to the sets.
func seriesOf(t *testing.T, body []byte, series map[string]int, points map[string]bool) {
	t.Helper()
	req := pmetricotlp.NewExportRequest()
	if err := req.UnmarshalProto(body); err != nil {
		t.Fatal(err)
	}
	md := req.Metrics()
	if n := md.DataPointCount(); n != itemsPerRequest {
		t.Fatalf("%d points per request, want %d", n, itemsPerRequest)
	}
	rm := md.ResourceMetrics().At(0)
	if n := rm.Resource().Attributes().Len(); n != 3 {
		t.Fatalf("%d resource attributes, want 3", n)
	}
	metrics := rm.ScopeMetrics().At(0).Metrics()
	for m := range metrics.Len() {
		dps := metrics.At(m).Gauge().DataPoints()
		for d := range dps.Len() {
			dp := dps.At(d)
			if n := dp.Attributes().Len(); n != 5 {
				t.Fatalf("%d point attributes, want 5", n)
			}
			attrs, err := json.Marshal(dp.Attributes().AsRaw()) // sorted keys
			if err != nil {
				t.Fatal(err)
			}
			key := metrics.At(m).Name() + string(attrs)
			series[key]++
			point := key + "@" + dp.Timestamp().String()
			if points[point] {
				t.Fatalf("two points of series %s at %s", key, dp.Timestamp())
			}
			points[point] = true
		}
	}
}

// threeRequests renders requests 0, 1 and 2 of a metrics payload and
// returns the points per series in them.
func threeRequests(t *testing.T, p *metricsPayload) map[string]int {
	t.Helper()
	series, points := map[string]int{}, map[string]bool{}
	for i := range int64(3) {
		body, err := p.marshal(i)
		if err != nil {
			t.Fatal(err)
		}
		seriesOf(t, body, series, points)
	}
	return series
}

func TestMetricsShapeHas200Series(t *testing.T) {
	series := threeRequests(t, newMetricsPayload(0))
	if len(series) != 200 {
		t.Fatalf("%d series in 3 requests, want the same 200 in each", len(series))
	}
	for k, n := range series {
		if n != 3*pointsPerSeries {
			t.Fatalf("series %s has %d points in 3 requests, want %d", k, n, 3*pointsPerSeries)
		}
	}
}

func TestChurnShapeMakesEveryPointANewSeries(t *testing.T) {
	if series := threeRequests(t, newMetricsPayload(churnSeries)); len(series) != 3*itemsPerRequest {
		t.Fatalf("%d series in 3 requests, want %d (one per point)", len(series), 3*itemsPerRequest)
	}
}

// TestSteadyShapeCyclesOverItsSeries: the steady shape's cpu attribute
// takes each of its series' values once per cycle, in the same order.
func TestSteadyShapeCyclesOverItsSeries(t *testing.T) {
	const series = 1500
	p := newMetricsPayload(series)
	var seen []string
	for i := range int64(3) {
		if _, err := p.marshal(i); err != nil {
			t.Fatal(err)
		}
		metrics := p.md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
		for m := range metrics.Len() {
			points := metrics.At(m).Gauge().DataPoints()
			for d := range points.Len() {
				v, _ := points.At(d).Attributes().Get("cpu")
				seen = append(seen, v.Str())
			}
		}
	}
	distinct := map[string]bool{}
	for i, v := range seen {
		distinct[v] = true
		if i >= series && v != seen[i-series] {
			t.Fatalf("point %d has cpu %q, want %q as one cycle earlier", i, v, seen[i-series])
		}
	}
	if len(distinct) != series {
		t.Fatalf("%d distinct cpu values over 3 requests, want %d", len(distinct), series)
	}
}

func TestLogsShape(t *testing.T) {
	p := newLogsPayload()
	requestIDs := map[string]bool{}
	users := map[string]bool{}
	for i := range int64(2) {
		body, err := p.marshal(i)
		if err != nil {
			t.Fatal(err)
		}
		req := plogotlp.NewExportRequest()
		if err := req.UnmarshalProto(body); err != nil {
			t.Fatal(err)
		}
		ld := req.Logs()
		if n := ld.LogRecordCount(); n != itemsPerRequest {
			t.Fatalf("%d records per request, want %d", n, itemsPerRequest)
		}
		if n := ld.ResourceLogs().At(0).Resource().Attributes().Len(); n != 3 {
			t.Fatalf("%d resource attributes, want 3", n)
		}
		records := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
		for r := range records.Len() {
			lr := records.At(r)
			if n := len(lr.Body().Str()); n != logBodyBytes {
				t.Fatalf("body of %d bytes (%q), want %d", n, lr.Body().Str(), logBodyBytes)
			}
			if n := lr.Attributes().Len(); n != 4 {
				t.Fatalf("%d attributes, want 4", n)
			}
			if lr.TraceID() == (pcommon.TraceID{}) || lr.SpanID() == (pcommon.SpanID{}) {
				t.Fatal("record without trace context")
			}
			id, _ := lr.Attributes().Get("request.id")
			if requestIDs[id.Str()] {
				t.Fatalf("request.id %s repeats", id.Str())
			}
			requestIDs[id.Str()] = true
			user, _ := lr.Attributes().Get("user.id")
			users[user.Str()] = true
		}
	}
	if len(users) != 2*itemsPerRequest {
		t.Fatalf("%d distinct user.id values in %d records", len(users), 2*itemsPerRequest)
	}
}

// TestTracesShape decodes two requests and checks the stated shape: 1,000
// spans over 20 resources, 50 names, 10 attributes of which 3 unique per
// span, one event each, traces of 10 spans, and no span repeated.
func TestTracesShape(t *testing.T) {
	p := newTracesPayload()
	spanIDs := map[pcommon.SpanID]bool{}
	unique := map[string]map[string]bool{"url.path": {}, "client.address": {}, "http.request.id": {}}
	names, traces := map[string]bool{}, map[pcommon.TraceID]int{}
	roots := 0
	for i := range int64(2) {
		body, err := p.marshal(i)
		if err != nil {
			t.Fatal(err)
		}
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(body); err != nil {
			t.Fatal(err)
		}
		td := req.Traces()
		if n := td.SpanCount(); n != itemsPerRequest {
			t.Fatalf("%d spans per request, want %d", n, itemsPerRequest)
		}
		if n := td.ResourceSpans().Len(); n != spanResources {
			t.Fatalf("%d resources, want %d", n, spanResources)
		}
		for r := range td.ResourceSpans().Len() {
			rs := td.ResourceSpans().At(r)
			if n := rs.Resource().Attributes().Len(); n != 5 {
				t.Fatalf("%d resource attributes, want 5", n)
			}
			spans := rs.ScopeSpans().At(0).Spans()
			for s := range spans.Len() {
				sp := spans.At(s)
				if spanIDs[sp.SpanID()] || sp.SpanID().IsEmpty() || sp.TraceID().IsEmpty() {
					t.Fatalf("span id %s repeats or is empty", sp.SpanID())
				}
				spanIDs[sp.SpanID()] = true
				traces[sp.TraceID()]++
				if sp.ParentSpanID().IsEmpty() {
					roots++
				}
				if sp.EndTimestamp() <= sp.StartTimestamp() || sp.Kind() != ptrace.SpanKindServer {
					t.Fatalf("span %s: end %s, start %s, kind %s", sp.SpanID(), sp.EndTimestamp(), sp.StartTimestamp(), sp.Kind())
				}
				names[sp.Name()] = true
				if n := sp.Attributes().Len(); n != 10 {
					t.Fatalf("%d span attributes, want 10", n)
				}
				for k, seen := range unique {
					v, ok := sp.Attributes().Get(k)
					if !ok || seen[v.AsString()] {
						t.Fatalf("%s %q missing or repeated", k, v.AsString())
					}
					seen[v.AsString()] = true
				}
				if sp.Events().Len() != 1 || sp.Events().At(0).Attributes().Len() != 2 || sp.Events().At(0).Timestamp() <= sp.StartTimestamp() {
					t.Fatalf("span %s: events %d, want one with 2 attributes after the start", sp.SpanID(), sp.Events().Len())
				}
			}
		}
	}
	if len(names) != 50 {
		t.Fatalf("%d span names, want 50", len(names))
	}
	if len(traces) != 2*itemsPerRequest/spansPerTrace || roots != len(traces) {
		t.Fatalf("%d traces with %d roots, want %d traces of %d spans with one root each", len(traces), roots, 2*itemsPerRequest/spansPerTrace, spansPerTrace)
	}
	for id, n := range traces {
		if n != spansPerTrace {
			t.Fatalf("trace %s has %d spans, want %d", id, n, spansPerTrace)
		}
	}
}

func TestLogBodyIsAlways100Bytes(t *testing.T) {
	for _, n := range []int64{0, 7, 1 << 20, 1 << 62} {
		if b := logBody([]byte("prefix"), n); len(b) != len("prefix")+logBodyBytes || string(b[:6]) != "prefix" {
			t.Errorf("logBody(%d) = %q", n, b)
		}
	}
}

func TestLookup(t *testing.T) {
	got, err := lookup(exporterConfigs, func(e exporterConfig) string { return e.name }, "exporter configuration", []string{"otlp_http", "nop"})
	if err != nil || len(got) != 2 || got[0].name != "otlp_http" || got[1].name != "nop" {
		t.Fatalf("lookup = %v, %v", got, err)
	}
	_, err = lookup(shapes, func(s shape) string { return s.name }, "shape", []string{"metrics", "profiles"})
	if err == nil || !strings.Contains(err.Error(), `unknown shape "profiles" (have metrics, logs, traces, churn, steady)`) {
		t.Fatalf("unknown shape: err = %v", err)
	}
}

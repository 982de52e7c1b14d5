package main

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// The metrics shape: metricsPerRequest x seriesPerMetric series, each with
// pointsPerSeries points per request.
const (
	metricsPerRequest = 10
	seriesPerMetric   = 20
	pointsPerSeries   = 5
	itemsPerRequest   = metricsPerRequest * seriesPerMetric * pointsPerSeries // 1,000, also the log records per request
	logBodyBytes      = 100
	// steadySeries is the steady shape's working set: 60,000 series whose
	// attribute JSON (about 120 bytes) is about 7 MiB of symbol text, more
	// than a 4 MiB dictionary generation and less than 16 MiB.
	steadySeries = 60000
)

// baseTime is the first timestamp of every run: fixed, so that runs are
// alike, and recent, so that nothing treats the points as stale.
var baseTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// payload renders request number i (unique within a run) as an OTLP/HTTP
// protobuf body. One payload belongs to one client goroutine: it reuses its
// pdata between requests.
type payload interface {
	marshal(i int64) ([]byte, error)
	path() string
}

// shape is one kind of load: how to build a client's payload and what its
// requests hold, for the report.
type shape struct {
	name        string
	description string
	newPayload  func() payload
}

var shapes = []shape{
	{"metrics", "1,000 gauge points/request, 200 series (10 metrics x 20), 5 point + 3 resource attributes",
		func() payload { return newMetricsPayload(0) }},
	{"logs", "1,000 log records/request, 100-byte body, 4 attributes (2 unique per record), 3 resource attributes, trace context",
		func() payload { return newLogsPayload() }},
	{"traces", "1,000 spans/request over 20 resources (5 attributes), 50 span names, traces of 10 spans, 10 attributes (3 unique per span), one event with 2 attributes",
		func() payload { return newTracesPayload() }},
	{"churn", "the metrics shape with one point attribute unique per point: every point a new series",
		func() payload { return newMetricsPayload(churnSeries) }},
	{"steady", "the metrics shape over 60,000 recurring series, read in the same order every 60 requests",
		func() payload { return newMetricsPayload(steadySeries) }},
}

func putResource(attrs pcommon.Map) {
	attrs.PutStr("service.name", "bench")
	attrs.PutStr("host.name", "bench-host-1")
	attrs.PutStr("service.instance.id", "8f2c6a1e-4b7d-4e52-9b0a-3c1d2e4f5a6b")
}

// churnSeries as a metricsPayload's series makes every point a new series.
const churnSeries = -1

// metricsPayload is the metrics shape; with series > 0 one point attribute
// cycles over that many series (the steady shape), with churnSeries it is
// unique per point (the churn shape).
type metricsPayload struct {
	md     pmetric.Metrics
	series int64
}

func newMetricsPayload(series int64) *metricsPayload {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	putResource(rm.Resource().Attributes())
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("benchcollector")
	sm.Scope().SetVersion("1.0.0")
	for m := range metricsPerRequest {
		metric := sm.Metrics().AppendEmpty()
		metric.SetName("bench.metric." + strconv.Itoa(m))
		metric.SetUnit("1")
		metric.SetDescription("a benchmark gauge")
		points := metric.SetEmptyGauge().DataPoints()
		for s := range seriesPerMetric {
			for range pointsPerSeries {
				attrs := points.AppendEmpty().Attributes()
				attrs.PutStr("cpu", "cpu"+strconv.Itoa(s))
				attrs.PutStr("state", "user")
				attrs.PutStr("host.arch", "amd64")
				attrs.PutStr("cloud.region", "eu-west-1")
				attrs.PutStr("cloud.availability_zone", "eu-west-1a")
			}
		}
	}
	return &metricsPayload{md: md, series: series}
}

func (p *metricsPayload) path() string { return "/v1/metrics" }

// marshal gives the k-th point of a series in request i the time
// baseTime + (i*pointsPerSeries + k) ms, so that no two points of one series
// share a timestamp in a run; with churn, point j of request i is series
// i*itemsPerRequest + j; with series, that modulo series.
func (p *metricsPayload) marshal(i int64) ([]byte, error) {
	metrics := p.md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	j := i * itemsPerRequest
	for m := range metrics.Len() {
		points := metrics.At(m).Gauge().DataPoints()
		for d := range points.Len() {
			dp := points.At(d)
			k := int64(d % pointsPerSeries)
			dp.SetTimestamp(pcommon.NewTimestampFromTime(baseTime.Add(time.Duration(i*pointsPerSeries+k) * time.Millisecond)))
			dp.SetDoubleValue(float64(j%997) / 10)
			switch {
			case p.series == churnSeries:
				dp.Attributes().PutStr("cpu", "cpu"+strconv.FormatInt(j, 10))
			case p.series > 0:
				dp.Attributes().PutStr("cpu", "cpu"+strconv.FormatInt(j%p.series, 10))
			}
			j++
		}
	}
	return pmetricotlp.NewExportRequestFromMetrics(p.md).MarshalProto()
}

// logsPayload is the logs shape.
type logsPayload struct {
	ld   plog.Logs
	body []byte // scratch for the 100-byte bodies
}

func newLogsPayload() *logsPayload {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	putResource(rl.Resource().Attributes())
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("benchcollector")
	sl.Scope().SetVersion("1.0.0")
	records := sl.LogRecords()
	for range itemsPerRequest {
		lr := records.AppendEmpty()
		lr.SetSeverityNumber(plog.SeverityNumberInfo)
		lr.SetSeverityText("INFO")
		attrs := lr.Attributes()
		attrs.PutStr("http.method", "GET")
		attrs.PutStr("http.route", "/api/v1/items/{id}")
		attrs.PutStr("user.id", "")
		attrs.PutStr("request.id", "")
	}
	return &logsPayload{ld: ld}
}

func (p *logsPayload) path() string { return "/v1/logs" }

// marshal makes record j of request i unique: its time, body, user.id,
// request.id and trace context all derive from i*itemsPerRequest + j.
func (p *logsPayload) marshal(i int64) ([]byte, error) {
	records := p.ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
	for r := range records.Len() {
		lr := records.At(r)
		n := i*itemsPerRequest + int64(r)
		ts := pcommon.NewTimestampFromTime(baseTime.Add(time.Duration(n) * time.Microsecond))
		lr.SetTimestamp(ts)
		lr.SetObservedTimestamp(ts)
		p.body = logBody(p.body[:0], n)
		lr.Body().SetStr(string(p.body))
		attrs := lr.Attributes()
		attrs.PutStr("user.id", "user-"+strconv.FormatInt(n%5000, 10))
		attrs.PutStr("request.id", "req-"+strconv.FormatInt(n, 16))
		var trace pcommon.TraceID
		binary.BigEndian.PutUint64(trace[:8], uint64(i)+1)
		binary.BigEndian.PutUint64(trace[8:], uint64(n))
		lr.SetTraceID(trace)
		var span pcommon.SpanID
		binary.BigEndian.PutUint64(span[:], uint64(n)+1)
		lr.SetSpanID(span)
	}
	return plogotlp.NewExportRequestFromLogs(p.ld).MarshalProto()
}

// logBody appends a log line of exactly logBodyBytes bytes about record n.
func logBody(dst []byte, n int64) []byte {
	start := len(dst)
	dst = fmt.Appendf(dst, "GET /api/v1/items/%d served 200 in %d ms (cache hit, %d bytes, upstream pool idle) ", n, n%97, 512+n%4096)
	for len(dst)-start < logBodyBytes {
		dst = append(dst, '.')
	}
	return dst[:start+logBodyBytes]
}

// The traces shape, the data-model span benchmark's (issue #13): 1,000 spans
// per request, spansPerResource from each of spanResources resources, names
// from 50 (5 methods x 10 routes), traces of spansPerTrace spans.
const (
	spanResources    = 20
	spansPerResource = itemsPerRequest / spanResources
	spansPerTrace    = 10
)

var spanMethods = [...]string{"GET", "POST", "PUT", "DELETE", "PATCH"}

// tracesPayload is the traces shape.
type tracesPayload struct {
	td ptrace.Traces
}

// newTracesPayload builds the spans once: what is the same in every request
// (resources, names, the 7 shared attributes, the event) is set here, what
// is unique per span in marshal.
func newTracesPayload() *tracesPayload {
	td := ptrace.NewTraces()
	for r := range spanResources {
		rs := td.ResourceSpans().AppendEmpty()
		ra := rs.Resource().Attributes()
		service := "service-" + strconv.Itoa(r%5)
		ra.PutStr("service.name", service)
		ra.PutStr("service.version", "2.4.1")
		ra.PutStr("service.instance.id", fmt.Sprintf("%s-7f9c8d6b5-%05d", service, r))
		ra.PutStr("host.name", fmt.Sprintf("ip-10-0-%d-17.eu-west-1.compute.internal", r))
		ra.PutStr("telemetry.sdk.language", "go")
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp")
		ss.Scope().SetVersion("0.72.0")
		for i := range spansPerResource {
			n := r*spansPerResource + i
			route := fmt.Sprintf("/api/v1/resource%d/{id}", n%10)
			method := spanMethods[(n/10)%len(spanMethods)]
			sp := ss.Spans().AppendEmpty()
			sp.SetName(method + " " + route)
			sp.SetKind(ptrace.SpanKindServer)
			sp.SetFlags(1)
			a := sp.Attributes()
			a.PutStr("http.request.method", method)
			a.PutStr("http.route", route)
			a.PutInt("http.response.status_code", int64([...]int{200, 200, 201, 404, 200}[n%5]))
			a.PutStr("url.scheme", "https")
			a.PutStr("server.address", "api.example.com")
			a.PutInt("server.port", 443)
			a.PutStr("network.protocol.version", "1.1")
			ev := sp.Events().AppendEmpty()
			ev.SetName("http.response.started")
			ev.Attributes().PutStr("message.type", "SENT")
			if n%20 == 0 {
				sp.Status().SetCode(ptrace.StatusCodeError)
				sp.Status().SetMessage("upstream timeout")
			}
		}
	}
	return &tracesPayload{td: td}
}

func (p *tracesPayload) path() string { return "/v1/traces" }

// marshal makes span s of request i unique: with n = i*itemsPerRequest + s,
// its ids, times, url.path, client.address, request id and event size
// derive from n; the first span of every 10 is a trace's root, the others
// its children.
func (p *tracesPayload) marshal(i int64) ([]byte, error) {
	rss := p.td.ResourceSpans()
	for r := range rss.Len() {
		spans := rss.At(r).ScopeSpans().At(0).Spans()
		for s := range spans.Len() {
			sp := spans.At(s)
			n := i*itemsPerRequest + int64(r*spansPerResource+s)
			var trace pcommon.TraceID
			binary.BigEndian.PutUint64(trace[:8], uint64(n/spansPerTrace)+1)
			binary.BigEndian.PutUint64(trace[8:], 0x9a3c110755e241b0)
			sp.SetTraceID(trace)
			sp.SetSpanID(spanID(n))
			if n%spansPerTrace != 0 {
				sp.SetParentSpanID(spanID(n - n%spansPerTrace))
			}
			start := pcommon.NewTimestampFromTime(baseTime.Add(time.Duration(n) * time.Microsecond))
			sp.SetStartTimestamp(start)
			sp.SetEndTimestamp(start + pcommon.Timestamp(200_000+n*7919%5_000_000))
			a := sp.Attributes()
			a.PutStr("url.path", "/api/v1/resource"+strconv.FormatInt(n%10, 10)+"/"+strconv.FormatInt(100_000+n*37, 10))
			a.PutStr("client.address", fmt.Sprintf("10.%d.%d.%d", n>>16&255, n>>8&255, n&255))
			a.PutStr("http.request.id", fmt.Sprintf("%08x-%04x", n*2654435761, n&0xffff))
			ev := sp.Events().At(0)
			ev.SetTimestamp(start + 150_000)
			ev.Attributes().PutInt("message.uncompressed_size", 512+n%4096)
		}
	}
	return ptraceotlp.NewExportRequestFromTraces(p.td).MarshalProto()
}

// spanID is the id of span n of a run (never zero).
func spanID(n int64) pcommon.SpanID {
	var id pcommon.SpanID
	binary.BigEndian.PutUint64(id[:], uint64(n)+1)
	return id
}

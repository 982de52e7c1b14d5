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
)

// The metrics shape: metricsPerRequest x seriesPerMetric series, each with
// pointsPerSeries points per request.
const (
	metricsPerRequest = 10
	seriesPerMetric   = 20
	pointsPerSeries   = 5
	itemsPerRequest   = metricsPerRequest * seriesPerMetric * pointsPerSeries // 1,000, also the log records per request
	logBodyBytes      = 100
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
		func() payload { return newMetricsPayload(false) }},
	{"logs", "1,000 log records/request, 100-byte body, 4 attributes (2 unique per record), 3 resource attributes, trace context",
		func() payload { return newLogsPayload() }},
	{"churn", "the metrics shape with one point attribute unique per point: every point a new series",
		func() payload { return newMetricsPayload(true) }},
}

func putResource(attrs pcommon.Map) {
	attrs.PutStr("service.name", "bench")
	attrs.PutStr("host.name", "bench-host-1")
	attrs.PutStr("service.instance.id", "8f2c6a1e-4b7d-4e52-9b0a-3c1d2e4f5a6b")
}

// metricsPayload is the metrics shape, or with churn the churn shape.
type metricsPayload struct {
	md    pmetric.Metrics
	churn bool
}

func newMetricsPayload(churn bool) *metricsPayload {
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
	return &metricsPayload{md: md, churn: churn}
}

func (p *metricsPayload) path() string { return "/v1/metrics" }

// marshal gives the k-th point of a series in request i the time
// baseTime + (i*pointsPerSeries + k) ms, so that no two points of one series
// share a timestamp in a run; with churn, point j of request i is series
// i*itemsPerRequest + j.
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
			if p.churn {
				dp.Attributes().PutStr("cpu", "cpu"+strconv.FormatInt(j, 10))
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

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// e2eTime is the fixed time of every point of the end-to-end payload.
const e2eTime = 1_700_000_000_123_456_789

// e2eMetrics is the fixed metrics payload: a gauge, a monotonic sum and a
// histogram from one resource.
func e2eMetrics() pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "e2e-service")
	rm.Resource().Attributes().PutStr("host.name", "e2e-host")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("e2e-scope")
	sm.Scope().SetVersion("1.2.3")

	g := sm.Metrics().AppendEmpty()
	g.SetName("e2e.temperature")
	g.SetUnit("Cel")
	g.SetDescription("room temperature")
	gp := g.SetEmptyGauge().DataPoints().AppendEmpty()
	gp.SetTimestamp(e2eTime)
	gp.SetDoubleValue(21.5)
	gp.Attributes().PutStr("room", "lab")

	s := sm.Metrics().AppendEmpty()
	s.SetName("e2e.requests")
	sum := s.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	sp := sum.DataPoints().AppendEmpty()
	sp.SetStartTimestamp(e2eTime - 60_000_000_000)
	sp.SetTimestamp(e2eTime)
	sp.SetIntValue(42)

	h := sm.Metrics().AppendEmpty()
	h.SetName("e2e.latency")
	h.SetUnit("ms")
	hist := h.SetEmptyHistogram()
	hist.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	hp := hist.DataPoints().AppendEmpty()
	hp.SetTimestamp(e2eTime)
	hp.SetCount(6)
	hp.SetSum(123.5)
	hp.SetMin(1)
	hp.SetMax(80)
	hp.BucketCounts().FromRaw([]uint64{1, 2, 3})
	hp.ExplicitBounds().FromRaw([]float64{10, 50})
	return md
}

// e2eLogs is the fixed logs payload: one error record inside a trace.
func e2eLogs() plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "e2e-service")
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetTimestamp(e2eTime)
	lr.SetObservedTimestamp(e2eTime + 1000)
	lr.SetSeverityNumber(plog.SeverityNumberError)
	lr.SetSeverityText("ERROR")
	lr.Body().SetStr("payment declined")
	lr.Attributes().PutStr("order.id", "A-17")
	lr.SetTraceID(e2eTraceID)
	lr.SetSpanID(e2eSpanID)
	return ld
}

// The trace and span of the e2e log record and span: the two rows join on
// trace_id and span_id.
var (
	e2eTraceID = pcommon.TraceID{0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03, 0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f, 0xc6, 0x0c}
	e2eSpanID  = pcommon.SpanID{0xee, 0xe1, 0x9b, 0x7e, 0xc3, 0xc1, 0xb1, 0x74}
)

// e2eTraces is the fixed traces payload: the failed server span the e2e
// log record was written in, with an event.
func e2eTraces() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "e2e-service")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("e2e-scope")
	sp := ss.Spans().AppendEmpty()
	sp.SetTraceID(e2eTraceID)
	sp.SetSpanID(e2eSpanID)
	sp.SetParentSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8})
	sp.SetFlags(0x101)
	sp.SetName("POST /checkout")
	sp.SetKind(ptrace.SpanKindServer)
	sp.SetStartTimestamp(e2eTime - 2_000_000)
	sp.SetEndTimestamp(e2eTime + 3_000_000)
	sp.Attributes().PutStr("http.request.method", "POST")
	sp.Attributes().PutInt("http.response.status_code", 402)
	ev := sp.Events().AppendEmpty()
	ev.SetTimestamp(e2eTime)
	ev.SetName("exception")
	ev.Attributes().PutStr("exception.type", "CardDeclined")
	sp.Status().SetCode(ptrace.StatusCodeError)
	sp.Status().SetMessage("payment declined")
	return td
}

// e2eExpected lists, per table, the columns of the single row expected, as
// the JSON text the sink renders them in.
var e2eExpected = map[string]map[string]string{
	"otel_metrics_gauge": {
		"timestamp": "1700000000123456789", "value": "21.5", "metric_name": `"e2e.temperature"`,
		"metric_unit": `"Cel"`, "metric_description": `"room temperature"`, "service_name": `"e2e-service"`,
		"scope_name": `"e2e-scope"`, "scope_version": `"1.2.3"`, "attributes": `"{\"room\":\"lab\"}"`,
		"resource_attributes": `"{\"host.name\":\"e2e-host\",\"service.name\":\"e2e-service\"}"`,
		"host_name":           `"e2e-host"`,
	},
	"otel_metrics_sum": {
		"timestamp": "1700000000123456789", "start_timestamp": "1699999940123456789", "value": "42",
		"metric_name": `"e2e.requests"`, "is_monotonic": "true", "temporality": `"cumulative"`,
	},
	"otel_metrics_histogram": {
		"timestamp": "1700000000123456789", "metric_name": `"e2e.latency"`, "count": "6", "sum": "123.5",
		"min": "1", "max": "80", "bucket_counts": "[1,2,3]", "explicit_bounds": "[10,50]",
		"temporality": `"delta"`,
	},
	"otel_logs": {
		"timestamp": "1700000000123456789", "observed_timestamp": "1700000000123457789",
		"service_name": `"e2e-service"`, "severity_text": `"ERROR"`, "severity_number": "17",
		"body": `"payment declined"`, "trace_id": `"5b8efff798038103d269b633813fc60c"`,
		"span_id": `"eee19b7ec3c1b174"`, "attributes": `"{\"order.id\":\"A-17\"}"`,
	},
	"otel_traces": {
		"timestamp": "1700000000121456789", "end_timestamp": "1700000000126456789", "duration": "5000000",
		"service_name": `"e2e-service"`, "span_name": `"POST /checkout"`, "span_kind": `"server"`,
		"trace_id": `"5b8efff798038103d269b633813fc60c"`, "span_id": `"eee19b7ec3c1b174"`,
		"parent_span_id": `"0102030405060708"`, "status_code": `"error"`, "status_message": `"payment declined"`,
		"scope_name": `"e2e-scope"`, "flags": "257", "dropped_events_count": "0",
		"attributes": `"{\"http.request.method\":\"POST\",\"http.response.status_code\":402}"`,
		"events":     `"[{\"time_unix_nano\":1700000000123456789,\"name\":\"exception\",\"attributes\":{\"exception.type\":\"CardDeclined\"}}]"`,
	},
}

// e2eTTL is the exporter's ttl in the e2e check, and e2eTTLClause what
// QuestDB (the sink) reports for it.
const (
	e2eTTL       = "30d"
	e2eTTLClause = "30 DAYS"
)

// e2eDedupKeys are the DEDUP UPSERT KEYS each checked table must have been
// created with: a table QWP auto-created (because the exporter's CREATE
// TABLE failed or came too late) has none, and a replay doubles its rows.
var e2eDedupKeys = map[string][]string{
	"otel_metrics_gauge":     {"timestamp", "series_id"},
	"otel_metrics_sum":       {"timestamp", "series_id"},
	"otel_metrics_histogram": {"timestamp", "series_id"},
	"otel_logs":              {"timestamp", "record_id"},
	"otel_traces":            {"timestamp", "span_key"},
}

func runE2E(ctx context.Context, o options) error {
	s, err := startStack(o)
	if err != nil {
		return err
	}
	defer s.stop()
	gen := &generator{endpoint: fmt.Sprintf("http://127.0.0.1:%d", s.otlpPort), hc: &http.Client{Timeout: 15 * time.Second}}
	mbody, err := pmetricotlp.NewExportRequestFromMetrics(e2eMetrics()).MarshalProto()
	if err != nil {
		return err
	}
	lbody, err := plogotlp.NewExportRequestFromLogs(e2eLogs()).MarshalProto()
	if err != nil {
		return err
	}
	tbody, err := ptraceotlp.NewExportRequestFromTraces(e2eTraces()).MarshalProto()
	if err != nil {
		return err
	}
	postCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := gen.post(postCtx, "/v1/metrics", mbody); err != nil {
		return err
	}
	if err := gen.post(postCtx, "/v1/logs", lbody); err != nil {
		return err
	}
	if err := gen.post(postCtx, "/v1/traces", tbody); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		problems, err := checkE2E(ctx, s.sink)
		if err != nil {
			return err
		}
		if len(problems) == 0 {
			fmt.Println("e2e: every expected row landed with the expected values")
			return e2eBulk(ctx, s, gen)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("e2e check failed:\n  %s\ncollector log tail:\n%s",
				strings.Join(problems, "\n  "), tail(s.col.log.Name(), 30))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkE2E returns one line per missing table, extra row or differing value.
func checkE2E(ctx context.Context, sink *sinkClient) ([]string, error) {
	var problems []string
	tables := make([]string, 0, len(e2eExpected))
	for t := range e2eExpected {
		tables = append(tables, t)
	}
	sort.Strings(tables)
	for _, table := range tables {
		tr, err := sink.rows(ctx, table, 100)
		if err != nil {
			return nil, err
		}
		problems = append(problems, compareRows(table, tr, e2eExpected[table])...)
		problems = append(problems, compareTable(table, tr, e2eDedupKeys[table], e2eTTLClause)...)
	}
	return problems, nil
}

// compareTable checks that a table was created with its dedup keys and TTL.
func compareTable(table string, tr *tableRows, keys []string, ttl string) []string {
	var problems []string
	if !slices.Equal(tr.DedupKeys, keys) {
		problems = append(problems, fmt.Sprintf("%s: dedup keys %v, want %v (auto-created instead of by the exporter's CREATE TABLE?)", table, tr.DedupKeys, keys))
	}
	if tr.TTL != ttl {
		problems = append(problems, fmt.Sprintf("%s: ttl %q, want %q", table, tr.TTL, ttl))
	}
	return problems
}

func compareRows(table string, tr *tableRows, want map[string]string) []string {
	if len(tr.Rows) != 1 {
		return []string{fmt.Sprintf("%s: %d rows, want 1", table, len(tr.Rows))}
	}
	var problems []string
	cols := make([]string, 0, len(want))
	for c := range want {
		cols = append(cols, c)
	}
	sort.Strings(cols)
	for _, c := range cols {
		i := tr.column(c)
		if i < 0 {
			problems = append(problems, fmt.Sprintf("%s: no column %q", table, c))
			continue
		}
		got, err := json.Marshal(tr.Rows[0][i])
		if err != nil {
			return append(problems, fmt.Sprintf("%s.%s: %v", table, c, err))
		}
		if string(got) != want[c] {
			problems = append(problems, fmt.Sprintf("%s.%s = %s, want %s", table, c, got, want[c]))
		}
	}
	return problems
}

// e2eBulk sends the bulk load after the fixed payload landed, waits for
// every record of it to land once, and checks that the sink received QWP
// messages over 64 KiB.
func e2eBulk(ctx context.Context, s *stack, gen *generator) error {
	postCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	size, err := gen.bulk(postCtx)
	if err != nil {
		return fmt.Errorf("bulk load: %w", err)
	}
	fmt.Printf("e2e: bulk load of %d log records in one %.1f MiB OTLP request sent\n", bulkLogs, float64(size)/(1<<20))
	deadline := time.Now().Add(60 * time.Second)
	for {
		logs, err := s.sink.rows(ctx, "otel_logs", 2*bulkLogs)
		if err != nil {
			return err
		}
		v, err := countLogs(demoLogsOnly(logs), bulkLogs)
		if err != nil {
			return err
		}
		if v.Lost == 0 && v.Duplicates == 0 {
			fmt.Printf("e2e: bulk load landed: %s\n", v)
			return s.sink.checkBigFrames(ctx)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("e2e bulk load: %s\ncollector log tail:\n%s", v, tail(s.col.log.Name(), 30))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// demoLogsOnly keeps the rows whose body is a generated log's ("demo log
// seq=N..."), leaving out the fixed payload's record.
func demoLogsOnly(t *tableRows) *tableRows {
	col := t.column("body")
	out := &tableRows{Columns: t.Columns}
	for _, row := range t.Rows {
		if b, ok := row[col].(string); col >= 0 && ok && strings.HasPrefix(b, "demo log ") {
			out.Rows = append(out.Rows, row)
		}
	}
	return out
}

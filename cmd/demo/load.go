package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// generator posts OTLP/HTTP batches the way an OTLP client does: a batch is
// sent until the collector answers 2xx, waiting as a 429/503 Retry-After asks
// (or backing off while the collector is down). Only batches answered 2xx
// count as sent: those are the ones the collector promised to keep.
type generator struct {
	endpoint string // http://127.0.0.1:port
	hc       *http.Client
	hosts    []string

	nextSeq      int64
	sentPoints   atomic.Int64
	sentLogs     atomic.Int64
	sentSpans    atomic.Int64
	retries      atomic.Int64
	backpressure atomic.Int64 // 429 answers
}

// metricsBatch builds n gauge points whose `seq` attribute identifies each
// point uniquely, so the verdict can tell lost points from duplicates.
func (g *generator) metricsBatch(n int, now time.Time) (pmetric.Metrics, int64) {
	md := pmetric.NewMetrics()
	first := g.nextSeq
	for h, host := range g.hosts {
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", "demo")
		rm.Resource().Attributes().PutStr("host.name", host)
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName("questdbexporter/demo")
		m := sm.Metrics().AppendEmpty()
		m.SetName("demo.cpu.utilization")
		m.SetUnit("1")
		gauge := m.SetEmptyGauge()
		for i := h; i < n; i += len(g.hosts) {
			dp := gauge.DataPoints().AppendEmpty()
			dp.SetTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Duration(i) * time.Microsecond)))
			dp.SetDoubleValue(float64(g.nextSeq%100) / 100)
			dp.Attributes().PutInt("seq", g.nextSeq)
			dp.Attributes().PutStr("cpu", "cpu"+strconv.Itoa(i%4))
			g.nextSeq++
		}
	}
	return md, g.nextSeq - first
}

// logsBatch builds n log records with unique bodies, "demo log seq=N"
// followed by pad.
func (g *generator) logsBatch(n int, now time.Time, pad string) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "demo")
	sl := rl.ScopeLogs().AppendEmpty()
	for i := 0; i < n; i++ {
		lr := sl.LogRecords().AppendEmpty()
		lr.SetTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Duration(i) * time.Microsecond)))
		lr.SetSeverityNumber(plog.SeverityNumberInfo)
		lr.SetSeverityText("INFO")
		lr.Body().SetStr(fmt.Sprintf("demo log seq=%d", g.sentLogs.Load()+int64(i)) + pad)
	}
	return ld
}

// spansBatch builds n spans whose `seq` attribute identifies each span
// uniquely (counting from the spans sent so far), in traces of up to five
// spans: a server span and its children.
func (g *generator) spansBatch(n int, now time.Time) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "demo")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("questdbexporter/demo")
	first := g.sentSpans.Load()
	var root pcommon.SpanID
	for i := 0; i < n; i++ {
		seq := first + int64(i)
		sp := ss.Spans().AppendEmpty()
		trace := seq / 5
		sp.SetTraceID(pcommon.TraceID{0xde, 0x30, 8: byte(trace >> 56), byte(trace >> 48), byte(trace >> 40), byte(trace >> 32),
			byte(trace >> 24), byte(trace >> 16), byte(trace >> 8), byte(trace)})
		id := pcommon.SpanID{0x5e, byte(seq >> 48), byte(seq >> 40), byte(seq >> 32), byte(seq >> 24), byte(seq >> 16), byte(seq >> 8), byte(seq)}
		sp.SetSpanID(id)
		if seq%5 == 0 || i == 0 {
			root = id
			sp.SetName("GET /demo/items/{id}")
			sp.SetKind(ptrace.SpanKindServer)
		} else {
			sp.SetParentSpanID(root)
			sp.SetName("SELECT demo.items")
			sp.SetKind(ptrace.SpanKindClient)
		}
		start := now.Add(time.Duration(i) * time.Microsecond)
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Duration(1+seq%50) * time.Millisecond)))
		sp.Attributes().PutInt("seq", seq)
	}
	return td
}

// post sends one body until the collector accepts it or ctx ends.
func (g *generator) post(ctx context.Context, path string, body []byte) error {
	backoff := 100 * time.Millisecond
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.endpoint+path, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-protobuf")
		resp, err := g.hc.Do(req)
		wait := backoff
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return nil
			}
			if resp.StatusCode == http.StatusTooManyRequests {
				g.backpressure.Add(1)
			}
			if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
				return fmt.Errorf("POST %s: %s (not retryable)", path, resp.Status)
			}
			if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
				wait = time.Duration(s) * time.Second
			}
		}
		g.retries.Add(1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// tick sends one metrics batch, one logs batch and one traces batch.
func (g *generator) tick(ctx context.Context, points, logs, spans int) error {
	now := time.Now()
	md, n := g.metricsBatch(points, now)
	body, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		return err
	}
	if err := g.post(ctx, "/v1/metrics", body); err != nil {
		return err
	}
	g.sentPoints.Add(n)
	lbody, err := plogotlp.NewExportRequestFromLogs(g.logsBatch(logs, now, "")).MarshalProto()
	if err != nil {
		return err
	}
	if err := g.post(ctx, "/v1/logs", lbody); err != nil {
		return err
	}
	g.sentLogs.Add(int64(logs))
	tbody, err := ptraceotlp.NewExportRequestFromTraces(g.spansBatch(spans, now)).MarshalProto()
	if err != nil {
		return err
	}
	if err := g.post(ctx, "/v1/traces", tbody); err != nil {
		return err
	}
	g.sentSpans.Add(int64(spans))
	return nil
}

// Bulk load: one OTLP request of bulkLogs log records with bulkPad bytes of
// filler in each body, about 2.7 MiB as OTLP and more as QWP - more than the
// exporter's max_batch_bytes (1.8 MiB by default), so its QWP messages, each
// sent as one WebSocket frame, run far past 64 KiB.
const (
	bulkLogs = 20_000
	bulkPad  = 96
)

// bulk posts the bulk load, counted with the other logs, and returns the
// request's size.
func (g *generator) bulk(ctx context.Context) (int, error) {
	pad := " " + strings.Repeat("x", bulkPad-1)
	body, err := plogotlp.NewExportRequestFromLogs(g.logsBatch(bulkLogs, time.Now(), pad)).MarshalProto()
	if err != nil {
		return 0, err
	}
	if err := g.post(ctx, "/v1/logs", body); err != nil {
		return 0, err
	}
	g.sentLogs.Add(bulkLogs)
	return len(body), nil
}

// run ticks every 100 ms (points gauge points, a fifth of it logs and spans)
// until ctx ends; the channel then yields nil, or the error that stopped it.
func (g *generator) run(ctx context.Context, points int) <-chan error {
	done := make(chan error, 1)
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				done <- nil
				return
			case <-t.C:
				if err := g.tick(ctx, points, max(1, points/5), max(1, points/5)); err != nil && ctx.Err() == nil {
					done <- err
					return
				}
			}
		}
	}()
	return done
}

package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestVerdictCountsLostAndDuplicates(t *testing.T) {
	tr := &tableRows{Rows: [][]any{
		{`{"cpu":"cpu0","seq":0}`}, {`{"seq":1}`}, {`{"seq":1}`}, {`{"seq":3}`},
	}}
	tr.Columns = append(tr.Columns, struct {
		Name string `json:"name"`
		Type string `json:"type"`
	}{Name: "attributes", Type: "SYMBOL"})
	v, err := countSeq(tr, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := verdict{Sent: 4, Landed: 3, Lost: 1, Duplicates: 1}
	if v != want {
		t.Fatalf("verdict = %v, want %v", v, want)
	}
	if got := v.String(); got != "sent 4, landed 3, lost 1, duplicates 1" {
		t.Fatalf("String() = %q", got)
	}
}

func TestVerdictRejectsRowsWithoutIdentity(t *testing.T) {
	tr := &tableRows{Rows: [][]any{{`{"cpu":"cpu0"}`}}}
	tr.Columns = append(tr.Columns, struct {
		Name string `json:"name"`
		Type string `json:"type"`
	}{Name: "attributes"})
	if _, err := countSeq(tr, 1); err == nil {
		t.Fatal("a row without seq must be an error, not a silent miss")
	}
	logs := &tableRows{Rows: [][]any{{"something else"}}}
	logs.Columns = append(logs.Columns, struct {
		Name string `json:"name"`
		Type string `json:"type"`
	}{Name: "body"})
	if _, err := countLogs(logs, 1); err == nil {
		t.Fatal("a foreign log body must be an error")
	}
}

func TestVerdictOfEmptyTableLosesEverything(t *testing.T) {
	v, err := countLogs(&tableRows{}, 5)
	if err != nil {
		t.Fatal(err)
	}
	if v.Lost != 5 || v.Landed != 0 {
		t.Fatalf("verdict = %v", v)
	}
}

// The generator keeps a batch until the collector accepts it, honouring
// Retry-After on 429, and gives up on answers an OTLP client must not retry.
func TestGeneratorRetriesBackpressureAndCountsOnlyAccepted(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		case 2:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	defer srv.Close()
	g := &generator{endpoint: srv.URL, hc: srv.Client(), hosts: []string{"a", "b"}}
	start := time.Now()
	if err := g.tick(context.Background(), 10, 2, 3); err != nil {
		t.Fatal(err)
	}
	if g.sentPoints.Load() != 10 || g.sentLogs.Load() != 2 || g.sentSpans.Load() != 3 {
		t.Fatalf("sent points=%d logs=%d spans=%d, want 10, 2 and 3", g.sentPoints.Load(), g.sentLogs.Load(), g.sentSpans.Load())
	}
	if g.backpressure.Load() != 1 || g.retries.Load() != 2 {
		t.Fatalf("backpressure=%d retries=%d, want 1 and 2", g.backpressure.Load(), g.retries.Load())
	}
	if time.Since(start) < time.Second {
		t.Fatal("Retry-After: 1 was not honoured")
	}

	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
	}))
	defer bad.Close()
	g2 := &generator{endpoint: bad.URL, hc: bad.Client(), hosts: []string{"a"}}
	if err := g2.tick(context.Background(), 1, 1, 1); err == nil {
		t.Fatal("400 must not be retried or counted")
	}
	if g2.sentPoints.Load() != 0 {
		t.Fatal("a refused batch was counted as sent")
	}
}

func TestGeneratorSeqIsUniqueAcrossBatches(t *testing.T) {
	g := &generator{hosts: []string{"a", "b", "c"}}
	seen := map[int64]bool{}
	for b := 0; b < 3; b++ {
		md, n := g.metricsBatch(7, time.Unix(0, 0))
		if n != 7 || md.DataPointCount() != 7 {
			t.Fatalf("batch %d: n=%d points=%d", b, n, md.DataPointCount())
		}
		rms := md.ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			dps := rms.At(i).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints()
			for j := 0; j < dps.Len(); j++ {
				v, _ := dps.At(j).Attributes().Get("seq")
				if seen[v.Int()] {
					t.Fatalf("seq %d twice", v.Int())
				}
				seen[v.Int()] = true
			}
		}
	}
	if len(seen) != 21 {
		t.Fatalf("%d distinct seq, want 21", len(seen))
	}
}

func TestVerdictCombinesSignals(t *testing.T) {
	v := combine([]string{"points", "spans"}, verdict{Sent: 4, Landed: 3, Lost: 1, Duplicates: 2}, verdict{Sent: 5, Landed: 5})
	want := "sent 9, landed 8, lost 1, duplicates 2 (points 3/4, spans 5/5)"
	if v.String() != want {
		t.Fatalf("combined verdict = %q, want %q", v, want)
	}
}

func TestGeneratorSpansCarryUniqueSeqInTraces(t *testing.T) {
	g := &generator{}
	seen := map[int64]bool{}
	traces := map[pcommon.TraceID]int{}
	for b := 0; b < 3; b++ {
		td := g.spansBatch(7, time.Unix(0, 0))
		spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
		if spans.Len() != 7 {
			t.Fatalf("batch %d: %d spans, want 7", b, spans.Len())
		}
		for i := 0; i < spans.Len(); i++ {
			sp := spans.At(i)
			v, _ := sp.Attributes().Get("seq")
			if seen[v.Int()] {
				t.Fatalf("seq %d twice", v.Int())
			}
			seen[v.Int()] = true
			traces[sp.TraceID()]++
			if sp.EndTimestamp() <= sp.StartTimestamp() {
				t.Fatalf("span %d ends at %d, before its start %d", v.Int(), sp.EndTimestamp(), sp.StartTimestamp())
			}
		}
		g.sentSpans.Add(7)
	}
	if len(seen) != 21 || len(traces) != 5 {
		t.Fatalf("%d distinct seq in %d traces, want 21 in 5", len(seen), len(traces))
	}
}

func TestCompareRowsReportsEveryDifference(t *testing.T) {
	tr := &tableRows{Rows: [][]any{{"x", json.Number("21.5")}}}
	for _, n := range []string{"metric_name", "value"} {
		tr.Columns = append(tr.Columns, struct {
			Name string `json:"name"`
			Type string `json:"type"`
		}{Name: n})
	}
	want := map[string]string{"metric_name": `"x"`, "value": "21.5"}
	if p := compareRows("t", tr, want); len(p) != 0 {
		t.Fatalf("identical row reported: %v", p)
	}
	want["value"] = "22"
	want["missing"] = "1"
	p := compareRows("t", tr, want)
	if len(p) != 2 {
		t.Fatalf("problems = %v, want a missing column and a differing value", p)
	}
	tr.Rows = append(tr.Rows, tr.Rows[0])
	if p := compareRows("t", tr, want); len(p) != 1 || !strings.Contains(p[0], "2 rows") {
		t.Fatalf("a duplicate row must be reported: %v", p)
	}
}

func TestParseGaugeSumsSamplesOfExactlyThatMetric(t *testing.T) {
	text := `# HELP otelcol_exporter_questdb_queue_bytes Bytes in the queue
otelcol_exporter_questdb_queue_bytes{exporter="questdb"} 1024
otelcol_exporter_questdb_queue_bytes{exporter="questdb/b"} 2048
otelcol_exporter_questdb_queue_bytes_total 99
`
	n, err := parseGauge(strings.NewReader(text), "otelcol_exporter_questdb_queue_bytes")
	if err != nil || n != 3072 {
		t.Fatalf("parseGauge = %d, %v; want 3072", n, err)
	}
	if _, err := parseGauge(strings.NewReader("other 1\n"), "otelcol_exporter_questdb_queue_bytes"); err == nil {
		t.Fatal("a missing metric must be an error, not 0")
	}
	if _, err := parseGauge(strings.NewReader("otelcol_exporter_questdb_queue_bytes x\n"), "otelcol_exporter_questdb_queue_bytes"); err == nil {
		t.Fatal("a malformed sample must be an error")
	}
}

func TestCompareTable(t *testing.T) {
	keys := []string{"timestamp", "series_id"}
	created := &tableRows{DedupKeys: keys, TTL: "30 DAYS"}
	if p := compareTable("t", created, keys, "30 DAYS"); len(p) != 0 {
		t.Fatalf("problems for a table created as wanted: %v", p)
	}
	auto := &tableRows{}
	p := compareTable("t", auto, keys, "30 DAYS")
	if len(p) != 2 || !strings.Contains(p[0], "dedup keys []") || !strings.Contains(p[1], `ttl ""`) {
		t.Fatalf("an auto-created table must fail on both counts: %v", p)
	}
}

// The bulk load is one OTLP request larger than the exporter's default
// max_batch_bytes (1,887,436 bytes), counted with the logs once accepted;
// its padded bodies count as demo logs, and the fixed e2e record does not.
func TestBulkLoadIsBigAndCounted(t *testing.T) {
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		got.Store(n)
	}))
	defer srv.Close()
	g := &generator{endpoint: srv.URL, hc: srv.Client()}
	g.sentLogs.Add(3)
	size, err := g.bulk(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if int64(size) != got.Load() || size <= 1_887_436 {
		t.Fatalf("bulk request of %d bytes (server read %d), want more than the default max_batch_bytes", size, got.Load())
	}
	if g.sentLogs.Load() != 3+bulkLogs {
		t.Fatalf("sentLogs = %d, want %d", g.sentLogs.Load(), 3+bulkLogs)
	}

	body := func(s string) []any { return []any{s} }
	logs := &tableRows{Rows: [][]any{body("demo log seq=0 " + strings.Repeat("x", 95)), body("payment declined"), body("demo log seq=1")}}
	logs.Columns = append(logs.Columns, struct {
		Name string `json:"name"`
		Type string `json:"type"`
	}{Name: "body"})
	v, err := countLogs(demoLogsOnly(logs), 2)
	if err != nil || v.Landed != 2 || v.Lost != 0 {
		t.Fatalf("verdict %v, %v; want both demo logs landed", v, err)
	}
}

// checkBigFrames fails when the sink never received a message over 64 KiB.
func TestCheckBigFrames(t *testing.T) {
	var size atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/stats" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]int64{"frames": 3, "max_frame_bytes": size.Load()})
	}))
	defer srv.Close()
	c := &sinkClient{base: srv.URL, hc: srv.Client()}
	size.Store(64 << 10)
	if err := c.checkBigFrames(context.Background()); err == nil {
		t.Fatal("a largest message of exactly 64 KiB must fail the check")
	}
	size.Store(1_800_000)
	if err := c.checkBigFrames(context.Background()); err != nil {
		t.Fatal(err)
	}
}

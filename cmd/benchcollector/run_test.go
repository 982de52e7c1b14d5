package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestPromSum(t *testing.T) {
	text := `# HELP otelcol_exporter_questdb_frames_appended_total QWP frames appended.
# TYPE otelcol_exporter_questdb_frames_appended_total counter
otelcol_exporter_questdb_frames_appended_total{exporter="questdb/bench",otel_scope_name="x y"} 120
otelcol_exporter_questdb_frames_appended_total{exporter="questdb/other"} 3.5 1700000000000
otelcol_exporter_questdb_frames_appended_bytes 999
otelcol_exporter_questdb_rows_appended_total 2e6
`
	got, err := promSum(text, "otelcol_exporter_questdb_frames_appended")
	if err != nil {
		t.Fatal(err)
	}
	if got != 123.5 {
		t.Fatalf("sum = %v, want 123.5", got)
	}
	if got, err := promSum(text, "otelcol_exporter_questdb_rows_appended"); err != nil || got != 2e6 {
		t.Fatalf("unlabelled sample: %v, %v", got, err)
	}
	if _, err := promSum(text, "otelcol_exporter_questdb_frames_acked"); err == nil {
		t.Fatal("a counter without samples read as 0")
	}
	if _, err := promSum("x_total{a=\"b\"} NaNa\n", "x"); err == nil {
		t.Fatal("a bad sample value parsed")
	}
}

func TestDrain(t *testing.T) {
	n := int64(0)
	counter := func() (int64, error) { n += 400; return n, nil }
	got, err := drain(context.Background(), counter, 1000, time.Minute)
	if err != nil || got != 1200 {
		t.Fatalf("drain = %d, %v; want 1200 (first count at or past 1000)", got, err)
	}
	stuck := func() (int64, error) { return 7, nil }
	if _, err := drain(context.Background(), stuck, 10, 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), "7 of 10") {
		t.Fatalf("stuck sink: err = %v", err)
	}
	broken := func() (int64, error) { return 0, errors.New("sink down") }
	if _, err := drain(context.Background(), broken, 10, time.Minute); err == nil {
		t.Fatal("a sink error was not returned")
	}
}

func TestQWPRows(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/tables" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"otel_metrics_gauge": 1500, "otel_logs": 250}`)
	}))
	defer srv.Close()
	got, err := qwpRows(context.Background(), srv.Client(), srv.URL)
	if err != nil || got != 1750 {
		t.Fatalf("qwpRows = %d, %v; want 1750", got, err)
	}
	if _, err := qwpRows(context.Background(), srv.Client(), srv.URL+"/nothing"); err == nil {
		t.Fatal("a 404 read as rows")
	}
}

func TestCollectorYAMLWiresTheExporter(t *testing.T) {
	for _, ec := range exporterConfigs {
		y := collectorYAML(ec.yaml("127.0.0.1:9000", "/tmp/sf", "flush"), 4318, 8888)
		id := map[string]string{"nop": "nop/bench", "otlp_http": "otlp_http/bench", "otlp_http-none": "otlp_http/bench"}[ec.name]
		if id == "" {
			id = "questdb/bench"
		}
		if strings.Count(y, "exporters: [ "+id+" ]") != 3 || !strings.Contains(y, "    traces:\n") {
			t.Errorf("%s: the metrics, logs and traces pipelines do not all use %s:\n%s", ec.name, id, y)
		}
		if !strings.Contains(y, "endpoint: 127.0.0.1:4318") || !strings.Contains(y, "port: 8888") {
			t.Errorf("%s: receiver or telemetry port missing:\n%s", ec.name, y)
		}
	}
	q := collectorYAML(exporterConfigs[1].yaml("127.0.0.1:9000", "/tmp/sf", "flush"), 1, 2)
	if !strings.Contains(q, "sf_durability: flush") || !strings.Contains(q, `sf_dir: "/tmp/sf"`) {
		t.Errorf("questdb configuration without its queue settings:\n%s", q)
	}
	o := runOptions{dictBytes: "4MiB", batchBytes: "1MiB"}
	for _, ec := range exporterConfigs {
		y := collectorYAML(questdbSettings(ec, ec.yaml("127.0.0.1:9000", "/tmp/sf", "flush"), o), 1, 2)
		if got := strings.Contains(y, "    symbol_dict_max_bytes: 4MiB\n"); got != (ec.sink == sinkQWP) {
			t.Errorf("%s: symbol_dict_max_bytes set %v:\n%s", ec.name, got, y)
		}
		if got := strings.Contains(y, "    max_batch_bytes: 1MiB\n"); got != (ec.sink == sinkQWP) {
			t.Errorf("%s: max_batch_bytes set %v:\n%s", ec.name, got, y)
		}
	}
}

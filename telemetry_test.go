package questdbexporter

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/questdbexporter/questdbexporter/internal/metadatatest"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
)

// metricTotal sums the data points of an own-telemetry metric whose
// attributes include attrs; ok is false while the metric has no data.
func metricTotal(t *testing.T, tt *componenttest.Telemetry, name string, attrs ...attribute.KeyValue) (float64, bool) {
	t.Helper()
	m, err := tt.GetMetric(name)
	if err != nil {
		return 0, false
	}
	match := func(set attribute.Set) bool {
		for _, kv := range attrs {
			if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
				return false
			}
		}
		return true
	}
	var total float64
	found := false
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			if match(dp.Attributes) {
				total += float64(dp.Value)
				found = true
			}
		}
	case metricdata.Gauge[int64]:
		for _, dp := range d.DataPoints {
			total += float64(dp.Value)
			found = true
		}
	case metricdata.Gauge[float64]:
		for _, dp := range d.DataPoints {
			total += dp.Value
			found = true
		}
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			total += float64(dp.Count)
			found = true
		}
	default:
		t.Fatalf("%s: unexpected data %T", name, m.Data)
	}
	return total, found
}

func TestTelemetryOfTheWritePath(t *testing.T) {
	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(context.Background())
	srv := newServer(t, qwptest.Options{})
	cfg := testConfig(t, srv.Addr())
	cfg.SFDir = t.TempDir()
	cfg.SFDurability = "flush"
	cfg.WaitForAck = true
	inst, err := newInstance(cfg, metadatatest.NewSettings(tt))
	if err != nil {
		t.Fatal(err)
	}
	e := inst.(*questdbExporter)
	if err := e.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())

	md := gaugeBatch(0, 10)
	unnamed := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().AppendEmpty()
	unnamed.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(1)
	if err := e.consumeMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	if err := e.consumeLogs(context.Background(), logBatch(0, 4)); err != nil {
		t.Fatal(err)
	}
	td := spanBatch(0, 2)
	huge := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1)
	huge.Attributes().PutStr("payload", strings.Repeat("x", int(cfg.MaxBatchBytes))) // larger than any frame
	if err := e.consumeTraces(context.Background(), td); err != nil {
		t.Fatal(err)
	}
	exact := []struct {
		name  string
		attrs []attribute.KeyValue
		want  float64
	}{
		{"otelcol_exporter_questdb_rows_appended", nil, 15},
		{"otelcol_exporter_questdb_skipped_data_points", []attribute.KeyValue{attribute.String("reason", "empty_metric_name"), attribute.String("signal", "metrics")}, 1},
		{"otelcol_exporter_questdb_skipped_data_points", []attribute.KeyValue{attribute.String("reason", "row_too_large"), attribute.String("signal", "traces")}, 1},
		{"otelcol_exporter_questdb_skipped_data_points", []attribute.KeyValue{attribute.String("signal", "logs")}, 0},
		{"otelcol_exporter_questdb_queue_capacity", nil, float64(cfg.effectiveMaxTotalBytes())},
	}
	atLeast := []string{
		"otelcol_exporter_questdb_frames_appended",
		"otelcol_exporter_questdb_frames_acked",
		"otelcol_exporter_questdb_ack_latency",
		"otelcol_exporter_questdb_dictionary_size",
		"otelcol_exporter_questdb_fsync_latency", // sampled by the monitor every second
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		missing := ""
		for _, c := range exact {
			if got, _ := metricTotal(t, tt, c.name, c.attrs...); got != c.want {
				missing = c.name
			}
		}
		for _, name := range atLeast {
			if got, ok := metricTotal(t, tt, name); !ok || got < 1 {
				missing = name
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			got, _ := metricTotal(t, tt, missing)
			t.Fatalf("%s is %v after 10 s", missing, got)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A dropped connection: the next call (wait_for_ack) needs a reconnect.
	srv.DropConnections()
	if err := e.consumeLogs(context.Background(), logBatch(10, 1)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"otelcol_exporter_questdb_reconnect_attempts", "otelcol_exporter_questdb_reconnect_successes"} {
		if got, _ := metricTotal(t, tt, name); got < 1 {
			t.Fatalf("%s is %v after a dropped connection was re-established", name, got)
		}
	}
}

func TestEvictOldestIsCountedAndAlerted(t *testing.T) {
	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(context.Background())
	cfg := testConfig(t, closedPort(t))
	cfg.OnFull = "evict_oldest"
	cfg.MaxBatchBytes = minMaxBatchBytes
	cfg.SFMaxSegmentBytes = minMaxBatchBytes + segmentOverheadBytes
	cfg.SFMaxTotalBytes = 2 * cfg.SFMaxSegmentBytes
	core, logs := observer.New(zapcore.InfoLevel)
	set := metadatatest.NewSettings(tt)
	set.Logger = zap.New(core)
	inst, err := newInstance(cfg, set)
	if err != nil {
		t.Fatal(err)
	}
	e := inst.(*questdbExporter)
	host := newStatusHost()
	if err := e.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	for i := range 10 {
		if err := e.consumeMetrics(context.Background(), gaugeBatch(i*1000, 500)); err != nil {
			t.Fatalf("evict_oldest refused a call: %v", err)
		}
	}
	waitFor(t, func() bool {
		got, _ := metricTotal(t, tt, "otelcol_exporter_questdb_frames_evicted")
		return got > 0
	})
	waitFor(t, func() bool { return logs.FilterMessageSnippet("evicting the oldest records").Len() > 0 })
	if got, _ := metricTotal(t, tt, "otelcol_exporter_questdb_backpressure_stalls"); got != 0 {
		t.Fatalf("evict_oldest counted %v backpressure stalls; evicting is not stalling", got)
	}
}

package questdbexporter

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/questdbexporter/questdbexporter/internal/metadatatest"
)

// collectorLogger is a logger like the collector's: stack traces on Error.
func collectorLogger() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core, zap.AddStacktrace(zapcore.ErrorLevel)), logs
}

// TestFullQueueUnderLoadLogsBoundedLines: four sources push through
// exporterhelper (as the collector calls the exporter) into a queue at its
// cap while QuestDB is unreachable. For the whole run (3 s with -short, 60 s
// without) the log holds at most 3 lines at info or above — the failed
// connect, and the queue's high and full alerts — none with a stack trace and
// none from exporterhelper; the collector's own counters still count every
// refused point (error.type ResourceExhausted) and every accepted one.
func TestFullQueueUnderLoadLogsBoundedLines(t *testing.T) {
	run := 60 * time.Second
	if testing.Short() {
		run = 3 * time.Second
	}
	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(context.Background())
	reg := newRegistry(newInstance)
	f := newFactory(reg)
	cfg := testConfig(t, closedPort(t))
	cfg.MaxBatchBytes = minMaxBatchBytes
	cfg.SFMaxSegmentBytes = minMaxBatchBytes + segmentOverheadBytes
	cfg.SFMaxTotalBytes = 4 * cfg.SFMaxSegmentBytes
	cfg.SFAppendDeadline = 20 * time.Millisecond
	logger, logs := collectorLogger()
	set := metadatatest.NewSettings(tt)
	set.Logger = logger
	ctx := context.Background()
	exp, err := f.CreateMetrics(ctx, set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	var accepted, refused, calls atomic.Int64
	var wrong atomic.Value
	end := time.Now().Add(run)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(end); i++ {
				md := gaugeBatch(g*1_000_000+i*100, 100)
				calls.Add(1)
				switch err := exp.ConsumeMetrics(ctx, md); status.Code(err) {
				case codes.OK:
					accepted.Add(100)
				case codes.ResourceExhausted:
					refused.Add(100)
				default:
					wrong.Store(err)
				}
			}
		}()
	}
	wg.Wait()
	if err := exp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err, _ := wrong.Load().(error); err != nil {
		t.Fatalf("a call failed with %v; want only OK or ResourceExhausted", err)
	}
	if refused.Load() == 0 {
		t.Fatal("nothing was refused: the queue never filled")
	}
	var lines []observer.LoggedEntry
	for _, e := range logs.All() {
		if e.Stack != "" {
			t.Errorf("%q carries a stack trace", e.Message)
		}
		if e.Level >= zapcore.InfoLevel {
			lines = append(lines, e)
		}
	}
	t.Logf("%v of full queue: %d calls, %d points accepted, %d refused, %d log lines at info or above",
		run, calls.Load(), accepted.Load(), refused.Load(), len(lines))
	if logs.FilterMessageSnippet(rejectLinePrefix).Len() != 0 || logs.FilterMessageSnippet("retry_on_failure").Len() != 0 {
		t.Error("exporterhelper logged its per-request failure line")
	}
	if logs.FilterMessageSnippet("queue full: refusing new records").Len() != 1 {
		t.Errorf("the full alert was logged %d times, want once", logs.FilterMessageSnippet("queue full").Len())
	}
	if len(lines) > 3 {
		for _, e := range lines {
			t.Logf("%v %s %v", e.Level, e.Message, e.ContextMap())
		}
		t.Fatalf("%d log lines at info or above, want at most 3", len(lines))
	}
	id := attribute.String("exporter", "questdb")
	if got, _ := metricTotal(t, tt, "otelcol_exporter_send_failed_metric_points", id,
		attribute.String("error.type", "ResourceExhausted")); got != float64(refused.Load()) {
		t.Errorf("otelcol_exporter_send_failed_metric_points{error.type=ResourceExhausted} = %v, want the %d refused", got, refused.Load())
	}
	if got, _ := metricTotal(t, tt, "otelcol_exporter_sent_metric_points", id); got != float64(accepted.Load()) {
		t.Errorf("otelcol_exporter_sent_metric_points = %v, want the %d accepted", got, accepted.Load())
	}
}

package questdbexporter

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/questdbexporter/questdbexporter/internal/metadata"
	"github.com/questdbexporter/questdbexporter/internal/metadatatest"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
)

// collectorLogger is a logger like the collector's: stack traces on Error.
func collectorLogger() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core, zap.AddStacktrace(zapcore.ErrorLevel)), logs
}

// TestFullQueueUnderLoadLogsBoundedLines: four sources push through
// exporterhelper (as the collector calls the exporter) into a queue at its
// cap while QuestDB is unreachable. For the whole run (3 s with -short, 60 s
// without) the log holds at most 4 lines at info or above — the start line,
// the failed connect, and the queue's high and full alerts — none with a
// stack trace and
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
	if len(lines) > 4 {
		for _, e := range lines {
			t.Logf("%v %s %v", e.Level, e.Message, e.ContextMap())
		}
		t.Fatalf("%d log lines at info or above, want at most 4", len(lines))
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

// TestStartLineAndCloseWarning: one Info line at start says where the data
// waits, where it goes, the bounds, the auth mode without the secret and the
// frames recovered; a shutdown that leaves frames behind says how many, how
// many bytes, where, and which key bounded the wait.
func TestStartLineAndCloseWarning(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "questdb") // created: its parent exists
	dead := closedPort(t)
	cfg := testConfig(t, dead)
	cfg.SFDir = dir
	cfg.SenderID = "ops"
	cfg.Username, cfg.Password = "ingest", "s3cret-pw"
	cfg.CloseFlushTimeout = 50 * time.Millisecond
	run := func(consume bool) *observer.ObservedLogs {
		logger, logs := collectorLogger()
		set := exportertest.NewNopSettings(metadata.Type)
		set.Logger = logger
		inst, err := newInstance(cfg, set)
		if err != nil {
			t.Fatal(err)
		}
		if err := inst.Start(context.Background(), componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
		if consume {
			for i := range 3 {
				if err := inst.consumeMetrics(context.Background(), gaugeBatch(i*100, 50)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := inst.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		return logs
	}
	first := run(true)
	if first.FilterMessage("created sf_dir for the store-and-forward queue").Len() != 1 {
		t.Errorf("creating the missing sf_dir was not logged: %v", first.All())
	}
	closing := first.FilterMessageSnippet("QuestDB exporter stopped").All()
	if len(closing) != 1 || closing[0].Level != zapcore.WarnLevel {
		t.Fatalf("shutdown with unacknowledged frames logged %v; want one warning", closing)
	}
	frames := closing[0].ContextMap()["frames"].(uint64)
	bytes := closing[0].ContextMap()["bytes"].(int64)
	for _, want := range []string{"waited close_flush_timeout (50ms)", fmt.Sprintf("%d frames (%d bytes)", frames, bytes),
		filepath.Join(dir, "ops"), "sent at the next start"} {
		if !strings.Contains(closing[0].Message, want) {
			t.Errorf("close warning %q does not say %q", closing[0].Message, want)
		}
	}
	if frames == 0 || bytes == 0 {
		t.Errorf("close warning counts %d frames, %d bytes; want the unacknowledged batch", frames, bytes)
	}

	second := run(false)
	started := second.FilterMessage("QuestDB exporter started").All()
	if len(started) != 1 || started[0].Level != zapcore.InfoLevel {
		t.Fatalf("start logged %v; want one info line", second.All())
	}
	m := started[0].ContextMap()
	if m["slot"] != filepath.Join(dir, "ops") || m["auth"] != "basic, username ingest" || m["sf_durability"] != "memory" ||
		m["sf_max_total_bytes"] != "10GiB" || m["recovered_frames"] != int64(frames) || m["on_full"] != "block" {
		t.Errorf("start line fields %v; want the slot, basic auth as ingest, memory durability, the 10GiB cap and %d recovered frames", m, frames)
	}
	if eps, _ := m["endpoints"].([]any); len(eps) != 1 || eps[0] != "ws://"+dead+"/write/v4" {
		t.Errorf("start line endpoints %v", m["endpoints"])
	}
	for _, e := range append(first.All(), second.All()...) {
		if strings.Contains(fmt.Sprint(e.Message, e.ContextMap()), "s3cret-pw") {
			t.Fatalf("the password is in the log: %q %v", e.Message, e.ContextMap())
		}
	}
}

// TestSFDirParentMustExist: a sf_dir whose parent is missing (a typo) fails
// the start with a message naming both, and creates nothing.
func TestSFDirParentMustExist(t *testing.T) {
	base := t.TempDir()
	cfg := testConfig(t, closedPort(t))
	cfg.SFDir = filepath.Join(base, "otelcl", "questdb")
	inst, err := newInstance(cfg, exportertest.NewNopSettings(metadata.Type))
	if err != nil {
		t.Fatal(err)
	}
	err = inst.Start(context.Background(), componenttest.NewNopHost())
	if err == nil || !strings.Contains(err.Error(), "sf_dir") || !strings.Contains(err.Error(), filepath.Join(base, "otelcl")) {
		t.Fatalf("Start with a missing parent: %v; want an error naming sf_dir and the parent", err)
	}
	if err := inst.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(base, "otelcl")); !os.IsNotExist(err) {
		t.Fatalf("the missing parent was created (%v)", err)
	}
}

// TestOutageLogsItsStartAndEnd: the README's outage log (Component status
// and the health check): one Warn "questdb connection lost; reconnecting"
// when a working connection is lost, one Info "questdb connection restored"
// with the outage's length and attempts when it is back, and each attempt
// in between at debug level only.
func TestOutageLogsItsStartAndEnd(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	logger, logs := collectorLogger()
	set := exportertest.NewNopSettings(metadata.Type)
	set.Logger = logger
	e := startExporterWith(t, testConfig(t, srv.Addr()), set)
	acked := func(n uint64) func() bool {
		return func() bool { return e.queue.Stats().AckedFSN >= n }
	}
	if err := e.consumeMetrics(context.Background(), gaugeBatch(0, 10)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, acked(e.queue.Stats().PublishedFSN))
	srv.Outage(300 * time.Millisecond)
	if err := e.consumeMetrics(context.Background(), gaugeBatch(100, 10)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return logs.FilterMessage("questdb connection restored").Len() > 0 })
	waitFor(t, acked(e.queue.Stats().PublishedFSN))

	lost := logs.FilterMessage("questdb connection lost; reconnecting").All()
	if len(lost) != 1 || lost[0].Level != zapcore.WarnLevel {
		t.Fatalf("the lost connection logged %v; want one Warn", lost)
	}
	restored := logs.FilterMessage("questdb connection restored").All()
	if len(restored) != 1 || restored[0].Level != zapcore.InfoLevel {
		t.Fatalf("the restored connection logged %v; want one Info", restored)
	}
	fields := restored[0].ContextMap()
	if d, ok := fields["outage"].(time.Duration); !ok || d <= 0 {
		t.Errorf("the restored line's outage %v, want its length", fields["outage"])
	}
	if n, ok := fields["attempts"].(int64); !ok || n < 1 {
		t.Errorf("the restored line's attempts %v, want at least 1", fields["attempts"])
	}
	for _, l := range logs.All() {
		if l.Level >= zapcore.InfoLevel && l.Message != "QuestDB exporter started" &&
			l.Message != lost[0].Message && l.Message != restored[0].Message {
			t.Errorf("logged at %v during a short outage: %q", l.Level, l.Message)
		}
	}
}

package questdbexporter

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/questdbexporter/questdbexporter/internal/metadata"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
)

// leaveOrphan leaves n gauge rows (ids from base) unsent in <dir>/<id>, as
// a collector stopped during an outage does.
func leaveOrphan(t *testing.T, dir, id string, base, n int) {
	t.Helper()
	cfg := testConfig(t, closedPort(t))
	cfg.SFDir, cfg.SenderID = dir, id
	inst, err := newInstance(cfg, exportertest.NewNopSettings(metadata.Type))
	if err != nil {
		t.Fatal(err)
	}
	if err := inst.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	if err := inst.consumeMetrics(context.Background(), gaugeBatch(base, n)); err != nil {
		t.Fatal(err)
	}
	if err := inst.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestFailedOrphanStaysVisibleAfterRestart: an orphan whose drainer gave up
// for a server's refusal (here a durable-ack tier QuestDB does not confirm)
// is marked .failed, and later orphan scans skip it. Its data waits for an
// operator, so after a restart (when the drainer's Error line and
// drainers_failed are gone) set_aside_slots and the component status must
// still name it; before, they counted only .failed slots of DATA_LOSS, and
// the slot waited without a trace.
func TestFailedOrphanStaysVisibleAfterRestart(t *testing.T) {
	dir := t.TempDir()
	leaveOrphan(t, dir, "dead", 0, 3)
	srv := newServer(t, qwptest.Options{})

	cfg := testConfig(t, srv.Addr())
	cfg.SFDir, cfg.SenderID, cfg.DrainOrphans = dir, "live", true
	cfg.RequestDurableAck = "on"
	e, tt, _, _ := startObserved(t, cfg)
	<-e.drained
	if n, _ := metricTotal(t, tt, "otelcol_exporter_questdb_drainers_failed"); n != 1 {
		t.Fatalf("drainers_failed = %v, want 1", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "dead", ".failed")); err != nil {
		t.Fatalf("the orphan was not marked .failed: %v", err)
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	cfg = testConfig(t, srv.Addr())
	cfg.SFDir, cfg.SenderID, cfg.DrainOrphans = dir, "live", true
	e, tt, _, host := startObserved(t, cfg)
	defer e.Shutdown(context.Background())
	<-e.drained
	waitFor(t, func() bool {
		ev := host.last()
		return ev != nil && ev.Status() == componentstatus.StatusRecoverableError && strings.Contains(ev.Err().Error(), "1 set-aside slot(s)") &&
			strings.Contains(ev.Err().Error(), "(dead)")
	})
	if n, _ := metricTotal(t, tt, "otelcol_exporter_questdb_set_aside_slots"); n != 1 {
		t.Fatalf("set_aside_slots = %v after the restart, want 1 (the .failed orphan)", n)
	}
	if got := srv.RowCount("otel_metrics_gauge"); got != 0 {
		t.Fatalf("%d rows of the .failed orphan were sent, want 0 (kept for the operator)", got)
	}
}

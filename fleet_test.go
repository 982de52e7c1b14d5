package questdbexporter

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.uber.org/zap"

	"github.com/questdbexporter/questdbexporter/internal/metadata"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
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

// TestOwnerGetsItsSlotBackFromADrainer: a collector whose slot another
// collector's drain_orphans adopted while it was down (both restarting at
// once, or a crash loop) starts anyway: its exporter asks the drainer for
// the slot, the drainer hands it over with its frames (interrupted, not
// failed), and the owner delivers them. Before, the owner's Start failed
// with the slot locked for as long as the drain lasted, which during an
// outage is for ever.
func TestOwnerGetsItsSlotBackFromADrainer(t *testing.T) {
	dir := t.TempDir()
	leaveOrphan(t, dir, "owner", 0, 3)

	// The other collector drains towards a QuestDB that is down: its
	// drainer holds the slot and never finishes.
	cfg := testConfig(t, closedPort(t))
	cfg.SFDir, cfg.SenderID, cfg.DrainOrphans = dir, "other", true
	other, ott, ologs, _ := startObserved(t, cfg)
	defer other.Shutdown(context.Background())
	waitFor(t, func() bool {
		n, _ := metricTotal(t, ott, "otelcol_exporter_questdb_drainers_active")
		return n == 1
	})

	srv := newServer(t, qwptest.Options{})
	cfg = testConfig(t, srv.Addr())
	cfg.SFDir, cfg.SenderID = dir, "owner"
	owner, _, logs, _ := startObserved(t, cfg)
	defer owner.Shutdown(context.Background())
	waitFor(t, func() bool { return srv.RowCount("otel_metrics_gauge") == 3 })
	ids := serverIDs(t, srv, "otel_metrics_gauge")
	for id := range 3 {
		if ids[id] != 1 {
			t.Fatalf("row %d arrived %d times", id, ids[id])
		}
	}
	if logs.FilterMessageSnippet("hand it over").Len() != 1 {
		t.Errorf("the owner did not log that it asked for its slot: %v", logs.All())
	}
	if _, err := os.Stat(filepath.Join(dir, "owner", ".handover")); !os.IsNotExist(err) {
		t.Errorf("the handover request was left in the slot (stat: %v)", err)
	}
	<-other.drained
	for name, want := range map[string]float64{"otelcol_exporter_questdb_drainers_active": 0, "otelcol_exporter_questdb_drainers_failed": 0} {
		if got, _ := metricTotal(t, ott, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if ologs.FilterMessageSnippet("handed it over").Len() != 1 {
		t.Errorf("the drainer did not log the handover: %v", ologs.All())
	}
}

// heldSlotInstance returns an exporter instance (not started) on the slot
// <dir>/twin, which this process holds locked as another sender would, with
// handoverWait set to wait; both are undone at the test's end.
func heldSlotInstance(t *testing.T, wait time.Duration) (string, instance) {
	t.Helper()
	dir := t.TempDir()
	holder, err := sfqueue.Open(sfqueue.Options{Dir: dir, SenderID: "twin"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close() })
	old := handoverWait
	handoverWait = wait
	t.Cleanup(func() { handoverWait = old })
	cfg := testConfig(t, closedPort(t))
	cfg.SFDir, cfg.SenderID = dir, "twin"
	inst, err := newInstance(cfg, exportertest.NewNopSettings(metadata.Type))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Shutdown(context.Background()) })
	return dir, inst
}

// TestSlotHeldByAnotherSenderStillFailsStart: a lock held by something
// that is not a drainer (a second collector on the same sender_id,
// questdb-slot salvage) does not yield: Start fails after handoverWait,
// naming the slot as locked, and withdraws its handover request.
func TestSlotHeldByAnotherSenderStillFailsStart(t *testing.T) {
	dir, inst := heldSlotInstance(t, 300*time.Millisecond)
	start := time.Now()
	err := inst.Start(context.Background(), componenttest.NewNopHost())
	var le *sfqueue.LockedError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("Start on a held slot: %v; want the LockedError", err)
	}
	if le.PID != os.Getpid() || !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Fatalf("Start's error %q (PID %d) does not name the holder's PID %d", err, le.PID, os.Getpid())
	}
	if waited := time.Since(start); waited < handoverWait {
		t.Errorf("Start gave up after %v, before handoverWait %v", waited, handoverWait)
	}
	if _, err := os.Stat(filepath.Join(dir, "twin", ".handover")); !os.IsNotExist(err) {
		t.Errorf("the handover request was left in the slot (stat: %v)", err)
	}
}

// TestOwnerClearsADrainersFailedMark: another collector's drainer, with its
// own credentials, gave up on this collector's slot and marked it .failed;
// when the owner starts again it delivers the slot itself, so the marker
// must go: before, set_aside_slots stayed 1 and the status RecoverableError
// for a healthy slot, for good.
func TestOwnerClearsADrainersFailedMark(t *testing.T) {
	dir := t.TempDir()
	leaveOrphan(t, dir, "owner", 0, 3)
	if err := sfqueue.MarkFailed(dir, "owner", "drainer of another collector: auth refused"); err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, qwptest.Options{})
	cfg := testConfig(t, srv.Addr())
	cfg.SFDir, cfg.SenderID = dir, "owner"
	e, tt, logs, host := startObserved(t, cfg)
	defer e.Shutdown(context.Background())
	waitFor(t, func() bool { return srv.RowCount("otel_metrics_gauge") == 3 })
	if n, _ := metricTotal(t, tt, "otelcol_exporter_questdb_set_aside_slots"); n != 0 {
		t.Fatalf("set_aside_slots = %v, want 0: the owner delivers its slot itself", n)
	}
	if ev := host.last(); ev != nil && ev.Status() == componentstatus.StatusRecoverableError {
		t.Fatalf("status %v for a healthy slot: %v", ev.Status(), ev.Err())
	}
	if logs.FilterField(zap.String("old_reason", "drainer of another collector: auth refused")).Len() != 1 {
		t.Fatal("no log naming the cleared marker's reason")
	}
	if _, err := os.Stat(filepath.Join(dir, "owner", ".failed")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf(".failed still there: %v", err)
	}
}

// TestStartOnAHeldSlotHonoursCancel: the handover wait (up to
// handoverWait, with e.mu held) ends when Start's context does; before, a
// cancelled Start slept out the whole wait.
func TestStartOnAHeldSlotHonoursCancel(t *testing.T) {
	dir, inst := heldSlotInstance(t, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := inst.Start(ctx, componenttest.NewNopHost())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start = %v; want the context's error", err)
	}
	if waited := time.Since(start); waited > 3*time.Second {
		t.Fatalf("Start returned %v after its context ended", waited-300*time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(dir, "twin", ".handover")); !os.IsNotExist(err) {
		t.Errorf("the handover request was left in the slot (stat: %v)", err)
	}
}

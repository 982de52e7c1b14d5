package questdbexporter

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/questdbexporter/questdbexporter/internal/metadatatest"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
)

const (
	connectedGauge = "otelcol_exporter_questdb_connected"
	ageGauge       = "otelcol_exporter_questdb_oldest_unacked_age"
)

// TestConnectionAndLagGauges: connected is 1 while QuestDB is reachable and
// 0 during an outage; oldest_unacked_age is 0 while QuestDB has everything,
// grows with the wait of the oldest queued frame during the outage, and is 0
// again once the backlog is acknowledged.
func TestConnectionAndLagGauges(t *testing.T) {
	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(context.Background())
	srv := newServer(t, qwptest.Options{})
	e := startWithTelemetry(t, tt, "questdb", testConfig(t, srv.Addr()))
	scrape := func() scrape { return takeScrape(t, tt, "questdb") }
	if err := e.consumeMetrics(context.Background(), gaugeBatch(0, 10)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return e.queue.AckedFSN() == e.queue.PublishedFSN() })
	if s := scrape(); s[connectedGauge] != 1 || s[ageGauge] != 0 {
		t.Fatalf("connected with nothing waiting: connected %v, age %v; want 1, 0", s[connectedGauge], s[ageGauge])
	}

	srv.Outage(time.Hour)
	waitFor(t, func() bool { return scrape()[connectedGauge] == 0 })
	appended := time.Now()
	if err := e.consumeMetrics(context.Background(), gaugeBatch(100, 10)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond)
	lag := scrape()[ageGauge]
	if lag < 1.2 || lag > time.Since(appended).Seconds()+1 {
		t.Fatalf("oldest_unacked_age %v s during the outage, %v after the append; want about that long", lag, time.Since(appended))
	}

	srv.Outage(0)
	waitFor(t, func() bool { return e.queue.AckedFSN() == e.queue.PublishedFSN() })
	waitFor(t, func() bool { s := scrape(); return s[connectedGauge] == 1 && s[ageGauge] == 0 })
}

// TestSentCountsQueuedRows: the collector's own otelcol_exporter_sent_*
// count what this exporter stored in its queue (the call returned), not
// what QuestDB acknowledged: during an outage they rise while frames_acked
// stays and oldest_unacked_age grows. Delivery is read from frames_acked
// against frames_appended, queue_bytes and oldest_unacked_age (README, Own
// telemetry).
func TestSentCountsQueuedRows(t *testing.T) {
	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(context.Background())
	ctx := context.Background()
	exp := startMetricsExporter(t, newFactory(newRegistry(newInstance)), metadatatest.NewSettings(tt), testConfig(t, closedPort(t)))
	for i := range 3 {
		if err := exp.ConsumeMetrics(ctx, gaugeBatch(i*100, 100)); err != nil {
			t.Fatal(err)
		}
	}
	id := attribute.String("exporter", "questdb")
	if sent, _ := metricTotal(t, tt, "otelcol_exporter_sent_metric_points", id); sent != 300 {
		t.Errorf("otelcol_exporter_sent_metric_points = %v with QuestDB unreachable, want the 300 queued", sent)
	}
	s := takeScrape(t, tt, "questdb")
	if s["otelcol_exporter_questdb_frames_acked"] != 0 || s["otelcol_exporter_questdb_rows_appended"] != 300 || s[connectedGauge] != 0 {
		t.Errorf("frames_acked %v, rows_appended %v, connected %v; want 0, 300, 0",
			s["otelcol_exporter_questdb_frames_acked"], s["otelcol_exporter_questdb_rows_appended"], s[connectedGauge])
	}
}

// TestRefusedCredentialsKeepTheExporterWorking: QuestDB refusing the
// credentials no longer stops the exporter: calls are still queued (not
// answered 503), the status is RecoverableError (it clears by itself once
// the server accepts; PermanentError could not go back to OK), each refusal
// counts in server_errors{category="security_error"}, sender_stopped stays
// 0 and connected 0, and the log says it once, with the fix.
func TestRefusedCredentialsKeepTheExporterWorking(t *testing.T) {
	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(context.Background())
	srv := newServer(t, qwptest.Options{})
	srv.RefuseUpgrades(1000, qwptest.Refusal{Status: 401, Message: "bad credentials"})
	cfg := testConfig(t, srv.Addr())
	cfg.Token = "expired"
	set := metadatatest.NewSettings(tt)
	core, logs := observer.New(zapcore.InfoLevel)
	set.Logger = zap.New(core)
	host := newStatusHost()
	e := startExporterOn(t, cfg, set, host)
	security := seriesKey("otelcol_exporter_questdb_server_errors", "category", "security_error")
	waitFor(t, func() bool { return takeScrape(t, tt, "questdb")[security] >= 1 })
	if err := e.consumeMetrics(context.Background(), gaugeBatch(0, 5)); err != nil {
		t.Fatalf("a call while the credentials are refused: %v; want it queued", err)
	}
	s := takeScrape(t, tt, "questdb")
	if s["otelcol_exporter_questdb_sender_stopped"] != 0 || s[connectedGauge] != 0 {
		t.Errorf("sender_stopped %v, connected %v; want 0, 0", s["otelcol_exporter_questdb_sender_stopped"], s[connectedGauge])
	}
	waitFor(t, func() bool {
		ev := host.last()
		return ev != nil && ev.Status() == componentstatus.StatusRecoverableError && strings.Contains(ev.Err().Error(), "bad credentials")
	})
	host.mu.Lock()
	for _, ev := range host.events {
		if ev.Status() == componentstatus.StatusPermanentError {
			t.Errorf("status %v: refused credentials must not be permanent", ev.Err())
		}
	}
	host.mu.Unlock()
	// The line comes from the sender's error inbox, dispatched on its own
	// goroutine: it may follow the status.
	fixLines := func() int {
		var n int
		for _, l := range logs.All() {
			if l.Level == zapcore.ErrorLevel && strings.Contains(fmt.Sprint(l.ContextMap()["error"]), "fix username/password or token") {
				n++
			}
		}
		return n
	}
	waitFor(t, func() bool { return fixLines() >= 1 })
	if fixes := fixLines(); fixes != 1 {
		t.Errorf("%d Error lines with the fix, want 1", fixes)
	}
}

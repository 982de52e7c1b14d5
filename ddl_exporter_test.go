package questdbexporter

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"

	"github.com/questdbexporter/questdbexporter/internal/metadatatest"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
)

// startDDLExporter starts an exporter with create_tables and ttl against
// srv, with a status host and a telemetry recorder.
func startDDLExporter(t *testing.T, srv *qwptest.Server) (*questdbExporter, *statusHost, *componenttest.Telemetry) {
	t.Helper()
	cfg := testConfig(t, srv.Addr())
	cfg.CreateTables, cfg.TTL = true, "30d"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	inst, err := newInstance(cfg, metadatatest.NewSettings(tt))
	if err != nil {
		t.Fatal(err)
	}
	e := inst.(*questdbExporter)
	host := newStatusHost()
	if err := e.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return e, host, tt
}

// A /exec failure of the moment holds the frames like a transport failure:
// the exporter reconnects, runs the DDL again, and only then sends. Every
// table that received rows therefore has its dedup keys and TTL; a frame
// sent before its CREATE TABLE would have auto-created it without them.
func TestExporterRetriesTransientDDLFailureBeforeAnyFrame(t *testing.T) {
	for _, f := range []qwptest.ExecFailure{
		{Message: "resource is busy and retry queue is full"},
		// The statement ran but its answer failed: on the retry, CREATE
		// TABLE IF NOT EXISTS finds the table and that is success.
		{Message: "timeout, query aborted [fd=17]", AfterRun: true},
		{Message: "unexpected", Status: 500},
		{Message: "cancelled by user [fd=17]"},
	} {
		t.Run(f.Message, func(t *testing.T) {
			srv := newServer(t, qwptest.Options{})
			srv.FailExec(2, f)
			e, host, tt := startDDLExporter(t, srv)
			if err := e.consumeMetrics(context.Background(), gaugeBatch(0, 5)); err != nil {
				t.Fatal(err)
			}
			if err := e.consumeLogs(context.Background(), logBatch(0, 3)); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return srv.RowCount("otel_metrics_gauge") == 5 && srv.RowCount("otel_logs") == 3 })
			if n := srv.Accepted(); n < 3 {
				t.Fatalf("%d connections: the two failed DDL runs did not each cost a connection", n)
			}
			for _, name := range srv.TableNames() {
				td, _ := srv.Rows(name)
				if len(td.DedupKeys) != 2 || td.TTL != "30 DAYS" {
					t.Fatalf("table %s: dedup keys %v, ttl %q; a frame reached it before its CREATE TABLE", name, td.DedupKeys, td.TTL)
				}
			}
			if len(srv.TableNames()) != len(e.tables.ddl) {
				t.Fatalf("tables %v, want the %d of the data model", srv.TableNames(), len(e.tables.ddl))
			}
			if got, _ := metricTotal(t, tt, "otelcol_exporter_questdb_ddl_failures"); got != 0 {
				t.Fatalf("ddl_failures = %v for failures of the moment, want 0", got)
			}
			waitFor(t, func() bool { ev := host.last(); return ev != nil && ev.Status() == componentstatus.StatusOK })
		})
	}
}

// A CREATE TABLE QuestDB refuses for its content is final for the
// connection: rows flow (QWP auto-creates the table, without dedup keys),
// and the failure is counted and reported in the component status.
func TestExporterReportsRefusedDDL(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	srv.FailExec(1, qwptest.ExecFailure{Message: "unexpected token [TTL]", Position: 374})
	sendGaugesDespiteRefusal(t, srv, "CREATE TABLE otel_metrics_gauge refused", "unexpected token [TTL]")
}

// sendGaugesDespiteRefusal sends five gauge points and checks that they
// reach an auto-created gauge table without dedup keys, that its refusal is
// counted once, and that the component status reports it with each of want.
func sendGaugesDespiteRefusal(t *testing.T, srv *qwptest.Server, want ...string) {
	t.Helper()
	e, host, tt := startDDLExporter(t, srv)
	if err := e.consumeMetrics(context.Background(), gaugeBatch(0, 5)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return srv.RowCount("otel_metrics_gauge") == 5 })
	td, _ := srv.Rows("otel_metrics_gauge")
	if td.DedupKeys != nil {
		t.Fatalf("gauge table has dedup keys %v though its CREATE TABLE was refused", td.DedupKeys)
	}
	if got, _ := metricTotal(t, tt, "otelcol_exporter_questdb_ddl_failures", attribute.String("table", "otel_metrics_gauge")); got != 1 {
		t.Fatalf("ddl_failures{table=otel_metrics_gauge} = %v, want 1", got)
	}
	waitFor(t, func() bool {
		ev := host.last()
		if ev == nil || ev.Status() != componentstatus.StatusRecoverableError {
			return false
		}
		for _, w := range want {
			if !strings.Contains(ev.Err().Error(), w) {
				return false
			}
		}
		return true
	})
}

// QuestDB refuses some statements for good at position 0, where it also
// reports passing engine failures: an account or instance that may not
// create tables, a name the engine refuses. Such a refusal is final at once:
// the sender does not wedge, rows flow into the tables QWP auto-creates, and
// the refusal is counted and reported.
func TestExporterRefusesPermanentPositionZeroDDL(t *testing.T) {
	for _, f := range []qwptest.ExecFailure{
		{Message: "permission denied"},
		{Message: "Write permission denied", Status: 403},
		{Message: "invalid table name [table=otel_metrics_gauge]"},
	} {
		t.Run(f.Message, func(t *testing.T) {
			srv := newServer(t, qwptest.Options{})
			srv.FailExec(1000, f)
			sendGaugesDespiteRefusal(t, srv, f.Message)
			if n := srv.Accepted(); n != 1 {
				t.Fatalf("%d connections: a permanent refusal was retried", n)
			}
		})
	}
}

// An answer that does not say whether the statement may succeed later (an
// engine failure at position 0 that QuestDB's wording does not mark as
// passing, here a full disk) holds the frames for maxUncertainRuns
// connections, then is refused: rows flow, nothing waits forever.
func TestExporterBoundsUncertainDDLFailure(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	srv.FailExec(1000, qwptest.ExecFailure{Message: "could not open read-write [file=/db/otel_metrics_gauge~1/_meta, errno=28]"})
	sendGaugesDespiteRefusal(t, srv, fmt.Sprintf("no definite answer in %d runs", maxUncertainRuns), "errno=28")
	if n := srv.Accepted(); n < maxUncertainRuns {
		t.Fatalf("%d connections before the rows went out, want the bound of %d", n, maxUncertainRuns)
	}
}

package questdbexporter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/questdbexporter/questdbexporter/internal/metadata"
	"github.com/questdbexporter/questdbexporter/internal/metadatatest"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sender"
)

// statusHost records the component status events reported to it.
type statusHost struct {
	component.Host
	mu     sync.Mutex
	events []*componentstatus.Event
}

func newStatusHost() *statusHost { return &statusHost{Host: componenttest.NewNopHost()} }

func (h *statusHost) Report(ev *componentstatus.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, ev)
}

func (h *statusHost) last() *componentstatus.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.events) == 0 {
		return nil
	}
	return h.events[len(h.events)-1]
}

// freeAddr returns a loopback address free at the time of the call, for a
// server the test starts on it.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// testConfig is a valid memory-mode configuration sending to endpoint.
func testConfig(t testing.TB, endpoint string) *Config {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.Endpoints = []string{endpoint}
	cfg.SFDir = ""
	cfg.CloseFlushTimeout = 0
	cfg.ReconnectInitialBackoff = 10 * time.Millisecond
	cfg.ReconnectMaxBackoff = 50 * time.Millisecond
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startExporter builds and starts an instance for cfg; it is shut down at
// the end of the test.
func startExporter(t *testing.T, cfg *Config, host component.Host) *questdbExporter {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	inst, err := newInstance(cfg, exportertest.NewNopSettings(metadata.Type))
	if err != nil {
		t.Fatal(err)
	}
	e := inst.(*questdbExporter)
	if err := e.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return e
}

// gaugeBatch is a gauge batch of n points whose attribute "id" runs from
// base, with 5 point attributes and 3 resource attributes (the benchmark's
// shape).
func gaugeBatch(base, n int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "checkout")
	rm.Resource().Attributes().PutStr("host.name", "node-7")
	rm.Resource().Attributes().PutStr("cloud.region", "eu-west-1")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("http.server.active_requests")
	m.SetUnit("{requests}")
	dps := m.SetEmptyGauge().DataPoints()
	for i := range n {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + int64(i)*1_000_000))
		dp.SetDoubleValue(float64(i))
		a := dp.Attributes()
		a.PutInt("id", int64(base+i))
		a.PutStr("http.method", []string{"GET", "POST"}[i%2])
		a.PutStr("http.route", fmt.Sprintf("/api/v1/item/%d", i%20))
		a.PutInt("http.status_code", int64(200+i%3))
		a.PutStr("net.peer", fmt.Sprintf("10.0.0.%d", i%10))
	}
	return md
}

func logBatch(base, n int) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "checkout")
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	for i := range n {
		lr := lrs.AppendEmpty()
		lr.SetTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + int64(base+i)))
		lr.Attributes().PutInt("id", int64(base+i))
		lr.Body().SetStr(fmt.Sprintf("order %d paid", base+i))
	}
	return ld
}

// spanBatch is a traces batch of n spans of one trace, with ids
// base..base+n-1 in their attributes.
func spanBatch(base, n int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "checkout")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	for i := range n {
		sp := spans.AppendEmpty()
		start := pcommon.Timestamp(1_700_000_000_000_000_000 + int64(base+i))
		sp.SetStartTimestamp(start)
		sp.SetEndTimestamp(start + 1000)
		sp.SetTraceID(pcommon.TraceID{0: byte(base), 1: byte(base >> 8), 15: 1})
		sp.SetSpanID(pcommon.SpanID{0: byte(i), 7: 1})
		sp.SetName(fmt.Sprintf("GET /api/v1/item/%d", i%5))
		sp.SetKind(ptrace.SpanKindServer)
		sp.Attributes().PutInt("id", int64(base+i))
	}
	return td
}

var idInJSON = regexp.MustCompile(`"id":(\d+)`)

// serverIDs counts the rows of table by the "id" attribute in its
// attributes JSON column.
func serverIDs(t *testing.T, s *qwptest.Server, table string) map[int]int {
	t.Helper()
	td, ok := s.Rows(table)
	if !ok {
		return nil
	}
	col := -1
	for i, c := range td.Columns {
		if c.Name == "attributes" {
			col = i
		}
	}
	if col < 0 {
		t.Fatalf("table %s has no attributes column: %+v", table, td.Columns)
	}
	ids := map[int]int{}
	for _, r := range td.Rows {
		js, _ := r[col].(string)
		m := idInJSON.FindStringSubmatch(js)
		if m == nil {
			t.Fatalf("row of %s without an id attribute: %q", table, js)
		}
		id, _ := strconv.Atoi(m[1])
		ids[id]++
	}
	return ids
}

func newServer(t *testing.T, o qwptest.Options) *qwptest.Server {
	t.Helper()
	s, err := qwptest.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestExporterEndToEndConcurrent(t *testing.T) {
	callers, perCaller, points := 8, 6, 25
	if testing.Short() {
		callers, perCaller = 4, 4
	}
	srv := newServer(t, qwptest.Options{})
	cfg := testConfig(t, srv.Addr())
	cfg.CloseFlushTimeout = 10 * time.Second
	e := startExporter(t, cfg, newStatusHost())
	var wg sync.WaitGroup
	var stored sync.Map // base id -> "metrics", "logs" or "traces"
	var failure atomic.Value
	for c := range callers {
		wg.Go(func() {
			for i := range perCaller {
				base := (c*perCaller + i) * points
				var err error
				kind := [...]string{"metrics", "logs", "traces"}[i%3]
				switch kind {
				case "logs":
					err = e.consumeLogs(context.Background(), logBatch(base, points))
				case "traces":
					err = e.consumeTraces(context.Background(), spanBatch(base, points))
				default:
					err = e.consumeMetrics(context.Background(), gaugeBatch(base, points))
				}
				if err != nil {
					failure.Store(err)
					return
				}
				stored.Store(base, kind)
			}
		})
	}
	wg.Wait()
	if err, _ := failure.Load().(error); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	stored.Range(func(_, v any) bool {
		want[v.(string)] += int64(points)
		return true
	})
	tables := map[string]string{"otel_metrics_gauge": "metrics", "otel_logs": "logs", "otel_traces": "traces"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for table, kind := range tables {
		if err := srv.WaitRows(ctx, table, want[kind]); err != nil {
			t.Fatal(err)
		}
	}
	for table, kind := range tables {
		ids := serverIDs(t, srv, table)
		stored.Range(func(k, v any) bool {
			if v != kind {
				return true
			}
			for id := k.(int); id < k.(int)+points; id++ {
				if ids[id] != 1 {
					t.Errorf("%s: row %d present %d times, want once", table, id, ids[id])
				}
			}
			return true
		})
	}
}

func TestExporterWaitForAck(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	cfg := testConfig(t, srv.Addr())
	cfg.WaitForAck = true
	e := startExporter(t, cfg, newStatusHost())
	if err := e.consumeMetrics(context.Background(), gaugeBatch(0, 3)); err != nil {
		t.Fatal(err)
	}
	if srv.RowCount("otel_metrics_gauge") != 3 {
		t.Fatalf("wait_for_ack call returned before its rows were committed: %d rows", srv.RowCount("otel_metrics_gauge"))
	}
	srv.StallAcks()
	done := make(chan error, 1)
	go func() { done <- e.consumeLogs(context.Background(), logBatch(0, 2)) }()
	waitFor(t, func() bool { return srv.RowCount("otel_logs") == 2 })
	select {
	case err := <-done:
		t.Fatalf("wait_for_ack call returned (%v) while the server withholds its OK", err)
	default:
	}
	acked := e.queue.AckedFSN()
	srv.ReleaseAcks()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if e.queue.AckedFSN() <= acked {
		t.Fatalf("call returned with acked fsn %d, not past %d", e.queue.AckedFSN(), acked)
	}
}

func TestExporterWaitForAckHonoursDeadline(t *testing.T) {
	cfg := testConfig(t, closedPort(t))
	cfg.WaitForAck = true
	e := startExporter(t, cfg, newStatusHost())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.consumeMetrics(ctx, gaugeBatch(0, 1)) }()
	waitFor(t, func() bool { return e.queue.PublishedFSN() == 1 })
	cancel()
	err := <-done
	if code := status.Code(err); code != codes.DeadlineExceeded {
		t.Fatalf("canceled wait_for_ack call: %v (code %v), want a retryable DeadlineExceeded status", err, code)
	}
}

// TestExporterTerminalSenderIsRetryable: a sender that stopped for good (here
// a durable-ack tier the server does not confirm) makes later calls fail
// retryably, and the status is PermanentError with the sender's error.
func TestExporterTerminalSenderIsRetryable(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	host := newStatusHost()
	cfg := testConfig(t, srv.Addr())
	cfg.RequestDurableAck = "on"
	e := startExporter(t, cfg, host)
	waitFor(t, func() bool { return e.sender.Err() != nil })
	err := e.consumeMetrics(context.Background(), gaugeBatch(0, 1))
	if consumererror.IsPermanent(err) {
		t.Fatalf("terminal sender made the call fail permanently (a receiver would drop the data): %v", err)
	}
	if code := status.Code(err); code != codes.Unavailable {
		t.Fatalf("terminal sender: %v (code %v), want Unavailable", err, code)
	}
	waitFor(t, func() bool {
		ev := host.last()
		return ev != nil && ev.Status() == componentstatus.StatusPermanentError
	})
	var te *sender.TerminalError
	if ev := host.last(); !errors.As(ev.Err(), &te) {
		t.Fatalf("permanent status error %v does not carry the sender's terminal error", ev.Err())
	}
}

func TestExporterStatusFollowsConnection(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	host := newStatusHost()
	e := startExporter(t, testConfig(t, srv.Addr()), host)
	if err := e.consumeMetrics(context.Background(), gaugeBatch(0, 1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { ev := host.last(); return ev != nil && ev.Status() == componentstatus.StatusOK })
	srv.Outage(time.Hour)
	srv.DropConnections()
	waitFor(t, func() bool {
		ev := host.last()
		return ev != nil && ev.Status() == componentstatus.StatusRecoverableError
	})
	if msg := host.last().Err().Error(); !regexp.MustCompile(`cannot reach QuestDB since \S+Z \(reconnecting; data is queued\): .+`).MatchString(msg) {
		t.Fatalf("recoverable status %q does not name the reconnect condition", msg)
	}
}

func TestExporterNotStartedAndShutDown(t *testing.T) {
	cfg := testConfig(t, closedPort(t))
	inst, err := newInstance(cfg, exportertest.NewNopSettings(metadata.Type))
	if err != nil {
		t.Fatal(err)
	}
	e := inst.(*questdbExporter)
	for _, step := range []string{"before start", "after shutdown"} {
		err := e.consumeLogs(context.Background(), logBatch(0, 1))
		if code := status.Code(err); code != codes.Unavailable || consumererror.IsPermanent(err) {
			t.Fatalf("%s: %v (code %v), want a retryable Unavailable", step, err, code)
		}
		if step == "before start" {
			if err := e.Start(context.Background(), componenttest.NewNopHost()); err != nil {
				t.Fatal(err)
			}
			if err := e.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestExporterSharedInstanceOneSlot(t *testing.T) {
	dir := t.TempDir()
	srv := newServer(t, qwptest.Options{})
	f := newFactory(newRegistry(newInstance))
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.Endpoints = []string{srv.Addr()}
	cfg.SFDir = dir
	cfg.CloseFlushTimeout = 5 * time.Second
	set := exportertest.NewNopSettings(metadata.Type)
	ctx := context.Background()
	me, err := f.CreateMetrics(ctx, set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	le, err := f.CreateLogs(ctx, set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	host := componenttest.NewNopHost()
	if err := me.Start(ctx, host); err != nil {
		t.Fatal(err)
	}
	if err := le.Start(ctx, host); err != nil {
		t.Fatalf("the logs exporter of the same ID did not share the slot: %v", err)
	}
	if err := me.ConsumeMetrics(ctx, gaugeBatch(0, 2)); err != nil {
		t.Fatal(err)
	}
	if err := le.ConsumeLogs(ctx, logBatch(0, 2)); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != cfg.senderID(set.ID) {
		t.Fatalf("sf_dir holds %v, want the one slot %q", entries, cfg.senderID(set.ID))
	}
	if err := me.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// The logs exporter still works: the instance lives until the last
	// handle shuts down.
	if err := le.ConsumeLogs(ctx, logBatch(2, 2)); err != nil {
		t.Fatalf("logs exporter after the metrics exporter shut down: %v", err)
	}
	if err := le.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if srv.RowCount("otel_metrics_gauge") != 2 || srv.RowCount("otel_logs") != 4 {
		t.Fatalf("server rows: gauge %d logs %d, want 2 and 4", srv.RowCount("otel_metrics_gauge"), srv.RowCount("otel_logs"))
	}
}

func TestSlotRegistryRefusesTwoExportersOnOneSlot(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, closedPort(t))
	cfg.SFDir = dir
	cfg.SenderID = "same"
	startExporter(t, cfg, componenttest.NewNopHost())
	inst, err := newInstance(cfg, exportertest.NewNopSettings(metadata.Type))
	if err != nil {
		t.Fatal(err)
	}
	err = inst.Start(context.Background(), componenttest.NewNopHost())
	if err == nil || !regexp.MustCompile(`already used by another questdb exporter`).MatchString(err.Error()) {
		t.Fatalf("second exporter on slot %s/same: %v", dir, err)
	}
	if err := inst.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestExporterRestartContinuesDictionaryGeneration(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, closedPort(t))
	cfg.SFDir = dir
	cfg.SymbolDictMaxEntries = 5
	set := exportertest.NewNopSettings(metadata.Type) // one ID: one slot
	// run starts an instance, stores 20 points with unique attributes, and
	// returns the dictionary generation at start and after the write.
	run := func(base int) (uint32, uint32) {
		inst, err := newInstance(cfg, set)
		if err != nil {
			t.Fatal(err)
		}
		e := inst.(*questdbExporter)
		if err := e.Start(context.Background(), componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
		start := e.writer.dict.Gen()
		if err := e.consumeMetrics(context.Background(), gaugeBatch(base, 20)); err != nil {
			t.Fatal(err)
		}
		end := e.writer.dict.Gen() // the commit happened before consume returned
		if err := e.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		return start, end
	}
	_, firstEnd := run(0)
	if firstEnd == 0 {
		t.Fatal("20 points with unique attributes and a 5-entry limit stayed in generation 0")
	}
	if secondStart, _ := run(100); secondStart != firstEnd {
		t.Fatalf("after a restart the writer continued with generation %d, want %d", secondStart, firstEnd)
	}
}

func TestExporterDrainsOrphansButNotClaimedSlots(t *testing.T) {
	dir := t.TempDir()
	srv := newServer(t, qwptest.Options{})
	slotConfig := func(id, endpoint string) *Config {
		cfg := testConfig(t, endpoint)
		cfg.SFDir = dir
		cfg.SenderID = id
		return cfg
	}
	// Leave unsent data in two slots: nothing listens on their endpoint.
	for i, id := range []string{"orphan", "sibling"} {
		inst, err := newInstance(slotConfig(id, closedPort(t)), exportertest.NewNopSettings(metadata.Type))
		if err != nil {
			t.Fatal(err)
		}
		if err := inst.Start(context.Background(), componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
		if err := inst.consumeMetrics(context.Background(), gaugeBatch(i*100, 3)); err != nil {
			t.Fatal(err)
		}
		if err := inst.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// The sibling's exporter is built (the collector builds everything
	// before starting anything) but not started: its slot is not an orphan.
	sibling, err := newInstance(slotConfig("sibling", srv.Addr()), exportertest.NewNopSettings(metadata.Type))
	if err != nil {
		t.Fatal(err)
	}
	defer sibling.Shutdown(context.Background())

	cfg := slotConfig("main", srv.Addr())
	cfg.DrainOrphans = true
	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(context.Background())
	set := metadatatest.NewSettings(tt)
	inst, err := newInstance(cfg, set)
	if err != nil {
		t.Fatal(err)
	}
	e := inst.(*questdbExporter)
	if err := e.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	<-e.drained
	if got := srv.RowCount("otel_metrics_gauge"); got != 3 {
		t.Fatalf("server holds %d gauge rows after draining, want the orphan's 3", got)
	}
	ids := serverIDs(t, srv, "otel_metrics_gauge")
	for id := range 3 {
		if ids[id] != 1 {
			t.Fatalf("orphan row %d arrived %d times", id, ids[id])
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "orphan")); !os.IsNotExist(err) {
		t.Fatalf("drained orphan slot still exists (stat: %v)", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sibling")); err != nil {
		t.Fatalf("the claimed sibling slot was touched: %v", err)
	}
	for name, want := range map[string]float64{"otelcol_exporter_questdb_drainers_active": 0, "otelcol_exporter_questdb_drainers_succeeded": 1} {
		if got, _ := metricTotal(t, tt, name); got != want {
			t.Fatalf("%s = %v, want %v", name, got, want)
		}
	}
}

func TestExporterQueueFullAlertAndStatus(t *testing.T) {
	cfg := testConfig(t, closedPort(t))
	cfg.MaxBatchBytes = minMaxBatchBytes
	cfg.SFMaxSegmentBytes = minMaxBatchBytes + segmentOverheadBytes
	cfg.SFMaxTotalBytes = 2 * cfg.SFMaxSegmentBytes
	cfg.SFAppendDeadline = 10 * time.Millisecond
	core, logs := observer.New(zapcore.InfoLevel)
	set := exportertest.NewNopSettings(metadata.Type)
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
	var refused error
	for i := 0; i < 50 && refused == nil; i++ {
		refused = e.consumeMetrics(context.Background(), gaugeBatch(i*1000, 500))
	}
	if status.Code(refused) != codes.ResourceExhausted {
		t.Fatalf("filling the queue ended with %v, want ResourceExhausted", refused)
	}
	// The monitor samples every second: wait for its alert and status.
	waitFor(t, func() bool { return logs.FilterMessageSnippet("queue full: refusing new records").Len() > 0 })
	waitFor(t, func() bool {
		ev := host.last()
		return ev != nil && ev.Status() == componentstatus.StatusRecoverableError &&
			strings.Contains(ev.Err().Error(), "queue full")
	})
	entry := logs.FilterMessageSnippet("queue full").All()[0]
	if entry.Level != zapcore.ErrorLevel {
		t.Fatalf("full alert logged at %v, want error", entry.Level)
	}
}

func TestExporterLogsDataLossLoudly(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, closedPort(t))
	cfg.SFDir = dir
	cfg.SenderID = "lossy"
	run := func(consume bool) *observer.ObservedLogs {
		core, logs := observer.New(zapcore.InfoLevel)
		set := exportertest.NewNopSettings(metadata.Type)
		set.Logger = zap.New(core)
		inst, err := newInstance(cfg, set)
		if err != nil {
			t.Fatal(err)
		}
		if err := inst.Start(context.Background(), componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
		if consume {
			if err := inst.consumeMetrics(context.Background(), gaugeBatch(0, 5)); err != nil {
				t.Fatal(err)
			}
		}
		if err := inst.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		return logs
	}
	run(true)
	// Without its dictionary the frames on disk still define their ids in
	// their delta sections: recovery rebuilds the dictionary and replays.
	dicts, _ := filepath.Glob(filepath.Join(dir, "lossy", ".symbol-dict*"))
	if len(dicts) == 0 {
		t.Fatal("no dictionary file in the slot")
	}
	for _, p := range dicts {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	logs := run(true)
	if n := logs.FilterMessageSnippet("DATA_LOSS").Len(); n != 0 || logs.FilterMessageSnippet("rebuilt symbol dictionary").Len() != 1 {
		t.Fatalf("a lost .symbol-dict the frames can rebuild: %d DATA_LOSS logs, logs %v", n, logs.All())
	}
	// One flipped byte in the first frame of the oldest segment, a newer
	// segment behind it: accepted frames are unreadable.
	segs, _ := filepath.Glob(filepath.Join(dir, "lossy", "*.sfseg"))
	if len(segs) < 2 {
		t.Fatalf("%d segments, want at least 2", len(segs))
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[24+20] ^= 0x08
	if err := os.WriteFile(segs[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	logs = run(false)
	loss := logs.FilterMessageSnippet("DATA_LOSS: the store-and-forward slot could not be replayed").All()
	if len(loss) != 1 || loss[0].Level != zapcore.ErrorLevel {
		t.Fatalf("recovery of an unreplayable slot logged %v, want one DATA_LOSS error", logs.All())
	}
	if path, _ := loss[0].ContextMap()["set_aside_as"].(string); !strings.Contains(path, "lossy.unreplayable") {
		t.Fatalf("DATA_LOSS log does not name the set-aside slot: %v", loss[0].ContextMap())
	}
}

// With create_tables on (the default) the exporter creates its tables with
// dedup keys, so frames replayed after a lost OK store each row once; with it
// off QWP auto-creates the tables without keys and the same replay doubles
// rows, which shows the check can fail.
func TestExporterCreatesDedupTablesSoReplayIsIdempotent(t *testing.T) {
	for _, tc := range []struct {
		name         string
		createTables bool
		ttl          string
	}{
		{"create_tables on, ttl 30d", true, "30d"},
		{"create_tables off", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, qwptest.Options{})
			cfg := testConfig(t, srv.Addr())
			cfg.CreateTables, cfg.TTL = tc.createTables, tc.ttl
			e := startExporter(t, cfg, newStatusHost())
			if err := e.consumeMetrics(context.Background(), gaugeBatch(0, 5)); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return srv.RowCount("otel_metrics_gauge") == 5 })
			for table, key := range map[string]string{"otel_metrics_gauge": "series_id", "otel_logs": "record_id"} {
				td, ok := srv.Rows(table)
				switch {
				case tc.createTables && (!ok || !slices.Contains(td.DedupKeys, key) || td.TTL == ""):
					t.Fatalf("table %s: exists %v, dedup keys %v, ttl %q; want created with %s and a TTL",
						table, ok, td.DedupKeys, td.TTL, key)
				case !tc.createTables && ok && len(td.DedupKeys) != 0:
					t.Fatalf("table %s has dedup keys %v with create_tables off", table, td.DedupKeys)
				}
			}
			// Rows committed but not acknowledged are sent again after the
			// reconnect.
			waitFor(t, func() bool { return e.queue.AckedFSN() == e.queue.PublishedFSN() })
			srv.StallAcks()
			if err := e.consumeMetrics(context.Background(), gaugeBatch(100, 5)); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return srv.RowCount("otel_metrics_gauge") == 10 })
			framesBefore := srv.Frames()
			srv.DropConnections()
			srv.ReleaseAcks()
			waitFor(t, func() bool { return e.queue.AckedFSN() == e.queue.PublishedFSN() })
			if srv.Frames() <= framesBefore {
				t.Fatal("nothing was replayed after the dropped connection")
			}
			ids := serverIDs(t, srv, "otel_metrics_gauge")
			if len(ids) != 10 {
				t.Fatalf("%d distinct rows, want 10", len(ids))
			}
			dups := 0
			for _, n := range ids {
				dups += n - 1
			}
			if tc.createTables && dups != 0 {
				t.Fatalf("%d duplicate rows after the replay into dedup tables", dups)
			}
			if !tc.createTables && dups != 5 {
				t.Fatalf("%d duplicate rows after replaying 5 committed-but-unacked rows into tables without keys, want 5", dups)
			}
		})
	}
}

func TestExporterDictionaryGenerationsEndToEnd(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	cfg := testConfig(t, srv.Addr())
	cfg.SymbolDictMaxEntries = 16
	e := startExporter(t, cfg, newStatusHost())
	const batches, points = 6, 20
	for b := range batches {
		// Unique attributes per point: every row brings a new SYMBOL.
		if err := e.consumeMetrics(context.Background(), gaugeBatch(b*points, points)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.WaitRows(ctx, "otel_metrics_gauge", batches*points); err != nil {
		t.Fatal(err)
	}
	if gen := e.writer.dict.Gen(); gen < 3 {
		t.Fatalf("%d unique attribute sets with 16-entry generations ended in generation %d", batches*points, gen)
	}
	// Each row's attributes SYMBOL resolved to its own JSON: the server
	// had the right dictionary for every frame of every generation.
	ids := serverIDs(t, srv, "otel_metrics_gauge")
	for id := range batches * points {
		if ids[id] != 1 {
			t.Fatalf("row %d present %d times", id, ids[id])
		}
	}
}

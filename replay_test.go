package questdbexporter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/questdbexporter/questdbexporter/internal/metadata"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
)

// The exporter-level proofs (crash_test.go, outage_test.go and this file)
// share the bookkeeping below: every batch carries unique ids (the "id"
// attribute of each point or record), the ledger records which ids were
// handed to a consume call and which calls returned nil, and check compares
// that with the exact rows on the server.

// proofTables are the tables the proofs write: gauge points, log records
// and spans, through one instance.
var proofTables = [...]string{"otel_metrics_gauge", "otel_logs", "otel_traces"}

// proofDedupKeys is the dedup key column of each proof table.
var proofDedupKeys = map[string]string{"otel_metrics_gauge": "series_id", "otel_logs": "record_id", "otel_traces": "span_key"}

// proofRowCount is the number of rows of the proof tables on the server.
func proofRowCount(srv *qwptest.Server) int64 {
	var n int64
	for _, table := range proofTables {
		n += srv.RowCount(table)
	}
	return n
}

// proofLedger records batches by table: tried (handed to a consume call)
// and acked (the call returned nil). Safe for concurrent use.
type proofLedger struct {
	mu    sync.Mutex
	tried map[string]map[int]bool
	acked map[string]map[int]bool
}

func newProofLedger() *proofLedger {
	l := &proofLedger{tried: map[string]map[int]bool{}, acked: map[string]map[int]bool{}}
	for _, tb := range proofTables {
		l.tried[tb], l.acked[tb] = map[int]bool{}, map[int]bool{}
	}
	return l
}

// add records ids base..base+n-1 of table as tried, and as acked too when
// acked is set.
func (l *proofLedger) add(table string, base, n int, acked bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := base; id < base+n; id++ {
		l.tried[table][id] = true
		if acked {
			l.acked[table][id] = true
		}
	}
}

func (l *proofLedger) ackedRows() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, ids := range l.acked {
		n += len(ids)
	}
	return n
}

// proofResult is what check found on the server.
type proofResult struct {
	Acked      int // rows whose consume call returned nil
	AckedSpans int // of them, spans (otel_traces): the traces pipeline was exercised
	Stored     int // distinct rows on the server
	Duplicates int // rows stored more than once, counted once per extra copy
}

// check asserts that every acked row is on the server and that the server
// holds no row that was never handed to a consume call; it returns the
// counts, duplicates included, for the caller's own assertion.
func (l *proofLedger) check(t *testing.T, srv *qwptest.Server) proofResult {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var res proofResult
	for _, table := range proofTables {
		ids := serverIDs(t, srv, table)
		var missing, phantom []int
		for id := range l.acked[table] {
			if ids[id] == 0 {
				missing = append(missing, id)
			}
		}
		for id, n := range ids {
			if !l.tried[table][id] {
				phantom = append(phantom, id)
			}
			res.Duplicates += n - 1
		}
		res.Acked += len(l.acked[table])
		if table == "otel_traces" {
			res.AckedSpans = len(l.acked[table])
		}
		res.Stored += len(ids)
		if len(missing) > 0 {
			t.Errorf("%s: %d of %d acknowledged rows are not on the server (LOST), first ids %v",
				table, len(missing), len(l.acked[table]), firstSorted(missing, 10))
		}
		if len(phantom) > 0 {
			t.Errorf("%s: %d rows on the server were never handed to a consume call, first ids %v",
				table, len(phantom), firstSorted(phantom, 10))
		}
	}
	return res
}

func firstSorted(ids []int, n int) []int {
	sort.Ints(ids)
	return ids[:min(n, len(ids))]
}

// proofConsumer is the exporter as the load sees it.
type proofConsumer interface {
	consume(ctx context.Context, table string, base, n int) error
}

// instanceConsumer drives an in-process instance directly.
type instanceConsumer struct {
	e       *questdbExporter
	logPad  int // extra body bytes per log record
	timeout time.Duration
}

func (c instanceConsumer) consume(ctx context.Context, table string, base, n int) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	switch table {
	case "otel_logs":
		return c.e.consumeLogs(ctx, paddedLogBatch(base, n, c.logPad))
	case "otel_traces":
		return c.e.consumeTraces(ctx, spanBatch(base, n))
	}
	return c.e.consumeMetrics(ctx, gaugeBatch(base, n))
}

// paddedLogBatch is logBatch with pad bytes added to every body, so that a
// backlog of logs weighs what a test needs.
func paddedLogBatch(base, n, pad int) plog.Logs {
	ld := logBatch(base, n)
	if pad > 0 {
		lrs := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
		for i := range lrs.Len() {
			b := lrs.At(i).Body()
			b.SetStr(fmt.Sprintf("%s %0*d", b.Str(), pad, base+i))
		}
	}
	return ld
}

// proofLoad runs workers that each take turns through tables (batches of
// points rows with fresh ids from next), recording them in l, until ctx
// ends. pace, when set, is called before each batch of n rows and may hold
// it back (rate limiting; false stops the worker); onResult, when set,
// learns every call's outcome.
func proofLoad(ctx context.Context, workers, points int, tables []string, next *atomic.Int64, l *proofLedger,
	c proofConsumer, pace func(ctx context.Context, n int) bool, onResult func(table string, base, n int, err error)) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				table := tables[(w+i)%len(tables)]
				if pace != nil && !pace(ctx, points) {
					return
				}
				base := int(next.Add(int64(points))) - points
				l.add(table, base, points, false)
				err := c.consume(context.Background(), table, base, points)
				if err == nil {
					l.add(table, base, points, true)
				}
				if onResult != nil {
					onResult(table, base, points, err)
				}
			}
		})
	}
	wg.Wait()
}

// errorTally keeps the count and the first few messages of failed calls.
type errorTally struct {
	mu    sync.Mutex
	n     int
	first []string
}

func (e *errorTally) result(table string, base, n int, err error) {
	if err == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	if len(e.first) < 5 {
		e.first = append(e.first, fmt.Sprintf("%s ids %d..%d: %v", table, base, base+n-1, err))
	}
}

func (e *errorTally) check(t *testing.T, what string) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n > 0 {
		t.Errorf("%s: %d consume calls failed, first: %q", what, e.n, e.first)
	}
}

// waitUntil polls cond until it holds, failing the test after timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v", what, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// proofDuration is d in short mode and long with QDB_LONG=1.
func proofDuration(short, normal, long time.Duration) time.Duration {
	switch {
	case os.Getenv("QDB_LONG") == "1":
		return long
	case testing.Short():
		return short
	}
	return normal
}

// checkDedupKeys asserts that the proof tables have dedup keys exactly when
// the exporter was told to create its tables.
func checkDedupKeys(t *testing.T, srv *qwptest.Server, createTables bool) {
	t.Helper()
	for _, table := range proofTables {
		td, ok := srv.Rows(table)
		if !ok {
			t.Fatalf("table %s does not exist", table)
		}
		key := proofDedupKeys[table]
		if has := slices.Contains(td.DedupKeys, key); has != createTables {
			t.Errorf("table %s: dedup keys %v with create_tables %v", table, td.DedupKeys, createTables)
		}
	}
}

// TestReplayServerRestartMidStream streams under load while the server
// drops the connection right after committing a frame and before its OK
// (a crash between commit and reply), and now and then goes down for a
// while. Nothing acknowledged may be lost; without the exporter's dedup
// tables the frames committed-but-unacknowledged at each break come back
// as duplicates, with them none does.
func TestReplayServerRestartMidStream(t *testing.T) {
	cases := []struct {
		name         string
		sf           bool
		createTables bool
		durableAck   string
	}{
		{"sf/create_tables_off", true, false, ""},
		{"sf/create_tables_on", true, true, ""},
		{"sf/create_tables_on/durable_ack_local", true, true, "local"},
		{"memory/create_tables_on", false, true, ""},
	}
	load := proofDuration(time.Second, 4*time.Second, 30*time.Second)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, qwptest.Options{DurableTiers: true, AutoDurable: true})
			cfg := testConfig(t, srv.Addr())
			if tc.sf {
				cfg.SFDir = t.TempDir()
			}
			cfg.CreateTables = tc.createTables
			cfg.RequestDurableAck = tc.durableAck
			cfg.MaxBatchBytes = 64 << 10
			cfg.SFMaxSegmentBytes = 256 << 10
			cfg.MaxInFlight = 16
			// A new dictionary generation every few batches (each point's
			// attributes are a new symbol): drops land on generation
			// switches too.
			cfg.SymbolDictMaxEntries = 300
			e := startExporter(t, cfg, newStatusHost())

			ctx, cancel := context.WithTimeout(context.Background(), load)
			defer cancel()
			var drops, outages atomic.Int64
			chaosDone := make(chan struct{})
			go func() {
				defer close(chaosDone)
				for i := 1; ctx.Err() == nil; i++ {
					// Arm a drop a few frames ahead, and wait for it to
					// fire before arming the next one.
					before := srv.Accepted()
					srv.DropAfter(2+rand.IntN(6), false)
					drops.Add(1)
					for ctx.Err() == nil && srv.Accepted() == before {
						time.Sleep(5 * time.Millisecond)
					}
					if i%4 == 0 {
						outages.Add(1)
						srv.Outage(time.Duration(50+rand.IntN(150)) * time.Millisecond)
					}
					select {
					case <-ctx.Done():
					case <-time.After(time.Duration(20+rand.IntN(60)) * time.Millisecond):
					}
				}
			}()
			l := newProofLedger()
			var next atomic.Int64
			var errs errorTally
			proofLoad(ctx, 4, 20, proofTables[:], &next, l, instanceConsumer{e: e, timeout: 10 * time.Second}, nil, errs.result)
			<-chaosDone
			srv.Outage(0) // ends a running outage
			errs.check(t, "consume during drops and outages")

			// The long variant's 30 s of unpaced load leaves ~46,000 frames of
			// 64 KiB, which the in-process server (typed rows, dedup index)
			// takes several minutes to absorb: the budget is time to drain,
			// not an assertion.
			drainStart, backlog := time.Now(), e.queue.PublishedFSN()-e.queue.AckedFSN()
			waitUntil(t, proofDuration(time.Minute, time.Minute, 15*time.Minute), "every frame acknowledged", func() bool {
				return e.queue.AckedFSN() == e.queue.PublishedFSN()
			})
			t.Logf("%s: a backlog of %d frames drained in %v", tc.name, backlog, time.Since(drainStart).Round(time.Millisecond))
			res := l.check(t, srv)
			checkDedupKeys(t, srv, tc.createTables)
			t.Logf("%s: %d rows acked, %d distinct stored, %d duplicates; %d drops armed, %d outages, %d connections",
				tc.name, res.Acked, res.Stored, res.Duplicates, drops.Load(), outages.Load(), srv.Accepted())
			if srv.Accepted() < 3 {
				t.Fatalf("only %d connections: the drops did not happen, the test proves nothing", srv.Accepted())
			}
			if tc.createTables && res.Duplicates != 0 {
				t.Errorf("%d duplicate rows with create_tables on; the dedup tables should absorb every replay", res.Duplicates)
			}
			if !tc.createTables && res.Duplicates == 0 {
				t.Errorf("no duplicates with create_tables off after %d connections dropped between commit and OK: the replay this test forces did not happen", srv.Accepted()-1)
			}
		})
	}
}

// TestReplayOrphanDrainIntoDedupTables adopts the slot of a collector that
// died with unsent data (drain_orphans) into a fresh QuestDB. The drainer
// replays like any sender, so with create_tables on the tables it writes
// to must get their dedup keys before its first frame, exactly as the
// foreground sender's do; otherwise the orphan's rows auto-create tables
// without them and every later replay into those tables duplicates rows.
func TestReplayOrphanDrainIntoDedupTables(t *testing.T) {
	dir := t.TempDir()
	srv := newServer(t, qwptest.Options{})
	slot := func(id, endpoint string) *Config {
		cfg := testConfig(t, endpoint)
		cfg.SFDir, cfg.SenderID = dir, id
		return cfg
	}
	// The orphan: its collector never reached QuestDB and is gone.
	l := newProofLedger()
	orphan, err := newInstance(slot("orphan", closedPort(t)), exportertest.NewNopSettings(metadata.Type))
	if err != nil {
		t.Fatal(err)
	}
	if err := orphan.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	oc := instanceConsumer{e: orphan.(*questdbExporter), timeout: 10 * time.Second}
	for i, table := range []string{"otel_logs", "otel_metrics_gauge", "otel_logs"} {
		base := i * 100
		err := oc.consume(context.Background(), table, base, 10)
		if err != nil {
			t.Fatal(err)
		}
		l.add(table, base, 10, true)
	}
	if err := orphan.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	cfg := slot("main", srv.Addr())
	cfg.DrainOrphans = true
	e := startExporter(t, cfg, newStatusHost())
	<-e.drained
	if _, err := os.Stat(filepath.Join(dir, "orphan")); !os.IsNotExist(err) {
		t.Fatalf("the orphan slot was not drained (stat: %v)", err)
	}
	if res := l.check(t, srv); res.Duplicates != 0 {
		t.Errorf("%d duplicate rows from one drain", res.Duplicates)
	}
	checkDedupKeys(t, srv, true)
}

package questdbexporter

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/questdbexporter/questdbexporter/internal/metadata"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// crashChildEnv carries the child's crashChild settings as JSON; set, it
// turns TestCrashChildProcess into the child.
const crashChildEnv = "QDB_CRASH_CHILD"

// crashChild is what the parent tells one child process.
type crashChild struct {
	SFDir        string
	SenderID     string
	Endpoint     string
	Durability   string
	DurableAck   string
	DrainOrphans bool
	CreateTables bool
	IDBase       int           // the child's ids start here, so no two children share one
	Lifetime     time.Duration // the child exits on its own after this, should the parent be gone
}

// config is the exporter configuration of a child, and of the
// parent's final exporter on the same slot.
func (c crashChild) config(cfg *Config) *Config {
	cfg.Endpoints = []string{c.Endpoint}
	cfg.SFDir = c.SFDir
	cfg.SenderID = c.SenderID
	cfg.SFDurability = c.Durability
	cfg.SFSyncInterval = 20 * time.Millisecond
	cfg.CreateTables = c.CreateTables
	cfg.RequestDurableAck = c.DurableAck
	cfg.DrainOrphans = c.DrainOrphans
	cfg.MaxBatchBytes = 64 << 10
	cfg.SFMaxSegmentBytes = 256 << 10
	cfg.MaxInFlight = 16
	// Every point's attributes JSON is a new symbol (its id is unique), so
	// the dictionary starts a new generation every few batches: crashes
	// land on generation boundaries too.
	cfg.SymbolDictMaxEntries = 300
	cfg.ReconnectInitialBackoff = 10 * time.Millisecond
	cfg.ReconnectMaxBackoff = 50 * time.Millisecond
	cfg.CloseFlushTimeout = 0
	return cfg
}

// TestCrashChildProcess is the child of TestCrashSIGKILL: run by the test
// binary re-executing itself with crashChildEnv set, it streams batches
// through an exporter built by NewFactory until it is killed, printing
// "try <table> <base> <n>" before each consume call and
// "ok <table> <base> <n>" only after the call returned nil. Without the
// variable it has nothing to do.
func TestCrashChildProcess(t *testing.T) {
	spec := os.Getenv(crashChildEnv)
	if spec == "" {
		return
	}
	var c crashChild
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		t.Fatalf("%s: %v", crashChildEnv, err)
	}
	go func() {
		time.Sleep(c.Lifetime)
		fmt.Fprintln(os.Stderr, "crash child: lifetime over, parent gone?")
		os.Exit(3)
	}()
	f := NewFactory()
	cfg := c.config(f.CreateDefaultConfig().(*Config))
	set := exportertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()),
		zapcore.Lock(os.Stderr), zap.WarnLevel))
	ctx := context.Background()
	me, err := f.CreateMetrics(ctx, set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	le, err := f.CreateLogs(ctx, set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	te, err := f.CreateTraces(ctx, set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, comp := range []component.Component{me, le, te} {
		if err := comp.Start(ctx, componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
	}
	var out sync.Mutex // one write per line: a pipe write that small is atomic
	print := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Fprintf(os.Stdout, format, args...)
	}
	var next atomic.Int64
	next.Store(int64(c.IDBase))
	proofLoad(ctx, 4, 20, proofTables[:], &next, newProofLedger(), factoryConsumer{me: me, le: le, te: te, print: print}, nil,
		func(table string, base, n int, err error) {
			if err != nil {
				fmt.Fprintf(os.Stderr, "consume %s %d: %v\n", table, base, err)
				return
			}
			print("ok %s %d %d\n", table, base, n)
		})
}

// factoryConsumer drives the metrics, logs and traces exporters a factory
// built (one shared instance).
type factoryConsumer struct {
	me    exporter.Metrics
	le    exporter.Logs
	te    exporter.Traces
	print func(format string, args ...any)
}

func (c factoryConsumer) consume(ctx context.Context, table string, base, n int) error {
	c.print("try %s %d %d\n", table, base, n)
	switch table {
	case "otel_logs":
		return c.le.ConsumeLogs(ctx, logBatch(base, n))
	case "otel_traces":
		return c.te.ConsumeTraces(ctx, spanBatch(base, n))
	}
	return c.me.ConsumeMetrics(ctx, gaugeBatch(base, n))
}

// childProc is one running child and the reader of its output.
type childProc struct {
	cmd      *exec.Cmd
	firstOK  chan struct{}
	readDone chan struct{}
	stderr   *tailBuffer
	oks      atomic.Int64
	bad      atomic.Int64 // unparsable lines
}

// startCrashChild re-executes the test binary as a child with spec and
// feeds its try/ok lines into l.
func startCrashChild(t *testing.T, spec crashChild, l *proofLedger) *childProc {
	t.Helper()
	js, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChildProcess$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+string(js))
	p := &childProc{cmd: cmd, firstOK: make(chan struct{}), readDone: make(chan struct{}), stderr: &tailBuffer{max: 16 << 10}}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.kill() })
	go p.read(stdout, l)
	return p
}

func (p *childProc) read(r io.Reader, l *proofLedger) {
	defer close(p.readDone)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var kind, table string
		var base, n int
		if _, err := fmt.Sscanf(sc.Text(), "%s %s %d %d", &kind, &table, &base, &n); err != nil || (kind != "try" && kind != "ok") {
			p.bad.Add(1)
			continue
		}
		l.add(table, base, n, kind == "ok")
		if kind == "ok" && p.oks.Add(1) == 1 {
			close(p.firstOK)
		}
	}
}

// kill SIGKILLs the child and waits for it and for its output.
func (p *childProc) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Kill() // SIGKILL: no deferred function, no flush, no Shutdown
	<-p.readDone
	_ = p.cmd.Wait()
}

// stallFrames withholds the server's acknowledgements until it has
// committed three frames meanwhile, and reports whether it did; the caller
// releases them. Frames, not rows, count: with dedup keys a replayed frame
// adds no row. Of three frames at least one carries rows, since a
// connection opens with at most two catch-up frames of this test's
// dictionary. The sender may hold its next frame until the ones in flight
// are acknowledged (at a dictionary generation switch), so a stall that
// sees too little is released briefly and tried again.
func stallFrames(t *testing.T, srv *qwptest.Server) bool {
	t.Helper()
	for range 10 {
		srv.StallAcks()
		frames := srv.Frames()
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if srv.Frames() >= frames+3 {
				return true
			}
		}
		srv.ReleaseAcks()
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("no three frames were committed in 10 attempts to withhold acks")
	return false
}

// startLoggedExporter is startExporter with the instance's warnings and
// errors in the test's log.
func startLoggedExporter(t *testing.T, cfg *Config) *questdbExporter {
	t.Helper()
	set := exportertest.NewNopSettings(metadata.Type)
	set.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	return startExporterWith(t, cfg, set)
}

// startExporterWith is startExporter with the given settings.
func startExporterWith(t *testing.T, cfg *Config, set exporter.Settings) *questdbExporter {
	t.Helper()
	return startExporterOn(t, cfg, set, componenttest.NewNopHost())
}

// startExporterOn is startExporter with the given settings and host.
func startExporterOn(t *testing.T, cfg *Config, set exporter.Settings, host component.Host) *questdbExporter {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	inst, err := newInstance(cfg, set)
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

// startMetricsExporter builds the metrics exporter of f (exporterhelper in
// front, as the collector builds it) and starts it; it is shut down at the
// end of the test.
func startMetricsExporter(t *testing.T, f exporter.Factory, set exporter.Settings, cfg *Config) exporter.Metrics {
	t.Helper()
	ctx := context.Background()
	exp, err := f.CreateMetrics(ctx, set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := exp.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return exp
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b = append(b.b, p...)
	if over := len(b.b) - b.max; over > 0 {
		b.b = b.b[over:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.b)
}

// crashKills is how many children each variant kills: 5, or
// QDB_CRASH_KILLS.
func crashKills(t *testing.T) int {
	s := os.Getenv("QDB_CRASH_KILLS")
	if s == "" {
		return 5
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 2 {
		t.Fatalf("QDB_CRASH_KILLS=%q: want a whole number >= 2", s)
	}
	return n
}

// TestCrashSIGKILL kills collector processes (this test binary re-executed
// as TestCrashChildProcess) at random moments while they stream metrics and
// logs and traces from four goroutines into the slot of one sf_dir, each child
// recovering what the previous one left. Some kills fall in a server
// outage, some while the child is still starting; one in four kills while
// the server withholds its OKs, so that frames QuestDB committed are
// unacknowledged at the crash (with create_tables off, that replay must
// show up as duplicates: the test can see them). Durability rotates through
// memory, flush and periodic: a process crash loses nothing in any of them.
// The SYMBOL dictionary starts a new generation every few batches, so kills
// also land next to generation switches. At the end the parent opens the
// slot itself and waits until everything is acknowledged; every batch a
// consume call returned nil for must be on the server, and no slot may
// have been set aside as unreplayable.
//
// In the orphans variant every child has a slot of its own and
// drain_orphans on: each adopts the slots the killed ones left (the rescue
// path after a crash), and may itself be killed while draining them.
func TestCrashSIGKILL(t *testing.T) {
	kills := crashKills(t)
	cases := []struct {
		createTables bool
		durableAck   string
		orphans      bool
	}{
		{false, "", false},
		{true, "", false},
		{true, "local", false}, // trim, and .ack-watermark, follow durable acks
		{true, "", true},
	}
	for _, tc := range cases {
		createTables := tc.createTables
		t.Run(fmt.Sprintf("create_tables=%v/durable_ack=%q/orphans=%v", createTables, tc.durableAck, tc.orphans), func(t *testing.T) {
			srv := newServer(t, qwptest.Options{DurableTiers: true, AutoDurable: true})
			spec := crashChild{
				SFDir: t.TempDir(), SenderID: "crash", Endpoint: srv.Addr(),
				CreateTables: createTables, DurableAck: tc.durableAck, DrainOrphans: tc.orphans,
				Lifetime: 2 * time.Minute,
			}
			durabilities := [...]string{"memory", "flush", "periodic"}
			l := newProofLedger()
			var children []*childProc
			var stalls, outages, earlies int
			defer func() {
				if !t.Failed() {
					return
				}
				for k, p := range children {
					t.Logf("stderr of child %d:\n%s", k, p.stderr)
				}
				if entries, err := os.ReadDir(spec.SFDir); err == nil {
					for _, d := range entries {
						t.Logf("sf_dir holds %s", d.Name())
					}
				}
			}()
			for k := range kills {
				spec.IDBase = (k + 1) * 10_000_000
				if tc.orphans {
					spec.SenderID = fmt.Sprintf("crash-%d", k)
				}
				spec.Durability = durabilities[k%len(durabilities)]
				p := startCrashChild(t, spec, l)
				children = append(children, p)
				early := k%5 == 3
				if !early {
					select {
					case <-p.firstOK:
					case <-p.readDone:
						t.Fatalf("child %d exited before storing a batch:\n%s", k, p.stderr)
					case <-time.After(60 * time.Second):
						t.Fatalf("child %d stored no batch within 60 s:\n%s", k, p.stderr)
					}
				}
				switch {
				case early:
					// Killed while it starts: opening, recovering,
					// replaying, or its first batches.
					earlies++
					time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
					p.kill()
				case k%4 == 1:
					// Frames committed by the server and never
					// acknowledged at the kill.
					if stallFrames(t, srv) {
						stalls++
					}
					p.kill()
					srv.ReleaseAcks()
				case k%3 == 2:
					// Killed during an outage; the next child may start
					// inside it too.
					outages++
					srv.Outage(time.Duration(200+rand.IntN(400)) * time.Millisecond)
					time.Sleep(time.Duration(50+rand.IntN(250)) * time.Millisecond)
					p.kill()
				default:
					time.Sleep(time.Duration(20+rand.IntN(300)) * time.Millisecond)
					p.kill()
				}
				if n := p.bad.Load(); n > 0 {
					t.Errorf("child %d printed %d unparsable lines", k, n)
				}
			}

			if tc.orphans {
				spec.SenderID = "final"
			}
			cfg := spec.config(testConfig(t, srv.Addr()))
			cfg.SFDurability = "memory"
			e := startLoggedExporter(t, cfg)
			select {
			case <-e.drained:
			case <-time.After(60 * time.Second):
				t.Fatal("the orphan drainers did not finish within 60 s")
			}
			waitUntil(t, 60*time.Second, "the slot drained by the parent", func() bool {
				return e.queue.AckedFSN() == e.queue.PublishedFSN()
			})
			if aside, _ := filepath.Glob(filepath.Join(spec.SFDir, "*.unreplayable-*")); len(aside) > 0 {
				t.Errorf("a process crash made a slot unreplayable (DATA_LOSS), set aside as %v: its unacknowledged frames will never be sent", aside)
			}
			if failed, _ := filepath.Glob(filepath.Join(spec.SFDir, "*", ".failed")); len(failed) > 0 {
				t.Errorf("orphan drainers gave up on %v", failed)
			}
			if tc.orphans {
				// Slots of children killed before their first append hold
				// nothing and are not orphans; every other one was drained.
				if left, err := sfqueue.ListOrphans(spec.SFDir, []string{spec.SenderID}); err != nil || len(left) > 0 {
					t.Errorf("orphan slots with unacknowledged frames left after the drain: %v (%v)", left, err)
				}
			}
			res := l.check(t, srv)
			checkDedupKeys(t, srv, createTables)
			t.Logf("%s: %d kills (%d with acks withheld, %d in an outage, %d while starting), %d rows acked (%d of them spans), %d distinct stored, %d duplicates, %d connections",
				t.Name(), kills, stalls, outages, earlies, res.Acked, res.AckedSpans, res.Stored, res.Duplicates, srv.Accepted())
			if res.Acked == 0 || res.AckedSpans == 0 {
				t.Fatal("no batch, or no traces batch, was acknowledged: the children did not run")
			}
			switch {
			case createTables && res.Duplicates != 0:
				t.Errorf("%d duplicate rows with create_tables on: the dedup tables should absorb every replay", res.Duplicates)
			case !createTables && stalls > 0 && res.Duplicates == 0:
				t.Errorf("no duplicates with create_tables off after %d kills with committed, unacknowledged frames: the replay did not happen", stalls)
			}
		})
	}
}

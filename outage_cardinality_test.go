//go:build linux

package questdbexporter

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/questdbexporter/questdbexporter/internal/metadatatest"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// The high-cardinality outage proof (issue #10): a QuestDB outage under a
// stream of new series costs bounded RAM and bounded disk. RSS under the
// race detector means nothing, so the exporter runs in a child process
// built without -race (this test binary when it is not a race build, else
// one built by `go test -c`); the parent keeps the QWP stand-in, samples
// the child's RSS and the slot's blocks on disk every 100 ms and checks the
// rows that land. It runs on Linux (RSS from /proc). Short variants run in
// `make test`; QDB_LONG=1 runs the full 10-minute ones.

// outageChildEnv carries the child's outageChild settings as JSON; set, it
// turns TestCardinalityOutageChild into the child.
const outageChildEnv = "QDB_OUTAGE_CHILD"

// outageFirstID is the first id of the outage's points; the warm-up's run
// from 0.
const outageFirstID = 1_000_000

// outageChild is what the parent tells the child.
type outageChild struct {
	Endpoint     string
	SFDir        string // "": memory-only mode
	CapBytes     int64  // sf_max_total_bytes
	SegmentBytes int64
	Rate         float64 // new series (points) per second
	Batch        int     // points per consume call
	Load         time.Duration
	Lifetime     time.Duration // the child exits on its own after this, should the parent be gone
	HeapProfile  string        // where to write a heap profile at the outage's end; "": none
}

// TestCardinalityOutageChild is the child of TestCardinalityOutage: run by
// a test binary with outageChildEnv set, it warms an exporter up, prints
// "ready", and on "load" from stdin sends gauge points, each a new series,
// from one goroutine (so ids grow with FSNs) for the load time, printing
// "ok <base> <n>" after each consume call that returned nil and "stats
// <json>" (sfqueue.Stats) twice a second; then "loaded", and on "drain"
// waits until every frame is acknowledged or evicted, prints its own
// counters "evicted <frames_evicted> <rows_evicted>" and "drained". Its
// shutdown logs the last eviction summary (evicted_rows_total) to stderr.
// Without the variable it has nothing to do.
func TestCardinalityOutageChild(t *testing.T) {
	spec := os.Getenv(outageChildEnv)
	if spec == "" {
		return
	}
	var c outageChild
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		t.Fatalf("%s: %v", outageChildEnv, err)
	}
	lifetime := time.AfterFunc(c.Lifetime, func() {
		fmt.Fprintln(os.Stderr, "outage child: lifetime over, parent gone?")
		os.Exit(3)
	})
	defer lifetime.Stop()
	cfg := testConfig(t, c.Endpoint)
	cfg.SFDir = c.SFDir
	cfg.SenderID = "outage"
	cfg.OnFull = "evict_oldest"
	cfg.SFMaxTotalBytes = ByteSize(c.CapBytes)
	cfg.SFMaxSegmentBytes = ByteSize(c.SegmentBytes)
	cfg.MaxBatchBytes = 256 << 10
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { tt.Shutdown(context.Background()) }) // after the exporter's shutdown
	set := metadatatest.NewSettings(tt)
	set.Logger = zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()),
		zapcore.Lock(os.Stderr), zap.WarnLevel))
	e := startExporterWith(t, cfg, set)

	var out sync.Mutex
	print := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", args...)
	}
	stats := func() {
		js, err := json.Marshal(e.queue.Stats())
		if err != nil {
			t.Fatal(err)
		}
		print("stats %s", js)
	}
	allAcked := func() bool { return e.queue.AckedFSN() == e.queue.PublishedFSN() }
	consume := func(base, n int) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.consumeMetrics(ctx, gaugeBatch(base, n)); err != nil {
			print("err %d %d %q", base, n, err.Error())
			return
		}
		print("ok %d %d", base, n)
	}
	in := bufio.NewScanner(os.Stdin)
	await := func(word string) {
		if !in.Scan() || in.Text() != word {
			t.Fatalf("outage child: want %q on stdin, got %q (%v)", word, in.Text(), in.Err())
		}
	}

	// Warm-up: connected, tables created, everything acknowledged.
	consume(0, 100)
	waitUntil(t, 60*time.Second, "warm-up acknowledged", allAcked)
	debug.FreeOSMemory()
	print("ready")
	await("load")

	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for base, sent := outageFirstID, 0; time.Since(start) < c.Load; base, sent = base+c.Batch, sent+c.Batch {
		time.Sleep(time.Until(start.Add(time.Duration(float64(sent) / c.Rate * float64(time.Second)))))
		consume(base, c.Batch)
		select {
		case <-tick.C:
			stats()
		default:
		}
	}
	print("loaded %d", time.Since(start).Nanoseconds())
	stats()
	if c.HeapProfile != "" {
		writeHeapProfile(t, c.HeapProfile)
	}
	await("drain")
	for !allAcked() {
		select {
		case <-tick.C:
			stats()
		default:
			time.Sleep(5 * time.Millisecond)
		}
	}
	stats()
	// The exporter's own counters, once its monitor has seen the last
	// eviction (nothing is appended any more).
	var frames, rows float64
	waitUntil(t, 30*time.Second, "the eviction counters caught up", func() bool {
		st := e.queue.Stats()
		frames, _ = metricTotal(t, tt, "otelcol_exporter_questdb_frames_evicted")
		rows, _ = metricTotal(t, tt, "otelcol_exporter_questdb_rows_evicted")
		return frames == float64(st.FramesEvicted) && rows == float64(st.ItemsEvicted)
	})
	print("evicted %d %d", int64(frames), int64(rows))
	print("drained")
}

// writeHeapProfile writes the heap profile, after a collection, to path.
func writeHeapProfile(t *testing.T, path string) {
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		t.Fatal(err)
	}
}

// outageVariant is one run of TestCardinalityOutage.
type outageVariant struct {
	name         string
	sf           bool
	capBytes     int64
	segmentBytes int64
	load         time.Duration
	// rssBound is how far the child's RSS may rise above idle during the
	// outage.
	rssBound int64
	// flatBound is how much more the second half of the outage may peak
	// than the first.
	flatBound int64
}

// TestCardinalityOutage is the proof of issue #10's first bullet: with the
// QWP stand-in down, at least 10,000 new series per second are sent (a
// rate below 5,000 fails: the proof would not show what it claims) with
// on_full: evict_oldest, and
//   - the child's RSS rises at most rssBound above idle and is flat over
//     the second half of the outage;
//   - in SF mode the slot's blocks on disk (st_blocks × 512 summed over
//     sf_dir, every 100 ms) never exceed sf_max_total_bytes + one segment;
//   - when the stand-in returns, every point not evicted lands exactly once,
//     the evicted ones are the oldest, every appended frame is acknowledged
//     or counted as evicted, and the points that did not land are exactly
//     the rows the exporter counted (rows_evicted, Stats.ItemsEvicted) and
//     logged (the last evicted_rows_total, at its shutdown).
//
// Bounds on the RSS above idle: SF mode 64 MiB (the queue is on disk; what
// remains is the encoder, the current dictionary generation and GC
// headroom). Memory-only mode sf_max_total_bytes + 16 MiB: the queue admits
// frames, dictionary and the encoder's index of the generation being
// written up to half the cap less two segments (the queue's buffers it
// does not count), and GOGC=100 lets the heap grow to twice that before a
// collection (README, Sizing); the 16 MiB margin is the runtime, the
// encoder's and writer's buffers and the connection, with their GC
// headroom.
func TestCardinalityOutage(t *testing.T) {
	long := os.Getenv("QDB_LONG") == "1"
	capBytes, segBytes, load := int64(16*mib), int64(1*mib), 24*time.Second
	if long {
		capBytes, segBytes, load = 64*mib, 4*mib, 10*time.Minute
	}
	variants := []outageVariant{
		{name: "sf", sf: true, capBytes: capBytes, segmentBytes: segBytes, load: load, rssBound: 64 * mib, flatBound: 8 * mib},
		{name: "memory", capBytes: capBytes, segmentBytes: segBytes, load: load, rssBound: capBytes + 16*mib, flatBound: 8 * mib},
	}
	bin := outageChildBinary(t)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) { runCardinalityOutage(t, bin, v) })
	}
}

// outageChildBinary returns a test binary of this package built without
// the race detector: this one when it is such a build, else one built by
// `go test -c` into a temporary directory.
func outageChildBinary(t *testing.T) string {
	t.Helper()
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build info: cannot tell whether this is a race build")
	}
	race := slices.ContainsFunc(bi.Settings, func(s debug.BuildSetting) bool { return s.Key == "-race" && s.Value == "true" })
	if !race {
		return os.Args[0]
	}
	bin := filepath.Join(t.TempDir(), "outage-child.test")
	start := time.Now()
	out, err := exec.Command("go", "test", "-c", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("building the child without -race: %v\n%s", err, out)
	}
	t.Logf("race build: the child was built without -race in %v", time.Since(start).Round(time.Second))
	return bin
}

// outageRun is what the parent learns from one child.
type outageRun struct {
	mu       sync.Mutex
	acked    [][2]int // [base, n] of calls that returned nil, in order
	failed   []string
	bad      []string
	stats    sfqueue.Stats
	rawStats string // the last stats line as printed
	// The child's frames_evicted and rows_evicted counters after the drain.
	counterFrames, counterRows int64
	loadTook                   time.Duration
	events                     map[string]chan struct{} // "ready", "loaded", "drained"
}

func (r *outageRun) read(rd io.Reader) {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		word, rest, _ := strings.Cut(line, " ")
		r.mu.Lock()
		switch word {
		case "ok":
			var base, n int
			if _, err := fmt.Sscanf(rest, "%d %d", &base, &n); err != nil {
				r.bad = append(r.bad, line)
			} else {
				r.acked = append(r.acked, [2]int{base, n})
			}
		case "err":
			r.failed = append(r.failed, rest)
		case "evicted":
			if _, err := fmt.Sscanf(rest, "%d %d", &r.counterFrames, &r.counterRows); err != nil {
				r.bad = append(r.bad, line)
			}
		case "stats":
			if err := json.Unmarshal([]byte(rest), &r.stats); err != nil {
				r.bad = append(r.bad, line)
			}
			r.rawStats = rest
		case "loaded":
			ns, _ := strconv.ParseInt(rest, 10, 64)
			r.loadTook = time.Duration(ns)
			fallthrough
		case "ready", "drained":
			close(r.events[word])
		case "PASS": // the test binary's own last line
		default:
			r.bad = append(r.bad, line)
		}
		r.mu.Unlock()
	}
}

// rssSample is one reading of the child's VmRSS.
type rssSample struct {
	at  time.Time
	rss int64
}

// sampler reads the child's RSS and the slot's blocks on disk every 100 ms.
type sampler struct {
	mu      sync.Mutex
	rss     []rssSample
	maxDisk int64
	maxDict int64 // dictionary files' share of maxDisk's sample
	stop    chan struct{}
	done    chan struct{}
}

func startSampler(pid int, dir string) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			rss := vmRSS(pid)
			var disk, dict int64
			if dir != "" {
				disk, dict = slotBlocks(dir)
			}
			s.mu.Lock()
			if rss > 0 {
				s.rss = append(s.rss, rssSample{time.Now(), rss})
			}
			if disk > s.maxDisk {
				s.maxDisk, s.maxDict = disk, dict
			}
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *sampler) end() {
	close(s.stop)
	<-s.done
}

// peak is the highest RSS sampled in [from, to).
func (s *sampler) peak(from, to time.Time) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var p int64
	for _, x := range s.rss {
		if !x.at.Before(from) && x.at.Before(to) {
			p = max(p, x.rss)
		}
	}
	return p
}

// vmRSS is the VmRSS of process pid in bytes, 0 if it cannot be read.
func vmRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// slotBlocks sums st_blocks × 512 over every file under dir, and over those
// of them that hold the symbol dictionary (named *symbol-dict*).
func slotBlocks(dir string) (total, dict int64) {
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file deleted while walking
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			b := st.Blocks * 512
			total += b
			if strings.Contains(d.Name(), "symbol-dict") {
				dict += b
			}
		}
		return nil
	})
	return total, dict
}

func runCardinalityOutage(t *testing.T, bin string, v outageVariant) {
	srv := newServer(t, qwptest.Options{})
	spec := outageChild{
		Endpoint: srv.Addr(), CapBytes: v.capBytes, SegmentBytes: v.segmentBytes,
		Rate: 12_000, Batch: 500, Load: v.load, Lifetime: v.load + 10*time.Minute,
	}
	if v.sf {
		spec.SFDir = t.TempDir()
	}
	if dir := os.Getenv("QDB_OUTAGE_PROFILE"); dir != "" {
		spec.HeapProfile = filepath.Join(dir, v.name+".heap")
		t.Logf("the child writes its heap profile at the outage's end to %s", spec.HeapProfile)
	}
	js, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestCardinalityOutageChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), outageChildEnv+"="+string(js))
	stderr := &tailBuffer{max: 1 << 20}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	run := &outageRun{events: map[string]chan struct{}{
		"ready": make(chan struct{}), "loaded": make(chan struct{}), "drained": make(chan struct{}),
	}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readDone := make(chan struct{})
	go func() { defer close(readDone); run.read(stdout) }()
	exited := make(chan error, 1)
	go func() { <-readDone; exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-readDone
		if t.Failed() {
			t.Logf("child's stderr:\n%s", stderr)
		}
	})
	await := func(event string, within time.Duration) {
		t.Helper()
		select {
		case <-run.events[event]:
		case err := <-exited:
			t.Fatalf("the child exited (%v) before %q", err, event)
		case <-time.After(within):
			t.Fatalf("the child did not report %q within %v", event, within)
		}
	}
	tell := func(word string) {
		t.Helper()
		if _, err := fmt.Fprintln(stdin, word); err != nil {
			t.Fatal(err)
		}
	}

	await("ready", 3*time.Minute)
	smp := startSampler(cmd.Process.Pid, spec.SFDir)
	time.Sleep(time.Second)
	idle := smp.peak(time.Time{}, time.Now())
	srv.Outage(24 * time.Hour)
	loadStart := time.Now()
	tell("load")
	await("loaded", v.load+5*time.Minute)
	loadEnd := time.Now()
	run.mu.Lock()
	atOutageEnd, rawAtOutageEnd := run.stats, run.rawStats
	run.mu.Unlock()
	rssEnd := vmRSS(cmd.Process.Pid)
	var diskEnd, dictEnd int64
	if v.sf {
		diskEnd, dictEnd = slotBlocks(spec.SFDir)
	}
	peak := smp.peak(loadStart, loadEnd)
	half := loadStart.Add(loadEnd.Sub(loadStart) / 2)
	firstHalf, secondHalf := smp.peak(loadStart, half), smp.peak(half, loadEnd)
	if rows := srv.RowCount("otel_metrics_gauge"); rows != 100 {
		t.Errorf("%d rows on the server at the outage's end, want the warm-up's 100", rows)
	}

	srv.Outage(0)
	drainStart := time.Now()
	tell("drain")
	await("drained", 5*time.Minute)
	drainTook := time.Since(drainStart)
	smp.end()
	_ = stdin.Close()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("child: %v", err)
		}
	case <-time.After(time.Minute):
		t.Error("the child did not exit within a minute of the drain")
	}

	run.mu.Lock()
	defer run.mu.Unlock()
	if len(run.bad) > 0 || len(run.failed) > 0 {
		t.Errorf("child printed %d unparsable lines (first %q) and %d failed calls (first %q)",
			len(run.bad), first(run.bad), len(run.failed), first(run.failed))
	}
	points := 0
	for _, r := range run.acked {
		if r[0] >= outageFirstID {
			points += r[1]
		}
	}
	rate := float64(points) / run.loadTook.Seconds()
	final := run.stats
	evicted := checkOutageRows(t, srv, run.acked)
	t.Logf("%s: %d new series in %v = %.0f/s (load average %s); cap %d MiB, segment %d MiB; "+
		"RSS idle %.1f MiB, peak %.1f MiB during the outage (%+.1f MiB, bound %d MiB), first-half peak %.1f MiB, second-half peak %.1f MiB, %.1f MiB at its end; "+
		"queue at the outage's end %.1f MiB in %d segments, %d frames evicted (%.1f MiB); disk peak %.1f MiB of which dictionary files %.1f MiB (bound %.1f MiB), at the outage's end %.1f MiB of which dictionary files %.1f MiB; "+
		"drain %v: %d points landed, %d evicted (the oldest)",
		v.name, points, run.loadTook.Round(time.Millisecond), rate, loadAverage(), v.capBytes/mib, v.segmentBytes/mib,
		mb(idle), mb(peak), mb(peak-idle), v.rssBound/mib, mb(firstHalf), mb(secondHalf), mb(rssEnd),
		mb(atOutageEnd.UsedBytes), atOutageEnd.Segments, atOutageEnd.FramesEvicted, mb(int64(atOutageEnd.BytesEvicted)),
		mb(smp.maxDisk), mb(smp.maxDict), mb(v.capBytes+v.segmentBytes), mb(diskEnd), mb(dictEnd),
		drainTook.Round(time.Millisecond), points-evicted, evicted)
	t.Logf("%s: queue statistics at the outage's end: %s", v.name, rawAtOutageEnd)

	if rate < 5000 {
		t.Errorf("%.0f new series per second, want at least 5,000 (10,000 asked): the outage was not the one the proof claims", rate)
	}
	if idle == 0 || peak == 0 {
		t.Fatalf("no RSS sampled (idle %d, peak %d)", idle, peak)
	}
	if peak-idle > v.rssBound {
		t.Errorf("RSS rose %.1f MiB above idle during the outage (%.1f -> %.1f MiB), bound %d MiB", mb(peak-idle), mb(idle), mb(peak), v.rssBound/mib)
	}
	if secondHalf-firstHalf > v.flatBound {
		t.Errorf("RSS not flat over the outage's second half: it peaked at %.1f MiB after %.1f MiB in the first half (+%.1f MiB, bound %d MiB)",
			mb(secondHalf), mb(firstHalf), mb(secondHalf-firstHalf), v.flatBound/mib)
	}
	if v.sf && smp.maxDisk > v.capBytes+v.segmentBytes {
		t.Errorf("the slot took %.1f MiB on disk (dictionary files %.1f MiB), above sf_max_total_bytes + one segment (%.1f MiB)",
			mb(smp.maxDisk), mb(smp.maxDict), mb(v.capBytes+v.segmentBytes))
	}
	if share := v.capBytes/2 - 2*v.segmentBytes; !v.sf && (atOutageEnd.IndexBytes == 0 || atOutageEnd.CapacityBytes != share) {
		t.Errorf("memory-only mode: the encoder's index counts %d bytes in a queue cap of %d, want some in %d (half the cap less two segments)",
			atOutageEnd.IndexBytes, atOutageEnd.CapacityBytes, share)
	}
	if atOutageEnd.FramesEvicted == 0 || evicted == 0 {
		t.Errorf("nothing was evicted (%d frames, %d points): the outage did not reach the cap", atOutageEnd.FramesEvicted, evicted)
	}
	if final.FramesAppended != final.FramesAcked+final.FramesEvicted {
		t.Errorf("frames: %d appended, %d acknowledged + %d evicted: some are unaccounted for", final.FramesAppended, final.FramesAcked, final.FramesEvicted)
	}
	if log := stderr.String(); !strings.Contains(log, "evicting the oldest records") || !strings.Contains(log, "evicted_frames_total") {
		t.Errorf("the eviction was not logged; the child's log:\n%s", log)
	}
	// Every accepted point that did not land is counted and logged, exactly.
	if final.ItemsEvicted != uint64(evicted) || final.FramesEvictedItemsUnknown != 0 {
		t.Errorf("the queue counted %d rows evicted (%d frames of unknown rows); %d accepted points did not land",
			final.ItemsEvicted, final.FramesEvictedItemsUnknown, evicted)
	}
	if run.counterRows != int64(evicted) || run.counterFrames != int64(final.FramesEvicted) {
		t.Errorf("rows_evicted %d, frames_evicted %d; want %d rows (the accepted points that did not land) and %d frames",
			run.counterRows, run.counterFrames, evicted, final.FramesEvicted)
	}
	if logged := lastLoggedTotal(stderr.String(), "evicted_rows_total"); logged != int64(evicted) {
		t.Errorf("the last evicted_rows_total logged is %d, want %d (the accepted points that did not land)", logged, evicted)
	}
}

// lastLoggedTotal is the last value of the numeric field key in a console-
// encoded log (-1: never logged).
func lastLoggedTotal(log, key string) int64 {
	v := int64(-1)
	for rest := log; ; {
		i := strings.Index(rest, `"`+key+`": `)
		if i < 0 {
			return v
		}
		rest = rest[i+len(key)+4:]
		end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
		if end < 0 {
			end = len(rest)
		}
		v, _ = strconv.ParseInt(rest[:end], 10, 64)
	}
}

// checkOutageRows checks the gauge table against the calls that returned
// nil: the warm-up's points and every outage point from the oldest one
// kept are there exactly once, nothing else is; the outage's points that
// are missing must be its oldest (evicted). It returns how many those are.
func checkOutageRows(t *testing.T, srv *qwptest.Server, acked [][2]int) (evicted int) {
	t.Helper()
	ids := serverIDs(t, srv, "otel_metrics_gauge")
	want := map[int]bool{}
	kept := false
	for _, r := range acked {
		for id := r[0]; id < r[0]+r[1]; id++ {
			want[id] = true
			switch n := ids[id]; {
			case n > 1:
				t.Fatalf("point %d stored %d times", id, n)
			case n == 1:
				kept = kept || id >= outageFirstID
			case id < outageFirstID:
				t.Fatalf("warm-up point %d, acknowledged before the outage, is not on the server", id)
			case kept:
				t.Fatalf("point %d is missing after a newer point was kept: eviction takes the oldest frames only", id)
			default:
				evicted++
			}
		}
	}
	for id := range ids {
		if !want[id] {
			t.Fatalf("point %d is on the server but no consume call returned nil for it", id)
		}
	}
	return evicted
}

func mb(b int64) float64 { return float64(b) / mib }

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// loadAverage is the first field of /proc/loadavg: rates depend on it.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	return strings.Fields(string(b))[0]
}

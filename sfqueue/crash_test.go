package sfqueue_test

// Crash proof: a child process (this test binary re-executed) appends frames
// from several goroutines and reports every FSN whose Append returned; the
// parent SIGKILLs it at a random moment, reopens the slot and checks that
// recovery returns exactly what was promised. Repeated many times on one slot,
// cycling the durability modes.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// Environment of a crash child. envCrashChild selects child mode (its value
// is the sf_dir); the others carry the run's parameters.
const (
	envCrashChild      = "SFQUEUE_CRASH_CHILD_DIR"
	envCrashDurability = "SFQUEUE_CRASH_CHILD_DURABILITY"
	envCrashRun        = "SFQUEUE_CRASH_CHILD_RUN"
	envCrashKills      = "SFQUEUE_CRASH_KILLS"
)

const (
	crashSenderID   = "crash"
	crashSegment    = 128 << 10
	crashAppenders  = 4
	crashAckLag     = 100 // the child acks up to PublishedFSN-crashAckLag
	crashShortKills = 10
	crashLongKills  = 40
	// The report pipe is the child's fd 3 (ExtraFiles[0]).
	crashReportFD = 3
)

// ---- self-describing payloads, shared by the crash, fuzz and bench tests ----

// A test payload is: gen u32 | size u32 | maxSym i64 | id u64 | pattern.
// The pattern is a pseudo-random stream seeded by id, so any payload can be
// verified on its own, without knowing which run wrote it.
const payloadHeader = 24

func makePayload(id uint64, size int, gen uint32, maxSym int64) []byte {
	return appendPayload(nil, id, size, gen, maxSym)
}

func appendPayload(dst []byte, id uint64, size int, gen uint32, maxSym int64) []byte {
	if size < payloadHeader {
		size = payloadHeader
	}
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, gen)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(size))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(maxSym))
	dst = binary.LittleEndian.AppendUint64(dst, id)
	s := id*0x9E3779B97F4A7C15 + 1
	for len(dst)-start < size {
		s += 0x9E3779B97F4A7C15
		z := s
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		z ^= z >> 31
		for i := 0; i < 8 && len(dst)-start < size; i++ {
			dst = append(dst, byte(z>>(8*i)))
		}
	}
	return dst
}

// checkPayload verifies a payload against its own header and returns its id.
func checkPayload(p []byte) (id uint64, err error) {
	if len(p) < payloadHeader {
		return 0, fmt.Errorf("payload of %d bytes is shorter than the %d-byte test header", len(p), payloadHeader)
	}
	size := binary.LittleEndian.Uint32(p[4:])
	if int(size) != len(p) {
		return 0, fmt.Errorf("payload says %d bytes, has %d", size, len(p))
	}
	gen, maxSym := payloadSymbolUse(p)
	id = binary.LittleEndian.Uint64(p[16:])
	if want := makePayload(id, len(p), gen, maxSym); !bytes.Equal(p, want) {
		return id, fmt.Errorf("payload id %d (%d bytes) differs from its pattern at byte %d", id, len(p), firstDiff(p, want))
	}
	return id, nil
}

// payloadSymbolUse is the Options.SymbolUse of test payloads.
func payloadSymbolUse(p []byte) (gen uint32, maxID int64) {
	if len(p) < payloadHeader {
		return 0, -1
	}
	return binary.LittleEndian.Uint32(p), int64(binary.LittleEndian.Uint64(p[8:]))
}

// symbolEntry is the dictionary entry with id in generation gen.
func symbolEntry(gen uint32, id int) []byte {
	return []byte(fmt.Sprintf("sym-%d-%d", gen, id))
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// crashPayloadSize draws mostly small payloads, some medium, a few large.
func crashPayloadSize(r *rand.Rand) int {
	switch x := r.IntN(100); {
	case x < 70:
		return payloadHeader + r.IntN(500)
	case x < 95:
		return 512 + r.IntN(8<<10)
	default:
		return 8<<10 + r.IntN(24<<10)
	}
}

// ---- the workload (child side) ----

// crashWorkload appends frames from crashAppenders goroutines and reads and
// acks them from one consumer until ctx ends (or each appender reached
// perAppender frames, if > 0).
// Every line goes to report in one Write, after the call it describes:
//
//	A <fsn> <id>   Append/AppendBatch returned fsn for payload id
//	K <fsn>        written BEFORE Ack(fsn), so the parent knows an upper bound
//
// Symbols: before a frame uses new symbol ids, AddSymbols persists them.
type crashWorkload struct {
	q           *sfqueue.Queue
	run         int
	perAppender int
	report      io.Writer

	repMu sync.Mutex // one report line per Write, in call order per goroutine

	symMu   sync.Mutex
	symNext int // next symbol id of generation 0
}

func (w *crashWorkload) line(format string, args ...any) error {
	w.repMu.Lock()
	defer w.repMu.Unlock()
	_, err := fmt.Fprintf(w.report, format, args...)
	return err
}

// newSymbols persists k new symbols and returns the highest id in use.
func (w *crashWorkload) newSymbols(k int) (int64, error) {
	w.symMu.Lock()
	defer w.symMu.Unlock()
	entries := make([][]byte, k)
	for i := range entries {
		entries[i] = symbolEntry(0, w.symNext+i)
	}
	if err := w.q.AddSymbols(0, w.symNext, entries); err != nil {
		return 0, fmt.Errorf("AddSymbols(0, %d, %d entries): %w", w.symNext, k, err)
	}
	w.symNext += k
	return int64(w.symNext - 1), nil
}

func (w *crashWorkload) usedSymbols(r *rand.Rand) (int64, error) {
	switch x := r.IntN(10); {
	case x == 0:
		return w.newSymbols(1 + r.IntN(3))
	case x < 5:
		w.symMu.Lock()
		defer w.symMu.Unlock()
		return int64(w.symNext - 1), nil // may be -1: no symbols yet
	}
	return -1, nil
}

func (w *crashWorkload) appender(ctx context.Context, g int) error {
	r := rand.New(rand.NewPCG(uint64(w.run), uint64(g)))
	for seq := uint64(0); w.perAppender == 0 || seq < uint64(w.perAppender); {
		if ctx.Err() != nil {
			return nil
		}
		// Goroutine 0 appends batches of 1..4; the others single frames.
		n := 1
		if g == 0 {
			n = 1 + r.IntN(4)
			if w.perAppender > 0 {
				n = min(n, w.perAppender-int(seq))
			}
		}
		maxSym, err := w.usedSymbols(r)
		if err != nil {
			return err
		}
		ids := make([]uint64, n)
		payloads := make([][]byte, n)
		items := make([]uint32, n)
		for i := range payloads {
			ids[i] = uint64(w.run)<<40 | uint64(g)<<32 | seq
			seq++
			payloads[i] = makePayload(ids[i], crashPayloadSize(r), 0, maxSym)
			items[i] = crashItems(ids[i])
		}
		last, err := w.q.AppendBatchItems(ctx, payloads, items)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("appender %d: %w", g, err)
		}
		for i, id := range ids {
			if err := w.line("A %d %d\n", last-uint64(n-1-i), id); err != nil {
				return err
			}
		}
	}
	return nil
}

// crashItems is the item count appended with payload id, so that the
// parent can check every recovered frame's count (segment format 2).
func crashItems(id uint64) uint32 { return uint32(id%997) + 1 }

// consumer reads every frame through a Cursor, as the I/O loop does, checks
// FSN order and each payload's size field (the full pattern check is the
// parent's, after the kill: here it would starve the appenders of CPU), and
// acks crashAckLag frames behind what it read.
func (w *crashWorkload) consumer(ctx context.Context) error {
	c := w.q.NewCursor()
	next := w.q.AckedFSN() + 1
	c.Seek(next)
	var acked uint64
	for {
		fsn, p, ok, err := c.Next()
		if err != nil {
			return fmt.Errorf("consumer at FSN %d: %w", next, err)
		}
		if !ok {
			select {
			case <-ctx.Done():
				return nil
			case <-w.q.Published():
			}
			continue
		}
		if fsn != next {
			return fmt.Errorf("consumer read FSN %d, want %d", fsn, next)
		}
		if len(p) < payloadHeader || binary.LittleEndian.Uint32(p[4:]) != uint32(len(p)) {
			return fmt.Errorf("consumer read FSN %d: %d bytes whose test header does not match", fsn, len(p))
		}
		next++
		if fsn > crashAckLag && fsn-crashAckLag >= acked+16 {
			acked = fsn - crashAckLag
			if err := w.line("K %d\n", acked); err != nil {
				return err
			}
			w.q.Ack(acked)
		}
	}
}

// runAll starts the goroutines and returns when the appenders are done (bounded
// mode) or ctx ends; the first error wins.
func (w *crashWorkload) runAll(ctx context.Context) error {
	r, err := w.q.OpenSymbols(0)
	if err != nil {
		return err
	}
	w.symNext = r.Len()
	r.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, crashAppenders+1)
	var appenders, consumers sync.WaitGroup
	for g := range crashAppenders {
		appenders.Go(func() { errs <- w.appender(ctx, g) })
	}
	consumers.Go(func() { errs <- w.consumer(ctx) })
	appenders.Wait()
	cancel()
	consumers.Wait()
	close(errs)
	var first error
	for err := range errs {
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

func crashOptions(dir string, d sfqueue.Durability) sfqueue.Options {
	return sfqueue.Options{
		Dir:             dir,
		SenderID:        crashSenderID,
		MaxSegmentBytes: crashSegment,
		MaxTotalBytes:   64 << 20,
		Durability:      d,
		SyncInterval:    5 * time.Millisecond,
		SymbolUse:       payloadSymbolUse,
	}
}

// crashChild is the body of a child process: open, report readiness, append
// until killed. It never returns normally.
func crashChild(t *testing.T, dir string) {
	report := os.NewFile(crashReportFD, "crash-report")
	d, err := sfqueue.ParseDurability(os.Getenv(envCrashDurability))
	if err != nil {
		t.Fatal(err)
	}
	run, err := strconv.Atoi(os.Getenv(envCrashRun))
	if err != nil {
		t.Fatalf("%s=%q: %v", envCrashRun, os.Getenv(envCrashRun), err)
	}
	q, err := sfqueue.Open(crashOptions(dir, d))
	if err != nil {
		t.Fatalf("child run %d: Open: %v", run, err)
	}
	if _, err := fmt.Fprintf(report, "R %d\n", q.PublishedFSN()); err != nil {
		t.Fatal(err)
	}
	w := &crashWorkload{q: q, run: run, report: report}
	// The parent kills us long before this; the bound only stops an orphan.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = w.runAll(ctx)
	t.Fatalf("child run %d was not killed within 2 minutes (workload error: %v)", run, err)
}

// ---- the checker (parent side) ----

// crashLedger is what the parent knows about the slot across all runs.
type crashLedger struct {
	frames      map[uint64]uint64 // fsn -> payload id: reported or seen by a recovery
	maxReported uint64            // highest FSN whose Append returned
	maxAckSent  uint64            // highest FSN the child may have acked
	lastAcked   uint64            // AckedFSN seen by the previous recovery
	lastPub     uint64            // PublishedFSN seen by the previous recovery
	unreported  int               // frames recovered that no report line named
}

// absorb parses the child's report lines into the ledger.
func (l *crashLedger) absorb(lines []string) error {
	for _, ln := range lines {
		f := strings.Fields(ln)
		switch {
		case len(f) == 3 && f[0] == "A":
			fsn, err1 := strconv.ParseUint(f[1], 10, 64)
			id, err2 := strconv.ParseUint(f[2], 10, 64)
			if err := errors.Join(err1, err2); err != nil {
				return fmt.Errorf("report line %q: %w", ln, err)
			}
			if old, dup := l.frames[fsn]; dup && old != id {
				return fmt.Errorf("FSN %d reported for payload %d, but it already held payload %d: an FSN was reused", fsn, id, old)
			}
			l.frames[fsn] = id
			l.maxReported = max(l.maxReported, fsn)
		case len(f) == 2 && f[0] == "K":
			fsn, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return fmt.Errorf("report line %q: %w", ln, err)
			}
			l.maxAckSent = max(l.maxAckSent, fsn)
		case len(f) == 2 && f[0] == "R":
			// The child's own recovery must find what the parent's found.
			if pub, err := strconv.ParseUint(f[1], 10, 64); err != nil || pub != l.lastPub {
				return fmt.Errorf("child recovered PublishedFSN %s, the previous recovery found %d", f[1], l.lastPub)
			}
		default:
			return fmt.Errorf("malformed report line %q", ln)
		}
	}
	return nil
}

// verify opens the slot and checks recovery against the ledger: every frame
// above the recovered ack watermark that an Append returned is present with
// its payload, FSNs run without gaps up to PublishedFSN, every recovered frame
// is a valid, unique payload whose symbols the dictionary backs.
func (l *crashLedger) verify(dir string) error {
	q, err := sfqueue.Open(crashOptions(dir, sfqueue.DurabilityMemory))
	if err != nil {
		return fmt.Errorf("reopen after kill: %w", err)
	}
	err = l.check(q)
	if err == nil {
		err = checkCrashItems(dir, q.AckedFSN())
	}
	return errors.Join(err, q.Close())
}

// checkCrashItems reads the recovered slot's frames above acked with the
// scan and checks that each carries the item count appended with it.
func checkCrashItems(dir string, acked uint64) error {
	o := crashOptions(dir, sfqueue.DurabilityMemory)
	scan, err := sfqueue.ScanSlot(filepath.Join(o.Dir, o.SenderID))
	if err != nil {
		return err
	}
	return scan.EachFrame(func(fsn uint64, _ string, _ int64, p []byte) error {
		if fsn <= acked {
			return nil
		}
		id, err := checkPayload(p)
		if err != nil {
			return fmt.Errorf("FSN %d: %w", fsn, err)
		}
		if n, ok := scan.FrameItems(fsn); !ok || n != crashItems(id) {
			return fmt.Errorf("FSN %d (payload %d) carries %d items (known %v), appended with %d", fsn, id, n, ok, crashItems(id))
		}
		return nil
	})
}

func (l *crashLedger) check(q *sfqueue.Queue) error {
	rec := q.Recovery()
	if rec.Unreplayable != nil {
		return fmt.Errorf("recovery after SIGKILL set the slot aside: %v", rec.Unreplayable)
	}
	acked, pub := q.AckedFSN(), q.PublishedFSN()
	switch {
	case acked > l.maxAckSent:
		return fmt.Errorf("recovered AckedFSN %d is past the highest FSN ever acked (%d): unacked frames would be skipped", acked, l.maxAckSent)
	case acked < l.lastAcked:
		return fmt.Errorf("recovered AckedFSN %d went back from %d seen by the previous recovery (torn .ack-watermark?)", acked, l.lastAcked)
	case pub < l.maxReported:
		return fmt.Errorf("recovered PublishedFSN %d is below FSN %d whose Append returned", pub, l.maxReported)
	case acked > pub:
		return fmt.Errorf("recovered AckedFSN %d is above PublishedFSN %d", acked, pub)
	}
	dict, err := q.OpenSymbols(0)
	if err != nil {
		return err
	}
	defer dict.Close()
	for i := 0; ; i++ {
		e, err := dict.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("recovered symbol %d: %w", i, err)
		}
		if want := symbolEntry(0, i); !bytes.Equal(e, want) {
			return fmt.Errorf("recovered symbol %d is %q, want %q", i, e, want)
		}
	}
	c := q.NewCursor()
	c.Seek(acked + 1)
	seen := make(map[uint64]uint64)
	next := acked + 1
	for {
		fsn, p, ok, err := c.Next()
		if err != nil {
			return fmt.Errorf("cursor at FSN %d: %w", next, err)
		}
		if !ok {
			break
		}
		if fsn != next {
			return fmt.Errorf("cursor returned FSN %d, want %d (FSNs must be continuous)", fsn, next)
		}
		id, err := checkPayload(p)
		if err != nil {
			return fmt.Errorf("FSN %d: %w", fsn, err)
		}
		if prev, dup := seen[id]; dup {
			return fmt.Errorf("payload %d recovered twice, at FSN %d and %d", id, prev, fsn)
		}
		seen[id] = fsn
		if want, known := l.frames[fsn]; known && want != id {
			return fmt.Errorf("FSN %d holds payload %d, but Append returned it for payload %d", fsn, id, want)
		} else if !known {
			l.unreported++ // written, but killed before the report line went out
			l.frames[fsn] = id
		}
		if _, maxSym := payloadSymbolUse(p); maxSym >= int64(dict.Len()) {
			return fmt.Errorf("FSN %d uses symbol %d, the recovered dictionary has %d entries", fsn, maxSym, dict.Len())
		}
		next++
	}
	if next-1 != pub {
		return fmt.Errorf("cursor stopped after FSN %d, PublishedFSN is %d", next-1, pub)
	}
	for fsn := range l.frames {
		if fsn <= acked {
			delete(l.frames, fsn)
		}
	}
	l.lastAcked, l.lastPub = acked, pub
	return nil
}

// ---- the process driver ----

// crashRun is one child process.
type crashRun struct {
	cmd    *exec.Cmd
	out    bytes.Buffer // child's stdout+stderr, for diagnostics
	lines  []string
	ready  chan struct{}
	read   chan error
	exited chan error
}

func startCrashChild(t *testing.T, dir string, run int, d sfqueue.Durability) *crashRun {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cr := &crashRun{ready: make(chan struct{}), read: make(chan error, 1), exited: make(chan error, 1)}
	cr.cmd = exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cr.cmd.Env = append(os.Environ(),
		envCrashChild+"="+dir,
		envCrashDurability+"="+d.String(),
		envCrashRun+"="+strconv.Itoa(run))
	cr.cmd.ExtraFiles = []*os.File{w}
	cr.cmd.Stdout = &cr.out
	cr.cmd.Stderr = &cr.out
	err = cr.cmd.Start()
	w.Close() // the child holds the only write end now
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	go func() {
		defer r.Close()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			cr.lines = append(cr.lines, sc.Text())
			if len(cr.lines) == 1 {
				close(cr.ready)
			}
		}
		cr.read <- sc.Err()
	}()
	go func() { cr.exited <- cr.cmd.Wait() }()
	return cr
}

// killAfter SIGKILLs the child after delay (counted from readiness unless
// early), waits for it and its report stream, and returns the report lines.
func (cr *crashRun) killAfter(early bool, delay time.Duration) ([]string, error) {
	if !early {
		select {
		case <-cr.ready:
		case err := <-cr.exited:
			<-cr.read
			return nil, fmt.Errorf("child exited before reporting readiness (%v):\n%s", err, cr.out.String())
		case <-time.After(60 * time.Second):
			cr.cmd.Process.Kill()
			<-cr.exited
			<-cr.read
			return nil, fmt.Errorf("child not ready after 60 s:\n%s", cr.out.String())
		}
	}
	select {
	case err := <-cr.exited:
		<-cr.read
		return nil, fmt.Errorf("child exited on its own (%v):\n%s", err, cr.out.String())
	case <-time.After(delay):
	}
	if err := cr.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return nil, err
	}
	err := <-cr.exited
	if rerr := <-cr.read; rerr != nil {
		return nil, rerr
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		return nil, fmt.Errorf("child ended with %v, not SIGKILL:\n%s", err, cr.out.String())
	}
	return cr.lines, nil
}

func crashKills(t *testing.T) int {
	if s := os.Getenv(envCrashKills); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number of kills", envCrashKills, s)
		}
		return n
	}
	if testing.Short() {
		return crashShortKills
	}
	return crashLongKills
}

// TestCrashKill9 kills an appending child process with SIGKILL at random
// moments, many times on one slot (10 with -short, 40 without, N with
// SFQUEUE_CRASH_KILLS=N), and after each kill checks that recovery returns
// exactly the frames whose Append returned.
func TestCrashKill9(t *testing.T) {
	dir := t.TempDir()
	kills := crashKills(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("kills=%d seed=%d", kills, seed)
	r := rand.New(rand.NewPCG(seed, 0))
	modes := []sfqueue.Durability{sfqueue.DurabilityMemory, sfqueue.DurabilityPeriodic, sfqueue.DurabilityFlush}
	l := &crashLedger{frames: make(map[uint64]uint64)}
	var totalLines int
	for run := range kills {
		d := modes[run%len(modes)]
		// One kill in seven lands during start-up or recovery.
		early := r.IntN(7) == 0
		delay := time.Duration(r.Int64N(int64(250 * time.Millisecond)))
		if early {
			delay = time.Duration(r.Int64N(int64(80 * time.Millisecond)))
		}
		cr := startCrashChild(t, dir, run, d)
		lines, err := cr.killAfter(early, delay)
		if err != nil {
			t.Fatalf("run %d (%v): %v", run, d, err)
		}
		totalLines += len(lines)
		if err := l.absorb(lines); err != nil {
			t.Fatalf("run %d (%v): %v", run, d, err)
		}
		if err := l.verify(dir); err != nil {
			t.Fatalf("run %d (%v, early=%v, delay=%v): %v", run, d, early, delay, err)
		}
	}
	t.Logf("%d report lines, highest FSN %d, acked %d, %d frames recovered without a report line (written, report lost to the kill)",
		totalLines, l.maxReported, l.lastAcked, l.unreported)
	if l.maxReported == 0 {
		t.Fatalf("no child appended anything in %d runs: the test proved nothing", kills)
	}
}

// TestCrashChild is the child process of TestCrashKill9 when envCrashChild is
// set. Run normally, it runs the same workload in-process to a fixed count in
// each durability mode, closes cleanly, and checks the reopened slot with the
// same checker: then every frame must be reported and none may be missing.
func TestCrashChild(t *testing.T) {
	if dir := os.Getenv(envCrashChild); dir != "" {
		crashChild(t, dir)
		return
	}
	for _, d := range []sfqueue.Durability{sfqueue.DurabilityMemory, sfqueue.DurabilityPeriodic, sfqueue.DurabilityFlush} {
		t.Run(d.String(), func(t *testing.T) {
			dir := t.TempDir()
			l := &crashLedger{frames: make(map[uint64]uint64)}
			for run := range 2 { // the second run continues the first's slot
				q, err := sfqueue.Open(crashOptions(dir, d))
				if err != nil {
					t.Fatal(err)
				}
				var rep bytes.Buffer
				w := &crashWorkload{q: q, run: run, perAppender: 60, report: &rep}
				if err := w.runAll(context.Background()); err != nil {
					q.Close()
					t.Fatal(err)
				}
				if err := q.Close(); err != nil {
					t.Fatal(err)
				}
				lines := strings.Split(strings.TrimSpace(rep.String()), "\n")
				if err := l.absorb(lines); err != nil {
					t.Fatal(err)
				}
				if err := l.verify(dir); err != nil {
					t.Fatalf("run %d: %v", run, err)
				}
			}
			if want := uint64(2 * crashAppenders * 60); l.maxReported != want {
				t.Errorf("highest reported FSN %d, want %d (every frame of two runs)", l.maxReported, want)
			}
			if l.unreported != 0 {
				t.Errorf("%d frames recovered that no Append returned, after a clean close", l.unreported)
			}
		})
	}
}

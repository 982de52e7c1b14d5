package sfqueue

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// waitFor polls cond for up to 10 s; it is for state reached by background
// goroutines, not a timing assertion.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// closeAsync starts q.Close in a goroutine and returns its result's
// channel once Close has marked the queue closed.
func closeAsync(t *testing.T, q *Queue) <-chan error {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- q.Close() }()
	waitFor(t, "Close started", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.closed
	})
	return closed
}

// blockingSyncs makes the first fsync of a segment block until release is
// closed; entered is closed when it starts.
func blockingSyncs(cfs *crashFS) (entered, release chan struct{}) {
	return blockingSyncOf(cfs, segmentSuffix)
}

// blockingSyncOf makes the first fsync of a file whose name ends in suffix
// block until release is closed; entered is closed when it starts.
func blockingSyncOf(cfs *crashFS, suffix string) (entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	cfs.mu.Lock()
	cfs.syncHook = func(name string) {
		if strings.HasSuffix(name, suffix) {
			once.Do(func() {
				close(entered)
				<-release
			})
		}
	}
	cfs.mu.Unlock()
	return entered, release
}

// appendAsync appends testPayload(fsn, size) in a goroutine; the channel
// gets its error.
func appendAsync(q *Queue, fsn uint64, size int) chan error {
	done := make(chan error, 1)
	go func() {
		_, err := q.Append(context.Background(), testPayload(fsn, size))
		done <- err
	}()
	return done
}

func TestFlushGroupCommit(t *testing.T) {
	cfs := newCrashFS()
	q := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityFlush})
	defer q.Close()
	entered, release := blockingSyncs(cfs)

	first := make(chan error, 1)
	go func() {
		_, err := q.Append(context.Background(), testPayload(1, 100))
		first <- err
	}()
	<-entered
	// The first append's fsync is in flight: it must not have returned.
	select {
	case err := <-first:
		t.Fatalf("flush-mode Append returned (%v) before its fsync completed", err)
	default:
	}
	// Ten appends arrive while that fsync runs; all must share one more.
	const n = 10
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if _, err := q.Append(context.Background(), testPayload(uint64(i+2), 100)); err != nil {
				errs <- err
			}
		})
	}
	waitFor(t, "10 appends taken behind the running fsync", func() bool { return q.Stats().FramesAppended == n+1 })
	if q.Stats().DurableFSN != 0 {
		t.Fatalf("DurableFSN moved before any fsync completed")
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := q.Stats()
	if st.Fsyncs != 2 || st.DurableFSN != n+1 {
		t.Fatalf("11 appends, 10 of them behind a running fsync: %d fsync rounds, durable %d; want 2 rounds covering all 11", st.Fsyncs, st.DurableFSN)
	}
	if st.FsyncMax <= 0 || st.FsyncTotal < st.FsyncMax {
		t.Fatalf("fsync latency not recorded: %+v", st)
	}
}

// TestFlushWaitsForAnFsyncStartedAfterItsWrite: an append written while an
// fsync runs is not released by that fsync, only by the next, and a power
// loss while the next is in flight keeps the first append and may drop the
// second (the crash model makes durable only what preceded an fsync's start).
func TestFlushWaitsForAnFsyncStartedAfterItsWrite(t *testing.T) {
	cfs := newCrashFS()
	q := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityFlush})
	defer q.Close()
	gates := make(chan chan struct{}, 2) // one per segment fsync, handed to the test
	unblock := make(chan struct{})       // a failed test releases every fsync
	defer close(unblock)                 // (runs before the deferred Close)
	cfs.mu.Lock()
	cfs.syncHook = func(name string) {
		if strings.HasSuffix(name, segmentSuffix) {
			g := make(chan struct{})
			gates <- g
			select {
			case <-g:
			case <-unblock:
			}
		}
	}
	cfs.mu.Unlock()
	first := appendAsync(q, 1, 100)
	gate1 := <-gates // fsync 1 in flight, covering FSN 1
	second := appendAsync(q, 2, 100)
	waitFor(t, "the second append taken", func() bool { return q.Stats().FramesAppended == 2 })
	close(gate1)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	gate2 := <-gates // fsync 2 in flight, covering FSN 2
	select {
	case err := <-second:
		t.Fatalf("an append written during fsync 1 returned (%v) before fsync 2 completed", err)
	default:
	}
	survivors := func() int {
		q2 := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs.PowerLoss(dropUnsynced, rand.New(rand.NewPCG(1, 2)))})
		defer q2.Close()
		return len(drain(t, q2.NewCursor()))
	}
	if n := survivors(); n != 1 {
		t.Fatalf("power loss during fsync 2: %d frames survive, want exactly FSN 1", n)
	}
	close(gate2)
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if n := survivors(); n != 2 {
		t.Fatalf("power loss after fsync 2: %d frames survive, want 2", n)
	}
}

func TestPeriodicSyncsInBackground(t *testing.T) {
	cfs := newCrashFS()
	q := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityPeriodic, SyncInterval: 5 * time.Millisecond})
	defer q.Close()
	_, release := blockingSyncs(cfs)
	done := make(chan error, 1)
	go func() {
		_, err := q.Append(context.Background(), testPayload(1, 100))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("periodic-mode Append waited for an fsync")
	}
	close(release)
	waitFor(t, "the background fsync", func() bool { return q.Stats().DurableFSN == 1 })
	if q.Stats().Fsyncs == 0 {
		t.Fatal("DurableFSN moved without a recorded fsync")
	}
}

// Memory durability fsyncs a segment once it is sealed, in the background
// (rule.go): appends go on while that fsync runs, the active segment is
// never fsynced, and DurableFSN then covers the sealed segment.
func TestMemoryDurabilitySyncsSealedSegmentsInTheBackground(t *testing.T) {
	cfs := newCrashFS()
	var synced []string
	var mu sync.Mutex
	release := make(chan struct{})
	cfs.syncHook = func(name string) {
		if strings.HasSuffix(name, segmentSuffix) {
			mu.Lock()
			synced = append(synced, name)
			mu.Unlock()
			<-release
		}
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(synced) }
	q := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs, MaxSegmentBytes: 512})
	for i := range 5 { // 4 frames fill segment 1; the 5th seals it
		mustAppend(t, q, testPayload(uint64(i+1), 100))
	}
	waitFor(t, "the sealed segment's fsync to start", func() bool { return count() == 1 })
	for i := 5; i < 8; i++ { // the fsync is blocked: appends are not
		mustAppend(t, q, testPayload(uint64(i+1), 100))
	}
	if d := q.Stats().DurableFSN; d != 0 {
		t.Fatalf("DurableFSN %d while the sealed segment's fsync is blocked", d)
	}
	close(release)
	waitFor(t, "DurableFSN to cover the sealed segment", func() bool { return q.Stats().DurableFSN == 4 })
	q.Ack(3)
	mustClose(t, q)
	mu.Lock()
	defer mu.Unlock()
	if len(synced) != 1 || synced[0] != "/d/s/"+segmentName(1) {
		t.Fatalf("fsynced segments %v; want the sealed one only, never the active one", synced)
	}
}

func TestNewSegmentsAreDurableInFlushMode(t *testing.T) {
	cfs := newCrashFS()
	q := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityFlush, MaxSegmentBytes: 512})
	for i := range 20 {
		mustAppend(t, q, testPayload(uint64(i+1), 100))
	}
	snap := cfs.PowerLoss(dropUnsynced, nil)
	q.Close()
	q2 := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: snap, Durability: DurabilityFlush, MaxSegmentBytes: 512})
	defer q2.Close()
	if got := len(drain(t, q2.NewCursor())); got != 20 || q2.Recovery().Segments < 4 {
		t.Fatalf("after power loss: %d frames in %d segments, want all 20 in >= 4 segments (directory fsynced)", got, q2.Recovery().Segments)
	}
}

// powerPayload prefixes a test payload with the highest symbol id it uses.
func powerPayload(id uint64, maxSym int64, size int) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, uint64(maxSym)), testPayload(id, size)...)
}

func powerSymbolUse(p []byte) (uint32, int64) {
	if len(p) < 8 {
		return 0, -1
	}
	return 0, int64(binary.LittleEndian.Uint64(p))
}

type powerResult struct {
	promised, lost int
	window         time.Duration // age at the crash of the oldest lost promised frame
	unreplayable   bool
}

// ackWithLag is QuestDB for the power-loss tests: it reads q and acks
// each frame lag frames behind, until ctx ends.
func ackWithLag(ctx context.Context, q *Queue, lag uint64) {
	c := q.NewCursor()
	for ctx.Err() == nil {
		fsn, _, ok, err := c.Next()
		if err != nil {
			return
		}
		if !ok {
			select {
			case <-q.Published():
			case <-ctx.Done():
			}
			continue
		}
		if fsn > lag {
			q.Ack(fsn - lag)
		}
	}
}

// powerLossRun appends from several goroutines (registering symbols as it
// goes) while a consumer acks with a lag, cuts the power at a random moment
// between cutAfter/2 and 1.5*cutAfter (each appender sleeping pace between
// appends, so the measurement is not of a CPU-starved background goroutine),
// recovers the snapshot, and checks every recovered frame; it reports how
// many frames whose Append had returned were lost.
func powerLossRun(t *testing.T, d Durability, mode crashMode, seed uint64, cutAfter, pace time.Duration) powerResult {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	cfs := newCrashFS()
	o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: d, SyncInterval: 10 * time.Millisecond,
		MaxSegmentBytes: 4096, SymbolUse: powerSymbolUse}
	q := mustOpen(t, o)

	type rec struct {
		id  uint64
		at  time.Time
		pre bool // returned before the power cut
	}
	var (
		mu       sync.Mutex
		crashed  bool
		returned = map[uint64]rec{} // fsn -> what Append returned
		symMu    sync.Mutex
		symbols  int
	)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for g := range 3 {
		seedG := r.Uint64()
		wg.Go(func() {
			rg := rand.New(rand.NewPCG(seedG, uint64(g)))
			for seq := uint64(0); ctx.Err() == nil; seq++ {
				id := uint64(g+1)<<40 | seq
				symMu.Lock()
				if rg.IntN(8) == 0 {
					if q.AddSymbols(0, symbols, [][]byte{[]byte("sym")}) == nil {
						symbols++
					}
				}
				maxSym := int64(symbols) - 1
				symMu.Unlock()
				fsn, err := q.Append(ctx, powerPayload(id, maxSym, 12+rg.IntN(600)))
				if err != nil {
					return
				}
				mu.Lock()
				returned[fsn] = rec{id: id, at: time.Now(), pre: !crashed}
				mu.Unlock()
				if pace > 0 {
					time.Sleep(pace)
				}
			}
		})
	}
	wg.Go(func() { ackWithLag(ctx, q, 20) })
	time.Sleep(cutAfter/2 + time.Duration(r.Int64N(int64(cutAfter))))
	mu.Lock()
	snap := cfs.PowerLoss(mode, r)
	crashed = true
	crashAt := time.Now()
	mu.Unlock()
	stop()
	wg.Wait()
	q.Close()

	o.FS = snap
	q2, err := Open(o)
	if err != nil {
		t.Fatalf("seed %d: Open after power loss: %v", seed, err)
	}
	defer q2.Close()
	rep := q2.Recovery()
	res := powerResult{unreplayable: rep.Unreplayable != nil}
	got := map[uint64]bool{}
	next := q2.AckedFSN() + 1
	for _, f := range drain(t, q2.NewCursor()) {
		if f.fsn != next {
			t.Fatalf("seed %d: recovered FSN %d, want %d (continuous from acked %d)", seed, f.fsn, next, q2.AckedFSN())
		}
		next++
		id, err := checkTestPayload(f.payload[8:])
		if err != nil {
			t.Fatalf("seed %d: recovered frame %d is corrupt: %v", seed, f.fsn, err)
		}
		if rc, ok := returned[f.fsn]; ok && rc.id != id {
			t.Fatalf("seed %d: FSN %d holds payload %x, but Append returned that FSN for %x", seed, f.fsn, id, rc.id)
		}
		got[f.fsn] = true
	}
	for fsn, rc := range returned {
		if !rc.pre || fsn <= rep.AckedFSN && !res.unreplayable {
			continue
		}
		res.promised++
		if !got[fsn] {
			res.lost++
			res.window = max(res.window, crashAt.Sub(rc.at))
		}
	}
	return res
}

func TestPowerLossFlushKeepsEveryReturnedAppend(t *testing.T) {
	runs := iterations(24, 300)
	promised := 0
	for i := range runs {
		mode := []crashMode{dropUnsynced, keepSomeWrites, keepAndGarbage, keepNames}[i%4]
		res := powerLossRun(t, DurabilityFlush, mode, uint64(i), 20*time.Millisecond, 0)
		if res.unreplayable {
			t.Fatalf("run %d: flush-mode slot became unreplayable after a power loss", i)
		}
		if res.lost > 0 {
			t.Fatalf("run %d (mode %d): %d of %d frames whose Append returned were lost", i, mode, res.lost, res.promised)
		}
		promised += res.promised
	}
	if promised == 0 {
		t.Fatal("no append returned before any power cut: the test checked nothing")
	}
	t.Logf("flush: %d power cuts, %d returned unacked appends checked, 0 lost", runs, promised)
}

// TestPowerLossWindow measures (does not assert) what memory and periodic
// durability lose; the figures go to BENCHMARKS.md. It asserts that no
// power loss sets a slot aside: the frames are in the loss window or
// durable, and so are the dictionary entries they use (memory durability
// set every one of these slots aside while its dictionary was never
// fsynced).
func TestPowerLossWindow(t *testing.T) {
	runs := iterations(6, 60)
	for _, d := range []Durability{DurabilityMemory, DurabilityPeriodic} {
		var promised, lost, unreplayable int
		var window time.Duration
		for i := range runs {
			res := powerLossRun(t, d, dropUnsynced, uint64(1000+i), 100*time.Millisecond, 200*time.Microsecond)
			promised += res.promised
			lost += res.lost
			window = max(window, res.window)
			if res.unreplayable {
				unreplayable++
			}
		}
		if promised == 0 {
			t.Fatalf("%v: no append returned before any power cut", d)
		}
		t.Logf("%v (periodic: sync interval 10ms; 3 appenders, 200µs apart): %d power cuts, %d of %d returned unacked appends lost (%.0f %%), oldest lost append returned %v before the cut, %d slots set aside",
			d, runs, lost, promised, 100*float64(lost)/float64(promised), window.Round(time.Millisecond), unreplayable)
		if unreplayable > 0 {
			t.Fatalf("%v: %d of %d power cuts set the slot aside", d, unreplayable, runs)
		}
	}
}

// TestCloseDuringGroupCommitWait: an append still waiting for its group
// fsync when the queue closes gets the outcome of Close's fsync, which keeps
// its frame: nil, and the frame survives a power loss; or, when that fsync
// fails, the error. Never ErrClosed for a frame left on disk (a retrying
// caller would store it twice).
func TestCloseDuringGroupCommitWait(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fsync fails %v", fail), func(t *testing.T) {
			cfs := newCrashFS()
			q := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityFlush})
			entered, release := blockingSyncs(cfs)
			first := make(chan error, 1)
			go func() {
				_, err := q.Append(context.Background(), testPayload(1, 10))
				first <- err
			}()
			<-entered // the group fsync of FSN 1 is in flight
			second := make(chan error, 1)
			go func() {
				_, err := q.Append(context.Background(), testPayload(2, 10))
				second <- err
			}()
			waitFor(t, "second append taken", func() bool { return q.Stats().FramesAppended == 2 })
			closed := closeAsync(t, q)
			if fail {
				cfs.mu.Lock()
				segSyncs := 0
				cfs.failSync = func(name string) error {
					if !strings.HasSuffix(name, segmentSuffix) {
						return nil
					}
					if segSyncs++; segSyncs > 1 {
						return syscall.EIO // Close's fsync, not the one in flight
					}
					return nil
				}
				cfs.mu.Unlock()
			}
			close(release) // the flusher ends FSN 1's fsync and stops: Close has begun
			if err := <-first; err != nil {
				t.Fatalf("append whose fsync completed: %v", err)
			}
			err := <-second
			closeErr := <-closed
			switch {
			case fail && (err == nil || errors.Is(err, ErrClosed) || !errors.Is(err, syscall.EIO)):
				t.Fatalf("append whose frame Close failed to fsync: %v, want the fsync's EIO", err)
			case fail && !errors.Is(closeErr, syscall.EIO):
				t.Fatalf("Close after a failed fsync: %v, want EIO", closeErr)
			case fail:
				return
			case err != nil:
				t.Fatalf("append waiting for an fsync when the queue closed: %v, want nil (Close fsyncs and keeps its frame)", err)
			case closeErr != nil:
				t.Fatal(closeErr)
			}
			q2 := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs.PowerLoss(dropUnsynced, rand.New(rand.NewPCG(1, 2)))})
			defer q2.Close()
			if n := len(drain(t, q2.NewCursor())); n != 2 {
				t.Fatalf("power loss after Close: %d frames survive, want both answered appends", n)
			}
		})
	}
}

func TestRotationFsyncDoesNotBlockTheConsumer(t *testing.T) {
	cfs := newCrashFS()
	q := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityPeriodic,
		SyncInterval: time.Hour, MaxSegmentBytes: 1024})
	defer q.Close()
	for i := range 4 { // fills the first segment (24 + 4*frame200 bytes)
		mustAppend(t, q, testPayload(uint64(i+1), 200))
	}
	// The sealed segment's fsync: the new one's header is fsynced first,
	// under the lock (see writeLocked), and is not what this is about.
	entered, release := blockingSyncOf(cfs, segmentName(1))
	rotating := make(chan error, 1)
	go func() {
		_, err := q.Append(context.Background(), testPayload(5, 200))
		rotating <- err
	}()
	<-entered // the append is fsyncing segment 1 before writing segment 2
	behind := make(chan uint64, 1)
	go func() {
		fsn, _ := q.Append(context.Background(), testPayload(6, 10))
		behind <- fsn
	}()
	// The consumer reads and acks while the fsync is in flight.
	c := q.NewCursor()
	if got := drain(t, c); len(got) != 4 {
		t.Fatalf("consumer read %d frames during the rotation fsync, want 4", len(got))
	}
	q.Ack(2)
	select {
	case fsn := <-behind:
		t.Fatalf("an append (FSN %d) reached the next segment before the sealed one was durable", fsn)
	default:
	}
	close(release)
	if err := <-rotating; err != nil {
		t.Fatal(err)
	}
	if fsn := <-behind; fsn != 6 {
		t.Fatalf("append behind the rotation got FSN %d, want 6", fsn)
	}
	if st := q.Stats(); st.AckedFSN != 2 || st.PublishedFSN != 6 {
		t.Fatalf("after the rotation: %+v", st)
	}
}

// TestSyncIntervalFloor: a nanosecond sync interval (a bare integer in a
// config) is raised to MinSyncInterval instead of fsyncing in a loop.
func TestSyncIntervalFloor(t *testing.T) {
	for _, in := range []time.Duration{1, 5, 999 * time.Microsecond} {
		o, err := Options{SyncInterval: in}.withDefaults()
		if err != nil || o.SyncInterval != MinSyncInterval {
			t.Fatalf("SyncInterval %v became %v (%v); want %v", in, o.SyncInterval, err, MinSyncInterval)
		}
	}
	if o, _ := (Options{SyncInterval: 2 * time.Millisecond}).withDefaults(); o.SyncInterval != 2*time.Millisecond {
		t.Fatalf("2ms became %v", o.SyncInterval)
	}
}

// TestFlushRotationWritesNoFrameBeforeTheSealedSegmentIsDurable: in flush
// durability a rotation does not fsync the sealed segment on the append
// path; appends go on being taken while that fsync runs, but no frame
// reaches the new segment's file, and no append returns, until it has
// ended, so a power loss cannot leave a hole between the segments.
func TestFlushRotationWritesNoFrameBeforeTheSealedSegmentIsDurable(t *testing.T) {
	cfs, q := flushSealQueue(t, 3)
	defer q.Close()
	entered, release := blockSegment1Sync(cfs)
	defer release() // before Close, if the test fails
	// One batch: frame 4 ends segment 1, frame 5 starts segment 5.
	rotating := make(chan error, 1)
	go func() {
		_, err := q.AppendBatch(context.Background(), [][]byte{testPayload(4, 200), testPayload(5, 200)})
		rotating <- err
	}()
	<-entered // segment 1's fsync, with frame 4, is in flight
	behind := make(chan error, 1)
	go func() {
		_, err := q.Append(context.Background(), testPayload(6, 200))
		behind <- err
	}()
	waitFor(t, "the append behind the rotation taken", func() bool { return q.Stats().FramesAppended == 6 })
	if got := drain(t, q.NewCursor()); len(got) != 3 {
		t.Fatalf("the consumer read %d frames while the sealed segment's fsync ran, want the 3 durable ones", len(got))
	}
	select {
	case err := <-rotating:
		t.Fatalf("the rotating batch returned (%v) before the sealed segment was durable", err)
	case err := <-behind:
		t.Fatalf("an append returned (%v) before the sealed segment was durable", err)
	default:
	}
	cfs.mu.Lock()
	ino := cfs.names[filepath.Join("/d", "s", segmentName(5))]
	var written []byte
	if ino != nil {
		written = slices.Clone(ino.data)
	}
	cfs.mu.Unlock()
	if nz := nonZeroExtent(written); nz > segmentHeaderSize {
		t.Fatalf("segment 5 holds %d non-zero bytes while segment 1's fsync runs; want only its %d-byte header", nz, segmentHeaderSize)
	}
	release()
	if err := <-rotating; err != nil {
		t.Fatal(err)
	}
	if err := <-behind; err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.DurableFSN != 6 || st.PublishedFSN != 6 {
		t.Fatalf("after the rotation: durable %d, published %d; want 6 and 6", st.DurableFSN, st.PublishedFSN)
	}
	if got := drain(t, q.NewCursor()); len(got) != 6 {
		t.Fatalf("read %d frames after the rotation, want 6", len(got))
	}
}

// TestFlushWritesOncePerGroupFsync: in flush durability an append only
// builds its frames; the flusher writes the frames of all the appends a
// group fsync covers with one write, so concurrent appends cost one write
// system call per fsync (plus one per new segment's header), not one each.
func TestFlushWritesOncePerGroupFsync(t *testing.T) {
	cfs := newCrashFS()
	var writes atomic.Int64
	cfs.failWrite = func(name string) error {
		if strings.HasSuffix(name, segmentSuffix) {
			writes.Add(1)
		}
		return nil
	}
	q := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityFlush, MaxSegmentBytes: 64 << 10})
	defer q.Close()
	const appenders, each = 16, 40
	var wg sync.WaitGroup
	for g := range appenders {
		wg.Go(func() {
			for i := range each {
				if _, err := q.Append(context.Background(), testPayload(uint64(g*each+i), 300)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	st := q.Stats()
	q.mu.Lock()
	segments := int64(len(q.segs))
	q.mu.Unlock()
	if st.FramesAppended != appenders*each || st.DurableFSN != appenders*each {
		t.Fatalf("appended %d, durable %d; want %d", st.FramesAppended, st.DurableFSN, appenders*each)
	}
	// Every group fsync writes once; a rotation adds the new segment's
	// header and the sealed segment's last frames; each of those fsyncs
	// counts too, so writes <= fsyncs + 2 per segment bounds it.
	if w := writes.Load(); w > int64(st.Fsyncs)+2*segments {
		t.Fatalf("%d segment writes for %d frames in %d fsyncs and %d segments; want at most one per fsync and two per segment", w, st.FramesAppended, st.Fsyncs, segments)
	}
	if st.Fsyncs >= st.FramesAppended {
		t.Fatalf("%d fsyncs for %d frames from %d appenders: no grouping", st.Fsyncs, st.FramesAppended, appenders)
	}
}

// TestFlushEvictionOfTheActiveSegmentWritesItsBuiltFramesFirst: under
// evict_oldest in flush durability an append can evict the active segment
// while frames of appends still waiting for a group fsync are only built:
// the eviction writes them first, so it counts their items from the file
// like any other, and the next segment starts clean.
func TestFlushEvictionOfTheActiveSegmentWritesItsBuiltFramesFirst(t *testing.T) {
	cfs := newCrashFS()
	frame := frameSize(200)
	q := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityFlush,
		OnFull: OnFullEvictOldest, MaxSegmentBytes: 1024, MaxTotalBytes: segmentHeaderSize + 3*frame})
	defer q.Close()
	appendItems(t, q, testPayload(1, 200), 1)
	if got := drain(t, q.NewCursor()); len(got) != 1 {
		t.Fatalf("read %d frames, want 1", len(got))
	}
	q.Ack(1)
	entered, blocked := blockingSyncs(cfs)
	release := sync.OnceFunc(func() { close(blocked) })
	defer release()
	async := func(k uint64) chan error {
		ch := make(chan error, 1)
		go func() {
			_, err := q.AppendBatchItems(context.Background(), [][]byte{testPayload(k, 200)}, []uint32{uint32(k)})
			ch <- err
		}()
		return ch
	}
	second := async(2)
	<-entered // frame 2 is written, its group fsync blocked
	third := async(3)
	waitFor(t, "frame 3 built behind the fsync", func() bool { return q.Stats().FramesAppended == 3 })
	fourth := async(4) // over the cap: evicts segment 1, frames 2 and 3 unacked
	waitFor(t, "frame 4 taken", func() bool { return q.Stats().FramesAppended == 4 })
	release()
	for i, ch := range []chan error{second, third, fourth} {
		if err := <-ch; err != nil {
			t.Fatalf("append of frame %d: %v", i+2, err)
		}
	}
	st := q.Stats()
	if st.FramesEvicted != 2 || st.ItemsEvicted != 2+3 || st.FramesEvictedItemsUnknown != 0 {
		t.Fatalf("evicting segment 1 with frame 1 acked: %d frames, %d items, %d unknown; want 2 frames, 5 items, 0 unknown",
			st.FramesEvicted, st.ItemsEvicted, st.FramesEvictedItemsUnknown)
	}
	got := drain(t, q.NewCursor())
	if len(got) != 1 || got[0].fsn != 4 {
		t.Fatalf("after the eviction the cursor read %d frames; want frame 4 alone", len(got))
	}
	if id, err := checkTestPayload(got[0].payload); err != nil || id != 4 {
		t.Fatalf("frame 4: id %d, %v", id, err)
	}
}

// TestFlushBatchAcrossSegmentsWaitsAloneForTheSealedFsync: a batch whose
// second rotation must wait for the first sealed segment's fsync (already
// under way) keeps every other append out meanwhile, as it holds state
// computed under the lock: the frames land in order, each holding the
// payload appended with its FSN.
func TestFlushBatchAcrossSegmentsWaitsAloneForTheSealedFsync(t *testing.T) {
	cfs, q := flushSealQueue(t, 3)
	defer q.Close()
	entered, release := blockSegment1Sync(cfs)
	defer release()
	// Frame 4 ends segment 1, 5..8 fill segment 5, 9 starts segment 9.
	var batch [][]byte
	for k := uint64(4); k <= 9; k++ {
		batch = append(batch, testPayload(k, 200))
	}
	big := make(chan error, 1)
	go func() {
		_, err := q.AppendBatch(context.Background(), batch)
		big <- err
	}()
	<-entered // segment 1's fsync is under way; the batch waits for it at its second rotation
	waitFor(t, "the batch waiting at its second rotation", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.sealSyncing && len(q.segs) == 2 && slices.Contains(cfs.fileNames(), "/d/s/"+segmentName(9))
	})
	other := make(chan uint64, 1)
	go func() {
		fsn, _ := q.Append(context.Background(), testPayload(10, 200))
		other <- fsn
	}()
	time.Sleep(20 * time.Millisecond) // room for the other append to run, if it could
	release()
	if err := <-big; err != nil {
		t.Fatal(err)
	}
	if fsn := <-other; fsn != 10 {
		t.Fatalf("the append behind the batch got FSN %d, want 10", fsn)
	}
	got := drain(t, q.NewCursor())
	if len(got) != 10 {
		t.Fatalf("read %d frames, want 10", len(got))
	}
	for _, f := range got {
		if id, err := checkTestPayload(f.payload); err != nil || id != f.fsn {
			t.Fatalf("FSN %d holds payload %d (%v)", f.fsn, id, err)
		}
	}
}

// TestFlushRotatesEarlyAtAGroupBoundary: in flush durability the first
// append after a group write starts a new segment when a group like the
// last one would not fit the active segment, although its own frame would:
// the sealed segment's frames are all written by then, so no group waits
// for its own fsync. The room it leaves counts against the cap.
func TestFlushRotatesEarlyAtAGroupBoundary(t *testing.T) {
	fs := frameSize(1000)
	const k = 20 // groups of 3 frames, each at most a sixteenth of the segment
	o := Options{Dir: t.TempDir(), SenderID: "s", Durability: DurabilityFlush,
		MaxSegmentBytes: segmentHeaderSize + k*3*fs + 2*fs}
	q := mustOpen(t, o)
	defer q.Close()
	ctx := context.Background()
	for i := range k {
		p := testPayload(uint64(3*i+1), 1000)
		if _, err := q.AppendBatch(ctx, [][]byte{p, p, p}); err != nil {
			t.Fatal(err)
		}
	}
	if len(q.segs) != 1 || o.MaxSegmentBytes-q.active.size != 2*fs {
		t.Fatalf("%d segments, %d bytes of room; want 1 with room for two frames", len(q.segs), o.MaxSegmentBytes-q.active.size)
	}
	mustAppend(t, q, testPayload(3*k+1, 1000))
	if len(q.segs) != 2 || q.segs[1].base != 3*k+1 {
		t.Fatalf("%d segments; want the frame after a full group in a new one", len(q.segs))
	}
	if want := 2*segmentHeaderSize + (3*k+1)*fs + 2*fs; q.Stats().UsedBytes != want {
		t.Fatalf("UsedBytes %d, want %d: the sealed segment's unused room counts", q.Stats().UsedBytes, want)
	}
}

// TestFlushEarlyRotationNeverCostsRoom: near the cap, a batch that fits
// the active segment does not rotate early when the room the rotation
// would leave unused does not fit too: it is appended there, neither
// refused (on_full=block) nor making room by evicting unacked frames.
func TestFlushEarlyRotationNeverCostsRoom(t *testing.T) {
	for _, mode := range []OnFull{OnFullBlock, OnFullEvictOldest} {
		t.Run(mode.String(), func(t *testing.T) {
			const seg = 64 << 10
			o := Options{Dir: "/d", SenderID: "s", FS: newCrashFS(), MaxSegmentBytes: seg, MaxTotalBytes: 2 * seg,
				Durability: DurabilityFlush, OnFull: mode, AppendDeadline: 100 * time.Millisecond}
			q := mustOpen(t, o)
			defer q.Close()
			p := testPayload(1, 1000)
			ctx := context.Background()
			for i := 0; ; i++ {
				q.mu.Lock()
				early := q.rotatesEarlyLocked()
				fitsActive := len(q.segs) == 2 && q.active.size+frameSize(len(p)) <= seg &&
					q.usedLocked()+frameSize(len(p)) <= o.MaxTotalBytes
				q.mu.Unlock()
				if early && fitsActive {
					break
				}
				if i == 1000 {
					t.Fatal("the queue never reached a full second segment with room for one more frame")
				}
				if _, err := q.AppendBatch(ctx, [][]byte{p, p, p}); err != nil {
					t.Fatalf("batch %d: %v", i, err)
				}
			}
			if _, err := q.Append(ctx, p); err != nil {
				t.Fatalf("a frame that fits the active segment: %v", err)
			}
			if st := q.Stats(); st.FramesEvicted != 0 || st.Segments != 2 {
				t.Fatalf("%+v; want the frame in the active segment, nothing evicted", st)
			}
		})
	}
}

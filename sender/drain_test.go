package sender

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
	"github.com/questdbexporter/questdbexporter/sfqueue/sfqueuetest"
)

// orphan leaves a slot with n frames of rows starting at id first, as a
// crashed process would (closed without draining).
func orphan(t *testing.T, dir, id string, first int64, frames int) {
	t.Helper()
	q := sfQueue(t, dir, id)
	f := newFeeder(t, q, true)
	f.nextID = first
	f.frames(frames, 5)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestDrainOrphansWhileForegroundSends(t *testing.T) {
	dir := t.TempDir()
	orphan(t, dir, "dead-a", 1000, 10)
	orphan(t, dir, "dead-b", 2000, 10)
	orphan(t, dir, "busy", 3000, 3)
	busy := sfQueue(t, dir, "busy") // another process would hold this lock
	defer busy.Close()

	srv := newServer(t, qwptest.Options{})
	fg := sfQueue(t, dir, "me")
	defer fg.Close()
	f := newFeeder(t, fg, true)
	rec := &recorder{}
	s := startSender(t, fg, testOptions(rec, srv.URL()))

	done := make(chan DrainReport, 1)
	go func() {
		rep, err := DrainOrphans(context.Background(), dir, []string{"me"}, 1, DrainOptions{Sender: testOptions(rec, srv.URL())})
		if err != nil {
			t.Error(err)
		}
		done <- rep
	}()
	f.frames(20, 5) // ids 0-99, while the drainers run
	rep := <-done
	waitAll(t, s, fg)

	slices.Sort(rep.Drained)
	if !slices.Equal(rep.Drained, []string{"dead-a", "dead-b"}) || len(rep.Failed) != 0 {
		t.Fatalf("report %+v; want dead-a and dead-b drained", rep)
	}
	counts := rowIDs(t, srv)
	for id := range int64(100) {
		if counts[id] != 1 {
			t.Errorf("foreground row %d arrived %d times", id, counts[id])
		}
	}
	for _, base := range []int64{1000, 2000} {
		for id := base; id < base+50; id++ {
			if counts[id] != 1 {
				t.Errorf("orphan row %d arrived %d times", id, counts[id])
			}
		}
	}
	for id := int64(3000); id < 3015; id++ {
		if counts[id] != 0 {
			t.Errorf("row %d of the busy slot was sent", id)
		}
	}
	for _, gone := range []string{"dead-a", "dead-b"} {
		if _, err := os.Stat(filepath.Join(dir, gone)); !os.IsNotExist(err) {
			t.Errorf("drained slot %s still exists (%v)", gone, err)
		}
	}
	if busy.PublishedFSN() != 3 || busy.AckedFSN() != 0 {
		t.Errorf("busy slot changed: published %d acked %d", busy.PublishedFSN(), busy.AckedFSN())
	}
	if rec.drainers[0].Load() != 2 || rec.drainers[1].Load() != 2 || rec.drainers[2].Load() != 0 {
		t.Errorf("drainers started/succeeded/failed %d/%d/%d, want 2/2/0",
			rec.drainers[0].Load(), rec.drainers[1].Load(), rec.drainers[2].Load())
	}
}

// TestDrainOrphanAuthRefusalIsRetried: a drainer whose credentials are
// refused keeps trying after the credentials backoff (it does not mark the
// slot .failed), and drains the slot once the server accepts them.
func TestDrainOrphanAuthRefusalIsRetried(t *testing.T) {
	dir := t.TempDir()
	orphan(t, dir, "dead", 0, 4)
	srv := newServer(t, qwptest.Options{})
	srv.RefuseUpgrades(1, qwptest.Refusal{Status: 401, Message: "who are you"})
	rec := &recorder{}
	o := testOptions(rec, srv.URL())
	o.AuthInitialBackoff, o.AuthMaxBackoff = 20*time.Millisecond, 20*time.Millisecond
	rep, err := DrainOrphans(context.Background(), dir, nil, 2, DrainOptions{Sender: o})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Drained, []string{"dead"}) || len(rep.Failed) != 0 {
		t.Fatalf("report %+v; want dead drained", rep)
	}
	if _, err := os.Stat(filepath.Join(dir, "dead")); !os.IsNotExist(err) {
		t.Fatalf("the drained slot is still there (%v)", err)
	}
	if rec.errCount(qwp.CategorySecurityError) != 1 || rec.drainers[2].Load() != 0 {
		t.Fatalf("security errors %d, failed drainers %d; want 1, 0", rec.errCount(qwp.CategorySecurityError), rec.drainers[2].Load())
	}
}

func TestDrainOrphanUnreplayableIsMarkedFailedAndReported(t *testing.T) {
	dir := t.TempDir()
	orphan(t, dir, "dead", 0, 4)
	// A bit flip in the first frame of the slot's oldest segment, with the
	// rest of the frames valid after it: damage in the middle, not a tail.
	slot := filepath.Join(dir, "dead")
	segs, _ := filepath.Glob(filepath.Join(slot, "*.sfseg"))
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[24+10] ^= 0x40
	if err := os.WriteFile(segs[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, qwptest.Options{})
	rec := &recorder{}
	rep, err := DrainOrphans(context.Background(), dir, nil, 1, DrainOptions{Sender: testOptions(rec, srv.URL())})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Failed, []string{"dead"}) || len(rep.DataLoss) != 1 || rep.DataLoss[0].Path != slot || rep.DataLoss[0].Frames != 0 || rep.DataLoss[0].UnreadableFrames != 3 {
		t.Fatalf("report %+v; want dead failed with DATA_LOSS of 3 unreadable frames (valid ones after the damage, FSN unknown)", rep)
	}
	after, err := os.ReadFile(segs[0])
	if err != nil || !slices.Equal(after, b) {
		t.Fatalf("the unreplayable orphan's segment changed (%v)", err)
	}
	reason, err := os.ReadFile(filepath.Join(slot, ".failed"))
	if err != nil || !strings.Contains(string(reason), "DATA_LOSS") {
		t.Fatalf(".failed = %q, %v; want the DATA_LOSS reason", reason, err)
	}
	if ids, err := sfqueue.ListOrphans(dir, nil); err != nil || len(ids) != 0 {
		t.Fatalf("ListOrphans after .failed = %v, %v", ids, err)
	}
	if len(rowIDs(t, srv)) != 0 || rec.drainers[2].Load() != 1 {
		t.Fatalf("rows sent from an unreplayable orphan, or %d failed drainers", rec.drainers[2].Load())
	}
}

func TestDrainOrphansInterruptedKeepsFrames(t *testing.T) {
	dir := t.TempDir()
	orphan(t, dir, "dead", 0, 3)
	srv := newServer(t, qwptest.Options{})
	srv.StallAcks() // nothing is ever acked
	rec := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	done := drainInBackground(ctx, dir, 1, testOptions(rec, srv.URL()))
	waitFor(t, "the drainer's frames", func() bool { return srv.Frames() >= 3 })
	if rec.drainers[0].Load() != 1 {
		t.Fatalf("drainers started %d, want 1", rec.drainers[0].Load())
	}
	cancel()
	rep := <-done
	if !slices.Equal(rep.Skipped, []string{"dead"}) {
		t.Fatalf("report %+v; want dead skipped (interrupted)", rep)
	}
	if _, err := os.Stat(filepath.Join(dir, "dead", ".failed")); !os.IsNotExist(err) {
		t.Fatal("an interrupted drainer marked the slot failed")
	}
	if rec.interrupted.Load() != 1 || rec.drainers[1].Load()+rec.drainers[2].Load() != 0 {
		t.Fatalf("interrupted %d, succeeded+failed %d; want 1, 0", rec.interrupted.Load(), rec.drainers[1].Load()+rec.drainers[2].Load())
	}
	if ids, err := sfqueue.ListOrphans(dir, nil); err != nil || !slices.Equal(ids, []string{"dead"}) {
		t.Fatalf("after interruption ListOrphans = %v, %v; want the slot still an orphan", ids, err)
	}
}

func TestDrainOrphansValidates(t *testing.T) {
	if _, err := DrainOrphans(context.Background(), t.TempDir(), nil, 0, DrainOptions{Sender: testOptions(nil, "ws://h/write/v4")}); err == nil || !strings.Contains(err.Error(), "maxDrainers 0") {
		t.Fatalf("maxDrainers 0 accepted: %v", err)
	}
}

// TestDrainOrphanOfANewerFormatIsLeftInPlace: an orphan slot a newer
// release wrote (a segment of format 3) cannot be opened: its drainer
// fails with an Error log naming the slot and both format versions, and
// the slot is left exactly as it was, without .failed, so that a release
// that reads it can still drain it; the other orphans drain as usual.
func TestDrainOrphanOfANewerFormatIsLeftInPlace(t *testing.T) {
	dir := t.TempDir()
	orphan(t, dir, "dead", 0, 4)
	orphan(t, dir, "newer", 1000, 4)
	segs, _ := filepath.Glob(filepath.Join(dir, "newer", "*.sfseg"))
	if len(segs) != 1 {
		t.Fatalf("segments %v, want one", segs)
	}
	sfqueuetest.SetSegmentVersion(t, segs[0], sfqueue.FormatVersion+1)
	before := slotFiles(t, filepath.Join(dir, "newer"))

	srv := newServer(t, qwptest.Options{})
	rec := &recorder{}
	o := testOptions(rec, srv.URL())
	core, logs := observer.New(zapcore.InfoLevel)
	o.Logger = zap.New(core)
	rep, err := DrainOrphans(context.Background(), dir, nil, 1, DrainOptions{Sender: o})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Drained, []string{"dead"}) || !slices.Equal(rep.Failed, []string{"newer"}) || len(rep.DataLoss) != 0 {
		t.Fatalf("report %+v; want dead drained, newer failed, no DATA_LOSS", rep)
	}
	logged := logs.FilterMessage("orphan slot cannot be opened").FilterField(zap.String("orphan_slot", "newer")).All()
	if len(logged) != 1 || logged[0].Level != zapcore.ErrorLevel {
		t.Fatalf("logs %v; want one Error \"orphan slot cannot be opened\" for newer", logs.All())
	}
	if msg := logged[0].ContextMap()["error"]; !strings.Contains(fmt.Sprint(msg), "format version 3") || !strings.Contains(fmt.Sprint(msg), "newer than version 2") {
		t.Errorf("logged error %q does not name both format versions", msg)
	}
	if after := slotFiles(t, filepath.Join(dir, "newer")); after != before {
		t.Errorf("the newer orphan changed:\nbefore %q\nafter  %q", before, after)
	}
	if ids, err := sfqueue.ListOrphans(dir, nil); err != nil || !slices.Equal(ids, []string{"newer"}) {
		t.Fatalf("ListOrphans after the drain = %v, %v; want newer, still waiting for a release that reads it", ids, err)
	}
	counts := rowIDs(t, srv)
	for id := range int64(20) {
		if counts[id] != 1 {
			t.Errorf("row %d of the drained orphan arrived %d times", id, counts[id])
		}
	}
	if len(counts) != 20 {
		t.Errorf("%d distinct rows arrived, want the 20 of dead and none of newer", len(counts))
	}
	if rec.drainers[0].Load() != 2 || rec.drainers[1].Load() != 1 || rec.drainers[2].Load() != 1 {
		t.Errorf("drainers started/succeeded/failed %d/%d/%d, want 2/1/1",
			rec.drainers[0].Load(), rec.drainers[1].Load(), rec.drainers[2].Load())
	}
}

// slotFiles names every file of the slot dir with its mode and bytes.
func slotFiles(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sb, "%s %v %q\n", e.Name(), fi.Mode(), b)
	}
	return sb.String()
}

// TestDrainOrphansRacingDrainers: two drainers (two collectors starting
// at once on one sf_dir) list the same orphans and race for each, round
// after round: the slot lock lets one drain it, the other skips it; every
// row arrives once, no drainer fails or logs an Error, and no slot is left
// behind. Before, the winner deleted the slot in place, unlinking the .lock
// it held: the loser could create a new .lock and take it meanwhile (two
// holders at once; the deletion then failed, "directory not empty"), or
// lock the slot between the winner's Close and RemoveSlot; both counted a
// failed drainer for a delivered slot.
func TestDrainOrphansRacingDrainers(t *testing.T) {
	rounds := 30
	if testing.Short() {
		rounds = 15
	}
	srv := newServer(t, qwptest.Options{})
	const orphans = 6
	for round := range rounds {
		dir := t.TempDir()
		base := int64(round * orphans * 1000)
		for i := range orphans {
			orphan(t, dir, fmt.Sprintf("dead-%d", i), base+int64(i*1000), 4)
		}
		core, logs := observer.New(zapcore.WarnLevel)
		recs := [2]*recorder{{}, {}}
		reps := make(chan DrainReport, 2)
		for _, rec := range recs {
			go func() {
				o := testOptions(rec, srv.URL())
				o.Logger = zap.New(core)
				rep, err := DrainOrphans(context.Background(), dir, nil, 3, DrainOptions{Sender: o})
				if err != nil {
					t.Error(err)
				}
				reps <- rep
			}()
		}
		var drained []string
		for range 2 {
			rep := <-reps
			if len(rep.Failed) != 0 {
				t.Errorf("round %d: report %+v: a drainer failed", round, rep)
			}
			drained = append(drained, rep.Drained...)
		}
		slices.Sort(drained)
		if len(slices.Compact(drained)) != orphans {
			t.Errorf("round %d: drained %v, want each of the %d orphans", round, drained, orphans)
		}
		counts := rowIDs(t, srv)
		for i := range orphans {
			for id := base + int64(i*1000); id < base+int64(i*1000+20); id++ {
				if counts[id] != 1 {
					t.Errorf("round %d: row %d arrived %d times", round, id, counts[id])
				}
			}
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("round %d: left under sf_dir: %v", round, left)
		}
		if f := recs[0].drainers[2].Load() + recs[1].drainers[2].Load(); f != 0 || logs.Len() != 0 {
			t.Errorf("round %d: drainers_failed %d, want 0; warnings and errors: %v", round, f, logs.All())
		}
		if t.Failed() {
			return
		}
	}
}

// TestDrainOrphanIgnoresAStaleHandoverRequest: a handover request left in
// a slot by an owner that died before it got the slot does not stop the
// drainers that adopt it later: only a request that changes while a
// drainer holds the slot does.
func TestDrainOrphanIgnoresAStaleHandoverRequest(t *testing.T) {
	dir := t.TempDir()
	orphan(t, dir, "dead", 0, 3)
	if err := RequestHandover(filepath.Join(dir, "dead")); err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, qwptest.Options{})
	srv.StallAcks()
	rec := &recorder{}
	done := drainInBackground(context.Background(), dir, 1, testOptions(rec, srv.URL()))
	waitFor(t, "the drainer's frames", func() bool { return srv.Frames() >= 3 })
	time.Sleep(3 * handoverPoll) // several looks at the stale request
	select {
	case rep := <-done:
		t.Fatalf("the drainer stopped for a stale handover request: %+v", rep)
	default:
	}
	if err := RequestHandover(filepath.Join(dir, "dead")); err != nil { // the owner is back
		t.Fatal(err)
	}
	rep := <-done
	if !slices.Equal(rep.Skipped, []string{"dead"}) || rec.interrupted.Load() != 1 || rec.drainers[2].Load() != 0 {
		t.Fatalf("report %+v, interrupted %d, failed %d; want dead handed over (skipped, interrupted, not failed)",
			rep, rec.interrupted.Load(), rec.drainers[2].Load())
	}
	if ids, err := sfqueue.ListOrphans(dir, nil); err != nil || !slices.Equal(ids, []string{"dead"}) {
		t.Fatalf("after the handover ListOrphans = %v, %v; want the slot with its frames, lock free", ids, err)
	}
}

// TestDrainOrphanLargerThanTheCap: an orphan larger than the drainer's own
// MaxTotalBytes (a dead collector's cap was larger, or the orphans of a
// volume add up past it) is drained in full and removed: recovery does not
// apply the cap to what a slot already holds, and a drainer appends nothing.
func TestDrainOrphanLargerThanTheCap(t *testing.T) {
	dir := t.TempDir()
	orphan(t, dir, "big", 0, 40)
	size := int64(0)
	segs, _ := filepath.Glob(filepath.Join(dir, "big", "*.sfseg"))
	for _, s := range segs {
		if fi, err := os.Stat(s); err == nil {
			size += fi.Size()
		}
	}
	const cap = 4 << 10
	if size <= cap {
		t.Fatalf("orphan of %d bytes, want more than the cap %d", size, cap)
	}
	srv := newServer(t, qwptest.Options{})
	rep, err := DrainOrphans(context.Background(), dir, nil, 1, DrainOptions{
		Queue:  sfqueue.Options{MaxTotalBytes: cap, MaxSegmentBytes: 4 << 10},
		Sender: testOptions(nil, srv.URL()),
	})
	if err != nil || !slices.Equal(rep.Drained, []string{"big"}) {
		t.Fatalf("report %+v, %v; want big drained", rep, err)
	}
	counts := rowIDs(t, srv)
	for id := range int64(200) {
		if counts[id] != 1 {
			t.Fatalf("row %d arrived %d times", id, counts[id])
		}
	}
}

// TestDrainOrphansAreBounded: however many orphans there are, at most
// maxDrainers of them are open (queue, connection, goroutines) at a time;
// the rest wait their turn unopened.
func TestDrainOrphansAreBounded(t *testing.T) {
	dir := t.TempDir()
	for i := range 6 {
		orphan(t, dir, fmt.Sprintf("dead-%d", i), int64(i*1000), 2)
	}
	srv := newServer(t, qwptest.Options{})
	srv.StallAcks() // no drainer ever finishes
	rec := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	done := drainInBackground(ctx, dir, 2, testOptions(rec, srv.URL()))
	waitFor(t, "two drainers' frames", func() bool { return srv.Frames() >= 4 })
	time.Sleep(100 * time.Millisecond)
	if n := rec.drainers[0].Load(); n != 2 {
		t.Fatalf("%d drainers started with maxDrainers 2", n)
	}
	if f := srv.Frames(); f != 4 {
		t.Fatalf("%d frames sent, want the 4 of the two open orphans", f)
	}
	cancel()
	if rep := <-done; len(rep.Skipped) != 6 || len(rep.Drained)+len(rep.Failed) != 0 {
		t.Fatalf("report %+v; want all 6 skipped (2 interrupted, 4 never opened)", rep)
	}
}

// drainInBackground runs DrainOrphans (no exclusions) in a goroutine and
// delivers its report.
func drainInBackground(ctx context.Context, dir string, maxDrainers int, o Options) <-chan DrainReport {
	done := make(chan DrainReport, 1)
	go func() {
		rep, _ := DrainOrphans(ctx, dir, nil, maxDrainers, DrainOptions{Sender: o})
		done <- rep
	}()
	return done
}

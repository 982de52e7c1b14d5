package sfqueue

// Regression tests from the review of flush durability's deferred writes
// and sealed rotations (the fifth #14 pass).

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestFlushFailedSealFsyncClosesTheSegmentFile: a sealed segment's file is
// held open by a ref until its fsync succeeds; when that fsync fails and
// latches the queue, Close still closes it.
func TestFlushFailedSealFsyncClosesTheSegmentFile(t *testing.T) {
	cfs, q := flushSealQueue(t, 3)
	cfs.mu.Lock()
	cfs.failSync = func(name string) error {
		if strings.HasSuffix(name, segmentName(1)) {
			return syscall.EIO
		}
		return nil
	}
	cfs.mu.Unlock()
	if _, err := q.AppendBatch(context.Background(), [][]byte{testPayload(4, 200), testPayload(5, 200)}); err == nil {
		t.Fatal("the batch whose sealed segment failed its fsync succeeded")
	}
	q.Close()
	noOpenFiles(t, cfs)
}

// TestFlushAckKeepsASealedSegmentUntilItsFsync: the consumer can read and
// acknowledge a sealed segment's last frames before its fsync has started;
// Ack must not delete it then: its unlink could miss the next group
// fsync's directory fsync, and a power loss would leave its torn tail
// before a newer segment's confirmed frames (a gap recovery sets aside).
func TestFlushAckKeepsASealedSegmentUntilItsFsync(t *testing.T) {
	cfs, q := flushSealQueue(t, 2)
	seg1 := segmentName(1)
	groupIn, groupGo := make(chan struct{}), make(chan struct{})
	spareIn, spareGo := make(chan struct{}), make(chan struct{})
	rmIn, rmGo := make(chan struct{}), make(chan struct{})
	var g1, g2, g3 sync.Once
	cfs.mu.Lock()
	cfs.syncHook = func(name string) {
		switch {
		case strings.HasSuffix(name, seg1):
			g1.Do(func() { close(groupIn); <-groupGo }) // the flusher, in a group fsync
		case strings.HasSuffix(name, spareName):
			g2.Do(func() { close(spareIn); <-spareGo }) // the background goroutine, busy
		}
	}
	cfs.removeHook = func(name string) {
		if strings.HasSuffix(name, seg1) {
			g3.Do(func() { close(rmIn); <-rmGo }) // Ack's unlink, not in the directory yet
		}
	}
	cfs.mu.Unlock()
	relGroup := sync.OnceFunc(func() { close(groupGo) })
	relSpare := sync.OnceFunc(func() { close(spareGo) })
	relRm := sync.OnceFunc(func() { close(rmGo) })
	defer relGroup()
	defer relSpare()
	defer relRm()
	async := func(id uint64) chan error {
		ch := make(chan error, 1)
		go func() { _, err := q.Append(context.Background(), testPayload(id, 200)); ch <- err }()
		return ch
	}
	third := async(3)
	<-groupIn // group fsync of frames 1..3 in flight
	<-spareIn // segment 1 is over half full: a spare is being prepared
	fourth := async(4)
	waitFor(t, "frame 4 taken", func() bool { return q.Stats().FramesAppended == 4 })
	fifth := async(5) // seals segment 1 (frame 4 written and published), starts segment 5
	waitFor(t, "frame 5 taken", func() bool { return q.Stats().FramesAppended == 5 })
	if got := drain(t, q.NewCursor()); len(got) != 4 {
		t.Fatalf("read %d frames, want 1..4", len(got))
	}
	acked := make(chan struct{})
	go func() { q.Ack(4); close(acked) }()
	select {
	case <-rmIn: // Ack unlinks segment 1: held before it reaches the directory
	case <-acked: // Ack kept segment 1 (not yet durable)
	}
	relGroup()
	for i, ch := range []chan error{third, fourth, fifth} {
		if err := <-ch; err != nil {
			t.Fatalf("append %d: %v", i+3, err)
		}
	}
	snap := cfs.PowerLoss(dropUnsynced, nil)
	relSpare()
	relRm()
	<-acked
	q.Close()
	q2 := reopenReplayable(t, snap, "frame 5's append returned after its group fsync")
	got := drain(t, q2.NewCursor())
	if len(got) == 0 || got[len(got)-1].fsn != 5 {
		t.Fatalf("frame 5, confirmed durable, not replayed: %d frames", len(got))
	}
}

// TestTornCreationWithGarbageAfterPowerLoss: a batch across segments cut by
// a power loss during its first segment's fsync, with the crash model's
// garbage (keepAndGarbage): a later segment that holds a torn header and
// garbage but no valid frame is deleted, and the segment before it keeps
// the torn-tail and torn-creation rules, instead of setting the slot aside.
func TestTornCreationWithGarbageAfterPowerLoss(t *testing.T) {
	for _, d := range []Durability{DurabilityPeriodic, DurabilityFlush} {
		t.Run(d.String(), func(t *testing.T) {
			aside := 0
			var example error
			for seed := range uint64(iterations(100, 1000)) {
				cfs := newCrashFS()
				q := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: d,
					SyncInterval: time.Hour, MaxSegmentBytes: segmentHeaderSize + 3*frameSize(100)})
				snap := batchAcrossSegmentsPowerLoss(t, q, cfs, keepAndGarbage, rand.New(rand.NewPCG(seed, 7)))
				q.Close()
				q = mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: snap, Durability: d})
				rep := q.Recovery()
				q.Close()
				if rep.Unreplayable != nil {
					aside++
					example = rep.Unreplayable
				}
			}
			if aside > 0 {
				t.Errorf("%d of %d power losses set the slot aside, e.g. %v", aside, iterations(100, 1000), example)
			}
		})
	}
}

// TestFlushCloseWhileABatchWaitsInItsSeal: Close while a rotating batch
// waits in sealLocked for the fsync of an earlier sealed segment: the
// batch is undone, nothing panics, and no segment file stays open (30
// rounds, as the order of Close and the parked batch varies).
func TestFlushCloseWhileABatchWaitsInItsSeal(t *testing.T) {
	for range 30 {
		cfs, q := flushSealQueue(t, 3)
		entered, release := blockSegment1Sync(cfs)
		rot := make(chan error, 1)
		go func() {
			_, err := q.AppendBatch(context.Background(), [][]byte{testPayload(4, 200), testPayload(5, 200)})
			rot <- err
		}()
		<-entered
		a := make(chan error, 1)
		go func() {
			_, err := q.AppendBatch(context.Background(), [][]byte{testPayload(6, 200), testPayload(7, 600)})
			a <- err
		}()
		waitFor(t, "batch A parked in its rotation", func() bool {
			q.mu.Lock()
			defer q.mu.Unlock()
			return q.active != nil && q.active.base == 5 && q.active.size == segmentHeaderSize+2*frameSize(200)
		})
		closed := closeAsync(t, q)
		release()
		<-rot
		<-a
		<-closed
		noOpenFiles(t, cfs)
	}
}

// TestFlushSealsASegmentItsGroupFsyncIsStillFsyncing: a rotation while a
// group fsync of the active segment is in flight (its dirty flag already
// cleared) seals it all the same, so a second rotation does not write the
// next segment's frames before it is durable, and a power loss then keeps
// the confirmed frames.
func TestFlushSealsASegmentItsGroupFsyncIsStillFsyncing(t *testing.T) {
	cfs, q := flushSealQueue(t, 2)
	entered, blocked := blockingSyncOf(cfs, segmentName(1))
	release := sync.OnceFunc(func() { close(blocked) })
	defer release()
	third := make(chan error, 1)
	go func() { _, err := q.Append(context.Background(), testPayload(3, 200)); third <- err }()
	<-entered // the group fsync of frame 3 (segment 1) is in flight
	batch := make(chan error, 1)
	go func() {
		// 4 (600 bytes) does not fit segment 1: segment 4 holds 4 and 5,
		// 6 starts segment 6.
		_, err := q.AppendBatch(context.Background(), [][]byte{testPayload(4, 600), testPayload(5, 200), testPayload(6, 200)})
		batch <- err
	}()
	poll := func(cond func() bool) { // a fixed queue may hold the batch until segment 1 is durable
		for end := time.Now().Add(time.Second); !cond() && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
	}
	poll(func() bool { return q.Stats().FramesAppended == 6 })
	cfs.mu.Lock()
	seg4 := cfs.names["/d/s/"+segmentName(4)]
	var nz int64
	if seg4 != nil {
		nz = nonZeroExtent(seg4.data)
	}
	cfs.mu.Unlock()
	if nz > segmentHeaderSize {
		t.Errorf("segment 4 holds %d written bytes while segment 1's fsync is still in flight; want its header only", nz)
	}
	// What a power loss now keeps, once something fsynced the directory
	// (the .ack-watermark's replace) and segment 4's seal fsync ended.
	poll(func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		for _, s := range q.segs {
			if s.sealing {
				return false
			}
		}
		return true
	})
	if err := cfs.SyncDir("/d/s"); err != nil {
		t.Fatal(err)
	}
	snap := cfs.PowerLoss(dropUnsynced, nil)
	release()
	<-third
	<-batch
	q.Close()
	reopenReplayable(t, snap, "frames 1 and 2 were confirmed")
}

// flushSealOptions are flushSealQueue's options on fsys (a power loss's
// snapshot, to reopen).
func flushSealOptions(fsys FS) Options {
	return Options{Dir: "/d", SenderID: "s", FS: fsys, Durability: DurabilityFlush, MaxSegmentBytes: 1024}
}

// flushSealQueue opens a flush-durability queue of 1 KiB segments (four
// 200-byte frames each) on a crash file system and appends frames
// 1..frames.
func flushSealQueue(t *testing.T, frames int) (*crashFS, *Queue) {
	t.Helper()
	cfs := newCrashFS()
	q := mustOpen(t, flushSealOptions(cfs))
	for i := range frames {
		mustAppend(t, q, testPayload(uint64(i+1), 200))
	}
	return cfs, q
}

// blockSegment1Sync blocks the next fsync of segment 1: entered is closed
// when it starts; release (idempotent) lets it go, and is deferred before
// the queue's Close so that a failing test does not hang.
func blockSegment1Sync(cfs *crashFS) (entered <-chan struct{}, release func()) {
	e, blocked := blockingSyncOf(cfs, segmentName(1))
	return e, sync.OnceFunc(func() { close(blocked) })
}

// reopenReplayable opens the power-loss snapshot snap in flush durability
// (closed when the test ends) and fails the test if recovery set the slot
// aside: why says what made its frames confirmed.
func reopenReplayable(t *testing.T, snap *crashFS, why string) *Queue {
	t.Helper()
	q := mustOpen(t, flushSealOptions(snap))
	t.Cleanup(func() { q.Close() })
	if rep := q.Recovery(); rep.Unreplayable != nil {
		t.Fatalf("%s, yet after a power loss the slot was set aside: %v", why, rep.Unreplayable)
	}
	return q
}

// noOpenFiles fails the test if a file of cfs is still open.
func noOpenFiles(t *testing.T, cfs *crashFS) {
	t.Helper()
	cfs.mu.Lock()
	n := cfs.openFiles
	cfs.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d files still open after Close", n)
	}
}

// TestPeriodicTornFirstFrameOfANewSegmentIsCounted: in periodic durability
// frame 3 is accepted into a new segment and a power loss keeps the
// segment's header and half of the frame: the new segment, after a whole
// one, is the tail, and the frame is counted as torn (the mode's loss
// window, logged at Error), not deleted unseen.
func TestPeriodicTornFirstFrameOfANewSegmentIsCounted(t *testing.T) {
	cfs := newCrashFS()
	o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityPeriodic,
		SyncInterval: time.Hour, MaxSegmentBytes: segmentHeaderSize + 2*frameSize(200)}
	q := mustOpen(t, o)
	mustAppend(t, q, testPayload(1, 200))
	mustAppend(t, q, testPayload(2, 200))
	mustAppend(t, q, testPayload(3, 200)) // rotation: segment 1 fsynced, 3 created
	if err := cfs.SyncDir("/d/s"); err != nil {
		t.Fatal(err)
	}
	name := "/d/s/" + segmentName(3)
	cfs.mu.Lock()
	cur := append([]byte(nil), cfs.names[name].data[:segmentHeaderSize+frameSize(200)/2]...)
	cfs.mu.Unlock()
	snap := cfs.PowerLoss(dropUnsynced, nil)
	q.Close()
	snap.mu.Lock()
	ino := snap.names[name]
	if ino == nil {
		snap.mu.Unlock()
		t.Fatal("segment 3's name not in the snapshot")
	}
	ino.data = writeAt(ino.data, cur, 0)
	ino.synced = append([]byte(nil), ino.data...)
	snap.mu.Unlock()
	o.FS = snap
	q2 := mustOpen(t, o)
	defer q2.Close()
	rep := q2.Recovery()
	t.Logf("report: torn bytes %d, torn frames %d from %d, unreplayable %v", rep.TornBytes, rep.TornFrames, rep.TornFirstFSN, rep.Unreplayable)
	if rep.TornFrames != 1 || rep.TornFirstFSN != 3 {
		t.Fatalf("accepted frame 3 torn by the power loss: TornFrames %d from %d, want 1 from 3", rep.TornFrames, rep.TornFirstFSN)
	}
}

// TestFlushFailedSealFsyncOfACreatedSegmentCloses: a batch spanning four
// new segments whose second sealed segment fails its fsync is undone, and
// the file of that segment (created by the batch, holding a sealing ref)
// is closed all the same.
func TestFlushFailedSealFsyncOfACreatedSegmentCloses(t *testing.T) {
	cfs := newCrashFS()
	q := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityFlush, MaxSegmentBytes: 1024})
	mustAppend(t, q, testPayload(1, 600))
	// Segment 1 is over half full: wait for the spare, which segment 2
	// then is (its file keeps the spare's name in the crash file system).
	waitFor(t, "spare ready", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.spare != nil && !q.sparing
	})
	cfs.mu.Lock()
	cfs.failSync = func(name string) error {
		if strings.HasSuffix(name, segmentName(2)) || strings.HasSuffix(name, spareName) {
			return syscall.EIO
		}
		return nil
	}
	cfs.mu.Unlock()
	var batch [][]byte
	for i := range 4 {
		batch = append(batch, testPayload(uint64(i+2), 600))
	}
	if _, err := q.AppendBatch(context.Background(), batch); err == nil {
		t.Fatal("batch succeeded")
	}
	q.Close()
	noOpenFiles(t, cfs)
}

// TestPeriodicRotationDuringTheTickFsyncWaitsForIt: a rotation while the
// periodic fsync of the active segment is in flight (its dirty flag
// already cleared) fsyncs it before writing the next segment's frame.
func TestPeriodicRotationDuringTheTickFsyncWaitsForIt(t *testing.T) {
	cfs := newCrashFS()
	entered, blocked := blockingSyncOf(cfs, segmentName(1))
	q := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityPeriodic,
		SyncInterval: 5 * time.Millisecond, MaxSegmentBytes: 1024})
	mustAppend(t, q, testPayload(1, 200))
	mustAppend(t, q, testPayload(2, 200))
	<-entered // the periodic fsync of segment 1 is in flight
	done := make(chan error, 1)
	go func() { _, err := q.Append(context.Background(), testPayload(3, 600)); done <- err }()
	returned := false
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
		returned = true
	case <-time.After(500 * time.Millisecond): // a rotation that waits for segment 1: fine
	}
	cfs.mu.Lock()
	var nz int64
	if seg := cfs.names["/d/s/"+segmentName(3)]; seg != nil {
		nz = nonZeroExtent(seg.data)
	}
	cfs.mu.Unlock()
	close(blocked)
	if !returned {
		<-done
	}
	q.Close()
	if nz > segmentHeaderSize {
		t.Fatalf("segment 3 holds %d written bytes while segment 1's fsync is still in flight; want its header only", nz)
	}
}

// TestAdmissionKeepsASealedSegmentUntilItsFsync: an append that needs the
// room of a wholly acked segment still being fsynced (sealed at a rotation
// in flush durability while the group fsync covering it ran) waits for
// that fsync before deleting it, as Ack does: deleted first, a power loss
// could keep the next segment's frames and lose its tail.
func TestAdmissionKeepsASealedSegmentUntilItsFsync(t *testing.T) {
	cfs := newCrashFS()
	o := flushSealOptions(cfs)
	o.MaxTotalBytes = 1400 // segment 1 (with its unused room) and segment 5, not a third frame
	q := mustOpen(t, o)
	for i := range 3 {
		mustAppend(t, q, testPayload(uint64(i+1), 200))
	}
	// Every fsync of segment 1 waits for release from here on.
	entered, gate := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(gate) })
	var once sync.Once
	cfs.mu.Lock()
	cfs.syncHook = func(name string) {
		if strings.HasSuffix(name, segmentName(1)) {
			once.Do(func() { close(entered) })
			<-gate
		}
	}
	cfs.mu.Unlock()
	defer q.Close()
	defer release()                // before Close, which waits for the fsyncs
	four := appendAsync(q, 4, 200) // its group fsync of segment 1 waits
	<-entered
	q.Ack(4)
	five := appendAsync(q, 5, 200) // rotation: segment 1, wholly acked, sealed
	waitFor(t, "segment 1 to be sealed", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.segs) == 2 && q.segs[0].sealing
	})
	six := appendAsync(q, 6, 200) // needs segment 1's room
	time.Sleep(100 * time.Millisecond)
	cfs.mu.Lock()
	_, kept := cfs.names["/d/s/"+segmentName(1)]
	cfs.mu.Unlock()
	if !kept {
		t.Fatal("segment 1 was deleted while its fsync was still running")
	}
	select {
	case err := <-six:
		t.Fatalf("frame 6 was appended (%v) before segment 1's fsync ended", err)
	default:
	}
	release()
	for _, done := range []chan error{four, five, six} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if st := q.Stats(); st.Segments != 1 || st.PublishedFSN != 6 {
		t.Fatalf("%+v; want segment 1 gone and frames 5 and 6 in one segment", st)
	}
}

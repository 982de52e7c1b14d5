package sfqueue

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// fillOptions: 1 KiB segments and a 3520-byte cap. A 200-byte payload takes
// frame200 (212) bytes, so four fit a segment (24 + 4*212 = 872 bytes) and
// the cap holds four full segments (3488 bytes) but not a fifth, with room
// for one more small frame in the last.
const frame200 = 200 + frameOverhead

func fillOptions(o Options, onFull OnFull) Options {
	o.MaxSegmentBytes = 1024
	o.MaxTotalBytes = 3520
	o.OnFull = onFull
	o.AppendDeadline = 50 * time.Millisecond
	return o
}

// fillUp appends 200-byte payloads until the queue refuses one and returns
// how many it took and the refusal.
func fillUp(t *testing.T, q *Queue) (int, error) {
	t.Helper()
	for i := range 1000 {
		if _, err := q.Append(context.Background(), testPayload(uint64(i+1), 200)); err != nil {
			return i, err
		}
	}
	t.Fatal("queue never became full")
	return 0, nil
}

func TestBlockFullErrorPublishingAndReconnecting(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			q := mustOpen(t, fillOptions(m.opts(t), OnFullBlock))
			defer q.Close()
			n, err := fillUp(t, q)
			var fe *FullError
			if !errors.As(err, &fe) || fe.Reason != Publishing || !fe.Retryable() {
				t.Fatalf("append into a full queue: %v, want a retryable *FullError while publishing", err)
			}
			if n != 16 || fe.Used > fe.Cap || fe.Cap != 3520 || fe.Need != frame200 || fe.Waited < 50*time.Millisecond {
				t.Fatalf("took %d frames, error %+v; want 16 frames, used <= cap 3520, need %d, waited >= deadline", n, fe, frame200)
			}
			if !strings.Contains(fe.Error(), "publishing") {
				t.Fatalf("error text %q does not say publishing", fe.Error())
			}
			if st := q.Stats(); !st.AtCap || st.FullErrors != 1 || st.FramesEvicted != 0 {
				t.Fatalf("stats after a refusal: %+v; want at the cap, 1 full error, nothing evicted", st)
			}

			outage := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
			q.SetConsumerState(ConsumerState{Reconnecting: true, Attempts: 7, OutageStart: outage})
			_, err = q.Append(context.Background(), testPayload(99, 200))
			if !errors.As(err, &fe) || fe.Reason != Reconnecting || fe.Attempts != 7 || !fe.OutageStart.Equal(outage) {
				t.Fatalf("append while reconnecting: %v; want Reconnecting with 7 attempts since %v", err, outage)
			}
			for _, want := range []string{"reconnecting", "7 attempts", "2026-11-30T14:00:00Z"} {
				if !strings.Contains(fe.Error(), want) {
					t.Fatalf("error text %q does not contain %q", fe.Error(), want)
				}
			}
			// Nothing was dropped: all 16 frames are still readable.
			if got := drain(t, q.NewCursor()); len(got) != 16 {
				t.Fatalf("read %d frames after refusals, want 16", len(got))
			}
		})
	}
}

func TestBlockWaitsForAckDrivenTrim(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			o := fillOptions(m.opts(t), OnFullBlock)
			o.AppendDeadline = time.Minute
			q := mustOpen(t, o)
			defer q.Close()
			for i := range 16 {
				mustAppend(t, q, testPayload(uint64(i+1), 200))
			}
			done := make(chan error, 1)
			go func() {
				_, err := q.Append(context.Background(), testPayload(17, 200))
				done <- err
			}()
			select {
			case err := <-done:
				t.Fatalf("append into a full queue returned %v before any ack", err)
			case <-time.After(20 * time.Millisecond):
			}
			q.Ack(4) // frees the first segment
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("append after an ack freed a segment: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("append still blocked after an ack freed a segment")
			}
			if q.PublishedFSN() != 17 {
				t.Fatalf("PublishedFSN %d, want 17", q.PublishedFSN())
			}
		})
	}
}

func TestBlockEndsOnContext(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			o := fillOptions(m.opts(t), OnFullBlock)
			o.AppendDeadline = time.Minute
			q := mustOpen(t, o)
			defer q.Close()
			for i := range 16 {
				mustAppend(t, q, testPayload(uint64(i+1), 200))
			}
			// Cancellation ends the wait at once with the context's error.
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := q.Append(ctx, testPayload(17, 200))
				done <- err
			}()
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("canceled append: %v, want context.Canceled", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("cancel did not end the wait")
			}
			// A caller deadline shorter than AppendDeadline caps the wait and
			// still reports a *FullError.
			ctx, cancel = context.WithTimeout(context.Background(), 30*time.Millisecond)
			defer cancel()
			_, err := q.Append(ctx, testPayload(18, 200))
			var fe *FullError
			if !errors.As(err, &fe) || fe.Waited >= time.Minute {
				t.Fatalf("append with a 30ms context deadline: %v; want *FullError well before the 1 min AppendDeadline", err)
			}
			// Close ends the wait too.
			go func() {
				_, err := q.Append(context.Background(), testPayload(19, 200))
				done <- err
			}()
			time.Sleep(10 * time.Millisecond)
			q.Close()
			if err := <-done; !errors.Is(err, ErrClosed) {
				t.Fatalf("append waiting when the queue closed: %v, want ErrClosed", err)
			}
		})
	}
}

func TestEvictOldestCountsWhatItDrops(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			q := mustOpen(t, fillOptions(m.opts(t), OnFullEvictOldest))
			defer q.Close()
			c := q.NewCursor()
			for i := range 16 {
				mustAppend(t, q, testPayload(uint64(i+1), 200))
			}
			q.Ack(2) // frames 1 and 2 of the first segment are acked
			// The 17th frame needs a fifth segment: the first one goes,
			// with its two unacked frames.
			if fsn := mustAppend(t, q, testPayload(17, 200)); fsn != 17 {
				t.Fatalf("FSN %d, want 17", fsn)
			}
			st := q.Stats()
			if st.FramesEvicted != 2 || st.BytesEvicted != 400 || st.AckedFSN != 4 || !st.AtCap || st.BytesAcked != 400 {
				t.Fatalf("after one eviction: %+v; want 2 frames / 400 bytes evicted, 400 acked, acked FSN 4, at the cap", st)
			}
			// Four more segments' worth evicts four more segments, all unacked.
			for i := 18; i <= 33; i++ {
				mustAppend(t, q, testPayload(uint64(i), 200))
			}
			st = q.Stats()
			if st.FramesEvicted != 18 || st.BytesEvicted != 18*200 || st.UsedBytes > st.CapacityBytes {
				t.Fatalf("after 17 more frames: %+v; want 18 evicted, 3600 bytes, used <= cap", st)
			}
			// The cursor skips to the oldest retained frame.
			fsn, p, ok, err := c.Next()
			if err != nil || !ok || fsn != st.AckedFSN+1 {
				t.Fatalf("Next after evictions = %d, %v, %v; want %d", fsn, ok, err, st.AckedFSN+1)
			}
			if id, err := checkTestPayload(p); err != nil || id != fsn {
				t.Fatalf("frame %d holds payload %d: %v", fsn, id, err)
			}
			if st.FullErrors != 0 {
				t.Fatalf("evict_oldest refused %d appends", st.FullErrors)
			}
		})
	}
}

func TestFrameLargerThanCapIsAdmittedWhenEmpty(t *testing.T) {
	for _, m := range bothModes {
		for _, onFull := range []OnFull{OnFullBlock, OnFullEvictOldest} {
			t.Run(m.name+"/"+onFull.String(), func(t *testing.T) {
				o := m.opts(t)
				o.MaxSegmentBytes = 8192
				o.MaxTotalBytes = 1000
				o.OnFull = onFull
				o.AppendDeadline = 20 * time.Millisecond
				q := mustOpen(t, o)
				defer q.Close()
				big := testPayload(1, 5000)
				if fsn := mustAppend(t, q, big); fsn != 1 {
					t.Fatalf("big frame into an empty queue: FSN %d", fsn)
				}
				_, err := q.Append(context.Background(), testPayload(2, 5000))
				if onFull == OnFullBlock {
					var fe *FullError
					if !errors.As(err, &fe) {
						t.Fatalf("second big frame while the first is unacked: %v, want *FullError", err)
					}
					q.Ack(1)
					if fsn := mustAppend(t, q, testPayload(3, 5000)); fsn != 2 {
						t.Fatalf("big frame after the first was acked: FSN %d, want 2", fsn)
					}
				} else if err != nil || q.Stats().FramesEvicted != 1 {
					t.Fatalf("evict_oldest with a big frame: %v, %+v", err, q.Stats())
				}
			})
		}
	}
}

// TestDiskFullIsAFullQueue: with periodic or flush durability a full disk
// shows when a segment is preallocated; memory durability does not
// preallocate (doc.go), so it shows as ENOSPC from a write. Either way it is
// a *FullError with reason DiskFull, never a fatal error.
func TestDiskFullIsAFullQueue(t *testing.T) {
	noSpace := func(name string) error {
		if strings.HasSuffix(name, segmentSuffix) {
			return syscall.ENOSPC
		}
		return nil
	}
	cases := []struct {
		durability Durability
		// fill makes the disk full the way this durability meets it.
		fill func(c *crashFS)
		// segBytes is the file size of the first segment after 4 frames.
		segBytes int
	}{
		{DurabilityPeriodic, func(c *crashFS) { c.failAlloc = func(string, int64) error { return syscall.ENOSPC } }, 1024},
		{DurabilityMemory, func(c *crashFS) { c.failWrite = noSpace }, segmentHeaderSize + 4*frame200},
	}
	for _, tc := range cases {
		for _, onFull := range []OnFull{OnFullBlock, OnFullEvictOldest} {
			t.Run(tc.durability.String()+"/"+onFull.String(), func(t *testing.T) {
				cfs := newCrashFS()
				o := Options{Dir: "/d", SenderID: "s", FS: cfs, MaxSegmentBytes: 1024, OnFull: onFull,
					Durability: tc.durability, AppendDeadline: 30 * time.Millisecond}
				q := mustOpen(t, o)
				defer q.Close()
				for i := range 4 {
					mustAppend(t, q, testPayload(uint64(i+1), 200))
				}
				// The active segment is over half full, so periodic durability
				// prepares a spare in the background; a spare ready before the
				// disk fills would take the rotation off the path this test
				// checks. Wait for it to settle and drop it.
				waitFor(t, "spare settled", func() bool {
					q.mu.Lock()
					defer q.mu.Unlock()
					return !q.sparing
				})
				q.mu.Lock()
				q.dropSpareLocked()
				q.mu.Unlock()
				cfs.mu.Lock()
				if n := len(cfs.names[clean("/d/s/"+segmentName(1))].data); n != tc.segBytes {
					t.Errorf("first segment file is %d bytes, want %d (preallocated only when fsyncing)", n, tc.segBytes)
				}
				tc.fill(cfs)
				cfs.mu.Unlock()
				_, err := q.Append(context.Background(), testPayload(5, 200))
				var fe *FullError
				if !errors.As(err, &fe) || fe.Reason != DiskFull || !strings.Contains(err.Error(), "ENOSPC") {
					t.Fatalf("append needing a segment on a full disk: %v; want *FullError DiskFull", err)
				}
				if onFull == OnFullEvictOldest && q.Stats().FramesEvicted != 4 {
					t.Fatalf("evict_oldest on a full disk evicted %d frames, want the 4 of the only segment", q.Stats().FramesEvicted)
				}
				if q.Stats().Fatal != nil {
					t.Fatalf("ENOSPC latched a fatal error: %v", q.Stats().Fatal)
				}
				for _, n := range cfs.fileNames() {
					if strings.HasSuffix(n, segmentName(5)) {
						t.Fatalf("the segment that could not be created was left behind: %s", n)
					}
				}
				cfs.mu.Lock()
				cfs.failAlloc, cfs.failWrite = nil, nil
				cfs.mu.Unlock()
				if fsn := mustAppend(t, q, testPayload(5, 200)); fsn != 5 {
					t.Fatalf("append once the disk has room: FSN %d, want 5", fsn)
				}
			})
		}
	}
}

func TestWriteENOSPCUndoesTheBatch(t *testing.T) {
	cfs := newCrashFS()
	o := Options{Dir: "/d", SenderID: "s", FS: cfs, MaxSegmentBytes: 1024, AppendDeadline: 10 * time.Millisecond}
	q := mustOpen(t, o)
	defer q.Close()
	mustAppend(t, q, testPayload(1, 100))
	cfs.mu.Lock()
	// Memory durability does not preallocate, so a full disk shows here:
	// the batch's second segment is created, then the frame write into
	// the first fails.
	cfs.failWrite = func(name string) error {
		if strings.HasSuffix(name, segmentName(1)) {
			return syscall.ENOSPC
		}
		return nil
	}
	cfs.mu.Unlock()
	_, err := q.AppendBatch(context.Background(), [][]byte{testPayload(2, 600), testPayload(3, 600)})
	var fe *FullError
	if !errors.As(err, &fe) || fe.Reason != DiskFull {
		t.Fatalf("batch write hitting ENOSPC: %v, want DiskFull", err)
	}
	if q.Stats().Fatal != nil {
		t.Fatalf("ENOSPC latched a fatal error: %v", q.Stats().Fatal)
	}
	for _, n := range cfs.fileNames() {
		if strings.HasSuffix(n, segmentName(2)) {
			t.Fatalf("the refused batch's segment was left behind: %s", n)
		}
	}
	cfs.mu.Lock()
	cfs.failWrite = nil
	cfs.mu.Unlock()
	if q.PublishedFSN() != 1 || len(drain(t, q.NewCursor())) != 1 {
		t.Fatalf("a refused batch left frames behind: published %d", q.PublishedFSN())
	}
	if fsn := mustAppend(t, q, testPayload(2, 100)); fsn != 2 {
		t.Fatalf("append after the disk recovered: FSN %d", fsn)
	}
	q.Close()
	// Power loss after the refusal must not resurrect the refused frames.
	q2 := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs.PowerLoss(dropUnsynced, nil)})
	defer q2.Close()
	for _, f := range drain(t, q2.NewCursor()) {
		if id, err := checkTestPayload(f.payload); err != nil || id != f.fsn || len(f.payload) != 100 {
			t.Fatalf("recovered frame %d: id %d len %d %v", f.fsn, id, len(f.payload), err)
		}
	}
}

func TestFatalFsyncLatches(t *testing.T) {
	cfs := newCrashFS()
	o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityFlush}
	q := mustOpen(t, o)
	defer q.Close()
	mustAppend(t, q, testPayload(1, 100))
	boom := fmt.Errorf("EIO: %w", syscall.EIO)
	var segSyncs atomic.Int64 // segment fsyncs from here on (the watermark's are not retries)
	cfs.mu.Lock()
	cfs.failSync = func(name string) error {
		if filepath.Ext(name) == segmentSuffix {
			return boom
		}
		return nil
	}
	cfs.syncHook = func(name string) {
		if filepath.Ext(name) == segmentSuffix {
			segSyncs.Add(1)
		}
	}
	cfs.mu.Unlock()

	_, err := q.Append(context.Background(), testPayload(2, 100))
	var fatal *FatalError
	if !errors.As(err, &fatal) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("append whose fsync fails: %v, want *FatalError wrapping EIO", err)
	}
	cfs.mu.Lock()
	cfs.failSync = nil // even a healthy disk now must not be trusted
	cfs.mu.Unlock()
	_, err2 := q.Append(context.Background(), testPayload(3, 100))
	if !errors.As(err2, &fatal) {
		t.Fatalf("append after a failed fsync: %v, want the latched *FatalError", err2)
	}
	if syncs := segSyncs.Load(); syncs != 1 {
		t.Fatalf("%d segment fsyncs after the failure, want exactly 1 (never retried)", syncs)
	}
	st := q.Stats()
	if st.DurableFSN != 1 || st.Fatal == nil {
		t.Fatalf("stats after a failed fsync: durable %d fatal %v; want durable 1", st.DurableFSN, st.Fatal)
	}
	// The consumer can still drain what is there.
	if got := drain(t, q.NewCursor()); len(got) != 2 {
		t.Fatalf("cursor after the latch read %d frames, want 2", len(got))
	}
	if err := q.AddSymbols(0, 0, [][]byte{[]byte("a")}); !errors.As(err, &fatal) {
		t.Fatalf("AddSymbols after the latch: %v", err)
	}
	if err := q.Close(); !errors.As(err, &fatal) {
		t.Fatalf("Close after the latch: %v, want the latched *FatalError again", err)
	}
	// Close records frame 2 as published, but not as fsynced: a torn FSN 2
	// is then a torn write, not damage to fsynced data.
	if w, ok, err := readWatermark(cfs, "/d/s"); !ok || err != nil || w.published != 2 || w.synced != 1 {
		t.Fatalf(".ack-watermark after the latch: %+v (ok %v, %v); want FSN 2 published, 1 synced", w, ok, err)
	}
}

// TestCloseWatermarkSaysWhatWasFsynced: Close records every written frame
// as published, and which of them a completed fsync covered (periodic and
// flush: all; memory: not the active segment), which decides whether
// recovery may take damage to them for a torn write.
func TestCloseWatermarkSaysWhatWasFsynced(t *testing.T) {
	for _, d := range []Durability{DurabilityMemory, DurabilityPeriodic, DurabilityFlush} {
		t.Run(d.String(), func(t *testing.T) {
			o := Options{Dir: t.TempDir(), SenderID: "s", Durability: d}
			q := mustOpen(t, o)
			for i := range 3 {
				mustAppend(t, q, testPayload(uint64(i+1), 100))
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			scan, err := ScanSlot(filepath.Join(o.Dir, o.SenderID))
			if err != nil {
				t.Fatal(err)
			}
			if w := scan.Watermark; !scan.WatermarkOK || w.Published != 3 || (w.Durable == 3) != (d != DurabilityMemory) ||
				!w.DurabilityKnown || w.Durability != d {
				t.Fatalf("watermark %+v (ok %v); want FSN 3 published, synced but in memory durability (the active segment)", w, scan.WatermarkOK)
			}
		})
	}
}

func TestAddSymbolsOnAFullDisk(t *testing.T) {
	cfs := newCrashFS()
	q := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs})
	defer q.Close()
	cfs.mu.Lock()
	cfs.failWrite = func(name string) error {
		if strings.Contains(name, symbolDictFile) {
			return syscall.ENOSPC
		}
		return nil
	}
	cfs.mu.Unlock()
	err := q.AddSymbols(0, 0, [][]byte{[]byte("a")})
	var fe *FullError
	if !errors.As(err, &fe) || fe.Reason != DiskFull {
		t.Fatalf("AddSymbols on a full disk: %v, want *FullError DiskFull", err)
	}
	if len(symbols(t, q, 0)) != 0 || q.Stats().Fatal != nil {
		t.Fatalf("a refused AddSymbols changed the dictionary or latched: %q %v", symbols(t, q, 0), q.Stats().Fatal)
	}
	cfs.mu.Lock()
	cfs.failWrite = nil
	cfs.mu.Unlock()
	if err := q.AddSymbols(0, 0, [][]byte{[]byte("a")}); err != nil {
		t.Fatalf("AddSymbols once the disk has room: %v", err)
	}
}

// TestUnackedBytesAndAtCap: UnackedBytes leaves out the acknowledged frames
// the segment taking appends still holds, and AtCap is set from the first
// append that finds no room until acknowledgements free a segment.
func TestUnackedBytesAndAtCap(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			q := mustOpen(t, fillOptions(m.opts(t), OnFullBlock))
			defer q.Close()
			for i := range 6 { // one full segment (4 frames) and 2 frames in the next
				mustAppend(t, q, testPayload(uint64(i+1), 200))
			}
			st := q.Stats()
			if st.UsedBytes != 2*24+6*frame200 || st.UnackedBytes != st.UsedBytes || st.AtCap {
				t.Fatalf("6 frames unacked: %+v; want used = unacked = %d, not at cap", st, 2*24+6*frame200)
			}
			q.Ack(5) // deletes the sealed segment; the active one keeps frame 5
			if st := q.Stats(); st.UsedBytes != 24+2*frame200 || st.UnackedBytes != frame200 {
				t.Fatalf("after acking 5 of 6: used %d unacked %d; want %d and %d", st.UsedBytes, st.UnackedBytes, 24+2*frame200, frame200)
			}
			q.Ack(6)
			if st := q.Stats(); st.UsedBytes != 24+2*frame200 || st.UnackedBytes != 0 {
				t.Fatalf("everything acked: used %d unacked %d; want %d and 0", st.UsedBytes, st.UnackedBytes, 24+2*frame200)
			}
			if _, err := fillUp(t, q); err == nil {
				t.Fatal("fillUp ended without a refusal")
			}
			if st := q.Stats(); !st.AtCap || st.FullErrors != 1 {
				t.Fatalf("after a refusal: %+v; want AtCap and 1 full error", st)
			}
			mustAppend(t, q, testPayload(100, 20)) // a small frame still fits: the queue stays at its cap
			if st := q.Stats(); !st.AtCap {
				t.Fatalf("a small frame fitted, and AtCap was cleared without any room freed: %+v", st)
			}
			q.Ack(q.PublishedFSN())
			if st := q.Stats(); st.AtCap || st.UnackedBytes != 0 {
				t.Fatalf("acks freed the sealed segments, but: %+v; want AtCap cleared, 0 unacked", st)
			}
		})
	}
}

// TestEvictionKeepsAtCap: under evict_oldest every append that had to evict
// leaves AtCap set, also when the next appends fit the freed segment; the
// queue itself logs nothing per eviction (the owner
// summarises FramesEvicted).
func TestEvictionKeepsAtCap(t *testing.T) {
	q := mustOpen(t, fillOptions(Options{}, OnFullEvictOldest))
	defer q.Close()
	for i := range 30 {
		mustAppend(t, q, testPayload(uint64(i+1), 200))
	}
	st := q.Stats()
	if !st.AtCap || st.FramesEvicted == 0 || st.UnackedBytes != st.UsedBytes {
		t.Fatalf("after evicting: %+v; want AtCap, frames evicted, every retained byte unacked", st)
	}
}

// TestFitsChangesNothing: Fits answers from the counts alone: room that
// acknowledged segments would give back counts, nothing is deleted, and it
// never waits.
func TestFitsChangesNothing(t *testing.T) {
	o := fillOptions(Options{}, OnFullBlock)
	q := mustOpen(t, o)
	defer q.Close()
	one := Batch{Payloads: [][]byte{testPayload(99, 200)}}
	n := 0
	for ; q.Fits(one); n++ {
		mustAppend(t, q, testPayload(uint64(n+1), 200))
	}
	if n < 8 {
		t.Fatalf("Fits said no after %d frames", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := q.Append(ctx, testPayload(99, 200)); err == nil {
		t.Fatal("Fits said no, and the append found room")
	}
	q.Ack(uint64(n)) // Ack deletes all but the segment taking appends
	segs := q.Stats().Segments
	if !q.Fits(one) {
		t.Fatal("the acknowledged segment's room does not count")
	}
	if q.Stats().Segments != segs || segs == 0 {
		t.Fatalf("%d segments after Fits, %d before", q.Stats().Segments, segs)
	}
}

// A full disk refuses every append: the refusals are counted (FullErrors,
// DiskFullErrors), Fits answers no so the exporter counts the stall, and
// the Warn is logged once per noSpaceLogInterval, not once per refusal
// (issue 23, finding 5: 1,000 refused appends logged 1,001 lines).
func TestDiskFullIsSummarisedAndCounted(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	cfs := newCrashFS()
	q := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs, MaxSegmentBytes: 1024,
		AppendDeadline: time.Millisecond, Logger: zap.New(core)})
	defer q.Close()
	mustAppend(t, q, testPayload(1, 100))
	cfs.mu.Lock()
	cfs.failWrite = func(string) error { return syscall.ENOSPC } // memory durability: the frame write meets it
	cfs.mu.Unlock()
	const refused = 1000
	for i := range refused {
		if _, err := q.Append(context.Background(), testPayload(uint64(i+2), 100)); err == nil {
			t.Fatal("append on a full disk succeeded")
		}
	}
	if err := q.AddSymbols(0, 0, [][]byte{[]byte("x")}); err == nil {
		t.Fatal("AddSymbols on a full disk succeeded")
	}
	st := q.Stats()
	if st.FullErrors != refused+1 || st.DiskFullErrors != refused+1 {
		t.Fatalf("FullErrors %d, DiskFullErrors %d; want %d refusals counted in both", st.FullErrors, st.DiskFullErrors, refused+1)
	}
	if q.Fits(Batch{Payloads: [][]byte{testPayload(9, 100)}}) {
		t.Fatal("Fits answers yes on a full disk: the stall goes uncounted")
	}
	if n := logs.FilterMessageSnippet("file system full").Len(); n != 1 {
		t.Fatalf("%d ENOSPC lines for %d refusals, want 1 (summarised)", n, refused+1)
	}
	cfs.mu.Lock()
	cfs.failWrite = nil
	cfs.mu.Unlock()
	if fsn := mustAppend(t, q, testPayload(2, 100)); fsn != 2 {
		t.Fatalf("append once there is room: FSN %d, want 2", fsn)
	}
	if !q.Fits(Batch{Payloads: [][]byte{testPayload(3, 100)}}) {
		t.Fatal("Fits still answers no after an append found room")
	}
}

// TestRefusedBatchLeavesNoFrames: a batch whose write into a new segment
// finds no room (memory durability does not preallocate) had already
// written its first frames at the active segment's end. The next append
// overwrites them from the start, and whatever it leaves of them must not
// read as frames after a restart: a refused frame the walk reaches whole
// would be replayed (the caller retries it: twice in QuestDB), one it
// reaches mid-frame would be a damage with valid frames after it, and the
// slot set aside for a DATA_LOSS that never happened.
func TestRefusedBatchLeavesNoFrames(t *testing.T) {
	for _, next := range []int{100, 50} { // the same size as the first refused frame, or shorter
		t.Run(fmt.Sprintf("next frame %d bytes", next), func(t *testing.T) {
			cfs := newCrashFS()
			o := Options{Dir: "/d", SenderID: "s", FS: cfs, MaxSegmentBytes: 1024, AppendDeadline: 10 * time.Millisecond}
			q := mustOpen(t, o)
			mustAppend(t, q, testPayload(1, 100))
			writes := 0
			cfs.mu.Lock()
			cfs.failWrite = func(name string) error {
				if strings.HasSuffix(name, segmentName(4)) {
					if writes++; writes > 1 { // the header is written, the frame finds no room
						return syscall.ENOSPC
					}
				}
				return nil
			}
			cfs.mu.Unlock()
			_, err := q.AppendBatch(context.Background(), [][]byte{testPayload(2, 100), testPayload(3, 100), testPayload(4, 700)})
			var fe *FullError
			if !errors.As(err, &fe) || fe.Reason != DiskFull {
				t.Fatalf("batch whose third frame finds no room: %v, want DiskFull", err)
			}
			cfs.mu.Lock()
			cfs.failWrite = nil
			cfs.mu.Unlock()
			if fsn := mustAppend(t, q, testPayload(2, next)); fsn != 2 {
				t.Fatalf("append after the refusal: FSN %d, want 2", fsn)
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			q2 := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs})
			defer q2.Close()
			if dl := q2.Recovery().Unreplayable; dl != nil {
				t.Fatalf("a clean restart set the slot aside: %v", dl)
			}
			got := drain(t, q2.NewCursor())
			for _, f := range got {
				if id, err := checkTestPayload(f.payload); err != nil || id != f.fsn {
					t.Fatalf("FSN %d: payload id %d (%v)", f.fsn, id, err)
				}
			}
			if len(got) != 2 || q2.PublishedFSN() != 2 || len(got[1].payload) != next {
				t.Fatalf("recovered %d frames, published %d; want FSN 1 and 2 (%d bytes): a refused frame came back", len(got), q2.PublishedFSN(), next)
			}
		})
	}
}

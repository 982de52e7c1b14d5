package sfqueue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// groupWriteFails makes the writes into the first segment fail through
// fail (whole or short) on cfs until the returned func is called.
func groupWriteFails(cfs *crashFS, fail func(size int) (int, error)) (restore func()) {
	cfs.mu.Lock()
	cfs.shortWrite = func(name string, size int) (int, error) {
		if strings.HasSuffix(name, segmentName(1)) {
			return fail(size)
		}
		return 0, nil
	}
	cfs.mu.Unlock()
	return func() {
		cfs.mu.Lock()
		cfs.shortWrite = nil
		cfs.mu.Unlock()
	}
}

// TestFlushGroupWriteNoSpace (issue 23 finding 6): in flush durability a
// group write that a full disk refuses (ENOSPC, EDQUOT; whole or cut short)
// fails that group's appends with the retryable DiskFull refusal, counted,
// and leaves no part of their frames in the file; the queue stays usable,
// the FSNs are handed out again, and every frame answered before and after
// is intact after a restart, with no torn frame counted.
func TestFlushGroupWriteNoSpace(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(size int) (int, error)
	}{
		{"ENOSPC", func(int) (int, error) { return 0, syscall.ENOSPC }},
		{"EDQUOT", func(int) (int, error) { return 0, syscall.EDQUOT }},
		{"short write then ENOSPC", func(size int) (int, error) { return size/2 + 3, syscall.ENOSPC }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfs := newCrashFS()
			o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityFlush, MaxSegmentBytes: 1 << 20}
			q := mustOpen(t, o)
			defer q.Close()
			for i := range 3 {
				mustAppend(t, q, testPayload(uint64(i+1), 200))
			}
			segPath := clean("/d/s/" + segmentName(1))
			cfs.mu.Lock()
			good := append([]byte(nil), cfs.names[segPath].data[:segmentHeaderSize+3*frame200]...)
			cfs.mu.Unlock()

			restore := groupWriteFails(cfs, tc.fail)
			const refused = 4
			var wg sync.WaitGroup
			errs := make([]error, refused)
			for i := range refused {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[i] = q.Append(context.Background(), testPayload(100+uint64(i), 200))
				}()
			}
			wg.Wait()
			for _, err := range errs {
				var fe *FullError
				if !errors.As(err, &fe) || fe.Reason != DiskFull || !fe.Retryable() {
					t.Fatalf("append whose group write met a full disk: %v; want the retryable *FullError DiskFull", err)
				}
			}
			st := q.Stats()
			if st.Fatal != nil {
				t.Fatalf("a full disk in the group write latched the queue: %v", st.Fatal)
			}
			if st.DiskFullErrors != refused || st.FullErrors != refused {
				t.Fatalf("refusals counted: full %d disk-full %d, want %d each", st.FullErrors, st.DiskFullErrors, refused)
			}
			if st.FramesAppended != 3 || q.PublishedFSN() != 3 {
				t.Fatalf("after the refused group: appended %d published %d, want 3 and 3", st.FramesAppended, q.PublishedFSN())
			}
			cfs.mu.Lock()
			data := cfs.names[segPath].data
			if len(data) < len(good) || string(data[:len(good)]) != string(good) || strings.Trim(string(data[len(good):]), "\x00") != "" {
				cfs.mu.Unlock()
				t.Fatalf("the segment holds bytes of the refused frames after its 3 good ones (%d bytes)", len(data))
			}
			cfs.mu.Unlock()

			restore()
			if fsn := mustAppend(t, q, testPayload(4, 200)); fsn != 4 {
				t.Fatalf("append once there is room: FSN %d, want 4 (the refused FSNs handed out again)", fsn)
			}
			if err := q.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			for _, mode := range []crashMode{dropUnsynced, keepSomeWrites} {
				q2 := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs.PowerLoss(mode, rand.New(rand.NewPCG(1, 2))), Durability: DurabilityFlush})
				rep := q2.Recovery()
				got := ids(t, q2)
				q2.Close()
				if rep.TornFrames != 0 || rep.TornBytes != 0 || rep.LostFrames != 0 || rep.Unreplayable != nil {
					t.Fatalf("recovery after the refused group: torn %d frames %d bytes, lost %d, %v; want none",
						rep.TornFrames, rep.TornBytes, rep.LostFrames, rep.Unreplayable)
				}
				if !slices.Equal(got, []uint64{1, 2, 3, 4}) {
					t.Fatalf("recovered payloads %v, want the 4 answered, in order", got)
				}
			}
		})
	}
}

// TestFlushGroupWriteEIOLatches: a group write that fails other than for
// space (EIO: what reached the disk is unknown) still latches the queue.
func TestFlushGroupWriteEIOLatches(t *testing.T) {
	cfs := newCrashFS()
	q := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityFlush})
	defer q.Close()
	mustAppend(t, q, testPayload(1, 200))
	restore := groupWriteFails(cfs, func(int) (int, error) { return 0, fmt.Errorf("EIO: %w", syscall.EIO) })
	_, err := q.Append(context.Background(), testPayload(2, 200))
	var fatal *FatalError
	if !errors.As(err, &fatal) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("append whose group write fails with EIO: %v, want *FatalError wrapping EIO", err)
	}
	restore()
	if _, err := q.Append(context.Background(), testPayload(3, 200)); !errors.As(err, &fatal) {
		t.Fatalf("append after the EIO: %v, want the latched *FatalError", err)
	}
	if st := q.Stats(); st.DiskFullErrors != 0 {
		t.Fatalf("an EIO counted as a full disk: %d", st.DiskFullErrors)
	}
}

// TestFlushGroupNoSpaceAtRotation: the group write that a rotation runs
// (the frames built for the segment it seals) meets a full disk: the
// appends waiting for it and the rotating batch are refused, the queue
// stays usable and nothing answered is lost.
func TestFlushGroupNoSpaceAtRotation(t *testing.T) {
	cfs := newCrashFS()
	o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityFlush, MaxSegmentBytes: 1024,
		AppendDeadline: 20 * time.Millisecond}
	q := mustOpen(t, o)
	defer q.Close()
	mustAppend(t, q, testPayload(1, 200))
	restore := groupWriteFails(cfs, func(int) (int, error) { return 0, syscall.ENOSPC })
	// A batch that fills the first segment and rotates: the rotation writes
	// the frames built for the first segment, and that write fails.
	_, err := q.AppendBatch(context.Background(), [][]byte{testPayload(2, 200), testPayload(3, 200), testPayload(4, 200), testPayload(5, 200)})
	var fe *FullError
	if !errors.As(err, &fe) || fe.Reason != DiskFull {
		t.Fatalf("rotating batch whose write met a full disk: %v, want *FullError DiskFull", err)
	}
	if st := q.Stats(); st.Fatal != nil || q.PublishedFSN() != 1 {
		t.Fatalf("after the refused rotation: fatal %v published %d, want none and 1", st.Fatal, q.PublishedFSN())
	}
	restore()
	if fsn := mustAppend(t, q, testPayload(2, 200)); fsn != 2 {
		t.Fatalf("append once there is room: FSN %d, want 2", fsn)
	}
	q.Close()
	q2 := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs.PowerLoss(dropUnsynced, nil), Durability: DurabilityFlush})
	defer q2.Close()
	rep := q2.Recovery()
	if got := drain(t, q2.NewCursor()); len(got) != 2 || rep.TornFrames != 0 || rep.Unreplayable != nil {
		t.Fatalf("recovered %d frames (torn %d, %v), want the 2 answered", len(got), rep.TornFrames, rep.Unreplayable)
	}
}

// TestFlushCloseGroupWriteNoSpace: appends still waiting when the queue
// closes share Close's group write; when a full disk refuses it they get
// the DiskFull refusal, not a success for frames that are not there.
func TestFlushCloseGroupWriteNoSpace(t *testing.T) {
	cfs := newCrashFS()
	q := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityFlush})
	mustAppend(t, q, testPayload(1, 200))
	// Hold the flusher inside the next group fsync.
	inSync, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	cfs.mu.Lock()
	cfs.syncHook = func(name string) {
		if strings.HasSuffix(name, segmentName(1)) {
			once.Do(func() { close(inSync); <-release })
		}
	}
	cfs.mu.Unlock()
	first := make(chan error, 1)
	go func() { _, err := q.Append(context.Background(), testPayload(2, 200)); first <- err }()
	<-inSync
	// Built while that fsync runs: it waits for the next group, which the
	// closing queue's flusher never starts.
	second := make(chan error, 1)
	go func() { _, err := q.Append(context.Background(), testPayload(3, 200)); second <- err }()
	waitFor(t, "the second append waiting", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.pending != nil && q.pending.waiters == 1
	})
	groupWriteFails(cfs, func(int) (int, error) { return 0, syscall.ENOSPC })
	closed := make(chan error, 1)
	go func() { closed <- q.Close() }()
	waitFor(t, "the queue closing", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.closed
	})
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("append whose group fsync completed: %v", err)
	}
	var fe *FullError
	if err := <-second; !errors.As(err, &fe) || fe.Reason != DiskFull {
		t.Fatalf("append whose group write at Close met a full disk: %v; want *FullError DiskFull", err)
	}
	if err := <-closed; !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Close after its group write met a full disk: %v, want the ENOSPC", err)
	}
	q2 := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs.PowerLoss(dropUnsynced, nil), Durability: DurabilityFlush})
	defer q2.Close()
	if got := drain(t, q2.NewCursor()); len(got) != 2 || q2.Recovery().TornFrames != 0 {
		t.Fatalf("recovered %d frames (torn %d), want the 2 answered", len(got), q2.Recovery().TornFrames)
	}
}

// TestFlushGroupNoSpaceRetryWithSymbols: an append's dictionary entries
// are stored (and fsynced) before its frames are built, so a group write
// that a full disk refuses fails an append whose entries stay in the
// dictionary. The producer retries the same batch, entries included, as it
// does after any refusal: the retry must be taken, not refused for
// repeating ids (which wedged every later append of the producer).
func TestFlushGroupNoSpaceRetryWithSymbols(t *testing.T) {
	cfs := newCrashFS()
	o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityFlush, MaxSegmentBytes: 1 << 20}
	q := mustOpen(t, o)
	defer q.Close()
	if _, err := q.AppendWith(context.Background(), Batch{Payloads: [][]byte{genPayload(0, 200)}, Symbols: []SymbolRun{symbolRun(0, 0, 2, 10)}}); err != nil {
		t.Fatal(err)
	}
	restore := groupWriteFails(cfs, func(int) (int, error) { return 0, syscall.ENOSPC })
	b := Batch{Payloads: [][]byte{genPayload(0, 200)}, Symbols: []SymbolRun{symbolRun(0, 2, 3, 10)}}
	_, err := q.AppendWith(context.Background(), b)
	var fe *FullError
	if !errors.As(err, &fe) || fe.Reason != DiskFull {
		t.Fatalf("append whose group write met a full disk: %v, want DiskFull", err)
	}
	restore()
	if fsn, err := q.AppendWith(context.Background(), b); err != nil || fsn != 2 {
		t.Fatalf("the same batch retried once there is room: FSN %d, %v; want FSN 2", fsn, err)
	}
	next := Batch{Payloads: [][]byte{genPayload(0, 200)}, Symbols: []SymbolRun{symbolRun(0, 5, 1, 10)}}
	if _, err := q.AppendWith(context.Background(), next); err != nil {
		t.Fatalf("the next batch: %v", err)
	}
	want := append(symbolRun(0, 0, 2, 10).Entries, append(symbolRun(0, 2, 3, 10).Entries, symbolRun(0, 5, 1, 10).Entries...)...)
	equalEntries(t, symbols(t, q, 0), want) // each id once, in order
}

package sfqueue

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"
)

// In memory durability a sealed segment is fsynced in the background and
// then counts as durable: its frames are outside the loss window. The
// dictionary entries they use must be durable by then too. Here the frame
// that defined id 0 is acknowledged and deleted, so after a power loss
// only the dictionary file can back the id the sealed frame uses: were the
// file's entries never fsynced, recovery would set the slot aside
// (DATA_LOSS) for frames the mode promised to keep.
//
// The same holds for a restart after a process crash: recovery fsyncs the
// recovered segments and counts them durable, so it fsyncs the dictionary
// the previous life left unsynced with them. There the entry comes from
// AddSymbols, no frame defines it, and no rotation (no seal) runs in
// either life: only recovery's fsync can make it durable.
func TestMemoryDurabilitySealMakesDictionaryDurable(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(map[bool]string{false: "seal", true: "recovery"}[restart], func(t *testing.T) {
			memoryDictionaryPowerLoss(t, restart)
		})
	}
}

func memoryDictionaryPowerLoss(t *testing.T, restart bool) {
	cfs := newCrashFS()
	o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityMemory, MaxSegmentBytes: 256,
		SymbolUse: symUse, SymbolDefs: symDefs}
	if restart {
		o.MaxSegmentBytes = 4096 // no rotation, so no seal fsyncs the dictionary
	}
	q := mustOpen(t, o)
	pad := bytes.Repeat([]byte{'.'}, 150) // one frame a segment (but on restart)
	appendWith := func(p []byte, runs ...SymbolRun) uint64 {
		t.Helper()
		fsn, err := q.AppendWith(context.Background(), Batch{Payloads: [][]byte{append(p, pad...)}, Symbols: runs})
		if err != nil {
			t.Fatal(err)
		}
		return fsn
	}
	var uses uint64
	if restart {
		if err := q.AddSymbols(0, 0, [][]byte{[]byte("a")}); err != nil {
			t.Fatal(err)
		}
		uses = appendWith([]byte{0, 0, 0}) // uses id 0, defines nothing
		// A process crash: nothing of the slot fsynced.
		kill(q)
		q = mustOpen(t, o)
		waitFor(t, ".ack-watermark records the recovered segment as synced", func() bool {
			q.mu.Lock()
			defer q.mu.Unlock()
			return q.wmSaved.synced >= uses
		})
	} else {
		appendWith(symPayload(0, "a"), SymbolRun{Gen: 0, FirstID: 0, Entries: [][]byte{[]byte("a")}})
		uses = appendWith([]byte{0, 0, 0}) // uses id 0, defines nothing
		appendWith([]byte{0xff, 0, 0})     // seals the segment holding uses
		ackDefiningFrame(t, q, uses)
	}
	entryOutlivesPowerLoss(t, cfs, q, o, uses)
}

// ackDefiningFrame acks FSN 1, which defined the entry FSN uses uses, and
// waits until its segment is gone and .ack-watermark records uses synced.
func ackDefiningFrame(t *testing.T, q *Queue, uses uint64) {
	t.Helper()
	q.Ack(1)
	waitFor(t, ".ack-watermark records the frame using id 0 as synced, the defining one acked", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.wmSaved.synced >= uses && q.wmSaved.acked >= 1 && len(q.segs) > 0 && q.segs[0].base == uses
	})
}

// entryOutlivesPowerLoss cuts the power under q, closes it and checks
// that the slot recovers with FSN uses first and id 0 of generation 0 "a".
func entryOutlivesPowerLoss(t *testing.T, cfs *crashFS, q *Queue, o Options, uses uint64) {
	t.Helper()
	snap := cfs.PowerLoss(dropUnsynced, nil)
	q.Close()
	o.FS = snap
	q = mustOpen(t, o)
	defer q.Close()
	if rep := q.Recovery(); rep.Unreplayable != nil || rep.LostFrames != 0 {
		t.Fatalf("a power loss set aside a slot whose synced frame uses a dictionary entry: %+v", rep)
	}
	if frames := drain(t, q.NewCursor()); len(frames) == 0 || frames[0].fsn != uses {
		t.Fatalf("replayed %v; want FSN %d first", frames, uses)
	}
	if got := symbols(t, q, 0); len(got) != 1 || string(got[0]) != "a" {
		t.Fatalf("dictionary after recovery %q; want [a]", got)
	}
}

// A failed fsync of a dictionary file at a memory-durability seal latches
// the queue like a segment's: the sealed frames are not counted durable,
// later appends fail, and the failure names the dictionary.
func TestMemoryDurabilityDictionaryFsyncFailureLatches(t *testing.T) {
	cfs := newCrashFS()
	cfs.failSync = func(name string) error {
		if strings.Contains(name, symbolDictFile) {
			return syscall.EIO
		}
		return nil
	}
	o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityMemory, MaxSegmentBytes: 256, SymbolUse: symUse}
	q := mustOpen(t, o)
	defer q.Close()
	pad := bytes.Repeat([]byte{'.'}, 150)
	if _, err := q.AppendWith(context.Background(), Batch{Payloads: [][]byte{append(symPayload(0, "a"), pad...)},
		Symbols: []SymbolRun{{Gen: 0, FirstID: 0, Entries: [][]byte{[]byte("a")}}}}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, q, append([]byte{0, 0, 0}, pad...)) // seals the first segment
	var fatal *FatalError
	waitFor(t, "the seal's failed dictionary fsync latched", func() bool {
		_, err := q.Append(context.Background(), []byte{0xff, 0, 0})
		return errors.As(err, &fatal)
	})
	if !errors.Is(fatal, syscall.EIO) || !strings.Contains(fatal.Op, "dictionary") {
		t.Fatalf("latched %v; want the dictionary's fsync EIO", fatal)
	}
	if d := q.Stats().DurableFSN; d != 0 {
		t.Fatalf("durable FSN %d after a failed seal fsync; want 0", d)
	}
}

// A failed fsync of the slot directory while .ack-watermark is replaced
// latches the queue: the directory holds the segments' names, and a later
// directory fsync may report clean for entries that never reached the disk
// (the failed one is never retried as if they had). A failure on the
// temporary file alone is only retried (TestFileFaultsAreLoud).
func TestWatermarkDirectoryFsyncFailureLatches(t *testing.T) {
	cfs := newCrashFS()
	o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityMemory}
	q := mustOpen(t, o)
	defer q.Close()
	cfs.mu.Lock()
	cfs.failSync = func(name string) error {
		if name == "/d/s" {
			return syscall.EIO
		}
		return nil
	}
	cfs.mu.Unlock()
	mustAppend(t, q, testPayload(1, 10)) // moves what .ack-watermark records
	var fatal *FatalError
	waitFor(t, "the .ack-watermark save's failed directory fsync latched", func() bool {
		_, err := q.Append(context.Background(), testPayload(2, 10))
		return errors.As(err, &fatal)
	})
	if !errors.Is(fatal, syscall.EIO) || !strings.Contains(fatal.Op, "directory") {
		t.Fatalf("latched %v; want the directory fsync's EIO", fatal)
	}
}

// A memory-durability life leaves the dictionary unsynced; the next Open,
// in periodic durability, fsyncs the recovered segments and counts them
// durable, so it must fsync the dictionary files with them, though its own
// mode fsyncs entries as it writes them. Here a frame of the new life uses
// an entry the memory life defined, the defining frame is acked and
// deleted, and the power fails: on the old code only the memory life's
// dictionary could back the id, and it was never fsynced (the slot set
// aside, DATA_LOSS).
func TestRecoveryAfterAMemoryLifeMakesDictionaryDurable(t *testing.T) {
	cfs := newCrashFS()
	o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityMemory, MaxSegmentBytes: 256,
		SymbolUse: symUse, SymbolDefs: symDefs, SyncInterval: 5 * time.Millisecond}
	q := mustOpen(t, o)
	pad := bytes.Repeat([]byte{'.'}, 150) // one frame a segment
	if _, err := q.AppendWith(context.Background(), Batch{Payloads: [][]byte{append(symPayload(0, "a"), pad...)},
		Symbols: []SymbolRun{{Gen: 0, FirstID: 0, Entries: [][]byte{[]byte("a")}}}}); err != nil {
		t.Fatal(err)
	}
	q.Close()
	o.Durability = DurabilityPeriodic
	q = mustOpen(t, o)
	uses := mustAppend(t, q, append([]byte{0, 0, 0}, pad...)) // uses id 0, defines nothing
	ackDefiningFrame(t, q, uses)
	entryOutlivesPowerLoss(t, cfs, q, o, uses)
}

// A refused batch's dictionary entries, which a seal fsynced while the
// batch rotated, are cut by its undo; the cut must be fsynced by the next
// seal like any dictionary write, or a power loss keeps the refused
// entries in the dictionary (entries nothing defines, counted in the
// generation, its later ids past them). On the old code the undo's
// truncate left the file clean.
func TestRefusedBatchDictionaryEntriesStayUndoneAfterAPowerLoss(t *testing.T) {
	cfs := newCrashFS()
	pad := bytes.Repeat([]byte{'.'}, 150) // one frame a segment
	filler := append([]byte{0xff, 0, 0}, pad...)
	third := "/d/s/" + segmentName(4)
	cfs.shortWrite = func(name string, size int) (int, error) {
		if name == third && size == int(frameSize(len(filler))) {
			return 0, syscall.ENOSPC
		}
		return 0, nil
	}
	o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityMemory, MaxSegmentBytes: 256,
		SymbolUse: symUse, SymbolDefs: symDefs, AppendDeadline: time.Millisecond}
	q := mustOpen(t, o)
	defer q.Close()
	if _, err := q.AppendWith(context.Background(), Batch{Payloads: [][]byte{append(symPayload(0, "a"), pad...)},
		Symbols: []SymbolRun{{Gen: 0, FirstID: 0, Entries: [][]byte{[]byte("a")}}}}); err != nil {
		t.Fatal(err)
	}
	// Three segments' frames: the second rotation waits for the seal
	// fsync of the first segment, dictionary included; the third's write
	// is refused.
	_, err := q.AppendWith(context.Background(), Batch{
		Payloads: [][]byte{append(symPayload(1, "x", "y"), pad...), filler, filler},
		Symbols:  []SymbolRun{{Gen: 0, FirstID: 1, Entries: [][]byte{[]byte("x"), []byte("y")}}}})
	var full *FullError
	if !errors.As(err, &full) || full.Reason != DiskFull {
		t.Fatalf("batch whose third segment's write the disk refuses: %v; want a DiskFull *FullError", err)
	}
	cfs.mu.Lock()
	cfs.shortWrite = nil
	cfs.mu.Unlock()
	mustAppend(t, q, filler)
	last := mustAppend(t, q, filler) // seals the segment before it
	waitFor(t, "the seals after the refusal are durable", func() bool { return q.Stats().DurableFSN >= last-1 })
	snap := cfs.PowerLoss(dropUnsynced, nil)

	o.FS = snap
	r := mustOpen(t, o)
	defer r.Close()
	if rep := r.Recovery(); rep.Unreplayable != nil || rep.LostFrames != 0 {
		t.Fatalf("recovery: %+v", rep)
	}
	if got := symbols(t, r, 0); len(got) != 1 || string(got[0]) != "a" {
		t.Fatalf("dictionary after a power loss %q; want [a]: the refused batch's entries came back", got)
	}
}

// .ack-watermark never records more frames synced than published: a batch
// of several segments' frames in memory durability counts its first frames
// durable at a seal fsync before it publishes them, and a watermark saved
// while a later seal fsync runs (q.mu released) took q.durable as it was
// (the old code: synced 2, published 1).
func TestWatermarkNeverRecordsSyncedPastPublished(t *testing.T) {
	cfs := newCrashFS()
	o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityMemory, MaxSegmentBytes: 256}
	q := mustOpen(t, o)
	defer q.Close()
	pad := bytes.Repeat([]byte{'.'}, 150) // one frame a segment
	mustAppend(t, q, pad)
	var seen []watermark
	cfs.mu.Lock()
	cfs.syncHook = func(name string) {
		if name == "/d/s/"+segmentName(3) { // the batch's second frame's segment, sealed by its fourth
			q.mu.Lock()
			seen = append(seen, q.watermarkLocked())
			q.mu.Unlock()
		}
	}
	cfs.mu.Unlock()
	if _, err := q.AppendBatch(context.Background(), [][]byte{pad, pad, pad, pad}); err != nil {
		t.Fatal(err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("the second segment of the batch was never fsynced: the test checked nothing")
	}
	for _, w := range seen {
		if w.synced > w.published {
			t.Fatalf(".ack-watermark would record synced %d past published %d", w.synced, w.published)
		}
	}
}

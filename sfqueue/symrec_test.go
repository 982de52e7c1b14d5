package sfqueue

import (
	"bytes"
	"context"
	"fmt"
	"testing"
)

// TestSymbolRecordBufferReused: in SF mode the records of an append are
// built in a buffer kept for the next append and written recBytes at a
// time, so a steady stream of new entries (series churn) makes no record
// buffer per append and keeps none larger than about recBytes; what every
// append wrote reads back entry for entry, whether the run before it was
// larger, smaller, written in several pieces, or held a record too large
// to keep a buffer for.
func TestSymbolRecordBufferReused(t *testing.T) {
	dir := t.TempDir()
	q := mustOpen(t, Options{Dir: dir, SenderID: "s1"})
	defer func() { q.Close() }()
	var want [][]byte
	add := func(n, size int) {
		t.Helper()
		run := make([][]byte, n)
		for i := range run {
			run[i] = fmt.Appendf(nil, "%08d-%s", len(want)+i, bytes.Repeat([]byte{'a' + byte(len(want)+i)%26}, size))
		}
		if err := q.AddSymbols(0, len(want), run); err != nil {
			t.Fatal(err)
		}
		want = append(want, run...)
	}
	base := func() *byte {
		if cap(q.dict.rec) == 0 {
			return nil
		}
		return &q.dict.rec[:1][0]
	}

	add(100, 120)
	first := base()
	if first == nil {
		t.Fatal("no record buffer kept after an append")
	}
	add(10, 120) // smaller: the kept buffer's tail must not reach the file
	if base() != first {
		t.Fatal("a smaller append did not reuse the kept record buffer")
	}
	add(2000, 120) // ~260 KB: written in pieces, the buffer grown to one
	grown := base()
	if c := cap(q.dict.rec); c < recBytes || c > 2*recBytes {
		t.Fatalf("after %d bytes of records the kept buffer holds %d, want about %d", 2000*140, c, recBytes)
	}
	add(50, 120)
	add(1000, 120)
	if grown == nil || base() != grown {
		t.Fatal("the grown record buffer was not reused")
	}
	add(3, 3*recBytes) // records larger than a piece: written whole, not kept
	if c := cap(q.dict.rec); c > 2*recBytes {
		t.Fatalf("a record buffer of %d bytes was kept, over twice recBytes", c)
	}
	add(3, 7)
	equalEntries(t, symbols(t, q, 0), want)

	// The same entries after a restart: the file holds them, not the buffer.
	q.Close()
	q = mustOpen(t, Options{Dir: dir, SenderID: "s1"})
	equalEntries(t, symbols(t, q, 0), want)
}

// TestSymbolRecordPieceFailureUndoesTheRun: a run written in several
// pieces whose second piece fails (a full disk) takes back the pieces
// before it: the dictionary file is as before the append, which fails, and
// the same batch goes in whole once the disk has room.
func TestSymbolRecordPieceFailureUndoesTheRun(t *testing.T) {
	q, cfs, dictName := crashQueueWithTwoSymbols(t, Options{})
	defer q.Close()
	ctx := context.Background()
	size := func() int { return cfs.fileSize(dictName) }
	before := size()
	writes := 0
	cfs.mu.Lock()
	cfs.failWrite = func(name string) error {
		if name == dictName {
			if writes++; writes == 2 {
				return errNoSpace
			}
		}
		return nil
	}
	cfs.mu.Unlock()
	run := symbolRun(0, 2, 3*recBytes/100, 100) // three pieces and more
	batch := Batch{Payloads: [][]byte{genPayload(0, 100)}, Symbols: []SymbolRun{run}}
	if _, err := q.AppendWith(ctx, batch); err == nil {
		t.Fatal("an append whose second piece of records failed was accepted")
	}
	if writes != 2 || size() != before || len(symbols(t, q, 0)) != 2 {
		t.Fatalf("after the failure: %d writes, dictionary file %d bytes (was %d), %d entries (was 2)", writes, size(), before, len(symbols(t, q, 0)))
	}
	cfs.mu.Lock()
	cfs.failWrite = nil
	cfs.mu.Unlock()
	if _, err := q.AppendWith(ctx, batch); err != nil {
		t.Fatalf("the same batch once the disk has room: %v", err)
	}
	equalEntries(t, symbols(t, q, 0)[2:], run.Entries)
}

package sfqueue

import (
	"bytes"
	"fmt"
	"testing"
)

// TestSymbolRecordBufferReused: in SF mode the records of an append are
// built in a buffer kept for the next append (up to recKeep bytes), so a
// steady stream of new entries (series churn) makes no record buffer per
// append; what every append wrote reads back entry for entry, whether the
// run before it was larger, smaller, or too large to keep a buffer for.
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
	add(200, 120) // larger: the buffer grows, and the grown one is kept
	grown := base()
	add(50, 120)
	if grown == nil || base() != grown {
		t.Fatal("the grown record buffer was not reused")
	}
	add(3, recKeep/2) // over recKeep: written, not kept
	if cap(q.dict.rec) > recKeep {
		t.Fatalf("a record buffer of %d bytes was kept, over recKeep %d", cap(q.dict.rec), recKeep)
	}
	add(3, 7)
	equalEntries(t, symbols(t, q, 0), want)

	// The same entries after a restart: the file holds them, not the buffer.
	q.Close()
	q = mustOpen(t, Options{Dir: dir, SenderID: "s1"})
	equalEntries(t, symbols(t, q, 0), want)
}

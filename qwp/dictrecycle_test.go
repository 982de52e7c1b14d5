package qwp

import (
	"bytes"
	"fmt"
	"testing"
)

// TestMemDictRecycle: a dictionary that recycles another's memory takes
// its full-size chunks, blocks and table before allocating, assigns the same dense
// ids and reads back its own entries (nothing of the old text shows
// through), and the old dictionary is left empty; a second Recycle drops
// the spares of the first.
func TestMemDictRecycle(t *testing.T) {
	sym := func(gen, i int) []byte {
		return fmt.Appendf(nil, `{"gen":%d,"cpu":"cpu%07d","state":"user","zone":"eu-west-1a"}`, gen, i)
	}
	const n = 12000 // ~780 KB of text: two full-size chunks and two full blocks
	old := NewMemDict()
	for i := range n {
		old.ID(sym(0, i))
	}
	var oldChunks []*byte
	for _, c := range old.chunks {
		if cap(c) == dictChunkMax {
			oldChunks = append(oldChunks, &c[:1][0])
		}
	}
	if len(oldChunks) < 2 {
		t.Fatalf("setup: %d full-size chunks", len(oldChunks))
	}
	oldTable := &old.slots[0]
	d := old.Successor()
	d.Recycle(old)
	if old.Len() != 0 || old.chunks != nil || old.blocks != nil {
		t.Fatalf("the recycled dictionary still holds %d entries, %d chunks", old.Len(), len(old.chunks))
	}
	if held := d.MemBytes(); held < int64(len(oldChunks))*dictChunkMax {
		t.Fatalf("MemBytes %d leaves out the %d spare chunks", held, len(oldChunks))
	}
	for i := range n {
		if id := d.ID(sym(1, i)); id != uint32(i) {
			t.Fatalf("entry %d got id %d", i, id)
		}
	}
	for i := range n {
		if !bytes.Equal(d.Entry(i), sym(1, i)) || d.ID(sym(1, i)) != uint32(i) {
			t.Fatalf("entry %d reads %q", i, d.Entry(i))
		}
	}
	if &d.slots[0] != oldTable {
		t.Fatal("the recycled table was not used")
	}
	reused := 0
	for _, c := range d.chunks {
		for _, p := range oldChunks {
			if cap(c) > 0 && &c[:1][0] == p {
				reused++
			}
		}
	}
	if reused != len(oldChunks) {
		t.Fatalf("%d of the %d spare chunks were used", reused, len(oldChunks))
	}
	if len(d.spareBlocks) != 0 {
		t.Fatalf("%d spare blocks left after %d entries", len(d.spareBlocks), n)
	}

	// A dictionary that already holds entries takes the recycled table at
	// its next growth, and keeps its ids.
	g := d.Successor()
	for i := range 12 { // 16 slots hold 12
		g.ID(sym(2, i))
	}
	spareTable := &d.slots[0]
	g.Recycle(d)
	g.ID(sym(2, 12))
	if &g.slots[0] != spareTable {
		t.Fatal("a non-empty dictionary did not grow into the recycled table")
	}
	for i := range 13 {
		if g.ID(sym(2, i)) != uint32(i) {
			t.Fatalf("entry %d lost its id across the growth into a recycled table", i)
		}
	}
	d = g

	e := d.Successor()
	e.Recycle(d)
	spare := len(e.spareChunks)
	f := e.Successor()
	f.Recycle(NewMemDict()) // nothing to give: e's spares are not f's
	e.Recycle(NewMemDict())
	if spare == 0 || len(e.spareChunks) != 0 || len(f.spareChunks) != 0 {
		t.Fatalf("spares: %d after the first Recycle, %d after a second one of an empty dictionary", spare, len(e.spareChunks))
	}
}

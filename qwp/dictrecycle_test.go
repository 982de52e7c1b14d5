package qwp

import (
	"bytes"
	"fmt"
	"testing"
)

// TestMemDictRecycle: a dictionary that recycles another's memory takes
// its full-size chunks and blocks before allocating, assigns the same dense
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

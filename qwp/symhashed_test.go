package qwp

import (
	"bytes"
	"testing"
)

// TestSymbolValidHashedIsSymbolValid writes the same rows into two
// encoders, one with SymbolValidHashed and one with SymbolValid, and
// requires the same frames: through hits, two values sharing a hash (and
// a slot), one value under two hashes, hashes that differ only above the
// slot bits, frames, and a Reset to a new dictionary whose ids name other
// bytes (a cached id must not be used then) or do not exist yet.
func TestSymbolValidHashedIsSymbolValid(t *testing.T) {
	type row struct {
		v    string
		hash uint64
	}
	rows := []row{
		{"a", 1}, {"b", 2}, {"a", 1}, {"b", 2}, // hits
		{"c", 1}, {"a", 1}, {"c", 1}, // "c" takes "a"'s hash: each evicts the other
		{"a", 7}, {"a", 1}, // one value, two hashes
		{"d", 1 + hashedSlots}, {"a", 1}, {"d", 1 + hashedSlots}, // one slot, two hashes
	}
	var out [2][]byte
	for side := range 2 {
		dicts := []*MemDict{NewMemDict(), NewMemDict(), NewMemDict()}
		dicts[1].ID([]byte("zz")) // the second dictionary gives id 0 to other bytes
		enc := NewEncoder(dicts[0], EncoderOptions{DeltaSymbolDict: true})
		tb := mustTable(t, enc, "t")
		col := mustCol(t, tb, "s", TypeSymbol)
		for pass, d := range dicts {
			if pass > 0 {
				enc.Reset(d)
			}
			for i, r := range rows {
				if side == 0 {
					tb.SymbolValidHashed(col, []byte(r.v), r.hash)
				} else {
					tb.SymbolValid(col, []byte(r.v))
				}
				if err := tb.EndRow(); err != nil {
					t.Fatal(err)
				}
				if i == 5 {
					out[side] = enc.Finish(out[side])
				}
			}
			out[side] = enc.Finish(out[side])
		}
	}
	if !bytes.Equal(out[0], out[1]) {
		t.Fatalf("frames differ:\nhashed %x\nplain  %x", out[0], out[1])
	}
	for len(out[0]) > 0 {
		n := HeaderSize + int(uint32(out[0][8])|uint32(out[0][9])<<8|uint32(out[0][10])<<16|uint32(out[0][11])<<24)
		if _, err := decodeMessage(out[0][:n]); err != nil {
			t.Fatal(err)
		}
		out[0] = out[0][n:]
	}
}

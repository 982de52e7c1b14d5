package qwp

import (
	"bytes"
	"fmt"
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

// TestSymbolValidHashedUnderChurn: after hashedChurnMisses new values in a
// row a column samples its cache (a value outside the sample neither reads
// nor fills its slot) and, once a working set comes round again, consults
// it all again; through churn, the working set and churn again the frames
// are those of SymbolValid.
func TestSymbolValidHashedUnderChurn(t *testing.T) {
	var in, out string // one value in the sample, one outside it
	for i := 0; in == "" || out == ""; i++ {
		v := fmt.Sprint("probe-", i)
		if testHash(v)>>hashedSampleShift == 0 {
			in = v
		} else {
			out = v
		}
	}
	var frames [2][]byte
	for side := range 2 {
		enc := NewEncoder(NewMemDict(), EncoderOptions{DeltaSymbolDict: true})
		tb := mustTable(t, enc, "t")
		col := mustCol(t, tb, "s", TypeSymbol)
		write := func(v string) {
			t.Helper()
			if side == 0 {
				tb.SymbolValidHashed(col, []byte(v), testHash(v))
			} else {
				tb.SymbolValid(col, []byte(v))
			}
			if err := tb.EndRow(); err != nil {
				t.Fatal(err)
			}
			if enc.Rows() == 500 {
				frames[side] = enc.Finish(frames[side])
			}
		}
		for i := range hashedChurnMisses - 1 {
			write(fmt.Sprint("churn-", i))
		}
		if side == 0 && col.c.hashedSampling {
			t.Fatalf("sampling after %d misses, want it at %d", hashedChurnMisses-1, hashedChurnMisses)
		}
		for i := range 2000 {
			write(fmt.Sprint("churn-", hashedChurnMisses-1+i))
		}
		if side == 0 {
			if !col.c.hashedSampling {
				t.Fatalf("not sampling after %d new values", hashedChurnMisses+1999)
			}
			// A value outside the sample leaves its slot alone; one in it
			// takes its slot.
			write(out)
			write(in)
			if s := col.c.hashed[testHash(out)&(hashedSlots-1)]; s.set && s.hash == testHash(out) {
				t.Fatal("a value outside the sample filled its slot while sampling")
			}
			if s := col.c.hashed[testHash(in)&(hashedSlots-1)]; !s.set || s.hash != testHash(in) {
				t.Fatal("a sampled value did not fill its slot while sampling")
			}
		} else {
			write(out) // the same rows on both sides
			write(in)
		}
		for range 3 { // a working set of 200 values, three rounds
			for i := range 200 {
				write(fmt.Sprint("series-", i))
			}
		}
		if side == 0 && col.c.hashedSampling {
			t.Fatal("still sampling after a working set came round three times")
		}
		for i := range 300 {
			write(fmt.Sprint("churn-again-", i))
		}
		frames[side] = enc.Finish(frames[side])
	}
	if !bytes.Equal(frames[0], frames[1]) {
		t.Fatalf("frames differ: hashed %d bytes, plain %d", len(frames[0]), len(frames[1]))
	}
}

// testHash is a 64-bit hash of v (FNV-1a, then mixed so that the top
// bits vary as a caller's hash's do).
func testHash(v string) uint64 {
	h := uint64(14695981039346656037)
	for i := range len(v) {
		h = (h ^ uint64(v[i])) * 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}

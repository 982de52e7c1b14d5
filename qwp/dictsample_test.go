package qwp

import (
	"slices"
	"strconv"
	"testing"
)

// TestSampledHashesCompareAcrossSuccessors checks the sample a caller
// estimates recurrence by: about one entry in 16, the same symbols sampled
// with the same hashes in a successor, none for symbols already present.
func TestSampledHashesCompareAcrossSuccessors(t *testing.T) {
	const n = 16000
	d := NewMemDict()
	for i := range n {
		d.ID([]byte("series-" + strconv.Itoa(i)))
	}
	s := slices.Clone(d.SampledHashes())
	if len(s) < n/32 || len(s) > n/8 {
		t.Fatalf("%d sampled hashes of %d entries, want about %d", len(s), n, n/16)
	}
	d.ID([]byte("series-1")) // present: no new sample
	if got := len(d.SampledHashes()); got != len(s) {
		t.Fatalf("looking up an entry again sampled it: %d hashes, want %d", got, len(s))
	}
	next := d.Successor()
	if next.Len() != 0 || len(next.SampledHashes()) != 0 {
		t.Fatalf("successor holds %d entries, %d samples; want an empty dictionary", next.Len(), len(next.SampledHashes()))
	}
	for i := n - 1; i >= 0; i-- { // the other order: the sample is by hash, not by id
		next.ID([]byte("series-" + strconv.Itoa(i)))
	}
	got := slices.Clone(next.SampledHashes())
	slices.Sort(got)
	slices.Sort(s)
	if !slices.Equal(got, s) {
		t.Fatalf("the successor sampled %d hashes for the same symbols, the original %d, or different ones", len(got), len(s))
	}
	if d.MemBytes() < int64(cap(d.SampledHashes()))*8 {
		t.Fatalf("MemBytes %d leaves out the %d sampled hashes", d.MemBytes(), len(s))
	}
}

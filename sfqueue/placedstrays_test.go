package sfqueue

import (
	"fmt"
	"testing"
)

// TestPlacedStrays: the intact frames after a damaged one in a segment
// that is not the tail get their FSNs from the next segment's base, and
// only then.
func TestPlacedStrays(t *testing.T) {
	const base, n = 10, 6
	zeroEnd := false
	build := func(flip ...int) *SegmentScan {
		data := encodeSegmentHeader(base)
		var starts []int
		for i := 0; i < n; i++ {
			starts = append(starts, len(data))
			data = appendFrame(data, []byte("payload-of-a-frame"), 1)
		}
		if zeroEnd {
			// The last frame's CRC32C ends in a zero byte, which the
			// written extent (the last non-zero byte) leaves out.
			data = data[:starts[n-1]]
			for k := 0; data[len(data)-1] != 0 || len(data) == starts[n-1]; k++ {
				data = appendFrame(data[:starts[n-1]], fmt.Appendf(nil, "payload-%d", k), 1)
			}
		}
		data = append(data, make([]byte, 64)...) // preallocated, never written
		for _, f := range flip {
			data[starts[f]+10] ^= 0xff // inside the payload: a CRC mismatch
		}
		seg := &SegmentScan{Base: base, NonZeroEnd: nonZeroExtent(data)}
		walkSegment(seg, data)
		return seg
	}
	next := uint64(base + n)

	seg := build(2)
	first, lost, ok := seg.PlacedStrays(next)
	if !ok || first != base+3 || lost != 1 {
		t.Errorf("one damaged frame: PlacedStrays = %d, %d, %v; want %d, 1, true", first, lost, ok, base+3)
	}
	if _, _, ok := seg.PlacedStrays(0); ok {
		t.Error("the tail segment (next 0): strays placed, but nothing fixes their FSNs")
	}
	if _, _, ok := seg.PlacedStrays(base + 3); ok {
		t.Error("a next base that leaves no room for the damaged frame: strays placed")
	}

	seg = build(1, 2)
	if first, lost, ok := seg.PlacedStrays(next); !ok || first != base+3 || lost != 2 {
		t.Errorf("two adjacent damaged frames: PlacedStrays = %d, %d, %v; want %d, 2, true", first, lost, ok, base+3)
	}

	seg = build(1, 3)
	if !seg.Damage.StrayGap {
		t.Error("damage between the strays: StrayGap not set")
	}
	if _, _, ok := seg.PlacedStrays(next); ok {
		t.Error("damage between the strays: strays placed, but the gap hides how many frames it held")
	}

	zeroEnd = true
	seg = build(2)
	if first, lost, ok := seg.PlacedStrays(next); !ok || first != base+3 || lost != 1 || len(seg.Damage.Stray) != n-3 {
		t.Errorf("the last frame ending in a zero byte: PlacedStrays = %d, %d, %v with %d strays; want %d, 1, true with %d",
			first, lost, ok, len(seg.Damage.Stray), base+3, n-3)
	}
	zeroEnd = false

	if _, _, ok := build().PlacedStrays(next); ok {
		t.Error("an undamaged segment: strays placed")
	}
}

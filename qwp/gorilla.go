package qwp

import (
	"encoding/binary"
	"math"
)

// gorilla tracks, value by value, how many bits the delta-of-delta stream of
// a timestamp column needs, so that a frame's size is known exactly at every
// row without encoding it.
type gorilla struct {
	n         int   // values seen
	prev      int64 // last value
	prevDelta int64 // last delta (valid when n >= 2)
	bits      int   // bits of the DoD stream so far
	overflow  bool  // some DoD is outside int32: the column goes uncompressed
}

// Encoding flag byte of a timestamp column under FlagGorilla.
const (
	tsUncompressed byte = 0x00
	tsGorilla      byte = 0x01
)

// add records v and returns how many bytes valueBytes grew by, so that a
// row's size follows without computing valueBytes before and after.
func (g *gorilla) add(v int64) (grown int) {
	grown = 8 // a raw value: the first two, or any once overflowed
	if g.n >= 1 {
		d := v - g.prev
		if g.n >= 2 && !g.overflow {
			if b := dodBits(d - g.prevDelta); b > 0 {
				// bits is never negative: shifts, not signed divisions
				grown = (g.bits+b+7)>>3 - (g.bits+7)>>3
				g.bits += b
			} else { // every value goes raw from now on
				g.overflow = true
				grown = 8*(g.n+1) - (16 + (g.bits+7)/8)
			}
		}
		g.prevDelta = d
	}
	g.prev = v
	g.n++
	return grown
}

// compressed reports whether the column is written in Gorilla mode.
func (g *gorilla) compressed() bool { return !g.overflow }

// valueBytes is the size of what follows the encoding flag byte.
func (g *gorilla) valueBytes() int {
	if !g.compressed() {
		return 8 * g.n
	}
	return 8*min(g.n, 2) + (g.bits+7)/8
}

// dodBits is the encoded size of one delta-of-delta, or 0 when it does not
// fit the 32-bit bucket.
func dodBits(dod int64) int {
	switch {
	case dod == 0:
		return 1
	case dod >= -64 && dod <= 63:
		return 9
	case dod >= -256 && dod <= 255:
		return 12
	case dod >= -2048 && dod <= 2047:
		return 16
	case dod >= math.MinInt32 && dod <= math.MaxInt32:
		return 36
	}
	return 0
}

// appendValues appends the encoding flag and the values of raw, the column's
// int64 values in little-endian form.
func (g *gorilla) appendValues(dst []byte, raw []byte) []byte {
	if !g.compressed() {
		dst = append(dst, tsUncompressed)
		return append(dst, raw...)
	}
	dst = append(dst, tsGorilla)
	head := 8 * min(g.n, 2)
	dst = append(dst, raw[:head]...)
	if g.n < 3 {
		return dst
	}
	w := bitWriter{dst: dst}
	prev := int64(binary.LittleEndian.Uint64(raw[8:]))
	prevDelta := prev - int64(binary.LittleEndian.Uint64(raw))
	for off := 16; off < len(raw); off += 8 {
		v := int64(binary.LittleEndian.Uint64(raw[off:]))
		d := v - prev
		dod := d - prevDelta
		switch dodBits(dod) {
		case 1:
			w.write(0, 1)
		case 9:
			w.write(0b01, 2)
			w.write(uint64(dod), 7)
		case 12:
			w.write(0b011, 3)
			w.write(uint64(dod), 9)
		case 16:
			w.write(0b0111, 4)
			w.write(uint64(dod), 12)
		default:
			w.write(0b1111, 4)
			w.write(uint64(dod), 32)
		}
		prev, prevDelta = v, d
	}
	return w.flush()
}

// bitWriter appends bits LSB-first: the first bit written is bit 0 of the
// first byte. Prefixes are therefore passed with their first bit in bit 0
// ("10" is 0b01).
type bitWriter struct {
	dst []byte
	acc uint64
	n   int
}

func (w *bitWriter) write(v uint64, n int) {
	w.acc |= (v & (1<<n - 1)) << w.n
	w.n += n
	for w.n >= 8 {
		w.dst = append(w.dst, byte(w.acc))
		w.acc >>= 8
		w.n -= 8
	}
}

// flush pads the last byte with zero bits.
func (w *bitWriter) flush() []byte {
	if w.n > 0 {
		w.dst = append(w.dst, byte(w.acc))
	}
	return w.dst
}

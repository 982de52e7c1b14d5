package qwptest

import (
	"encoding/binary"
)

// gorillaWidths are the value widths selected by prefixes 10, 110, 1110 and
// 1111; prefix 0 means a delta-of-delta of zero.
var gorillaWidths = [...]uint{7, 9, 12, 32}

// gorillaValues decodes n Gorilla-encoded timestamps: the first value, the
// second, then a byte-padded LSB-first bit stream of n-2 delta-of-deltas.
func (bd *blockDecoder) gorillaValues(n int, add func(any)) error {
	r := bd.r
	if n == 0 {
		return nil
	}
	head, err := r.bytes(8*min(n, 2), "Gorilla first/second timestamps")
	if err != nil {
		return err
	}
	keep := !bd.dec.CountOnly // guards add: boxing an int64 allocates
	prev := int64(binary.LittleEndian.Uint64(head))
	if keep {
		add(prev)
	}
	if n == 1 {
		return nil
	}
	cur := int64(binary.LittleEndian.Uint64(head[8:]))
	if keep {
		add(cur)
	}
	delta := cur - prev
	br := bitReader{b: r.b[r.off:]}
	for i := 2; i < n; i++ {
		dod, err := br.dod()
		if err != nil {
			return parseErr("Gorilla delta-of-delta %d: %s", i, err.Msg)
		}
		delta += dod
		cur += delta
		if keep {
			add(cur)
		}
	}
	r.off += (br.pos + 7) / 8
	return nil
}

// bitReader reads an LSB-first bit stream.
type bitReader struct {
	b   []byte
	pos int // in bits
}

func (br *bitReader) bits(n uint) (uint64, *StatusError) {
	if br.pos+int(n) > 8*len(br.b) {
		return 0, parseErr("bit stream truncated at bit %d (%d bytes left)", br.pos, len(br.b))
	}
	var v uint64
	for i := range n {
		if br.b[br.pos>>3]&(1<<(br.pos&7)) != 0 {
			v |= 1 << i
		}
		br.pos++
	}
	return v, nil
}

// dod reads one delta-of-delta: a prefix of up to four '1' bits ended by a
// '0' (not after four), then a value as wide as the prefix selects.
func (br *bitReader) dod() (int64, *StatusError) {
	ones := 0
	for ones < len(gorillaWidths) {
		bit, err := br.bits(1)
		if err != nil {
			return 0, err
		}
		if bit == 0 {
			break
		}
		ones++
	}
	if ones == 0 {
		return 0, nil
	}
	return br.signed(gorillaWidths[ones-1])
}

// signed reads a width-bit two's complement value.
func (br *bitReader) signed(width uint) (int64, *StatusError) {
	v, err := br.bits(width)
	if err != nil {
		return 0, err
	}
	shift := 64 - width
	return int64(v<<shift) >> shift, nil
}

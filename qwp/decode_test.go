package qwp

import (
	"encoding/binary"
	"fmt"
	"math"
)

// A strict test-only decoder of the messages this package encodes, written
// from the specification; tests compare what it reads with what they wrote.

type decMsg struct {
	flags     byte
	dictStart int
	dict      [][]byte
	tables    []decTable
}

type decTable struct {
	name string
	rows int
	cols []decCol
}

type decCol struct {
	name     string
	typ      ColumnType
	nullFlag byte
	encoding int   // timestamp encoding byte under Gorilla, -1 otherwise
	param    int   // GEOHASH precision or DECIMAL scale
	vals     []any // one per row; nil is NULL
}

type arrayVal struct {
	shape []int32
	f64   []float64
	i64   []int64
}

type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) need(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b)-d.off < n {
		d.err = fmt.Errorf("truncated at %d: need %d bytes, have %d", d.off, n, len(d.b)-d.off)
		return nil
	}
	s := d.b[d.off : d.off+n]
	d.off += n
	return s
}

func (d *decoder) u8() byte {
	if s := d.need(1); s != nil {
		return s[0]
	}
	return 0
}

func (d *decoder) u16() uint16 {
	if s := d.need(2); s != nil {
		return binary.LittleEndian.Uint16(s)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if s := d.need(4); s != nil {
		return binary.LittleEndian.Uint32(s)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if s := d.need(8); s != nil {
		return binary.LittleEndian.Uint64(s)
	}
	return 0
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.err = fmt.Errorf("bad varint at %d", d.off)
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) str() string { return string(d.need(int(d.uvarint()))) }

func decodeMessage(b []byte) (*decMsg, error) {
	d := &decoder{b: b}
	if m := d.u32(); d.err == nil && m != Magic {
		return nil, fmt.Errorf("magic %#x", m)
	}
	if v := d.u8(); d.err == nil && v != Version {
		return nil, fmt.Errorf("version %d", v)
	}
	m := &decMsg{flags: d.u8()}
	if m.flags&^(FlagDeferCommit|FlagGorilla|FlagDeltaSymbolDict) != 0 {
		return nil, fmt.Errorf("reserved flags %#x", m.flags)
	}
	nTables := int(d.u16())
	plen := int(d.u32())
	if d.err != nil {
		return nil, d.err
	}
	if plen != len(b)-HeaderSize {
		return nil, fmt.Errorf("payload_length %d, message has %d payload bytes", plen, len(b)-HeaderSize)
	}
	if m.flags&FlagDeltaSymbolDict != 0 {
		m.dictStart = int(d.uvarint())
		n := int(d.uvarint())
		for i := 0; i < n && d.err == nil; i++ {
			m.dict = append(m.dict, d.need(int(d.uvarint())))
		}
	}
	for i := 0; i < nTables && d.err == nil; i++ {
		m.tables = append(m.tables, d.table(m.flags))
	}
	if d.err != nil {
		return nil, d.err
	}
	if d.off != len(b) {
		return nil, fmt.Errorf("%d trailing bytes", len(b)-d.off)
	}
	return m, nil
}

func (d *decoder) table(flags byte) decTable {
	t := decTable{name: d.str(), rows: int(d.uvarint())}
	n := int(d.uvarint())
	if d.err == nil && (len(t.name) < 1 || len(t.name) > MaxNameBytes || t.rows < 1 || n > MaxColumnsPerBlock) {
		d.err = fmt.Errorf("table %q rows %d cols %d", t.name, t.rows, n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		c := decCol{name: d.str(), typ: ColumnType(d.u8()), encoding: -1}
		if d.err == nil && !c.typ.Valid() {
			d.err = fmt.Errorf("column %q type %#x", c.name, byte(c.typ))
		}
		t.cols = append(t.cols, c)
	}
	for i := range t.cols {
		if d.err != nil {
			break
		}
		d.column(&t.cols[i], t.rows, flags)
	}
	return t
}

func (d *decoder) column(c *decCol, rows int, flags byte) {
	c.nullFlag = d.u8()
	present := make([]bool, rows)
	nonNull := rows
	if c.nullFlag != 0 {
		bm := d.need((rows + 7) / 8)
		if d.err != nil {
			return
		}
		for r := 0; r < rows; r++ {
			present[r] = bm[r/8]&(1<<(r%8)) == 0
			if !present[r] {
				nonNull--
			}
		}
		if nonNull == rows {
			d.err = fmt.Errorf("column %q: bitmap mode without NULLs", c.name)
		}
	} else {
		for r := range present {
			present[r] = true
		}
	}
	vals := d.values(c, nonNull, flags)
	if d.err != nil {
		return
	}
	c.vals = make([]any, rows)
	j := 0
	for r := range present {
		if present[r] {
			c.vals[r] = vals[j]
			j++
		}
	}
}

func (d *decoder) values(c *decCol, n int, flags byte) []any {
	out := make([]any, 0, n)
	switch c.typ {
	case TypeBoolean:
		bs := d.need((n + 7) / 8)
		for i := 0; i < n && d.err == nil; i++ {
			out = append(out, bs[i/8]&(1<<(i%8)) != 0)
		}
	case TypeVarchar, TypeBinary:
		offs := make([]uint32, n+1)
		for i := range offs {
			offs[i] = d.u32()
		}
		if d.err != nil {
			return nil
		}
		if offs[0] != 0 {
			d.err = fmt.Errorf("column %q: offset[0] = %d", c.name, offs[0])
			return nil
		}
		data := d.need(int(offs[n]))
		for i := 0; i < n && d.err == nil; i++ {
			if offs[i] > offs[i+1] {
				d.err = fmt.Errorf("column %q: offsets not monotonic", c.name)
				return nil
			}
			out = append(out, append([]byte{}, data[offs[i]:offs[i+1]]...))
		}
	case TypeSymbol:
		for i := 0; i < n && d.err == nil; i++ {
			out = append(out, d.uvarint())
		}
	case TypeTimestamp, TypeTimestampNanos:
		ts := d.timestamps(c, n, flags)
		for _, v := range ts {
			out = append(out, v)
		}
	case TypeDoubleArray, TypeLongArray:
		for i := 0; i < n && d.err == nil; i++ {
			out = append(out, d.array(c))
		}
	case TypeGeohash:
		c.param = int(d.uvarint())
		if d.err == nil && (c.param < 1 || c.param > 60) {
			d.err = fmt.Errorf("geohash precision %d", c.param)
		}
		w := (c.param + 7) / 8
		for i := 0; i < n && d.err == nil; i++ {
			var v uint64
			for k, b := range d.need(w) {
				v |= uint64(b) << (8 * k)
			}
			out = append(out, v)
		}
	case TypeDecimal64, TypeDecimal128, TypeDecimal256:
		c.param = int(d.u8())
		fallthrough
	default:
		for i := 0; i < n && d.err == nil; i++ {
			out = append(out, d.fixed(c.typ))
		}
	}
	return out
}

func (d *decoder) fixed(t ColumnType) any {
	switch t {
	case TypeByte:
		return int8(d.u8())
	case TypeShort:
		return int16(d.u16())
	case TypeChar:
		return d.u16()
	case TypeInt:
		return int32(d.u32())
	case TypeIPv4:
		return d.u32()
	case TypeFloat:
		return math.Float32frombits(d.u32())
	case TypeDouble:
		return math.Float64frombits(d.u64())
	case TypeLong, TypeDate, TypeDecimal64:
		return int64(d.u64())
	case TypeUUID, TypeDecimal128:
		return [2]uint64{d.u64(), d.u64()}
	case TypeLong256, TypeDecimal256:
		return [4]uint64{d.u64(), d.u64(), d.u64(), d.u64()}
	}
	d.err = fmt.Errorf("no fixed decoding for %s", t)
	return nil
}

func (d *decoder) array(c *decCol) arrayVal {
	nd := int(d.u8())
	if d.err == nil && (nd < 1 || nd > MaxArrayDims) {
		d.err = fmt.Errorf("column %q: %d dims", c.name, nd)
		return arrayVal{}
	}
	a := arrayVal{shape: make([]int32, nd)}
	n := 1
	for i := range a.shape {
		a.shape[i] = int32(d.u32())
		if a.shape[i] < 0 {
			d.err = fmt.Errorf("negative dim")
		}
		n *= int(a.shape[i])
	}
	if d.err != nil {
		return a
	}
	for i := 0; i < n && d.err == nil; i++ {
		if c.typ == TypeDoubleArray {
			a.f64 = append(a.f64, math.Float64frombits(d.u64()))
		} else {
			a.i64 = append(a.i64, int64(d.u64()))
		}
	}
	return a
}

func (d *decoder) timestamps(c *decCol, n int, flags byte) []int64 {
	out := make([]int64, 0, n)
	if flags&FlagGorilla != 0 {
		c.encoding = int(d.u8())
	}
	if c.encoding != int(tsGorilla) {
		if c.encoding > 0 {
			d.err = fmt.Errorf("timestamp encoding %d", c.encoding)
		}
		for i := 0; i < n && d.err == nil; i++ {
			out = append(out, int64(d.u64()))
		}
		return out
	}
	if n == 0 {
		return out
	}
	out = append(out, int64(d.u64()))
	if n == 1 {
		return out
	}
	out = append(out, int64(d.u64()))
	r := bitReader{d: d}
	prev, delta := out[1], out[1]-out[0]
	for i := 2; i < n && d.err == nil; i++ {
		var dod int64
		switch {
		case r.bit() == 0:
		case r.bit() == 0:
			dod = r.signed(7)
		case r.bit() == 0:
			dod = r.signed(9)
		case r.bit() == 0:
			dod = r.signed(12)
		default:
			dod = r.signed(32)
		}
		delta += dod
		prev += delta
		out = append(out, prev)
	}
	if r.n > 0 && r.cur>>r.n != 0 && d.err == nil {
		d.err = fmt.Errorf("nonzero padding bits")
	}
	return out
}

// bitReader reads LSB-first bits, refilling a byte at a time from d.
type bitReader struct {
	d   *decoder
	cur byte // the current byte
	n   int  // bits of cur consumed; 0 means a fresh byte is needed
}

func (r *bitReader) bit() uint64 {
	if r.n == 0 {
		r.cur = r.d.u8()
	}
	b := uint64(r.cur>>r.n) & 1
	r.n = (r.n + 1) % 8
	return b
}

func (r *bitReader) signed(n int) int64 {
	var v uint64
	for i := 0; i < n; i++ {
		v |= r.bit() << i
	}
	return int64(v<<(64-n)) >> (64 - n)
}

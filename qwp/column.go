package qwp

import (
	"encoding/binary"
	"math"
)

// kind groups column types by how their values are laid out on the wire.
type kind byte

const (
	kindFixed     kind = iota // fixed-width little-endian values
	kindBool                  // one bit per value
	kindVarlen                // VARCHAR, BINARY: u32 offsets + bytes
	kindSymbol                // varint global ids
	kindTimestamp             // int64, optionally Gorilla
	kindArray                 // per row: n_dims, dims, values
	kindGeohash               // precision varint, then ceil(bits/8) bytes per value
	kindDecimal               // scale byte, then fixed-width values
)

func kindOf(t ColumnType) kind {
	switch t {
	case TypeBoolean:
		return kindBool
	case TypeVarchar, TypeBinary:
		return kindVarlen
	case TypeSymbol:
		return kindSymbol
	case TypeTimestamp, TypeTimestampNanos:
		return kindTimestamp
	case TypeDoubleArray, TypeLongArray:
		return kindArray
	case TypeGeohash:
		return kindGeohash
	case TypeDecimal64, TypeDecimal128, TypeDecimal256:
		return kindDecimal
	}
	return kindFixed
}

// column holds one column of one table block. Values are appended as they
// are set; NULLs take no value bytes and are recorded in the bitmap when the
// row ends, so a column is in bitmap mode exactly when it has a NULL (and
// only then holds a bitmap).
type column struct {
	name   string
	typ    ColumnType
	kind   kind
	param  byte // GEOHASH precision bits or DECIMAL scale
	schema int  // bytes of this column's schema entry

	frame     uint64   // Encoder.frame while the column is in the current block
	data      []byte   // non-null values in wire form (timestamps always raw)
	offs      []uint32 // kindVarlen: end offset of each value in data
	nulls     []byte   // LSB-first bitmap, one bit per row of the block
	nullCount int

	// Undo state for the row in progress.
	setSeq   uint64 // Table.seq of the row that set a value
	mark     int    // len(data) before the value
	markOffs int    // len(offs) before the value
	gor      gorilla
	gorMark  gorilla

	// kindSymbol: the last value accepted by Table.Symbol, its id and its
	// SymbolKeyed key (0: none), valid while symFrame is the encoder's
	// current frame. The id stays right after the row that set it is
	// rolled back: the dictionary keeps it.
	symFrame uint64
	symLast  []byte
	symID    uint32
	symKey   uint64
	hashed   []hashedSlot // SymbolValidHashed's cache, nil until used
	// hashedMisses counts SymbolValidHashed's misses since its last hit;
	// at hashedChurnMisses the column is under series churn and only
	// samples its cache (hashedSampling) until a sampled value hits.
	hashedMisses   uint16
	hashedSampling bool
}

func newColumn(name string, typ ColumnType, param byte) *column {
	return &column{
		name:   name,
		typ:    typ,
		kind:   kindOf(typ),
		param:  param,
		schema: uvarintLen(uint64(len(name))) + len(name) + 1,
	}
}

// take prepares the column for a value in row seq, remembering where the
// value starts so that it can be undone.
func (c *column) take(seq uint64) {
	c.setSeq = seq
	c.mark = len(c.data)
	c.markOffs = len(c.offs)
	if c.kind == kindTimestamp { // gor is unused otherwise
		c.gorMark = c.gor
	}
}

// undo drops the value of the row in progress.
func (c *column) undo() {
	c.data = c.data[:c.mark]
	c.offs = c.offs[:c.markOffs]
	if c.kind == kindTimestamp {
		c.gor = c.gorMark
	}
	c.setSeq = 0
}

// backfill records rows NULL rows: the rows a block already had when the
// column joined it.
func (c *column) backfill(rows int) {
	for i := 0; i < rows/8; i++ {
		c.nulls = append(c.nulls, 0xff)
	}
	if rows%8 != 0 {
		c.nulls = append(c.nulls, byte(1)<<(rows%8)-1)
	}
	c.nullCount = rows
}

// endRow records row number row (0-based) as set or NULL. A column without
// NULLs keeps no bitmap, so that rows setting every column cost nothing
// here; the first NULL brings the zero bits of the rows before it.
func (c *column) endRow(row int, set bool) {
	switch {
	case c.nullCount > 0:
		if row%8 == 0 {
			c.nulls = append(c.nulls, 0)
		}
	case set:
		return
	default:
		for range row/8 + 1 {
			c.nulls = append(c.nulls, 0)
		}
	}
	if !set {
		c.nulls[row/8] |= 1 << (row % 8)
		c.nullCount++
	}
}

func (c *column) reset() {
	c.frame = 0
	c.data = c.data[:0]
	c.offs = c.offs[:0]
	c.nulls = c.nulls[:0]
	c.nullCount = 0
	c.setSeq = 0
	c.gor = gorilla{}
}

// size is the byte size of the column's data section for a block of rows
// rows of which nulls are NULL, given the values appended so far.
func (c *column) size(rows, nulls int, gorillaOn bool) int {
	n := 1 // null flag
	if nulls > 0 {
		n += (rows + 7) / 8
	}
	switch c.kind {
	case kindBool:
		n += (len(c.data) + 7) / 8
	case kindVarlen:
		n += 4*(len(c.offs)+1) + len(c.data)
	case kindTimestamp:
		if gorillaOn {
			n += 1 + c.gor.valueBytes()
		} else {
			n += len(c.data)
		}
	case kindGeohash:
		n += uvarintLen(uint64(c.param)) + len(c.data)
	case kindDecimal:
		n += 1 + len(c.data)
	default:
		n += len(c.data)
	}
	return n
}

// appendData appends the column's data section.
func (c *column) appendData(dst []byte, gorillaOn bool) []byte {
	if c.nullCount > 0 {
		dst = append(dst, 1)
		dst = append(dst, c.nulls...)
	} else {
		dst = append(dst, 0)
	}
	switch c.kind {
	case kindBool:
		var b byte
		for i, v := range c.data {
			b |= v << (i % 8)
			if i%8 == 7 {
				dst = append(dst, b)
				b = 0
			}
		}
		if len(c.data)%8 != 0 {
			dst = append(dst, b)
		}
		return dst
	case kindVarlen:
		dst = binary.LittleEndian.AppendUint32(dst, 0)
		for _, o := range c.offs {
			dst = binary.LittleEndian.AppendUint32(dst, o)
		}
	case kindTimestamp:
		if gorillaOn {
			return c.gor.appendValues(dst, c.data)
		}
	case kindGeohash:
		dst = binary.AppendUvarint(dst, uint64(c.param))
	case kindDecimal:
		dst = append(dst, c.param)
	}
	return append(dst, c.data...)
}

// Value appenders used by the Table setters.

func (c *column) appendU16(v uint16) { c.data = binary.LittleEndian.AppendUint16(c.data, v) }
func (c *column) appendU32(v uint32) { c.data = binary.LittleEndian.AppendUint32(c.data, v) }
func (c *column) appendU64(v uint64) { c.data = binary.LittleEndian.AppendUint64(c.data, v) }

func (c *column) appendF64(v float64) { c.appendU64(math.Float64bits(v)) }

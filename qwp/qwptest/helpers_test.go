package qwptest

import (
	"encoding/binary"
	"math"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// wire builds hand-crafted message bytes for tests, independently of the
// client encoder.
type wire []byte

func (w wire) u8(v ...byte) wire { return append(w, v...) }

func (w wire) varint(v uint64) wire { return binary.AppendUvarint(w, v) }

func (w wire) str(s string) wire { return append(w.varint(uint64(len(s))), s...) }

func (w wire) u16(v uint16) wire { return binary.LittleEndian.AppendUint16(w, v) }

func (w wire) u32(v uint32) wire { return binary.LittleEndian.AppendUint32(w, v) }

func (w wire) u64(v uint64) wire { return binary.LittleEndian.AppendUint64(w, v) }

func (w wire) i64(v int64) wire { return w.u64(uint64(v)) }

func (w wire) f64(v float64) wire { return w.u64(math.Float64bits(v)) }

// message prepends a header with the payload length filled in.
func message(flags byte, tables int, payload wire) []byte {
	h := wire{}.u32(qwp.Magic).u8(qwp.Version, flags).u16(uint16(tables)).u32(uint32(len(payload)))
	return append(h, payload...)
}

// blockHeader starts a table block: name, row count, then the column
// definitions as name/type pairs.
func blockHeader(table string, rows int, cols ...any) wire {
	w := wire{}.str(table).varint(uint64(rows)).varint(uint64(len(cols) / 2))
	for i := 0; i < len(cols); i += 2 {
		w = w.str(cols[i].(string)).u8(byte(cols[i+1].(qwp.ColumnType)))
	}
	return w
}

// oneColumn is a single-table, single-column message: column data is the
// null section plus values.
func oneColumn(flags byte, typ qwp.ColumnType, rows int, data wire) []byte {
	return message(flags, 1, append(blockHeader("t", rows, "c", typ), data...))
}

// deltaColumn is oneColumn with FLAG_DELTA_SYMBOL_DICT and the given
// delta section before the block.
func deltaColumn(delta wire, typ qwp.ColumnType, rows int, data wire) []byte {
	p := append(delta, blockHeader("t", rows, "c", typ)...)
	return message(qwp.FlagDeltaSymbolDict, 1, append(p, data...))
}

// longRows is a valid message of n LONG rows in table name.
func longRows(flags byte, name string, n int) []byte {
	w := blockHeader(name, n, "v", qwp.TypeLong).u8(0)
	for i := range n {
		w = w.i64(int64(i))
	}
	return message(flags, 1, w)
}

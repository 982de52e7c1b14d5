package qwp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"
)

// EncoderOptions configure an Encoder.
type EncoderOptions struct {
	// MaxFrameBytes bounds a whole message, header included. 0 or anything
	// above the protocol ceiling means HeaderSize+MaxPayloadBytes.
	MaxFrameBytes int
	// Gorilla sets FlagGorilla: TIMESTAMP and TIMESTAMP_NANOS columns carry
	// an encoding byte and are delta-of-delta compressed when they can be.
	Gorilla bool
	// DeltaSymbolDict sets FlagDeltaSymbolDict on every message: each starts
	// with the dictionary entries added since the previous one and SYMBOL
	// columns carry global ids. SYMBOL columns require it.
	DeltaSymbolDict bool
}

// ErrFrameFull is returned by EndRow when the row does not fit in the
// current frame. The row has been rolled back; finish the frame and write the
// row again.
var ErrFrameFull = errors.New("qwp: frame full")

// RowTooLargeError is returned by EndRow when a row does not fit even in a
// frame holding no other rows. The row has been rolled back.
type RowTooLargeError struct {
	Table string
	Size  int // frame size with this row alone
	Limit int // MaxFrameBytes in effect
}

// Error names the table, the size and the limit.
func (e *RowTooLargeError) Error() string {
	return fmt.Sprintf("qwp: a row of table %q needs a %d-byte frame on its own, over the %d-byte frame limit",
		e.Table, e.Size, e.Limit)
}

// Encoder builds QWP messages row by row into reusable buffers. Rows of any
// number of tables accumulate in the current frame; Finish appends the
// complete message and starts the next frame. Once its buffers have grown to
// a frame's size, writing rows allocates nothing.
//
// An Encoder is not safe for concurrent use.
type Encoder struct {
	dict  SymbolDict
	opts  EncoderOptions
	limit int
	flags byte

	frame   uint64 // generation of the current frame; starts at 1
	tables  map[string]*Table
	active  []*Table // tables touched in the current frame, in first-touch order
	nTables int      // active tables with rows
	rows    int
	size    int // exact frame size; 0 while the frame has no rows
	tblSize int // sum of the block sizes of the active tables

	dictStart int // first dictionary id of this frame's delta section
	dictEnd   int // end of the ids covered by rows ended so far
	dictBytes int // bytes of the entries [dictStart, dictEnd)
	// dictLooked: a SYMBOL value was looked up in dict since the last
	// ended row, so dict may have grown past dictEnd (only a lookup adds
	// entries: EndRow skips the dictionary's Len otherwise). Finish and a
	// rolled-back row keep it: the row written again may hit a cache and
	// look nothing up, and the entry must still reach the next frame.
	dictLooked bool

	finishedRows int // rows of the frame the last Finish appended
}

// NewEncoder returns an encoder whose first frame's delta section starts at
// dict.Len(): entries already in dict are assumed known to the server (sent
// as catch-up). dict may be nil only when DeltaSymbolDict is false.
func NewEncoder(dict SymbolDict, opts EncoderOptions) *Encoder {
	e := &Encoder{opts: opts, tables: make(map[string]*Table), frame: 1}
	e.limit = opts.MaxFrameBytes
	if e.limit <= 0 || e.limit > HeaderSize+MaxPayloadBytes {
		e.limit = HeaderSize + MaxPayloadBytes
	}
	if opts.Gorilla {
		e.flags |= FlagGorilla
	}
	if opts.DeltaSymbolDict {
		e.flags |= FlagDeltaSymbolDict
	}
	e.Reset(dict)
	return e
}

// Reset discards the current frame and continues with dict, whose existing
// entries are assumed known to the server (for a new dictionary generation,
// pass an empty one). Table and column handles stay valid. dict may be nil
// only when DeltaSymbolDict is false.
func (e *Encoder) Reset(dict SymbolDict) {
	if e.opts.DeltaSymbolDict && dict == nil {
		panic("qwp: EncoderOptions.DeltaSymbolDict requires a SymbolDict")
	}
	e.dict = dict
	e.clear()
	e.dictStart, e.dictEnd, e.dictLooked = 0, 0, false
	if dict != nil {
		e.dictStart, e.dictEnd = dict.Len(), dict.Len()
	}
}

// MaxFrameBytes is the frame limit in effect.
func (e *Encoder) MaxFrameBytes() int { return e.limit }

// Rows is the number of rows ended in the current frame.
func (e *Encoder) Rows() int { return e.rows }

// FinishedRows is the number of rows in the frame the last Finish appended
// (0 when it appended nothing). Whoever is handed finished frames reads it
// there: the exporter stores each frame's rows with it in the queue.
func (e *Encoder) FinishedRows() int { return e.finishedRows }

// Size is the exact length Finish would append now: 0 for a frame without
// rows. A row in progress is not counted.
func (e *Encoder) Size() int { return e.size }

// SymbolRange is the range of dictionary ids [from, to) that the current
// frame's delta section carries. A caller that persists the dictionary must
// have stored these entries before it stores the frame.
func (e *Encoder) SymbolRange() (from, to int) { return e.dictStart, e.dictEnd }

// Table returns the block of table name in the current frame. The *Table
// stays valid across frames: a table not touched in a frame is left out of
// it.
func (e *Encoder) Table(name string) (*Table, error) {
	if t, ok := e.tables[name]; ok {
		return t, nil
	}
	if err := checkTableName(name); err != nil {
		return nil, err
	}
	t := &Table{
		e:       e,
		name:    name,
		nameHdr: uvarintLen(uint64(len(name))) + len(name),
		cols:    make(map[string]int32),
		seq:     1,
		frame:   notInFrame,
	}
	e.tables[name] = t
	return t, nil
}

// Finish appends the frame (header, delta symbol dictionary when enabled,
// one block per table with rows) to dst and starts the next frame. Rows in
// progress are cancelled. A frame without rows appends nothing.
func (e *Encoder) Finish(dst []byte) []byte {
	for _, t := range e.active {
		t.rollback()
	}
	if e.rows > 0 {
		dst = appendHeader(dst, e.flags, e.nTables, e.size-HeaderSize)
		if e.opts.DeltaSymbolDict {
			dst = binary.AppendUvarint(dst, uint64(e.dictStart))
			dst = binary.AppendUvarint(dst, uint64(e.dictEnd-e.dictStart))
			for id := e.dictStart; id < e.dictEnd; id++ {
				sym := e.dict.Entry(id)
				dst = binary.AppendUvarint(dst, uint64(len(sym)))
				dst = append(dst, sym...)
			}
		}
		for _, t := range e.active {
			if t.rows > 0 {
				dst = t.appendBlock(dst)
			}
		}
	}
	e.finishedRows = e.rows
	e.clear()
	e.dictStart = e.dictEnd
	return dst
}

// clear empties the current frame except the dictionary range.
func (e *Encoder) clear() {
	for _, t := range e.active {
		t.clear()
	}
	e.active = e.active[:0]
	e.frame++
	e.nTables, e.rows, e.size, e.tblSize, e.dictBytes = 0, 0, 0, 0, 0
}

// dictSection is the size of the delta section covering [dictStart, end)
// whose entries take entryBytes.
func (e *Encoder) dictSection(end, entryBytes int) int {
	if !e.opts.DeltaSymbolDict {
		return 0
	}
	return uvarintLen(uint64(e.dictStart)) + uvarintLen(uint64(end-e.dictStart)) + entryBytes
}

// Col is a handle to a column of one table, returned by Table.Column and
// friends. It stays valid across frames.
type Col struct {
	t *Table
	c *column // t's column: the setters reach it without indexing the pool
}

// Table is one table's block in the encoder's frames. Set the values of a
// row with the setters, then call EndRow; a column not set in a row is NULL
// in it. A setter given a handle of the wrong table or type makes EndRow
// fail with an error naming the column.
type Table struct {
	e       *Encoder
	name    string
	nameHdr int

	cols   map[string]int32
	pool   []*column // every column ever declared, in declaration order
	frame  uint64    // Encoder.frame while the table is in the current frame, else notInFrame
	active []*column // columns in the current block, in first-set order
	kept   int       // len(active) after the last ended row
	schema int       // schema bytes of active
	rows   int
	size   int    // block size with the ended rows; 0 without rows
	seq    uint64 // number of the row in progress; never 0
	rowErr error

	// The row in progress's growth of the block, kept as it is set so that
	// EndRow can skip a pass over every column in the common case: the
	// same columns as the ended rows, each set once, and no NULLs in the
	// block (see rowFast). Each setter adds its value's bytes.
	bitmaps  bool   // some column of the block has a NULL bitmap
	rowDelta int    // data bytes the row's values add
	setCols  int    // columns set in the row
	twice    bool   // some column was set twice in the row
	epoch    uint64 // rollbacks that took columns out of the block (see SymbolRun)
}

// notInFrame is Table.frame outside a frame. A column's frame is 0 outside
// its table's block (column.reset), so c.frame == t.frame means that c is
// in the block of the current frame: the setters compare the two without
// going through the Encoder.
const notInFrame = ^uint64(0)

// Name is the table's name.
func (t *Table) Name() string { return t.name }

// Column returns the handle of column name of type typ, declaring it on
// first use. The empty name is the designated timestamp and must be
// TIMESTAMP or TIMESTAMP_NANOS. GEOHASH columns are declared with
// GeohashColumn; DECIMAL columns declared here have scale 0.
func (t *Table) Column(name string, typ ColumnType) (Col, error) {
	if typ == TypeGeohash {
		return Col{}, fmt.Errorf("qwp: column %q of table %q: GEOHASH needs a precision; use GeohashColumn", name, t.name)
	}
	return t.declare(name, typ, 0)
}

// GeohashColumn returns the handle of a GEOHASH column of bits precision
// (1..60).
func (t *Table) GeohashColumn(name string, bits int) (Col, error) {
	if bits < 1 || bits > 60 {
		return Col{}, fmt.Errorf("qwp: GEOHASH column %q of table %q: precision %d bits is outside 1..60", name, t.name, bits)
	}
	return t.declare(name, TypeGeohash, byte(bits))
}

// maxScale is the largest scale of each decimal type: its precision.
var maxScale = map[ColumnType]int{TypeDecimal64: 18, TypeDecimal128: 38, TypeDecimal256: 76}

// DecimalColumn returns the handle of a DECIMAL64, DECIMAL128 or DECIMAL256
// column whose values are unscaled integers with scale decimal digits after
// the point.
func (t *Table) DecimalColumn(name string, typ ColumnType, scale int) (Col, error) {
	m, ok := maxScale[typ]
	if !ok {
		return Col{}, fmt.Errorf("qwp: column %q of table %q: %s is not a decimal type", name, t.name, typ)
	}
	if scale < 0 || scale > m {
		return Col{}, fmt.Errorf("qwp: %s column %q of table %q: scale %d is outside 0..%d", typ, name, t.name, scale, m)
	}
	return t.declare(name, typ, byte(scale))
}

func (t *Table) declare(name string, typ ColumnType, param byte) (Col, error) {
	if i, ok := t.cols[name]; ok {
		c := t.pool[i]
		if c.typ != typ || c.param != param {
			return Col{}, fmt.Errorf("qwp: column %q of table %q is %s, cannot redeclare it as %s",
				name, t.name, c.describe(), (&column{typ: typ, param: param}).describe())
		}
		return Col{t: t, c: c}, nil
	}
	if !typ.Valid() {
		return Col{}, fmt.Errorf("qwp: column %q of table %q: type %s is not an ingress type", name, t.name, typ)
	}
	if name == "" {
		if typ != TypeTimestamp && typ != TypeTimestampNanos {
			return Col{}, fmt.Errorf("qwp: designated timestamp of table %q must be TIMESTAMP or TIMESTAMP_NANOS, not %s", t.name, typ)
		}
	} else if err := checkColumnName(name); err != nil {
		return Col{}, fmt.Errorf("table %q: %w", t.name, err)
	}
	if typ == TypeSymbol && !t.e.opts.DeltaSymbolDict {
		return Col{}, fmt.Errorf("qwp: SYMBOL column %q of table %q needs EncoderOptions.DeltaSymbolDict", name, t.name)
	}
	for _, c := range t.pool {
		if strings.EqualFold(c.name, name) {
			return Col{}, fmt.Errorf("qwp: column %q of table %q clashes with column %q: QuestDB names are case-insensitive", name, t.name, c.name)
		}
	}
	c := newColumn(name, typ, param)
	t.cols[name] = int32(len(t.pool))
	t.pool = append(t.pool, c)
	return Col{t: t, c: c}, nil
}

func (c *column) describe() string {
	switch c.kind {
	case kindGeohash:
		return fmt.Sprintf("GEOHASH(%d bits)", c.param)
	case kindDecimal:
		return fmt.Sprintf("%s(scale %d)", c.typ, c.param)
	}
	return c.typ.String()
}

// EndRow ends the row in progress. It returns nil when the row is in the
// frame; ErrFrameFull when the frame cannot take it (finish the frame and
// write the row again); *RowTooLargeError when no frame can; or the error
// of a setter given a bad handle or value. On any error the row is rolled
// back and the frame is unchanged, except that SYMBOL values it registered
// stay in the dictionary and travel with the next frame's delta section: a
// caller that drops rows too large for a frame should size them before
// setting their symbols.
func (t *Table) EndRow() error {
	e := t.e
	if t.rowErr != nil {
		err := t.rowErr
		t.rollback()
		return err
	}
	if t.frame != e.frame {
		e.activate(t)
	}
	if t.rows == MaxRowsPerBlock || (t.rows == 0 && e.nTables == math.MaxUint16) {
		t.rollback()
		return ErrFrameFull
	}
	rows := t.rows + 1
	var block int
	anyNulls := false // any column with a bitmap after this row
	if fast, bitmaps := t.rowFast(); fast {
		block = t.size + t.rowDelta
		if bitmaps {
			block += t.bitmapGrowth(rows)
			anyNulls = true
		}
		if rows&0x7f == 0 { // the row count's varint grows only at powers of 128
			block += uvarintLen(uint64(rows)) - uvarintLen(uint64(t.rows))
		}
	} else {
		block, anyNulls = t.blockSize(rows)
	}
	dictEnd, dictBytes := e.dictEnd, e.dictBytes
	if e.dictLooked {
		for dictEnd < e.dict.Len() {
			n := len(e.dict.Entry(dictEnd))
			dictBytes += uvarintLen(uint64(n)) + n
			dictEnd++
		}
	}
	var size int
	if dictEnd == e.dictEnd && e.rows > 0 { // e.size is HeaderSize + the same delta section + e.tblSize
		size = e.size - t.size + block
	} else {
		size = HeaderSize + e.dictSection(dictEnd, dictBytes) + e.tblSize - t.size + block
	}
	if size > e.limit {
		t.rollback()
		if e.rows == 0 {
			return &RowTooLargeError{Table: t.name, Size: size, Limit: e.limit}
		}
		return ErrFrameFull
	}
	if anyNulls { // else every column was set and none keeps a bitmap
		for _, c := range t.active {
			c.endRow(t.rows, c.setSeq == t.seq)
		}
	}
	if t.rows == 0 {
		e.nTables++
	}
	t.rows = rows
	e.tblSize += block - t.size
	t.size = block
	t.bitmaps = anyNulls
	t.kept = len(t.active)
	t.newRow()
	e.rows++
	e.size = size
	e.dictEnd, e.dictBytes, e.dictLooked = dictEnd, dictBytes, false
	return nil
}

// rowFast reports that the row in progress sets no column twice and adds
// none, and either sets every column of a block without NULL bitmaps or
// joins a block that has them (bitmaps): its size is then the ended rows'
// plus rowDelta (and the row count's varint), plus with bitmaps their
// growth. An unset column adds no data, only its bit.
func (t *Table) rowFast() (fast, bitmaps bool) {
	if t.rows == 0 || t.twice || t.kept != len(t.active) {
		return false, false
	}
	if t.bitmaps {
		return true, true
	}
	return t.setCols == len(t.active), false
}

// bitmapGrowth is what the NULL bitmaps of a block that keeps them grow by
// when the row in progress ends it at rows rows: a byte for each bitmap
// every 8 rows, and a whole bitmap for a column NULL for the first time.
// It loops over the columns as blockSize does, but sizes none of them:
// spans, whose parent id and status message are often NULL, end every row
// here.
func (t *Table) bitmapGrowth(rows int) int {
	n := 0
	grow := t.rows%8 == 0
	for _, c := range t.active {
		switch {
		case c.nullCount > 0:
			if grow {
				n++
			}
		case c.setSeq != t.seq:
			n += (rows + 7) / 8
		}
	}
	return n
}

// blockSize is the block's exact size with rows rows, the row in progress
// ended, computed column by column, and whether any column then has a NULL
// bitmap.
func (t *Table) blockSize(rows int) (block int, anyNulls bool) {
	block = t.nameHdr + uvarintLen(uint64(rows)) + uvarintLen(uint64(len(t.active))) + t.schema
	for _, c := range t.active {
		nulls := c.nullCount
		if c.setSeq != t.seq {
			nulls++
		}
		anyNulls = anyNulls || nulls > 0
		block += c.size(rows, nulls, t.e.opts.Gorilla)
	}
	return block, anyNulls
}

// newRow starts the next row.
func (t *Table) newRow() {
	t.seq++
	t.rowDelta, t.setCols, t.twice = 0, 0, false
}

// CancelRow drops the row in progress.
func (t *Table) CancelRow() { t.rollback() }

func (e *Encoder) activate(t *Table) {
	t.frame = e.frame
	e.active = append(e.active, t)
}

func (t *Table) rollback() {
	for _, c := range t.active[:t.kept] {
		if c.setSeq == t.seq {
			c.undo()
		}
	}
	for _, c := range t.active[t.kept:] {
		t.schema -= c.schema
		c.reset()
	}
	if len(t.active) > t.kept {
		t.epoch++ // columns left the block: disarm every SymbolRun
	}
	t.active = t.active[:t.kept]
	t.rowErr = nil
	t.newRow()
}

func (t *Table) clear() {
	for _, c := range t.active {
		c.reset()
	}
	t.active = t.active[:0]
	t.frame = notInFrame
	t.kept, t.schema, t.rows, t.size = 0, 0, 0, 0
	t.bitmaps = false
	t.rowErr = nil
	t.newRow()
}

func (t *Table) appendBlock(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(t.name)))
	dst = append(dst, t.name...)
	dst = binary.AppendUvarint(dst, uint64(t.rows))
	dst = binary.AppendUvarint(dst, uint64(len(t.active)))
	for _, c := range t.active {
		dst = binary.AppendUvarint(dst, uint64(len(c.name)))
		dst = append(dst, c.name...)
		dst = append(dst, byte(c.typ))
	}
	for _, c := range t.active {
		dst = c.appendData(dst, t.e.opts.Gorilla)
	}
	return dst
}

// value takes handle h's column (h.c) for a value of typ in the row in
// progress in the common case: a column of this table and type that the
// block has and the row has not set yet. It is inlined into the setters
// (a call less per value); for anything else it reports false and the
// setter calls valueSlow. The setter adds the value's bytes to rowDelta
// (took, tookVar).
func (t *Table) value(h Col, typ ColumnType) bool {
	c := h.c
	if h.t != t || c.typ != typ || c.frame != t.frame || c.setSeq == t.seq {
		return false
	}
	c.setSeq, c.mark, c.markOffs = t.seq, len(c.data), len(c.offs)
	t.setCols++
	return true
}

// valueSlow is value for a handle or type that is wrong, a column joining
// the block, or a column set twice in the row: it readies h.c for the
// value, or reports false after recording why it cannot.
func (t *Table) valueSlow(h Col, typ ColumnType) bool {
	// The table joins the frame first, so that Finish cancels this row
	// even when it only recorded an error.
	e := t.e
	if t.frame != e.frame {
		e.activate(t)
	}
	if h.t != t {
		t.fail(fmt.Errorf("qwp: table %q: column handle belongs to another table or is zero", t.name))
		return false
	}
	c := h.c
	if c.typ != typ {
		t.fail(fmt.Errorf("qwp: column %q of table %q is %s; cannot write a %s value", c.name, t.name, c.typ, typ))
		return false
	}
	if c.frame != e.frame {
		if len(t.active) == MaxColumnsPerBlock {
			t.fail(fmt.Errorf("qwp: column %q of table %q would be column %d of the block; the limit is %d",
				c.name, t.name, MaxColumnsPerBlock+1, MaxColumnsPerBlock))
			return false
		}
		c.frame = e.frame
		c.backfill(t.rows)
		t.active = append(t.active, c)
		t.schema += c.schema
	}
	if c.setSeq == t.seq {
		t.twice = true
		c.undo() // setting a value twice in one row replaces the first
	} else {
		t.setCols++
	}
	c.take(t.seq)
	return true
}

// took adds to rowDelta the bytes of the value just appended to c, a
// column of fixed-width or variable-width values without offsets.
func (t *Table) took(c *column) { t.rowDelta += len(c.data) - c.mark }

// tookVar is took for a VARCHAR or BINARY value (its bytes and offset).
func (t *Table) tookVar(c *column) { t.rowDelta += len(c.data) - c.mark + 4 }

func (t *Table) fail(err error) {
	if t.rowErr == nil {
		t.rowErr = err
	}
}

// badValue drops the value just begun in c and records why.
func (t *Table) badValue(c *column, format string, args ...any) {
	c.undo()
	t.fail(fmt.Errorf("qwp: column %q of table %q: "+format, append([]any{c.name, t.name}, args...)...))
}

// Bool sets a BOOLEAN value.
func (t *Table) Bool(h Col, v bool) {
	if c := h.c; t.value(h, TypeBoolean) || t.valueSlow(h, TypeBoolean) {
		var b byte
		if v {
			b = 1
		}
		c.data = append(c.data, b)
		t.rowDelta += (len(c.data)+7)/8 - (c.mark+7)/8 // one bit per value
	}
}

// Byte sets a BYTE value.
func (t *Table) Byte(h Col, v int8) {
	if c := h.c; t.value(h, TypeByte) || t.valueSlow(h, TypeByte) {
		c.data = append(c.data, byte(v))
		t.took(c)
	}
}

// Short sets a SHORT value.
func (t *Table) Short(h Col, v int16) {
	if c := h.c; t.value(h, TypeShort) || t.valueSlow(h, TypeShort) {
		c.appendU16(uint16(v))
		t.took(c)
	}
}

// Char sets a CHAR value, one UTF-16 code unit.
func (t *Table) Char(h Col, v uint16) {
	if c := h.c; t.value(h, TypeChar) || t.valueSlow(h, TypeChar) {
		c.appendU16(v)
		t.took(c)
	}
}

// Int sets an INT value.
func (t *Table) Int(h Col, v int32) {
	if c := h.c; t.value(h, TypeInt) || t.valueSlow(h, TypeInt) {
		c.appendU32(uint32(v))
		t.took(c)
	}
}

// IPv4 sets an IPv4 value, the address as a big-endian number
// (192.168.0.1 is 0xC0A80001).
func (t *Table) IPv4(h Col, v uint32) {
	if c := h.c; t.value(h, TypeIPv4) || t.valueSlow(h, TypeIPv4) {
		c.appendU32(v)
		t.took(c)
	}
}

// Float sets a FLOAT value.
func (t *Table) Float(h Col, v float32) {
	if c := h.c; t.value(h, TypeFloat) || t.valueSlow(h, TypeFloat) {
		c.appendU32(math.Float32bits(v))
		t.took(c)
	}
}

// Long sets a LONG value.
func (t *Table) Long(h Col, v int64) {
	if c := h.c; t.value(h, TypeLong) || t.valueSlow(h, TypeLong) {
		c.appendU64(uint64(v))
		t.took(c)
	}
}

// Double sets a DOUBLE value.
func (t *Table) Double(h Col, v float64) {
	if c := h.c; t.value(h, TypeDouble) || t.valueSlow(h, TypeDouble) {
		c.appendF64(v)
		t.took(c)
	}
}

// Date sets a DATE value, milliseconds since the Unix epoch.
func (t *Table) Date(h Col, millis int64) {
	if c := h.c; t.value(h, TypeDate) || t.valueSlow(h, TypeDate) {
		c.appendU64(uint64(millis))
		t.took(c)
	}
}

// Timestamp sets a TIMESTAMP value, microseconds since the Unix epoch.
func (t *Table) Timestamp(h Col, micros int64) { t.timestamp(h, TypeTimestamp, micros) }

// TimestampNanos sets a TIMESTAMP_NANOS value, nanoseconds since the Unix
// epoch.
func (t *Table) TimestampNanos(h Col, nanos int64) { t.timestamp(h, TypeTimestampNanos, nanos) }

func (t *Table) timestamp(h Col, typ ColumnType, v int64) {
	if c := h.c; t.value(h, typ) || t.valueSlow(h, typ) {
		c.appendU64(uint64(v))
		c.gorMark = c.gor // value's fast path leaves this to the one setter that uses it
		if grown := c.gor.add(v); t.e.opts.Gorilla {
			t.rowDelta += grown
		} else {
			t.rowDelta += 8
		}
	}
}

// UUID sets a UUID value from its low and high 64 bits.
func (t *Table) UUID(h Col, lo, hi uint64) {
	if c := h.c; t.value(h, TypeUUID) || t.valueSlow(h, TypeUUID) {
		c.appendU64(lo)
		c.appendU64(hi)
		t.took(c)
	}
}

// Long256 sets a LONG256 value, least significant word first.
func (t *Table) Long256(h Col, v [4]uint64) { t.words(h, TypeLong256, v[:]) }

// Decimal64 sets a DECIMAL64 value: the unscaled integer.
func (t *Table) Decimal64(h Col, unscaled int64) {
	if c := h.c; t.value(h, TypeDecimal64) || t.valueSlow(h, TypeDecimal64) {
		c.appendU64(uint64(unscaled))
		t.took(c)
	}
}

// Decimal128 sets a DECIMAL128 value: the unscaled two's complement integer
// as its low and high 64 bits.
func (t *Table) Decimal128(h Col, lo, hi uint64) {
	if c := h.c; t.value(h, TypeDecimal128) || t.valueSlow(h, TypeDecimal128) {
		c.appendU64(lo)
		c.appendU64(hi)
		t.took(c)
	}
}

// Decimal256 sets a DECIMAL256 value: the unscaled two's complement integer,
// least significant word first.
func (t *Table) Decimal256(h Col, v [4]uint64) { t.words(h, TypeDecimal256, v[:]) }

func (t *Table) words(h Col, typ ColumnType, w []uint64) {
	if c := h.c; t.value(h, typ) || t.valueSlow(h, typ) {
		for _, x := range w {
			c.appendU64(x)
		}
		t.took(c)
	}
}

// Geohash sets a GEOHASH value: the hash's bits, which must fit the column's
// precision.
func (t *Table) Geohash(h Col, v uint64) {
	c := h.c
	if !t.value(h, TypeGeohash) && !t.valueSlow(h, TypeGeohash) {
		return
	}
	if v>>c.param != 0 {
		t.badValue(c, "geohash %#x has more than %d bits", v, c.param)
		return
	}
	for i := 0; i < (int(c.param)+7)/8; i++ {
		c.data = append(c.data, byte(v>>(8*i)))
	}
	t.took(c)
}

// Symbol sets a SYMBOL value, registering it in the dictionary when new.
// It must be valid UTF-8.
func (t *Table) Symbol(h Col, v []byte) { t.symbol(h, v, 0, false, false, 0) }

// SymbolValid is Symbol for bytes the caller guarantees are valid UTF-8,
// because it built them itself (repairing what it copied from elsewhere):
// they are not validated again. Invalid bytes here make a frame the server
// refuses, so anything not built that way goes through Symbol.
func (t *Table) SymbolValid(h Col, v []byte) { t.symbol(h, v, 0, true, false, 0) }

// SymbolString is Symbol for a string.
func (t *Table) SymbolString(h Col, v string) {
	t.symbol(h, unsafe.Slice(unsafe.StringData(v), len(v)), 0, false, false, 0) // read only: SymbolDict must not retain or modify it
}

// NewSymbolKey returns a key for SymbolKeyed that no other call returns in
// this process.
func NewSymbolKey() uint64 { return symbolKeys.Add(1) }

var symbolKeys atomic.Uint64

// SymbolKeyed is Symbol for a value the caller names with key, which must
// never name other bytes: take a NewSymbolKey for each value computed once
// and written to many rows (a resource's attributes, a metric's name). When
// the column's previous value in this frame had the same key, its id is
// reused without reading v, saving the comparison of a long value row after
// row. Key 0 names nothing: SymbolKeyed is then Symbol.
func (t *Table) SymbolKeyed(h Col, v []byte, key uint64) { t.symbol(h, v, key, false, false, 0) }

// SymbolStringKeyed is SymbolKeyed for a string.
func (t *Table) SymbolStringKeyed(h Col, v string, key uint64) {
	t.symbol(h, unsafe.Slice(unsafe.StringData(v), len(v)), key, false, false, 0) // read only, as in SymbolString
}

// SymbolRun is a run of SYMBOL values that many rows of one table repeat
// as they are (a resource's, a scope's and a metric's columns): build it
// once with Add, then write it into each row with Table.Symbols. The run
// remembers the dictionary id of each value for the frame in progress, so
// after the first row of a frame a value costs its id's bytes and the row
// bookkeeping, none of a setter's checks or lookups. The values' bytes are
// only read, and must not change until Reset.
type SymbolRun struct {
	ents []runEntry

	// Armed: every value has its id for frame and its column in t's
	// block, which stays so until the frame ends or a rollback takes
	// columns out of the block (t.epoch changes); short: every id takes
	// one or two bytes (a varint below 1<<14: a dictionary under series
	// churn puts a metric's name and unit past id 127 in most
	// generations).
	t     *Table
	frame uint64
	epoch uint64
	short bool
}

type runEntry struct {
	col   Col
	v     []byte
	c     *column // col's column, once a row of frame took the value
	frame uint64  // Encoder.frame in which id holds; 0: none
	id    uint32
}

// Reset empties the run, dropping its references to the values.
func (r *SymbolRun) Reset() {
	clear(r.ents)
	*r = SymbolRun{ents: r.ents[:0]}
}

// Add appends v for column c.
func (r *SymbolRun) Add(c Col, v []byte) {
	r.ents = append(r.ents, runEntry{col: c, v: v})
	r.t = nil // disarm
}

// AddString appends v for column c; the string is only read, as in
// SymbolString.
func (r *SymbolRun) AddString(c Col, v string) {
	r.Add(c, unsafe.Slice(unsafe.StringData(v), len(v)))
}

// Symbols sets each value of run in order, exactly as Symbol would one by
// one. Once a row of the frame has taken every value, later rows write the
// ids the run holds, checking per value only that the row has not set the
// column yet.
func (t *Table) Symbols(run *SymbolRun) {
	ents := run.ents
	i := 0
	if run.t == t && run.frame == t.frame && run.epoch == t.epoch && run.short { // t.frame: see notInFrame
		// A loop that calls nothing, so keeps its state in registers and
		// writes no pointer (no write barrier while the GC marks); a
		// value it cannot take (its column set earlier in the row, or
		// without room for two bytes) goes to the general path with the
		// rest.
		seq, delta := t.seq, 0
		for ; i < len(ents); i++ {
			c, id := ents[i].c, ents[i].id
			n := len(c.data)
			if c.setSeq == seq || cap(c.data)-n < 2 {
				break
			}
			// What value records for a first value in the row (a SYMBOL
			// column has no offsets: markOffs stays 0), and the id's
			// uvarint.
			c.setSeq, c.mark = seq, n
			if id < 0x80 {
				c.data = c.data[:n+1]
				c.data[n] = byte(id)
				delta++
			} else {
				c.data = c.data[:n+2]
				c.data[n], c.data[n+1] = byte(id)|0x80, byte(id>>7)
				delta += 2
			}
		}
		t.rowDelta += delta
		t.setCols += i
		if i == len(ents) {
			return
		}
	}
	for ; i < len(ents); i++ {
		t.runValue(&ents[i])
	}
	t.arm(run)
}

// arm arms run for t when every value has its id for this frame and its
// column in the block.
func (t *Table) arm(run *SymbolRun) {
	frame := t.e.frame
	run.t, run.short = nil, true
	for i := range run.ents {
		en := &run.ents[i]
		if en.frame != frame || en.col.t != t || en.c.frame != frame {
			return
		}
		run.short = run.short && en.id < 1<<14
	}
	run.t, run.frame, run.epoch = t, frame, t.epoch
}

// runValue is Symbols for one value: its id when the run holds it for this
// frame, else Symbol, remembering the id it got.
func (t *Table) runValue(en *runEntry) {
	frame := t.e.frame
	if c := en.c; en.frame == frame && en.col.t == t && c.frame == frame && c.setSeq != t.seq {
		n := len(c.data)
		c.setSeq, c.mark, c.markOffs = t.seq, n, len(c.offs)
		c.data = binary.AppendUvarint(c.data, uint64(en.id))
		t.rowDelta += len(c.data) - n
		t.setCols++
		return
	}
	t.symbol(en.col, en.v, 0, false, false, 0)
	if en.col.t == t && t.rowErr == nil {
		c := en.col.c
		if c.setSeq == t.seq && c.symFrame == frame { // taken: symbol left its id in the column's cache
			en.c, en.frame, en.id = c, frame, c.symID
		}
	}
}

// symbol sets a SYMBOL value; valid skips the UTF-8 check (SymbolValid);
// hashed looks the value up in the column's cache under hash first
// (SymbolValidHashed).
func (t *Table) symbol(h Col, v []byte, key uint64, valid, hashed bool, hash uint64) {
	c := h.c
	if !t.value(h, TypeSymbol) && !t.valueSlow(h, TypeSymbol) {
		return
	}
	var slot *hashedSlot
	if hashed && (!c.hashedSampling || hash>>hashedSampleShift == 0) {
		if c.hashed == nil {
			c.hashed = make([]hashedSlot, hashedSlots)
		}
		slot = &c.hashed[hash&(hashedSlots-1)]
		if slot.set && slot.hash == hash && int(slot.id) < t.e.dict.Len() && bytes.Equal(t.e.dict.Entry(int(slot.id)), v) {
			c.hashedMisses, c.hashedSampling = 0, false
			c.data = binary.AppendUvarint(c.data, uint64(slot.id))
			t.took(c)
			return
		}
		if !c.hashedSampling {
			c.hashedMisses++
			c.hashedSampling = c.hashedMisses == hashedChurnMisses
		}
	}
	// Most SYMBOL columns repeat the previous row's value (service, metric,
	// scope, resource attributes): reuse its id without validating or
	// looking it up again. The cache lives for one frame, because Reset,
	// which may come with a cleared dictionary, also starts a new frame.
	if c.symFrame == t.e.frame && (key != 0 && key == c.symKey || bytes.Equal(v, c.symLast)) {
		// The bytes matched under another key (a new metric with the
		// previous one's unit): the new key names them from now on.
		c.symKey = key
	} else {
		if !valid && !utf8.Valid(v) {
			t.badValue(c, "symbol %q is not valid UTF-8", v)
			return
		}
		// An entry no frame can carry would stay pending forever and make
		// every later frame too large: refuse it before it is registered.
		if n := HeaderSize + 2*binary.MaxVarintLen32 + uvarintLen(uint64(len(v))) + len(v); n > t.e.limit {
			t.badValue(c, "a %d-byte symbol cannot fit in a %d-byte frame", len(v), t.e.limit)
			return
		}
		id := t.e.dict.ID(v)
		t.e.dictLooked = true
		if id >= MaxSymbolDictSize {
			t.badValue(c, "symbol %q got dictionary id %d; a server accepts ids below %d", v, id, MaxSymbolDictSize)
			return
		}
		c.symFrame, c.symID, c.symKey = t.e.frame, id, key
		c.symLast = append(c.symLast[:0], v...)
	}
	if slot != nil {
		slot.hash, slot.id, slot.set = hash, c.symID, true
	}
	c.data = binary.AppendUvarint(c.data, uint64(c.symID))
	t.took(c)
}

// hashedSlots is the size of a column's SymbolValidHashed cache: 16 bytes
// a slot, 64 KiB, allocated at the column's first hashed value.
const hashedSlots = 1 << 12

// Under series churn (every value new) the cache never hits, and reading
// a slot, which the rows between two of a column's values have evicted
// from the CPU's caches, costs about as much as the dictionary's lookup of
// the value. After hashedChurnMisses misses in a row a column consults and
// fills only the slots of a sixteenth of the values, those whose hash has
// its top 4 bits clear (hash>>hashedSampleShift == 0: a value is sampled
// every time or never), and consults them all again once a sampled value hits: a working
// set that comes round again hits on its sampled values at its second
// round.
const (
	hashedChurnMisses = 1024
	hashedSampleShift = 60
)

// hashedSlot remembers the id of the value last written with a hash.
type hashedSlot struct {
	hash uint64
	id   uint32
	set  bool
}

// SymbolValidHashed is SymbolValid for a value that comes with a 64-bit
// hash the caller has computed anyway and that is the same whenever the
// value recurs (series_id for a data point's attributes: it hashes the
// attribute JSON and the metric). The column keeps the id of the last
// value of each hash in a small direct-mapped table; a value whose hash
// is there and whose dictionary entry has its bytes takes that id without
// the dictionary's lookup, which would hash and compare the value again.
// The byte comparison makes the id exact whatever the hash: values with
// one hash only share a slot. Cached ids outlive frames; one that the
// dictionary no longer holds (after Reset) is not used.
func (t *Table) SymbolValidHashed(h Col, v []byte, hash uint64) { t.symbol(h, v, 0, true, true, hash) }

// Varchar sets a VARCHAR value, which must be valid UTF-8.
func (t *Table) Varchar(h Col, v []byte) {
	if utf8.Valid(v) {
		t.VarcharValid(h, v)
		return
	}
	if c := h.c; t.value(h, TypeVarchar) || t.valueSlow(h, TypeVarchar) { // the handle's errors first, as for a valid value
		t.badValue(c, "value %q is not valid UTF-8", v)
	}
}

// VarcharValid is Varchar for bytes the caller guarantees are valid UTF-8;
// see SymbolValid. It is the setter itself, not a call of a shared one with
// a flag (a call less for each of the four VARCHARs of a log record).
func (t *Table) VarcharValid(h Col, v []byte) {
	if c := h.c; t.value(h, TypeVarchar) || t.valueSlow(h, TypeVarchar) {
		c.data = append(c.data, v...)
		c.offs = append(c.offs, uint32(len(c.data)))
		t.tookVar(c)
	}
}

// VarcharString is Varchar for a string.
func (t *Table) VarcharString(h Col, v string) {
	c := h.c
	if !t.value(h, TypeVarchar) && !t.valueSlow(h, TypeVarchar) {
		return
	}
	if !utf8.ValidString(v) {
		t.badValue(c, "value %q is not valid UTF-8", v)
		return
	}
	c.data = append(c.data, v...)
	c.offs = append(c.offs, uint32(len(c.data)))
	t.tookVar(c)
}

// Binary sets a BINARY value.
func (t *Table) Binary(h Col, v []byte) {
	if c := h.c; t.value(h, TypeBinary) || t.valueSlow(h, TypeBinary) {
		c.data = append(c.data, v...)
		c.offs = append(c.offs, uint32(len(c.data)))
		t.tookVar(c)
	}
}

// MaxArrayDims is the largest number of dimensions of an array value.
const MaxArrayDims = 32

// DoubleArray sets a DOUBLE_ARRAY value of the given shape (1..32
// dimensions, each >= 0) from vals in row-major order; len(vals) must be
// the product of shape. A zero dimension makes an empty array, which is a
// value, distinct from NULL (not setting the column).
func (t *Table) DoubleArray(h Col, shape []int32, vals []float64) {
	if c := t.array(h, TypeDoubleArray, shape, len(vals)); c != nil {
		for _, v := range vals {
			c.appendF64(v)
		}
		t.took(c)
	}
}

// LongArray sets a LONG_ARRAY value; see DoubleArray.
func (t *Table) LongArray(h Col, shape []int32, vals []int64) {
	if c := t.array(h, TypeLongArray, shape, len(vals)); c != nil {
		for _, v := range vals {
			c.appendU64(uint64(v))
		}
		t.took(c)
	}
}

func (t *Table) array(h Col, typ ColumnType, shape []int32, n int) *column {
	c := h.c
	if !t.value(h, typ) && !t.valueSlow(h, typ) {
		return nil
	}
	if len(shape) < 1 || len(shape) > MaxArrayDims {
		t.badValue(c, "array has %d dimensions; it must have 1..%d", len(shape), MaxArrayDims)
		return nil
	}
	product := int64(1)
	for _, d := range shape {
		if d < 0 {
			t.badValue(c, "array shape %v has a negative dimension", shape)
			return nil
		}
		product *= int64(d)
		if product > math.MaxInt32 {
			t.badValue(c, "array shape %v has more than %d elements", shape, math.MaxInt32)
			return nil
		}
	}
	if product != int64(n) {
		t.badValue(c, "array shape %v needs %d values, got %d", shape, product, n)
		return nil
	}
	c.data = append(c.data, byte(len(shape)))
	for _, d := range shape {
		c.appendU32(uint32(d))
	}
	return c
}

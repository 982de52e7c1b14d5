package qwptest

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"unicode/utf8"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// StatusError is a frame refused by the decoder or the server: the status
// the server answers with and the reason it puts in the error frame.
type StatusError struct {
	Status qwp.Status
	Msg    string
	// UnknownSymbol marks the refusal of a symbol id beyond the dictionary
	// (PARSE_ERROR, QuestDB's "symbol index out of range"), so a client
	// decoding offline (questdb-slot salvage) need not match the text.
	UnknownSymbol bool
}

func (e *StatusError) Error() string { return e.Status.String() + ": " + e.Msg }

func parseErr(format string, args ...any) *StatusError {
	return &StatusError{Status: qwp.StatusParseError, Msg: fmt.Sprintf(format, args...)}
}

func unknownSymbol(e *StatusError) *StatusError {
	e.UnknownSymbol = true
	return e
}

// Dict is a connection's global symbol dictionary as the server holds it.
// The zero value is an empty dictionary.
type Dict struct{ entries []string }

// Len is the number of ids the dictionary knows.
func (d *Dict) Len() int { return len(d.entries) }

// Entry returns the string of id i (0 <= i < Len()).
func (d *Dict) Entry(i int) string { return d.entries[i] }

// Message is one decoded ingress message.
type Message struct {
	Flags byte
	// DeltaStart and DeltaCount describe the delta symbol dictionary section;
	// both are 0 without FLAG_DELTA_SYMBOL_DICT.
	DeltaStart, DeltaCount int
	Tables                 []Block
}

// Block is one table block.
type Block struct {
	Table   string
	Rows    int
	Columns []Column
}

// Column is one column of a block. Values has one entry per row (nil for a
// NULL) unless the decoder runs in count-only mode, where it is nil.
//
// Value types: BOOLEAN bool; BYTE int8; SHORT int16; INT int32; LONG,
// TIMESTAMP (µs), TIMESTAMP_NANOS (ns) and DATE (ms) int64; FLOAT float32;
// DOUBLE float64; CHAR uint16; IPv4 uint32; GEOHASH uint64 (GeohashBits
// wide); SYMBOL and VARCHAR string; BINARY []byte; UUID UUID; LONG256
// Long256; arrays Array; decimals Decimal. Sentinel-mode values are kept as
// sent, except the spec's sentinels for UUID, LONG256, IPv4 and GEOHASH,
// which are QuestDB's own null encodings and decode to nil in either mode
// (GEOHASH all ones only at 1-7, 9-15, 25-31 and 57-60 bits, where the wire
// value is as wide as QuestDB's column; elsewhere it is a value). The
// server stores the other types' NULL values as NULL (see TableData).
type Column struct {
	Name        string
	Type        qwp.ColumnType
	GeohashBits int // GEOHASH only
	Scale       int // decimals only
	Values      []any
}

// Decoder is a strict server-side decoder of QWP v1 ingress messages. It
// holds the connection's symbol dictionary, so use one Decoder per
// connection. The zero value is ready to use.
type Decoder struct {
	// CountOnly validates everything but keeps no values (Column.Values stays
	// nil), for large backlogs in benchmarks.
	CountOnly bool
	// Dict is the connection's symbol dictionary, grown by delta sections.
	Dict Dict
}

// Decode parses and validates one message. On error the returned error is a
// *StatusError carrying the status a QuestDB server answers with, and the
// dictionary is left as it was before the call.
func (d *Decoder) Decode(frame []byte) (*Message, error) {
	oldLen := len(d.Dict.entries)
	var undo dictUndo
	m, err := d.decode(frame, &undo)
	if err != nil {
		// roll back the delta: restore overwritten ids, drop appended ones
		copy(d.Dict.entries[undo.start:], undo.old)
		clear(d.Dict.entries[oldLen:])
		d.Dict.entries = d.Dict.entries[:oldLen]
		return nil, err
	}
	return m, nil
}

// DecodeMessage decodes one message against dict (which it updates), keeping
// every value. It is Decoder.Decode for callers that own a Dict.
func DecodeMessage(frame []byte, dict *Dict) (*Message, error) {
	d := Decoder{Dict: *dict}
	m, err := d.Decode(frame)
	*dict = d.Dict
	return m, err
}

// dictUndo remembers the entries a delta section overwrote.
type dictUndo struct {
	start int
	old   []string
}

func (d *Decoder) decode(frame []byte, undo *dictUndo) (*Message, error) {
	if len(frame) < qwp.HeaderSize {
		return nil, parseErr("message of %d bytes is shorter than the %d-byte header", len(frame), qwp.HeaderSize)
	}
	if m := binary.LittleEndian.Uint32(frame); m != qwp.Magic {
		return nil, parseErr("magic 0x%08x is not 0x%08x", m, qwp.Magic)
	}
	if v := frame[4]; v != qwp.Version {
		return nil, parseErr("version %d is not %d", v, qwp.Version)
	}
	flags := frame[5]
	tableCount := int(binary.LittleEndian.Uint16(frame[6:]))
	payloadLen := binary.LittleEndian.Uint32(frame[8:])
	if payloadLen > qwp.MaxPayloadBytes {
		return nil, parseErr("payload_length %d exceeds %d", payloadLen, qwp.MaxPayloadBytes)
	}
	if int64(payloadLen) > int64(len(frame)-qwp.HeaderSize) {
		return nil, parseErr("payload_length %d exceeds the %d bytes present", payloadLen, len(frame)-qwp.HeaderSize)
	}
	r := &reader{b: frame[qwp.HeaderSize : qwp.HeaderSize+int(payloadLen)], off: 0}
	m := &Message{Flags: flags}
	if flags&qwp.FlagDeltaSymbolDict != 0 {
		if err := d.readDelta(r, m, undo); err != nil {
			return nil, err
		}
	}
	bd := blockDecoder{r: r, dec: d, gorilla: flags&qwp.FlagGorilla != 0, delta: flags&qwp.FlagDeltaSymbolDict != 0}
	m.Tables = make([]Block, 0, min(tableCount, 64))
	for i := range tableCount {
		b, err := bd.block()
		if err != nil {
			if se, ok := err.(*StatusError); ok {
				se.Msg = fmt.Sprintf("table block %d: %s", i, se.Msg)
			}
			return nil, err
		}
		m.Tables = append(m.Tables, b)
	}
	return m, nil
}

func (d *Decoder) readDelta(r *reader, m *Message, undo *dictUndo) error {
	start, err := r.varint("delta_start")
	if err != nil {
		return err
	}
	count, err := r.varint("delta_count")
	if err != nil {
		return err
	}
	size := uint64(len(d.Dict.entries))
	if start > size {
		return &StatusError{Status: qwp.StatusDictionaryGap,
			Msg: fmt.Sprintf("delta_start %d is past the dictionary size %d", start, size)}
	}
	if count > qwp.MaxSymbolDictSize || start+count > qwp.MaxSymbolDictSize {
		return parseErr("delta_start %d + delta_count %d exceeds the %d-entry symbol dictionary limit", start, count, qwp.MaxSymbolDictSize)
	}
	m.DeltaStart, m.DeltaCount = int(start), int(count)
	undo.start = int(start)
	undo.old = append([]string(nil), d.Dict.entries[start:min(start+count, size)]...)
	for i := range int(count) {
		s, err := r.utf8String("symbol")
		if err != nil {
			return err
		}
		id := int(start) + i
		if id < len(d.Dict.entries) {
			d.Dict.entries[id] = s
		} else {
			d.Dict.entries = append(d.Dict.entries, s)
		}
	}
	return nil
}

type blockDecoder struct {
	r       *reader
	dec     *Decoder
	gorilla bool
	delta   bool
	rows    int
	nulls   []bool // per row of the current column, nil when no bitmap
}

func (bd *blockDecoder) block() (Block, error) {
	r := bd.r
	var b Block
	name, err := r.name("table name")
	if err != nil {
		return b, err
	}
	if len(name) == 0 {
		return b, parseErr("empty table name")
	}
	b.Table = name
	rows, err := r.varint("row_count")
	if err != nil {
		return b, err
	}
	if rows > qwp.MaxRowsPerBlock {
		return b, parseErr("table %q: row_count %d exceeds %d", name, rows, qwp.MaxRowsPerBlock)
	}
	cols, err := r.varint("column_count")
	if err != nil {
		return b, err
	}
	if cols > qwp.MaxColumnsPerBlock {
		return b, parseErr("table %q: column_count %d exceeds %d", name, cols, qwp.MaxColumnsPerBlock)
	}
	b.Rows = int(rows)
	b.Columns = make([]Column, 0, min(int(cols), r.remaining()/2+1))
	for range int(cols) {
		cn, err := r.name("column name")
		if err != nil {
			return b, err
		}
		tb, err := r.byte("column type")
		if err != nil {
			return b, err
		}
		t := qwp.ColumnType(tb)
		if !t.Valid() {
			return b, parseErr("table %q column %q: type code 0x%02x is not an ingress type", name, cn, tb)
		}
		b.Columns = append(b.Columns, Column{Name: cn, Type: t})
	}
	bd.rows = b.Rows
	for i := range b.Columns {
		c := &b.Columns[i]
		if err := bd.column(c); err != nil {
			if se, ok := err.(*StatusError); ok {
				se.Msg = fmt.Sprintf("table %q column %q (%s): %s", name, c.Name, c.Type, se.Msg)
			}
			return b, err
		}
	}
	return b, nil
}

// column reads the null section and the values of one column.
func (bd *blockDecoder) column(c *Column) error {
	r := bd.r
	flag, err := r.byte("null_flag")
	if err != nil {
		return err
	}
	n := bd.rows // values present
	bd.nulls = nil
	if flag != 0 {
		bm, err := r.bytes((bd.rows+7)/8, "null bitmap")
		if err != nil {
			return err
		}
		bd.nulls = make([]bool, bd.rows)
		for i := range bd.rows {
			if bm[i>>3]&(1<<(i&7)) != 0 {
				bd.nulls[i] = true
				n--
			}
		}
	}
	var vals []any
	keep := !bd.dec.CountOnly
	if keep {
		// capped by what the payload can hold (BOOLEAN: 8 per byte), so a
		// huge row count in a short message costs nothing
		vals = make([]any, 0, min(n, 8*r.remaining()+8))
	}
	add := func(v any) {
		if keep {
			vals = append(vals, v)
		}
	}
	switch c.Type {
	case qwp.TypeBoolean:
		bits, err := r.bytes((n+7)/8, "boolean values")
		if err != nil {
			return err
		}
		for i := range n {
			add(bits[i>>3]&(1<<(i&7)) != 0)
		}
	case qwp.TypeByte, qwp.TypeShort, qwp.TypeInt, qwp.TypeLong, qwp.TypeFloat, qwp.TypeDouble,
		qwp.TypeDate, qwp.TypeChar, qwp.TypeIPv4, qwp.TypeUUID, qwp.TypeLong256:
		if err := bd.fixed(c.Type, n, add); err != nil {
			return err
		}
	case qwp.TypeTimestamp, qwp.TypeTimestampNanos:
		if err := bd.timestamps(n, add); err != nil {
			return err
		}
	case qwp.TypeVarchar, qwp.TypeBinary:
		if err := bd.varlen(c.Type == qwp.TypeVarchar, n, add); err != nil {
			return err
		}
	case qwp.TypeSymbol:
		if err := bd.symbols(n, add); err != nil {
			return err
		}
	case qwp.TypeGeohash:
		bits, err := r.varint("geohash precision")
		if err != nil {
			return err
		}
		if bits < 1 || bits > 60 {
			return parseErr("geohash precision %d bits is outside 1..60", bits)
		}
		c.GeohashBits = int(bits)
		w := (int(bits) + 7) / 8
		raw, err := r.bytes(w*n, "geohash values")
		if err != nil {
			return err
		}
		// QuestDB stores a geohash in a 1-, 2-, 4- or 8-byte column by its
		// precision (GEOBYTE up to 7 bits, GEOSHORT 15, GEOINT 31, GEOLONG)
		// and reads all ones as NULL; the value is zero-extended from the
		// wire (QwpGeoHashColumnCursor), so all ones on the wire is NULL
		// only where the wire and the column are as wide.
		allOnes := uint64(1)<<(8*w) - 1
		sentinel := w == geohashStorageBytes(int(bits))
		for i := range n {
			var v uint64
			for j := w - 1; j >= 0; j-- {
				v = v<<8 | uint64(raw[i*w+j])
			}
			if sentinel && v == allOnes {
				add(nil)
			} else {
				add(v)
			}
		}
	case qwp.TypeDoubleArray, qwp.TypeLongArray:
		if err := bd.arrays(c.Type == qwp.TypeDoubleArray, n, add); err != nil {
			return err
		}
	case qwp.TypeDecimal64, qwp.TypeDecimal128, qwp.TypeDecimal256:
		scale, err := r.byte("decimal scale")
		if err != nil {
			return err
		}
		c.Scale = int(scale)
		words := map[qwp.ColumnType]int{qwp.TypeDecimal64: 1, qwp.TypeDecimal128: 2, qwp.TypeDecimal256: 4}[c.Type]
		raw, err := r.bytes(8*words*n, "decimal values")
		if err != nil {
			return err
		}
		if keep {
			for i := range n {
				add(Decimal{Unscaled: twosComplement(raw[8*words*i : 8*words*(i+1)]), Scale: int(scale)})
			}
		}
	default:
		return parseErr("unsupported type") // unreachable: the schema admits only Valid types
	}
	if keep {
		c.Values = spreadNulls(vals, bd.nulls)
	}
	return nil
}

// geohashStorageBytes is the width of QuestDB's column for a geohash of
// the given precision (ColumnType.getGeoHashTypeWithBits).
func geohashStorageBytes(bits int) int {
	switch {
	case bits <= 7:
		return 1
	case bits <= 15:
		return 2
	case bits <= 31:
		return 4
	}
	return 8
}

// spreadNulls turns the densely packed non-null values into one entry per
// row, nil where the bitmap marks a NULL.
func spreadNulls(vals []any, nulls []bool) []any {
	if nulls == nil {
		return vals
	}
	out := make([]any, len(nulls))
	j := 0
	for i, isNull := range nulls {
		if !isNull {
			out[i] = vals[j]
			j++
		}
	}
	return out
}

var fixedWidth = map[qwp.ColumnType]int{
	qwp.TypeByte: 1, qwp.TypeShort: 2, qwp.TypeChar: 2, qwp.TypeInt: 4, qwp.TypeFloat: 4,
	qwp.TypeIPv4: 4, qwp.TypeLong: 8, qwp.TypeDouble: 8, qwp.TypeDate: 8, qwp.TypeTimestamp: 8,
	qwp.TypeTimestampNanos: 8, qwp.TypeUUID: 16, qwp.TypeLong256: 32,
}

const minInt64Bits = uint64(1) << 63

func (bd *blockDecoder) fixed(t qwp.ColumnType, n int, add func(any)) error {
	w := fixedWidth[t]
	raw, err := bd.r.bytes(w*n, "values")
	if err != nil {
		return err
	}
	if bd.dec.CountOnly {
		return nil
	}
	le := binary.LittleEndian
	for i := range n {
		v := raw[i*w : (i+1)*w]
		switch t {
		case qwp.TypeByte:
			add(int8(v[0]))
		case qwp.TypeShort:
			add(int16(le.Uint16(v)))
		case qwp.TypeChar:
			add(le.Uint16(v))
		case qwp.TypeInt:
			add(int32(le.Uint32(v)))
		case qwp.TypeFloat:
			add(math.Float32frombits(le.Uint32(v)))
		case qwp.TypeIPv4:
			if ip := le.Uint32(v); ip != 0 {
				add(ip)
			} else {
				add(nil)
			}
		case qwp.TypeLong, qwp.TypeDate, qwp.TypeTimestamp, qwp.TypeTimestampNanos:
			add(int64(le.Uint64(v)))
		case qwp.TypeDouble:
			add(math.Float64frombits(le.Uint64(v)))
		case qwp.TypeUUID:
			u := UUID{Lo: le.Uint64(v), Hi: le.Uint64(v[8:])}
			if u.Lo == minInt64Bits && u.Hi == minInt64Bits {
				add(nil)
			} else {
				add(u)
			}
		case qwp.TypeLong256:
			l := Long256{le.Uint64(v), le.Uint64(v[8:]), le.Uint64(v[16:]), le.Uint64(v[24:])}
			if l == (Long256{minInt64Bits, minInt64Bits, minInt64Bits, minInt64Bits}) {
				add(nil)
			} else {
				add(l)
			}
		}
	}
	return nil
}

// timestamps reads a TIMESTAMP or TIMESTAMP_NANOS column: plain int64s, or
// with FLAG_GORILLA an encoding byte and then raw or delta-of-delta values.
func (bd *blockDecoder) timestamps(n int, add func(any)) error {
	if bd.gorilla {
		enc, err := bd.r.byte("timestamp encoding")
		if err != nil {
			return err
		}
		switch enc {
		case 0:
		case 1:
			return bd.gorillaValues(n, add)
		default:
			return parseErr("timestamp encoding %d is neither 0 (raw) nor 1 (Gorilla)", enc)
		}
	}
	return bd.fixed(qwp.TypeTimestamp, n, add)
}

func (bd *blockDecoder) varlen(isVarchar bool, n int, add func(any)) error {
	r := bd.r
	offs, err := r.bytes(4*(n+1), "offsets")
	if err != nil {
		return err
	}
	le := binary.LittleEndian
	if o0 := le.Uint32(offs); o0 != 0 {
		return parseErr("offset[0] is %d, not 0", o0)
	}
	end := le.Uint32(offs[4*n:])
	if int64(end) > int64(r.remaining()) {
		return parseErr("last offset %d exceeds the %d bytes left", end, r.remaining())
	}
	data, _ := r.bytes(int(end), "data")
	prev := uint32(0)
	for i := 1; i <= n; i++ {
		o := le.Uint32(offs[4*i:])
		if o < prev || o > end {
			return parseErr("offset[%d] = %d is below offset[%d] = %d or past the last offset %d", i, o, i-1, prev, end)
		}
		v := data[prev:o]
		if isVarchar {
			if !utf8.Valid(v) {
				return parseErr("value %d is not valid UTF-8", i-1)
			}
			if !bd.dec.CountOnly {
				add(string(v))
			}
		} else if !bd.dec.CountOnly {
			add(append([]byte{}, v...))
		}
		prev = o
	}
	return nil
}

func (bd *blockDecoder) symbols(n int, add func(any)) error {
	r := bd.r
	var local []string
	size := uint64(bd.dec.Dict.Len())
	if !bd.delta { // per-column dictionary
		cnt, err := r.varint("column dictionary size")
		if err != nil {
			return err
		}
		if cnt > qwp.MaxSymbolDictSize {
			return parseErr("column dictionary size %d exceeds %d", cnt, qwp.MaxSymbolDictSize)
		}
		local = make([]string, 0, min(int(cnt), r.remaining()))
		for range int(cnt) {
			s, err := r.utf8String("column dictionary entry")
			if err != nil {
				return err
			}
			local = append(local, s)
		}
		size = cnt
	}
	for i := range n {
		id, err := r.varint("symbol id")
		if err != nil {
			return err
		}
		// QuestDB's texts (QwpSymbolColumnCursor), which clients may have
		// to recognise (questdb-slot salvage does), then context. QuestDB
		// checks Java's int range first, on the varint read as a signed
		// long.
		if id > math.MaxInt32 {
			return unknownSymbol(parseErr("symbol index out of int range: %d (value %d)", int64(id), i))
		}
		if id >= size {
			return unknownSymbol(parseErr("symbol index out of range: %d (value %d, dictionary size %d)", id, i, size))
		}
		if bd.dec.CountOnly {
			continue
		}
		if bd.delta {
			add(bd.dec.Dict.entries[id])
		} else {
			add(local[id])
		}
	}
	return nil
}

// maxArrayElements bounds the element count of one array value.
const maxArrayElements = math.MaxInt32

func (bd *blockDecoder) arrays(isDouble bool, n int, add func(any)) error {
	r := bd.r
	le := binary.LittleEndian
	for i := range n {
		nd, err := r.byte("n_dims")
		if err != nil {
			return err
		}
		if nd < 1 || nd > 32 {
			return parseErr("array value %d has %d dimensions; 1..32 allowed (NULL is only signalled by the bitmap)", i, nd)
		}
		dimBytes, err := r.bytes(4*int(nd), "array dimensions")
		if err != nil {
			return err
		}
		var dims [32]int32 // on the stack: count-only mode allocates nothing
		shape := dims[:nd]
		count := int64(1)
		for j := range shape {
			shape[j] = int32(le.Uint32(dimBytes[4*j:]))
			if shape[j] < 0 {
				return parseErr("array value %d dimension %d is negative (%d)", i, j, shape[j])
			}
			count *= int64(shape[j])
			if count > maxArrayElements {
				return parseErr("array value %d element count overflows %d", i, int64(maxArrayElements))
			}
		}
		raw, err := r.bytes(8*int(count), "array elements")
		if err != nil {
			return err
		}
		if bd.dec.CountOnly {
			continue
		}
		a := Array{Shape: append([]int32(nil), shape...)}
		if isDouble {
			a.Doubles = make([]float64, count)
			for j := range a.Doubles {
				a.Doubles[j] = math.Float64frombits(le.Uint64(raw[8*j:]))
			}
		} else {
			a.Longs = make([]int64, count)
			for j := range a.Longs {
				a.Longs[j] = int64(le.Uint64(raw[8*j:]))
			}
		}
		add(a)
	}
	return nil
}

// twosComplement reads a little-endian two's complement integer.
func twosComplement(le []byte) *big.Int {
	be := make([]byte, len(le))
	for i, b := range le {
		be[len(le)-1-i] = b
	}
	v := new(big.Int).SetBytes(be)
	if be[0]&0x80 != 0 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(8*len(le))))
	}
	return v
}

// reader is a bounds-checked cursor over a payload; every failure is a
// PARSE_ERROR naming what was being read.
type reader struct {
	b   []byte
	off int
}

func (r *reader) remaining() int { return len(r.b) - r.off }

func (r *reader) bytes(n int, what string) ([]byte, error) {
	if n < 0 || n > r.remaining() {
		return nil, parseErr("truncated %s: need %d bytes at offset %d, %d left", what, n, r.off, r.remaining())
	}
	v := r.b[r.off : r.off+n]
	r.off += n
	return v, nil
}

func (r *reader) byte(what string) (byte, error) {
	v, err := r.bytes(1, what)
	if err != nil {
		return 0, err
	}
	return v[0], nil
}

func (r *reader) varint(what string) (uint64, error) {
	v, n := binary.Uvarint(r.b[r.off:])
	if n == 0 {
		return 0, parseErr("truncated %s varint at offset %d", what, r.off)
	}
	if n < 0 {
		return 0, parseErr("%s varint at offset %d overflows 64 bits", what, r.off)
	}
	r.off += n
	return v, nil
}

// utf8String reads a varint length and that many bytes of valid UTF-8.
func (r *reader) utf8String(what string) (string, error) {
	l, err := r.varint(what + " length")
	if err != nil {
		return "", err
	}
	if l > uint64(r.remaining()) {
		return "", parseErr("truncated %s: length %d exceeds the %d bytes left", what, l, r.remaining())
	}
	b, _ := r.bytes(int(l), what)
	if !utf8.Valid(b) {
		return "", parseErr("%s at offset %d is not valid UTF-8", what, r.off-int(l))
	}
	return string(b), nil
}

// name reads a table or column name: UTF-8 of at most qwp.MaxNameBytes.
func (r *reader) name(what string) (string, error) {
	start := r.off
	l, err := r.varint(what + " length")
	if err != nil {
		return "", err
	}
	if l > qwp.MaxNameBytes {
		return "", parseErr("%s length %d at offset %d exceeds %d bytes", what, l, start, qwp.MaxNameBytes)
	}
	r.off = start
	return r.utf8String(what)
}

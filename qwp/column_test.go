package qwp

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

// TestColumnBytes pins the data section of every type, worked out by hand
// from the specification, for a block of two rows: a value, then NULL
// (null flag 1, bitmap 0b10, then the one value).
func TestColumnBytes(t *testing.T) {
	for _, tc := range []struct {
		typ     ColumnType
		declare func(tb *Table) (Col, error)
		set     func(tb *Table, c Col)
		want    string // hex of what follows the null flag and bitmap
	}{
		{TypeBoolean, nil, func(tb *Table, c Col) { tb.Bool(c, true) }, "01"},
		{TypeByte, nil, func(tb *Table, c Col) { tb.Byte(c, -2) }, "fe"},
		{TypeShort, nil, func(tb *Table, c Col) { tb.Short(c, -2) }, "feff"},
		{TypeChar, nil, func(tb *Table, c Col) { tb.Char(c, 'A') }, "4100"},
		{TypeInt, nil, func(tb *Table, c Col) { tb.Int(c, 0x01020304) }, "04030201"},
		{TypeIPv4, nil, func(tb *Table, c Col) { tb.IPv4(c, 0xC0A80001) }, "0100a8c0"},
		{TypeFloat, nil, func(tb *Table, c Col) { tb.Float(c, 1) }, "0000803f"},
		{TypeLong, nil, func(tb *Table, c Col) { tb.Long(c, -1) }, "ffffffffffffffff"},
		{TypeDouble, nil, func(tb *Table, c Col) { tb.Double(c, 1.3) }, "cdccccccccccf43f"},
		{TypeDate, nil, func(tb *Table, c Col) { tb.Date(c, 1000) }, "e803000000000000"},
		{TypeTimestamp, nil, func(tb *Table, c Col) { tb.Timestamp(c, 400000) }, "801a060000000000"},
		{TypeTimestampNanos, nil, func(tb *Table, c Col) { tb.TimestampNanos(c, 1) }, "0100000000000000"},
		{TypeUUID, nil, func(tb *Table, c Col) { tb.UUID(c, 1, 2) }, "0100000000000000" + "0200000000000000"},
		{TypeLong256, nil, func(tb *Table, c Col) { tb.Long256(c, [4]uint64{1, 2, 3, 4}) },
			"0100000000000000" + "0200000000000000" + "0300000000000000" + "0400000000000000"},
		{TypeGeohash, func(tb *Table) (Col, error) { return tb.GeohashColumn("c", 25) },
			func(tb *Table, c Col) { tb.Geohash(c, 0x1ABCDEF) }, "19" + "efcdab01"},
		{TypeGeohash, func(tb *Table) (Col, error) { return tb.GeohashColumn("c", 8) },
			func(tb *Table, c Col) { tb.Geohash(c, 0xFF) }, "08" + "ff"},
		{TypeVarchar, nil, func(tb *Table, c Col) { tb.VarcharString(c, "é") }, "00000000" + "02000000" + "c3a9"},
		{TypeBinary, nil, func(tb *Table, c Col) { tb.Binary(c, []byte{0, 0xff}) }, "00000000" + "02000000" + "00ff"},
		{TypeDecimal64, func(tb *Table) (Col, error) { return tb.DecimalColumn("c", TypeDecimal64, 3) },
			func(tb *Table, c Col) { tb.Decimal64(c, 12345) }, "03" + "3930000000000000"},
		{TypeDecimal128, func(tb *Table) (Col, error) { return tb.DecimalColumn("c", TypeDecimal128, 2) },
			func(tb *Table, c Col) { tb.Decimal128(c, 5, 6) }, "02" + "0500000000000000" + "0600000000000000"},
		{TypeDecimal256, func(tb *Table) (Col, error) { return tb.DecimalColumn("c", TypeDecimal256, 0) },
			func(tb *Table, c Col) { tb.Decimal256(c, [4]uint64{1, 0, 0, 1 << 63}) },
			"00" + "0100000000000000" + "0000000000000000" + "0000000000000000" + "0000000000000080"},
		{TypeDoubleArray, nil, func(tb *Table, c Col) { tb.DoubleArray(c, []int32{2}, []float64{1, -2}) },
			"01" + "02000000" + "000000000000f03f" + "00000000000000c0"},
		{TypeLongArray, nil, func(tb *Table, c Col) { tb.LongArray(c, []int32{1, 1}, []int64{7}) },
			"02" + "01000000" + "01000000" + "0700000000000000"},
	} {
		e := NewEncoder(nil, EncoderOptions{})
		tb := mustTable(t, e, "t")
		var c Col
		var err error
		if tc.declare != nil {
			c, err = tc.declare(tb)
		} else {
			c, err = tb.Column("c", tc.typ)
		}
		if err != nil {
			t.Fatal(err)
		}
		tc.set(tb, c)
		mustEndRow(t, tb)
		mustEndRow(t, tb) // NULL
		frame := e.Finish(nil)
		want, _ := hex.DecodeString("0102" + tc.want)
		head := HeaderSize + 2 + 1 + 1 + 3 // table name, rows, columns, schema of "c"
		if got := frame[head:]; !bytes.Equal(got, want) || frame[head-1] != byte(tc.typ) {
			t.Errorf("%s: data section %x, want %x", tc.typ, got, want)
		}
	}
}

// TestArrayNullAndEmptyShapes: NULL is a bitmap bit with no inline bytes;
// empty arrays of any shape are values with their dimensions.
func TestArrayNullAndEmptyShapes(t *testing.T) {
	e := NewEncoder(nil, EncoderOptions{})
	tb := mustTable(t, e, "t")
	c := mustCol(t, tb, "a", TypeDoubleArray)
	for _, shape := range [][]int32{{1}, nil, {0}, {2, 0}, {0, 5}} {
		switch {
		case shape == nil: // NULL
		case shape[0] == 1:
			tb.DoubleArray(c, shape, []float64{1.5})
		default:
			tb.DoubleArray(c, shape, nil)
		}
		mustEndRow(t, tb)
	}
	frame := e.Finish(nil)
	want := "01" + "02" + // bitmap: row 1 is NULL
		"01" + "01000000" + "000000000000f83f" + // [1.5]
		"01" + "00000000" + // [0]
		"02" + "02000000" + "00000000" + // [2, 0]
		"02" + "00000000" + "05000000" // [0, 5]
	got := hex.EncodeToString(frame[HeaderSize+2+1+1+3:])
	if got != want {
		t.Fatalf("array column\n got %s\nwant %s", got, want)
	}
}

// TestSymbolColumnBytes: SYMBOL data is varint global ids of the non-null
// rows; ids of 128 and more take two bytes.
func TestSymbolColumnBytes(t *testing.T) {
	dict := NewMemDict()
	for i := 0; i < 200; i++ {
		dict.ID([]byte(strings.Repeat("s", i+1)))
	}
	e := NewEncoder(dict, EncoderOptions{DeltaSymbolDict: true})
	tb := mustTable(t, e, "t")
	c := mustCol(t, tb, "c", TypeSymbol)
	tb.SymbolString(c, "s")
	mustEndRow(t, tb)
	mustEndRow(t, tb)
	tb.SymbolString(c, strings.Repeat("s", 200))
	mustEndRow(t, tb)
	tb.SymbolString(c, "new")
	mustEndRow(t, tb)
	frame := e.Finish(nil)
	// delta section: start 200 (c8 01), one entry "new"; then the block.
	want := "c801" + "01" + "03" + hex.EncodeToString([]byte("new")) +
		"0174" + "04" + "01" + "0163" + "09" +
		"01" + "02" + "00" + "c701" + "c801"
	if got := hex.EncodeToString(frame[HeaderSize:]); got != want {
		t.Fatalf("payload\n got %s\nwant %s", got, want)
	}
}

// TestNullBitmapFromFirstNull: a column keeps no bitmap until its first
// NULL, which must then bring the zero bits of every row before it (across
// byte boundaries), and a row rolled back does not leave bits behind.
func TestNullBitmapFromFirstNull(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rows     int
		nulls    []int // rows where the column is NULL
		rollback int   // a NULL row rolled back before this row (-1: none)
	}{
		{"no NULLs", 20, nil, -1},
		{"first row", 20, []int{0}, -1},
		{"end of the first byte", 20, []int{7}, -1},
		{"start of the second byte", 20, []int{8}, -1},
		{"late and adjacent", 20, []int{17, 18}, -1},
		{"last row", 17, []int{16}, -1},
		{"every row but the last", 9, []int{0, 1, 2, 3, 4, 5, 6, 7}, -1},
		{"rolled-back NULL row", 20, nil, 9},
		{"rolled-back NULL row, then a NULL", 20, []int{12}, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEncoder(nil, EncoderOptions{})
			tb := mustTable(t, e, "t")
			v := mustCol(t, tb, "v", TypeInt)
			always := mustCol(t, tb, "n", TypeLong)
			isNull := map[int]bool{}
			for _, r := range tc.nulls {
				isNull[r] = true
			}
			for r := range tc.rows {
				if r == tc.rollback {
					tb.Long(always, -1)
					tb.CancelRow()
				}
				tb.Long(always, int64(r))
				if !isNull[r] {
					tb.Int(v, int32(r))
				}
				mustEndRow(t, tb)
			}
			m, err := decodeMessage(e.Finish(nil))
			if err != nil {
				t.Fatal(err)
			}
			var col decCol
			for _, c := range m.tables[0].cols {
				if c.name == "v" {
					col = c
				}
			}
			if want := byte(min(len(tc.nulls), 1)); col.nullFlag != want {
				t.Fatalf("null flag %d, want %d", col.nullFlag, want)
			}
			for r, got := range col.vals {
				if want := any(int32(r)); isNull[r] && got != nil || !isNull[r] && got != want {
					t.Fatalf("row %d: %v, want NULL %v", r, got, isNull[r])
				}
			}
			if len(col.vals) != tc.rows {
				t.Fatalf("%d rows decoded, want %d", len(col.vals), tc.rows)
			}
		})
	}
}

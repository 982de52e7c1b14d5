package qwptest

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// rtColumn declares one column on a qwp.Table and sets row i's value,
// returning what the decoder must give back.
type rtColumn struct {
	name    string
	typ     qwp.ColumnType
	declare func(t *qwp.Table) (qwp.Col, error)
	set     func(t *qwp.Table, c qwp.Col, i int) any
}

func plain(name string, typ qwp.ColumnType, set func(t *qwp.Table, c qwp.Col, i int) any) rtColumn {
	return rtColumn{name: name, typ: typ, set: set, declare: func(t *qwp.Table) (qwp.Col, error) { return t.Column(name, typ) }}
}

var arrayShapes = [][]int32{{3}, {0}, {2, 0}, {0, 5}, {2, 3}, {1, 2, 2}}

func product(shape []int32) int {
	n := 1
	for _, d := range shape {
		n *= int(d)
	}
	return n
}

// allTypes covers every ingress type.
var allTypes = []rtColumn{
	plain("b", qwp.TypeBoolean, func(t *qwp.Table, c qwp.Col, i int) any { t.Bool(c, i%3 == 0); return i%3 == 0 }),
	plain("i8", qwp.TypeByte, func(t *qwp.Table, c qwp.Col, i int) any { t.Byte(c, int8(i-10)); return int8(i - 10) }),
	plain("i16", qwp.TypeShort, func(t *qwp.Table, c qwp.Col, i int) any {
		t.Short(c, int16(i*1000-5000))
		return int16(i*1000 - 5000)
	}),
	plain("i32", qwp.TypeInt, func(t *qwp.Table, c qwp.Col, i int) any {
		t.Int(c, int32(i)*-123456)
		return int32(i) * -123456
	}),
	plain("i64", qwp.TypeLong, func(t *qwp.Table, c qwp.Col, i int) any { t.Long(c, int64(i)<<40); return int64(i) << 40 }),
	plain("f32", qwp.TypeFloat, func(t *qwp.Table, c qwp.Col, i int) any { t.Float(c, float32(i)/4); return float32(i) / 4 }),
	plain("f64", qwp.TypeDouble, func(t *qwp.Table, c qwp.Col, i int) any { t.Double(c, float64(i)*1.1); return float64(i) * 1.1 }),
	plain("sym", qwp.TypeSymbol, func(t *qwp.Table, c qwp.Col, i int) any {
		s := fmt.Sprintf("sym-%d", i%4)
		t.SymbolString(c, s)
		return s
	}),
	plain("ts", qwp.TypeTimestamp, func(t *qwp.Table, c qwp.Col, i int) any {
		v := 1_700_000_000_000_000 + int64(i*i*1000)
		t.Timestamp(c, v)
		return v
	}),
	plain("day", qwp.TypeDate, func(t *qwp.Table, c qwp.Col, i int) any { t.Date(c, int64(i)*86_400_000); return int64(i) * 86_400_000 }),
	plain("id", qwp.TypeUUID, func(t *qwp.Table, c qwp.Col, i int) any {
		t.UUID(c, uint64(i+1), uint64(i*7+1))
		return UUID{Lo: uint64(i + 1), Hi: uint64(i*7 + 1)}
	}),
	plain("l256", qwp.TypeLong256, func(t *qwp.Table, c qwp.Col, i int) any {
		v := [4]uint64{uint64(i), 2, 3, math.MaxUint64}
		t.Long256(c, v)
		return Long256(v)
	}),
	{name: "geo", typ: qwp.TypeGeohash,
		declare: func(t *qwp.Table) (qwp.Col, error) { return t.GeohashColumn("geo", 25) },
		set: func(t *qwp.Table, c qwp.Col, i int) any {
			v := uint64(i*12345) & (1<<25 - 1)
			t.Geohash(c, v)
			return v
		}},
	plain("txt", qwp.TypeVarchar, func(t *qwp.Table, c qwp.Col, i int) any {
		s := fmt.Sprintf("välue-%d-€", i)
		t.VarcharString(c, s)
		return s
	}),
	plain("tsn", qwp.TypeTimestampNanos, func(t *qwp.Table, c qwp.Col, i int) any {
		v := int64(i) * 1_000_000_007
		t.TimestampNanos(c, v)
		return v
	}),
	plain("da", qwp.TypeDoubleArray, func(t *qwp.Table, c qwp.Col, i int) any {
		shape := arrayShapes[i%len(arrayShapes)]
		vals := make([]float64, product(shape))
		for j := range vals {
			vals[j] = float64(i) + float64(j)/8
		}
		t.DoubleArray(c, shape, vals)
		return Array{Shape: shape, Doubles: vals}
	}),
	plain("la", qwp.TypeLongArray, func(t *qwp.Table, c qwp.Col, i int) any {
		shape := arrayShapes[(i+1)%len(arrayShapes)]
		vals := make([]int64, product(shape))
		for j := range vals {
			vals[j] = int64(i*100 - j)
		}
		t.LongArray(c, shape, vals)
		return Array{Shape: shape, Longs: vals}
	}),
	{name: "d64", typ: qwp.TypeDecimal64,
		declare: func(t *qwp.Table) (qwp.Col, error) { return t.DecimalColumn("d64", qwp.TypeDecimal64, 3) },
		set: func(t *qwp.Table, c qwp.Col, i int) any {
			t.Decimal64(c, int64(i*1001-7000))
			return Decimal{Unscaled: big.NewInt(int64(i*1001 - 7000)), Scale: 3}
		}},
	{name: "d128", typ: qwp.TypeDecimal128,
		declare: func(t *qwp.Table) (qwp.Col, error) { return t.DecimalColumn("d128", qwp.TypeDecimal128, 10) },
		set: func(t *qwp.Table, c qwp.Col, i int) any {
			if i%2 == 1 { // -(i+1) in two's complement
				t.Decimal128(c, ^uint64(i), math.MaxUint64)
				return Decimal{Unscaled: big.NewInt(-int64(i + 1)), Scale: 10}
			}
			t.Decimal128(c, uint64(i), 1)
			v := new(big.Int).Lsh(big.NewInt(1), 64)
			return Decimal{Unscaled: v.Add(v, big.NewInt(int64(i))), Scale: 10}
		}},
	{name: "d256", typ: qwp.TypeDecimal256,
		declare: func(t *qwp.Table) (qwp.Col, error) { return t.DecimalColumn("d256", qwp.TypeDecimal256, 0) },
		set: func(t *qwp.Table, c qwp.Col, i int) any {
			t.Decimal256(c, [4]uint64{uint64(i), 0, 0, 1 << 62})
			v := new(big.Int).Lsh(big.NewInt(1), 254)
			return Decimal{Unscaled: v.Add(v, big.NewInt(int64(i))), Scale: 0}
		}},
	plain("ch", qwp.TypeChar, func(t *qwp.Table, c qwp.Col, i int) any { t.Char(c, uint16('a'+i)); return uint16('a' + i) }),
	plain("bin", qwp.TypeBinary, func(t *qwp.Table, c qwp.Col, i int) any {
		v := []byte{byte(i), 0xFF, 0}
		t.Binary(c, v)
		return v
	}),
	plain("ip", qwp.TypeIPv4, func(t *qwp.Table, c qwp.Col, i int) any { t.IPv4(c, uint32(i+1)<<8); return uint32(i+1) << 8 }),
	plain("", qwp.TypeTimestampNanos, func(t *qwp.Table, c qwp.Col, i int) any {
		v := 1_700_000_000_000_000_000 + int64(i)*1_000_000_000
		t.TimestampNanos(c, v)
		return v
	}),
}

// encodeRows writes rows rows of every column in cols into one frame; a
// column is NULL in a row when null(column index, row) says so. It returns
// the frame and the expected values per column.
func encodeRows(t *testing.T, e *qwp.Encoder, table string, cols []rtColumn, first, rows int, null func(col, row int) bool) ([]byte, [][]any) {
	t.Helper()
	tb, err := e.Table(table)
	require.NoError(t, err)
	handles := make([]qwp.Col, len(cols))
	for j, c := range cols {
		handles[j], err = c.declare(tb)
		require.NoError(t, err, c.name)
	}
	want := make([][]any, len(cols))
	for i := first; i < first+rows; i++ {
		for j, c := range cols {
			if null(j, i) {
				want[j] = append(want[j], nil)
				continue
			}
			want[j] = append(want[j], c.set(tb, handles[j], i))
		}
		require.NoError(t, tb.EndRow())
	}
	return e.Finish(nil), want
}

// assertBlock matches columns by name: the encoder orders a block's columns
// by first use, not declaration.
func assertBlock(t *testing.T, b Block, cols []rtColumn, want [][]any) {
	t.Helper()
	require.Len(t, b.Columns, len(cols))
	byName := map[string]Column{}
	for _, c := range b.Columns {
		byName[c.Name] = c
	}
	for j, c := range cols {
		got, ok := byName[c.name]
		require.True(t, ok, "column %q missing", c.name)
		assert.Equal(t, c.typ, got.Type, c.name)
		require.Len(t, got.Values, len(want[j]), c.name)
		for i := range want[j] {
			assert.Equal(t, want[j][i], got.Values[i], "column %q row %d", c.name, i)
		}
	}
}

func TestRoundTripEveryType(t *testing.T) {
	nullPatterns := map[string]func(col, row int) bool{
		"no nulls":         func(int, int) bool { return false },
		"every third":      func(col, row int) bool { return (row+col)%3 == 1 },
		"all but the last": func(col, row int) bool { return allTypes[col].name != "" && row < 17 },
	}
	for _, gorilla := range []bool{false, true} {
		for pname, null := range nullPatterns {
			t.Run(fmt.Sprintf("gorilla=%v/%s", gorilla, pname), func(t *testing.T) {
				dict := qwp.NewMemDict()
				e := qwp.NewEncoder(dict, qwp.EncoderOptions{Gorilla: gorilla, DeltaSymbolDict: true})
				var d Decoder
				// two frames: the second reuses symbols sent by the first
				for _, first := range []int{0, 18} {
					frame, want := encodeRows(t, e, "all_types", allTypes, first, 18, null)
					m, err := d.Decode(frame)
					require.NoError(t, err)
					require.Len(t, m.Tables, 1)
					assert.Equal(t, 18, m.Tables[0].Rows)
					assertBlock(t, m.Tables[0], allTypes, want)
				}
				assert.Equal(t, dict.Len(), d.Dict.Len(), "server dictionary matches the client's")
			})
		}
	}
}

func TestRoundTripThroughServer(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s, nil)
	e := qwp.NewEncoder(qwp.NewMemDict(), qwp.EncoderOptions{Gorilla: true, DeltaSymbolDict: true})
	// the server fixes array dimensions from the first value: 1-D only here
	cols := make([]rtColumn, 0, len(allTypes))
	for _, col := range allTypes {
		if col.typ != qwp.TypeDoubleArray && col.typ != qwp.TypeLongArray {
			cols = append(cols, col)
		}
	}
	frame, want := encodeRows(t, e, "everything", cols, 0, 10, func(col, row int) bool { return cols[col].name != "" && row%4 == 2 })
	c.send(frame)
	c.ackedThrough(0)
	td, ok := s.Rows("everything")
	require.True(t, ok)
	require.Len(t, td.Columns, len(cols))
	for j, col := range cols {
		name := col.name
		if name == "" {
			name = "timestamp"
		}
		assert.Equal(t, ColumnInfo{Name: name, Type: col.typ}, td.Columns[j])
		for i := range want[j] {
			w := want[j][i]
			if z, ok := noNullType[col.typ]; ok && w == nil {
				w = z // QuestDB stores a NULL of a type without one as its zero
			}
			assert.Equal(t, w, td.Rows[i][j], "column %q row %d", name, i)
		}
	}
}

// noNullType holds the zero QuestDB stores for a NULL of each type that has
// no NULL value.
var noNullType = map[qwp.ColumnType]any{qwp.TypeBoolean: false, qwp.TypeByte: int8(0), qwp.TypeShort: int16(0)}

func TestRoundTripGorillaEdges(t *testing.T) {
	base := int64(1_000_000)
	seq := func(dods ...int64) []int64 {
		ts := []int64{base, base + 100}
		delta := int64(100)
		for _, dod := range dods {
			delta += dod
			ts = append(ts, ts[len(ts)-1]+delta)
		}
		return ts
	}
	cases := map[string][]int64{
		"one value":         {base},
		"two values":        {base, base - 5},
		"steady":            seq(0, 0, 0, 0, 0, 0, 0, 0, 0),
		"7-bit edges":       seq(63, -64, 0, 63, -64),
		"9-bit edges":       seq(64, -65, 255, -256),
		"12-bit edges":      seq(256, -257, 2047, -2048),
		"32-bit edges":      seq(2048, -2049, math.MaxInt32, math.MinInt32),
		"overflow to raw":   seq(math.MaxInt32 + 1),
		"negative overflow": seq(0, math.MinInt32-1, 5),
	}
	for name, ts := range cases {
		t.Run(name, func(t *testing.T) {
			for _, typ := range []qwp.ColumnType{qwp.TypeTimestamp, qwp.TypeTimestampNanos} {
				e := qwp.NewEncoder(nil, qwp.EncoderOptions{Gorilla: true})
				tb, err := e.Table("g")
				require.NoError(t, err)
				c, err := tb.Column("", typ)
				require.NoError(t, err)
				mark, err := tb.Column("after", qwp.TypeLong) // proves the stream's end was found
				require.NoError(t, err)
				for i, v := range ts {
					if typ == qwp.TypeTimestamp {
						tb.Timestamp(c, v)
					} else {
						tb.TimestampNanos(c, v)
					}
					tb.Long(mark, int64(i))
					require.NoError(t, tb.EndRow())
				}
				var d Decoder
				m, err := d.Decode(e.Finish(nil))
				require.NoError(t, err)
				got := m.Tables[0].Columns
				for i, v := range ts {
					assert.Equal(t, v, got[0].Values[i], "%s value %d", typ, i)
					assert.Equal(t, int64(i), got[1].Values[i])
				}
			}
		})
	}
}

func TestRoundTripInvalidUTF8Refused(t *testing.T) {
	e := qwp.NewEncoder(nil, qwp.EncoderOptions{})
	tb, err := e.Table("t")
	require.NoError(t, err)
	c, err := tb.Column("v", qwp.TypeVarchar)
	require.NoError(t, err)
	tb.VarcharString(c, "ok-MARKER-ok")
	require.NoError(t, tb.EndRow())
	frame := e.Finish(nil)
	var d Decoder
	_, err = d.Decode(frame)
	require.NoError(t, err)
	i := bytes.Index(frame, []byte("MARKER"))
	require.Positive(t, i)
	frame[i] = 0xC0 // an overlong-encoding lead byte
	_, err = d.Decode(frame)
	assertStatus(t, err, qwp.StatusParseError)
	assert.Contains(t, err.Error(), "UTF-8")
}

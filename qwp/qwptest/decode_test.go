package qwptest

import (
	"encoding/hex"
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// fromHex reads spec-style hex dumps: whitespace and "# comments" ignored.
func fromHex(t testing.TB, dump string) []byte {
	t.Helper()
	var sb strings.Builder
	for line := range strings.SplitSeq(dump, "\n") {
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		sb.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(sb.String())
	require.NoError(t, err)
	return b
}

// specExample1Payload is the payload of the spec's "Single table with three
// columns" example, byte for byte.
const specExample1Payload = `
07 73 65 6E 73 6F 72 73 02 03
02 69 64 05
05 76 61 6C 75 65 07
00 0A
00 01 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00
00 CD CC CC CC CC CC F4 3F 9A 99 99 99 99 99 01 40
00 00 E4 0B 54 02 00 00 00 80 1A 06 00 00 00 00 00`

func specExample1(t testing.TB) []byte {
	return message(0, 1, fromHex(t, specExample1Payload))
}

// specExample3 is the spec's Gorilla + delta dictionary example with the
// two timestamps filled in.
func specExample3(t testing.TB) []byte {
	p := fromHex(t, `
00 02 07 73 65 72 76 65 72 31 07 73 65 72 76 65 72 32
07 73 65 6E 73 6F 72 73 02 03
04 68 6F 73 74 09 04 74 65 6D 70 07 00 0A
00 00 01
00 66 66 66 66 66 E6 56 40 9A 99 99 99 99 19 57 40
00 01`)
	p = wire(p).i64(1_700_000_000_000_000).i64(1_700_000_001_000_000)
	return message(qwp.FlagGorilla|qwp.FlagDeltaSymbolDict, 1, p)
}

func TestDecodeSpecExample1(t *testing.T) {
	frame := specExample1(t)
	require.Equal(t, []byte{0x51, 0x57, 0x50, 0x31, 0x01, 0x00, 0x01, 0x00}, frame[:8], "header as in the spec")
	var d Decoder
	m, err := d.Decode(frame)
	require.NoError(t, err)
	require.Len(t, m.Tables, 1)
	b := m.Tables[0]
	assert.Equal(t, "sensors", b.Table)
	assert.Equal(t, 2, b.Rows)
	require.Len(t, b.Columns, 3)
	assert.Equal(t, Column{Name: "id", Type: qwp.TypeLong, Values: []any{int64(1), int64(2)}}, b.Columns[0])
	assert.Equal(t, Column{Name: "value", Type: qwp.TypeDouble, Values: []any{1.3, 2.2}}, b.Columns[1])
	assert.Equal(t, Column{Name: "", Type: qwp.TypeTimestamp, Values: []any{int64(10_000_000_000), int64(400_000)}}, b.Columns[2])
}

func TestDecodeSpecExample3(t *testing.T) {
	var d Decoder
	m, err := d.Decode(specExample3(t))
	require.NoError(t, err)
	assert.Equal(t, 0, m.DeltaStart)
	assert.Equal(t, 2, m.DeltaCount)
	assert.Equal(t, 2, d.Dict.Len())
	assert.Equal(t, "server2", d.Dict.Entry(1))
	b := m.Tables[0]
	assert.Equal(t, []any{"server1", "server2"}, b.Columns[0].Values)
	assert.Equal(t, []any{91.6, 92.4}, b.Columns[1].Values)
	assert.Equal(t, []any{int64(1_700_000_000_000_000), int64(1_700_000_001_000_000)}, b.Columns[2].Values)
}

func TestDecodeSpecExample2NullableVarchar(t *testing.T) {
	col := fromHex(t, `01 02 00 00 00 00 03 00 00 00 06 00 00 00 09 00 00 00 66 6F 6F 62 61 72 62 61 7A`)
	var d Decoder
	m, err := d.Decode(oneColumn(0, qwp.TypeVarchar, 4, col))
	require.NoError(t, err)
	assert.Equal(t, []any{"foo", nil, "bar", "baz"}, m.Tables[0].Columns[0].Values)
}

// bits writes an LSB-first bit stream like the spec's Gorilla section.
type bits struct {
	b []byte
	n int
}

func (w *bits) put(v uint64, width int) {
	for i := range width {
		if w.n%8 == 0 {
			w.b = append(w.b, 0)
		}
		if v&(1<<i) != 0 {
			w.b[w.n/8] |= 1 << (w.n % 8)
		}
		w.n++
	}
}

func TestDecodeGorillaBuckets(t *testing.T) {
	// deltas-of-deltas exercising every bucket at both of its edges
	dods := []int64{0, 63, -64, 64, -65, 255, -256, 256, -257, 2047, -2048, 2048, -2049, math.MaxInt32, math.MinInt32}
	ts := []int64{1_000, 1_010}
	var w bits
	delta := int64(10)
	for _, dod := range dods {
		delta += dod
		ts = append(ts, ts[len(ts)-1]+delta)
		switch {
		case dod == 0:
			w.put(0, 1)
		case dod >= -64 && dod <= 63:
			w.put(0b01, 2)
			w.put(uint64(dod), 7)
		case dod >= -256 && dod <= 255:
			w.put(0b011, 3)
			w.put(uint64(dod), 9)
		case dod >= -2048 && dod <= 2047:
			w.put(0b0111, 4)
			w.put(uint64(dod), 12)
		default:
			w.put(0b1111, 4)
			w.put(uint64(dod), 32)
		}
	}
	data := wire{}.u8(0, 1).i64(ts[0]).i64(ts[1]).u8(w.b...)
	// a LONG column after the timestamps proves the stream's length was right
	p := append(blockHeader("t", len(ts), "", qwp.TypeTimestampNanos, "n", qwp.TypeByte), data...)
	p = wire(p).u8(0)
	for i := range ts {
		p = p.u8(byte(i))
	}
	var d Decoder
	m, err := d.Decode(message(qwp.FlagGorilla, 1, p))
	require.NoError(t, err)
	got := m.Tables[0].Columns[0].Values
	require.Len(t, got, len(ts))
	for i, v := range ts {
		assert.Equal(t, v, got[i], "timestamp %d", i)
	}
	assert.Equal(t, int8(len(ts)-1), m.Tables[0].Columns[1].Values[len(ts)-1])
}

func TestDecodeTypedValues(t *testing.T) {
	minW := uint64(1) << 63
	cases := []struct {
		name string
		typ  qwp.ColumnType
		rows int
		data wire
		want []any
		bits int // GEOHASH precision expected
		sc   int // decimal scale expected
	}{
		{"boolean bit-packed with bitmap", qwp.TypeBoolean, 10, wire{}.u8(1, 0x05, 0x02, 0b0100_0101), []any{nil, true, nil, false, true, false, false, false, true, nil}, 0, 0},
		{"byte sentinel kept raw", qwp.TypeByte, 2, wire{}.u8(0, 0, 0xFF), []any{int8(0), int8(-1)}, 0, 0},
		{"short", qwp.TypeShort, 1, wire{}.u8(0).u16(0x8000), []any{int16(math.MinInt16)}, 0, 0},
		{"char", qwp.TypeChar, 1, wire{}.u8(0).u16('é'), []any{uint16('é')}, 0, 0},
		{"int", qwp.TypeInt, 2, wire{}.u8(1, 0x01).u32(0xFFFFFFFE), []any{nil, int32(-2)}, 0, 0},
		{"float", qwp.TypeFloat, 1, wire{}.u8(0).u32(math.Float32bits(1.5)), []any{float32(1.5)}, 0, 0},
		{"date plain int64 even with Gorilla", qwp.TypeDate, 1, wire{}.u8(0).i64(-5), []any{int64(-5)}, 0, 0},
		{"ipv4 zero is null", qwp.TypeIPv4, 2, wire{}.u8(0).u32(0).u32(0x0100007F), []any{nil, uint32(0x0100007F)}, 0, 0},
		{"uuid sentinel is null", qwp.TypeUUID, 2, wire{}.u8(0).u64(minW).u64(minW).u64(1).u64(2), []any{nil, UUID{Lo: 1, Hi: 2}}, 0, 0},
		{"long256", qwp.TypeLong256, 2, wire{}.u8(0).u64(minW).u64(minW).u64(minW).u64(minW).u64(1).u64(2).u64(3).u64(4), []any{nil, Long256{1, 2, 3, 4}}, 0, 0},
		{"geohash 12 bits, all-ones null", qwp.TypeGeohash, 2, wire{}.u8(0).varint(12).u16(0xFFFF).u16(0x0ABC), []any{nil, uint64(0x0ABC)}, 12, 0},
		{"geohash 7 bits, all-ones null", qwp.TypeGeohash, 1, wire{}.u8(0).varint(7).u8(0xFF), []any{nil}, 7, 0},
		// QuestDB zero-extends the wire value into a wider column: no NULL
		{"geohash 8 bits, all ones a value", qwp.TypeGeohash, 1, wire{}.u8(0).varint(8).u8(0xFF), []any{uint64(0xFF)}, 8, 0},
		{"geohash 16 bits, all ones a value", qwp.TypeGeohash, 1, wire{}.u8(0).varint(16).u16(0xFFFF), []any{uint64(0xFFFF)}, 16, 0},
		{"geohash 60 bits, all-ones null", qwp.TypeGeohash, 1, wire{}.u8(0).varint(60).u64(math.MaxUint64), []any{nil}, 60, 0},
		// bitmap mode: the precision follows the bitmap and only non-NULL rows
		// have value bytes (the spec; QwpGeoHashColumnCursor's valueCount =
		// rowCount - nullCount)
		{"geohash 20 bits, bitmap, NULL rows carry no bytes", qwp.TypeGeohash, 3, wire{}.u8(1, 0x02).varint(20).u8(1, 2, 3).u8(4, 5, 6), []any{uint64(0x030201), nil, uint64(0x060504)}, 20, 0},
		{"binary keeps any bytes", qwp.TypeBinary, 2, wire{}.u8(0).u32(0).u32(2).u32(2).u8(0xFF, 0xFE), []any{[]byte{0xFF, 0xFE}, []byte{}}, 0, 0},
		{"raw timestamp with Gorilla flag", qwp.TypeTimestamp, 2, wire{}.u8(1, 0x01, 0).i64(7), []any{nil, int64(7)}, 0, 0},
		{"gorilla single value", qwp.TypeTimestamp, 1, wire{}.u8(0, 1).i64(42), []any{int64(42)}, 0, 0},
		{"gorilla all null", qwp.TypeTimestamp, 2, wire{}.u8(1, 0x03, 1), []any{nil, nil}, 0, 0},
		{"double array shapes", qwp.TypeDoubleArray, 4, wire{}.u8(1, 0x02).
			u8(1).u32(2).f64(1.5).f64(2.5).
			u8(2).u32(2).u32(0).
			u8(3).u32(1).u32(1).u32(1).f64(-1),
			[]any{Array{Shape: []int32{2}, Doubles: []float64{1.5, 2.5}}, nil, Array{Shape: []int32{2, 0}, Doubles: []float64{}}, Array{Shape: []int32{1, 1, 1}, Doubles: []float64{-1}}}, 0, 0},
		{"long array", qwp.TypeLongArray, 1, wire{}.u8(0).u8(1).u32(0), []any{Array{Shape: []int32{0}, Longs: []int64{}}}, 0, 0},
		{"decimal64 scale 3", qwp.TypeDecimal64, 2, wire{}.u8(1, 0x01, 3).i64(-12345), []any{nil, Decimal{Unscaled: big.NewInt(-12345), Scale: 3}}, 0, 3},
		{"decimal128 negative", qwp.TypeDecimal128, 1, wire{}.u8(0, 2).u64(math.MaxUint64).u64(math.MaxUint64), []any{Decimal{Unscaled: big.NewInt(-1), Scale: 2}}, 0, 2},
		{"decimal256 high word", qwp.TypeDecimal256, 1, wire{}.u8(0, 0).u64(0).u64(0).u64(0).u64(1), []any{Decimal{Unscaled: new(big.Int).Lsh(big.NewInt(1), 192), Scale: 0}}, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var d Decoder
			m, err := d.Decode(oneColumn(qwp.FlagGorilla, tc.typ, tc.rows, tc.data))
			require.NoError(t, err)
			c := m.Tables[0].Columns[0]
			assert.Equal(t, tc.want, c.Values)
			assert.Equal(t, tc.bits, c.GeohashBits)
			assert.Equal(t, tc.sc, c.Scale)
		})
	}
}

func TestDecodePerColumnSymbols(t *testing.T) {
	data := wire{}.u8(1, 0x02).varint(2).str("a").str("b").varint(1).varint(0)
	var d Decoder
	m, err := d.Decode(oneColumn(0, qwp.TypeSymbol, 3, data))
	require.NoError(t, err)
	assert.Equal(t, []any{"b", nil, "a"}, m.Tables[0].Columns[0].Values)
	assert.Equal(t, 0, d.Dict.Len(), "per-column dictionaries do not touch the connection's")
}

func TestDecodeCountOnlyKeepsNoValues(t *testing.T) {
	d := Decoder{CountOnly: true}
	m, err := d.Decode(specExample3(t))
	require.NoError(t, err)
	assert.Equal(t, 2, m.Tables[0].Rows)
	for _, c := range m.Tables[0].Columns {
		assert.Nil(t, c.Values, c.Name)
	}
	assert.Equal(t, 2, d.Dict.Len(), "the dictionary still grows")
	_, err = d.Decode(oneColumn(0, qwp.TypeVarchar, 1, wire{}.u8(0).u32(0).u32(1).u8(0xFF)))
	assertStatus(t, err, qwp.StatusParseError)
}

func assertStatus(t *testing.T, err error, want qwp.Status) {
	t.Helper()
	var se *StatusError
	require.True(t, errors.As(err, &se), "want a *StatusError %s, got %v", want, err)
	assert.Equal(t, want, se.Status, se.Msg)
	assert.NotEmpty(t, se.Msg)
}

func TestDecodeRefusals(t *testing.T) {
	valid := specExample1(t)
	mutate := func(f func(b []byte)) []byte {
		b := append([]byte{}, valid...)
		f(b)
		return b
	}
	longName := strings.Repeat("n", 128)
	cases := []struct {
		name  string
		frame []byte
		want  qwp.Status
		msg   string // the reason, so that a case cannot pass for another
	}{
		{"shorter than header", valid[:11], qwp.StatusParseError, `message of 11 bytes is shorter than the 12-byte header`},
		{"bad magic", mutate(func(b []byte) { b[0] = 'X' }), qwp.StatusParseError, `magic 0x31505758 is not 0x31505751`},
		{"version 2", mutate(func(b []byte) { b[4] = 2 }), qwp.StatusParseError, `version 2 is not 1`},
		{"payload_length over 16 MiB", mutate(func(b []byte) { b[8], b[9], b[10], b[11] = 1, 0, 0, 1 }), qwp.StatusParseError, `payload_length 16777217 exceeds 16777216`},
		{"payload_length over bytes present", valid[:len(valid)-1], qwp.StatusParseError, `payload_length 74 exceeds the 73 bytes present`},
		{"table_count past the blocks", mutate(func(b []byte) { b[6] = 2 }), qwp.StatusParseError, `truncated table name length varint at offset 74`},
		{"empty payload with delta flag", message(qwp.FlagDeltaSymbolDict, 0, nil), qwp.StatusParseError, `truncated delta_start varint at offset 0`},
		{"delta start past dictionary", message(qwp.FlagDeltaSymbolDict, 0, wire{}.varint(1).varint(1).str("x")), qwp.StatusDictionaryGap, `delta_start 1 is past the dictionary size 0`},
		{"delta over 2,000,000 entries", message(qwp.FlagDeltaSymbolDict, 0, wire{}.varint(0).varint(2_000_001)), qwp.StatusParseError, `delta_start 0 + delta_count 2000001 exceeds the 2000000-entry symbol dictionary limit`},
		{"delta entry truncated", message(qwp.FlagDeltaSymbolDict, 0, wire{}.varint(0).varint(2).str("a").varint(5).u8('b')), qwp.StatusParseError, `truncated symbol: length 5 exceeds the 1 bytes left`},
		{"delta entry bad UTF-8", message(qwp.FlagDeltaSymbolDict, 0, wire{}.varint(0).varint(1).varint(1).u8(0xC3)), qwp.StatusParseError, `symbol at offset 3 is not valid UTF-8`},
		{"varint overflow", message(qwp.FlagDeltaSymbolDict, 0, wire{}.u8(0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F)), qwp.StatusParseError, `delta_start varint at offset 0 overflows 64 bits`},
		{"empty table name", message(0, 1, blockHeader("", 0)), qwp.StatusParseError, `empty table name`},
		{"table name 128 bytes", message(0, 1, blockHeader(longName, 0)), qwp.StatusParseError, `table name length 128 at offset 0 exceeds 127 bytes`},
		{"table name bad UTF-8", message(0, 1, blockHeader("\xff", 0)), qwp.StatusParseError, `table name at offset 1 is not valid UTF-8`},
		{"rows over 1,000,000", message(0, 1, blockHeader("t", 1_000_001)), qwp.StatusParseError, `table "t": row_count 1000001 exceeds 1000000`},
		{"columns over 2048", message(0, 1, wire{}.str("t").varint(0).varint(2049)), qwp.StatusParseError, `table "t": column_count 2049 exceeds 2048`},
		{"column name 128 bytes", message(0, 1, blockHeader("t", 0, longName, qwp.TypeLong)), qwp.StatusParseError, `column name length 128 at offset 4 exceeds 127 bytes`},
		{"type 0x08", message(0, 1, blockHeader("t", 0, "c", qwp.ColumnType(0x08))), qwp.StatusParseError, `table "t" column "c": type code 0x08 is not an ingress type`},
		{"type 0x00", message(0, 1, blockHeader("t", 0, "c", qwp.ColumnType(0x00))), qwp.StatusParseError, `table "t" column "c": type code 0x00 is not an ingress type`},
		{"type 0x19", message(0, 1, blockHeader("t", 0, "c", qwp.ColumnType(0x19))), qwp.StatusParseError, `table "t" column "c": type code 0x19 is not an ingress type`},
		{"missing null flag", oneColumn(0, qwp.TypeLong, 1, nil), qwp.StatusParseError, `truncated null_flag: need 1 bytes at offset 7, 0 left`},
		{"truncated bitmap", oneColumn(0, qwp.TypeLong, 9, wire{}.u8(1, 0xFF)), qwp.StatusParseError, `truncated null bitmap: need 2 bytes at offset 8, 1 left`},
		{"truncated LONG values", oneColumn(0, qwp.TypeLong, 2, wire{}.u8(0).i64(1)), qwp.StatusParseError, `truncated values: need 16 bytes at offset 8, 8 left`},
		{"truncated BOOLEAN bits", oneColumn(0, qwp.TypeBoolean, 9, wire{}.u8(0, 0xFF)), qwp.StatusParseError, `truncated boolean values: need 2 bytes at offset 8, 1 left`},
		{"truncated UUID", oneColumn(0, qwp.TypeUUID, 1, wire{}.u8(0).u64(1)), qwp.StatusParseError, `truncated values: need 16 bytes at offset 8, 8 left`},
		{"varchar offset[0] not 0", oneColumn(0, qwp.TypeVarchar, 1, wire{}.u8(0).u32(1).u32(1).u8('a')), qwp.StatusParseError, `offset[0] is 1, not 0`},
		{"varchar offsets not monotonic", oneColumn(0, qwp.TypeVarchar, 3, wire{}.u8(0).u32(0).u32(2).u32(1).u32(3).u8('a', 'b', 'c')), qwp.StatusParseError, `offset[2] = 1 is below offset[1] = 2`},
		{"varchar inner offset past the last", oneColumn(0, qwp.TypeVarchar, 2, wire{}.u8(0).u32(0).u32(2).u32(1).u8('a')), qwp.StatusParseError, `offset[1] = 2 is below offset[0] = 0 or past the last offset 1`},
		{"varchar offset past data", oneColumn(0, qwp.TypeVarchar, 1, wire{}.u8(0).u32(0).u32(3).u8('a')), qwp.StatusParseError, `last offset 3 exceeds the 1 bytes left`},
		{"varchar truncated offsets", oneColumn(0, qwp.TypeVarchar, 2, wire{}.u8(0).u32(0).u32(0)), qwp.StatusParseError, `truncated offsets: need 12 bytes at offset 8, 8 left`},
		{"varchar bad UTF-8", oneColumn(0, qwp.TypeVarchar, 1, wire{}.u8(0).u32(0).u32(2).u8(0xED, 0xA0)), qwp.StatusParseError, `value 0 is not valid UTF-8`},
		{"binary offset past data", oneColumn(0, qwp.TypeBinary, 1, wire{}.u8(0).u32(0).u32(9)), qwp.StatusParseError, `last offset 9 exceeds the 0 bytes left`},
		{"symbol id past empty dictionary", deltaColumn(wire{}.varint(0).varint(0), qwp.TypeSymbol, 1, wire{}.u8(0).varint(0)), qwp.StatusParseError, `symbol index out of range: 0 (value 0, dictionary size 0)`},
		{"symbol id past per-column dictionary", oneColumn(0, qwp.TypeSymbol, 1, wire{}.u8(0).varint(1).str("a").varint(1)), qwp.StatusParseError, `symbol index out of range: 1 (value 0, dictionary size 1)`},
		{"symbol id past Java's int", oneColumn(0, qwp.TypeSymbol, 1, wire{}.u8(0).varint(6).str("s0").str("s1").str("s2").str("s3").str("s4").str("s5").varint(0x1_0000_0005)), qwp.StatusParseError, `symbol index out of int range: 4294967301 (value 0)`},
		{"delta symbol id past Java's int", deltaColumn(wire{}.varint(0).varint(0), qwp.TypeSymbol, 1, wire{}.u8(0).varint(1<<31)), qwp.StatusParseError, `symbol index out of int range: 2147483648 (value 0)`},
		{"symbol id negative as a long", deltaColumn(wire{}.varint(0).varint(0), qwp.TypeSymbol, 1, wire{}.u8(0).varint(1<<63)), qwp.StatusParseError, `symbol index out of int range: -9223372036854775808 (value 0)`},
		{"symbol per-column entry bad UTF-8", oneColumn(0, qwp.TypeSymbol, 1, wire{}.u8(0).varint(1).varint(1).u8(0x80).varint(0)), qwp.StatusParseError, `column dictionary entry at offset 10 is not valid UTF-8`},
		{"symbol id truncated", oneColumn(0, qwp.TypeSymbol, 1, wire{}.u8(0).varint(1).str("a")), qwp.StatusParseError, `truncated symbol id varint at offset 11`},
		{"timestamp encoding 2", oneColumn(qwp.FlagGorilla, qwp.TypeTimestamp, 1, wire{}.u8(0, 2).i64(1)), qwp.StatusParseError, `timestamp encoding 2 is neither 0 (raw) nor 1 (Gorilla)`},
		{"timestamp encoding missing", oneColumn(qwp.FlagGorilla, qwp.TypeTimestamp, 1, wire{}.u8(0)), qwp.StatusParseError, `truncated timestamp encoding: need 1 bytes at offset 8, 0 left`},
		{"gorilla second value missing", oneColumn(qwp.FlagGorilla, qwp.TypeTimestampNanos, 2, wire{}.u8(0, 1).i64(1)), qwp.StatusParseError, `truncated Gorilla first/second timestamps: need 16 bytes at offset 9, 8 left`},
		{"gorilla bit stream truncated", oneColumn(qwp.FlagGorilla, qwp.TypeTimestamp, 3, wire{}.u8(0, 1).i64(1).i64(2)), qwp.StatusParseError, `Gorilla delta-of-delta 2: bit stream truncated at bit 0 (0 bytes left)`},
		{"gorilla 32-bit value truncated", oneColumn(qwp.FlagGorilla, qwp.TypeTimestamp, 3, wire{}.u8(0, 1).i64(1).i64(2).u8(0x0F, 0xFF)), qwp.StatusParseError, `Gorilla delta-of-delta 2: bit stream truncated at bit 4 (2 bytes left)`},
		{"timestamp truncated without Gorilla", oneColumn(0, qwp.TypeTimestamp, 1, wire{}.u8(0, 1, 2, 3)), qwp.StatusParseError, `truncated values: need 8 bytes at offset 8, 3 left`},
		{"geohash precision 0", oneColumn(0, qwp.TypeGeohash, 1, wire{}.u8(0).varint(0).u8(0)), qwp.StatusParseError, `geohash precision 0 bits is outside 1..60`},
		{"geohash precision 61", oneColumn(0, qwp.TypeGeohash, 1, wire{}.u8(0).varint(61).u64(0)), qwp.StatusParseError, `geohash precision 61 bits is outside 1..60`},
		{"geohash values truncated", oneColumn(0, qwp.TypeGeohash, 1, wire{}.u8(0).varint(20).u8(1, 2)), qwp.StatusParseError, `truncated geohash values: need 3 bytes at offset 9, 2 left`},
		{"array 0 dimensions", oneColumn(0, qwp.TypeDoubleArray, 1, wire{}.u8(0, 0)), qwp.StatusParseError, `array value 0 has 0 dimensions; 1..32 allowed (NULL is only signalled by the bitmap)`},
		{"array 33 dimensions", oneColumn(0, qwp.TypeDoubleArray, 1, append(wire{}.u8(0, 33), make([]byte, 33*4)...)), qwp.StatusParseError, `array value 0 has 33 dimensions; 1..32 allowed (NULL is only signalled by the bitmap)`},
		{"array negative dimension", oneColumn(0, qwp.TypeLongArray, 1, wire{}.u8(0, 1).u32(0xFFFFFFFF)), qwp.StatusParseError, `array value 0 dimension 0 is negative (-1)`},
		{"array dimensions truncated", oneColumn(0, qwp.TypeDoubleArray, 1, wire{}.u8(0, 2).u32(1)), qwp.StatusParseError, `truncated array dimensions: need 8 bytes at offset 9, 4 left`},
		{"array elements truncated", oneColumn(0, qwp.TypeDoubleArray, 1, wire{}.u8(0, 1).u32(2).f64(1)), qwp.StatusParseError, `truncated array elements: need 16 bytes at offset 13, 8 left`},
		{"array element count overflow", oneColumn(0, qwp.TypeDoubleArray, 1, wire{}.u8(0, 3).u32(math.MaxInt32).u32(math.MaxInt32).u32(0)), qwp.StatusParseError, `array value 0 element count overflows 2147483647`},
		{"decimal scale missing", oneColumn(0, qwp.TypeDecimal64, 1, wire{}.u8(0)), qwp.StatusParseError, `truncated decimal scale: need 1 bytes at offset 8, 0 left`},
		{"decimal128 values truncated", oneColumn(0, qwp.TypeDecimal128, 1, wire{}.u8(0, 2).u64(1)), qwp.StatusParseError, `truncated decimal values: need 16 bytes at offset 9, 8 left`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var d Decoder
			m, err := d.Decode(tc.frame)
			assert.Nil(t, m)
			assertStatus(t, err, tc.want)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestDecodeIgnoresTrailingBytesAndReservedFlags(t *testing.T) {
	frame := append(specExample1(t), 0xDE, 0xAD) // bytes past payload_length
	frame[5] = 0x70                              // reserved flag bits are not checked
	var d Decoder
	m, err := d.Decode(frame)
	require.NoError(t, err)
	assert.Equal(t, byte(0x70), m.Flags)
}

func TestDecodeDeltaRollbackAndOverwrite(t *testing.T) {
	var d Decoder
	_, err := d.Decode(message(qwp.FlagDeltaSymbolDict, 0, wire{}.varint(0).varint(2).str("a").str("b")))
	require.NoError(t, err)

	// overwrite id 1, append id 2, then fail on a truncated entry
	_, err = d.Decode(message(qwp.FlagDeltaSymbolDict, 0, wire{}.varint(1).varint(3).str("B").str("c").varint(9)))
	assertStatus(t, err, qwp.StatusParseError)
	require.Equal(t, 2, d.Dict.Len(), "appended ids rolled back")
	assert.Equal(t, "b", d.Dict.Entry(1), "overwritten id restored")

	// a failure after the delta section (bad symbol id) rolls it back too
	bad := append(wire{}.varint(2).varint(1).str("c"), blockHeader("t", 1, "s", qwp.TypeSymbol)...)
	bad = wire(bad).u8(0).varint(3)
	_, err = d.Decode(message(qwp.FlagDeltaSymbolDict, 1, bad))
	assertStatus(t, err, qwp.StatusParseError)
	assert.Equal(t, 2, d.Dict.Len())

	// overlap is allowed and overwrites
	_, err = d.Decode(message(qwp.FlagDeltaSymbolDict, 0, wire{}.varint(1).varint(2).str("B").str("c")))
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "B", "c"}, d.Dict.entries)

	// DecodeMessage shares the caller's dictionary
	dict := d.Dict
	m, err := DecodeMessage(deltaColumn(wire{}.varint(3).varint(1).str("d"), qwp.TypeSymbol, 1, wire{}.u8(0).varint(3)), &dict)
	require.NoError(t, err)
	assert.Equal(t, []any{"d"}, m.Tables[0].Columns[0].Values)
	assert.Equal(t, 4, dict.Len())
}

func TestDecimalString(t *testing.T) {
	cases := map[string]Decimal{
		"-12.345": {big.NewInt(-12345), 3},
		"0.05":    {big.NewInt(5), 2},
		"-0.5":    {big.NewInt(-5), 1},
		"42":      {big.NewInt(42), 0},
	}
	for want, d := range cases {
		assert.Equal(t, want, d.String())
	}
	assert.Equal(t, "00000000-0000-0002-0000-000000000001", UUID{Lo: 1, Hi: 2}.String())
	assert.Equal(t, "0x0000000000000004000000000000000300000000000000020000000000000001", Long256{1, 2, 3, 4}.String())
}

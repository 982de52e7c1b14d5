package qwptest

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/questdbexporter/questdbexporter/qwp"
)

const minWord = uint64(1) << 63 // math.MinInt64's bits: UUID's and LONG256's NULL words

// sentinelRow writes, through qwp's encoder, one row holding each type's
// NULL value and one row holding plain values, and returns the frame.
func sentinelFrame(t *testing.T) []byte {
	t.Helper()
	e := qwp.NewEncoder(qwp.NewMemDict(), qwp.EncoderOptions{})
	tb, err := e.Table("sentinels")
	require.NoError(t, err)
	col := func(name string, typ qwp.ColumnType) qwp.Col {
		c, err := tb.Column(name, typ)
		require.NoError(t, err)
		return c
	}
	i32, i64, day := col("i32", qwp.TypeInt), col("i64", qwp.TypeLong), col("day", qwp.TypeDate)
	ts, tsn := col("ts", qwp.TypeTimestamp), col("tsn", qwp.TypeTimestampNanos)
	f32, f64, inf := col("f32", qwp.TypeFloat), col("f64", qwp.TypeDouble), col("inf", qwp.TypeDouble)
	ch, ip, id, l256 := col("ch", qwp.TypeChar), col("ip", qwp.TypeIPv4), col("id", qwp.TypeUUID), col("l256", qwp.TypeLong256)
	geo, err := tb.GeohashColumn("geo", 20)
	require.NoError(t, err)
	b, i8, i16 := col("b", qwp.TypeBoolean), col("i8", qwp.TypeByte), col("i16", qwp.TypeShort)
	da := col("da", qwp.TypeDoubleArray)
	designated := col("", qwp.TypeTimestamp)

	tb.Int(i32, math.MinInt32)
	tb.Long(i64, math.MinInt64)
	tb.Date(day, math.MinInt64)
	tb.Timestamp(ts, math.MinInt64)
	tb.TimestampNanos(tsn, math.MinInt64)
	tb.Float(f32, float32(math.NaN()))
	tb.Double(f64, math.NaN())
	tb.Double(inf, math.Inf(1))
	tb.Char(ch, 0)
	tb.IPv4(ip, 0)
	tb.UUID(id, minWord, minWord)
	tb.Long256(l256, [4]uint64{minWord, minWord, minWord, minWord})
	tb.Geohash(geo, 1<<20-1) // 20 bits of ones: 3 bytes on the wire, a 4-byte column: a value
	// b, i8 and i16 left NULL: types without a NULL value
	tb.DoubleArray(da, []int32{2}, []float64{math.NaN(), 1})
	tb.Timestamp(designated, 1)
	require.NoError(t, tb.EndRow())

	tb.Int(i32, math.MinInt32+1)
	tb.Long(i64, math.MinInt64+1)
	tb.Date(day, -1)
	tb.Timestamp(ts, -1)
	tb.TimestampNanos(tsn, math.MaxInt64)
	tb.Float(f32, float32(math.Inf(-1)))
	tb.Double(f64, -0.5)
	tb.Double(inf, math.Inf(-1))
	tb.Char(ch, 'x')
	tb.IPv4(ip, 1)
	tb.UUID(id, minWord, 0)
	tb.Long256(l256, [4]uint64{minWord, minWord, minWord, 0})
	tb.Geohash(geo, 0)
	tb.Bool(b, true)
	tb.Byte(i8, -1)
	tb.Short(i16, -1)
	tb.DoubleArray(da, []int32{1}, []float64{2})
	tb.Timestamp(designated, 2)
	require.NoError(t, tb.EndRow())
	return e.Finish(nil)
}

// The decoder gives the values as sent, except the spec's sentinels that
// are QuestDB's own null encodings on the wire.
func TestSentinelsDecodedAsSent(t *testing.T) {
	var d Decoder
	m, err := d.Decode(sentinelFrame(t))
	require.NoError(t, err)
	got := map[string]any{}
	for _, c := range m.Tables[0].Columns {
		got[c.Name] = c.Values[0]
	}
	assert.Equal(t, int32(math.MinInt32), got["i32"])
	assert.Equal(t, int64(math.MinInt64), got["i64"])
	assert.Equal(t, int64(math.MinInt64), got["day"])
	assert.Equal(t, int64(math.MinInt64), got["ts"])
	assert.Equal(t, int64(math.MinInt64), got["tsn"])
	assert.True(t, math.IsNaN(float64(got["f32"].(float32))))
	assert.True(t, math.IsNaN(got["f64"].(float64)))
	assert.Equal(t, uint16(0), got["ch"])
	assert.Equal(t, uint64(1<<20-1), got["geo"])
	for _, name := range []string{"ip", "id", "l256", "b", "i8", "i16"} {
		assert.Nil(t, got[name], name)
	}
}

// The server stores each type's NULL value as NULL, as QuestDB reads it
// back, and a NULL of a type without one as its zero; values next to the
// sentinels stay.
func TestSentinelsStoredAsNull(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s, nil)
	c.send(sentinelFrame(t))
	c.ackedThrough(0)
	td, ok := s.Rows("sentinels")
	require.True(t, ok)
	require.Len(t, td.Rows, 2)
	byName := func(row int) map[string]any {
		out := map[string]any{}
		for j, col := range td.Columns {
			out[col.Name] = td.Rows[row][j]
		}
		return out
	}
	null, plain := byName(0), byName(1)
	for _, name := range []string{"i32", "i64", "day", "ts", "tsn", "f32", "f64", "ch", "ip", "id", "l256"} {
		assert.Nil(t, null[name], name)
	}
	assert.Equal(t, math.Inf(1), null["inf"], "an infinity is a value")
	assert.Equal(t, uint64(1<<20-1), null["geo"])
	assert.Equal(t, false, null["b"])
	assert.Equal(t, int8(0), null["i8"])
	assert.Equal(t, int16(0), null["i16"])
	assert.Equal(t, int64(1), null["timestamp"])
	if a, ok := null["da"].(Array); assert.True(t, ok, "an array with a NaN element is not NULL") {
		assert.Equal(t, []int32{2}, a.Shape)
		assert.True(t, math.IsNaN(a.Doubles[0]), "a NaN element stays an element")
		assert.Equal(t, 1.0, a.Doubles[1])
	}

	assert.Equal(t, map[string]any{
		"i32": int32(math.MinInt32 + 1), "i64": int64(math.MinInt64 + 1), "day": int64(-1), "ts": int64(-1),
		"tsn": int64(math.MaxInt64), "f32": float32(math.Inf(-1)), "f64": -0.5, "inf": math.Inf(-1),
		"ch": uint16('x'), "ip": uint32(1), "id": UUID{Lo: minWord}, "l256": Long256{minWord, minWord, minWord, 0},
		"geo": uint64(0), "b": true, "i8": int8(-1), "i16": int16(-1), "da": Array{Shape: []int32{1}, Doubles: []float64{2}},
		"timestamp": int64(2),
	}, plain)
}

// A column of a type without a NULL value reads as its zero in rows that
// left it out, written before or after it was added.
func TestNoNullTypesFillMissingRows(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s, nil)
	c.send(longRows(0, "t", 1))
	c.send(message(0, 1, append(blockHeader("t", 1, "b", qwp.TypeBoolean, "i8", qwp.TypeByte, "i16", qwp.TypeShort, "i", qwp.TypeInt),
		wire{}.u8(0, 1).u8(0, 7).u8(0).u16(9).u8(0).u32(3)...)))
	c.send(longRows(0, "t", 1))
	c.ackedThrough(2)
	td, _ := s.Rows("t")
	require.Len(t, td.Rows, 3)
	for _, r := range []int{0, 2} {
		assert.Equal(t, []any{false, int8(0), int16(0), nil}, td.Rows[r][2:], "row %d", r)
	}
	assert.Equal(t, []any{true, int8(7), int16(9), int32(3)}, td.Rows[1][2:])
}

// Converted into a wider or other column, a value is NULL only when the
// stored value is the column's NULL value: INT's NULL into LONG is
// -2147483648, a LONG of -2147483648 into INT is NULL.
func TestConvertedSentinels(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s, nil)
	// the columns: LONG, INT, DOUBLE, TIMESTAMP (µs), TIMESTAMP_NANOS
	c.send(message(0, 1, append(blockHeader("conv", 1, "l", qwp.TypeLong, "i", qwp.TypeInt, "d", qwp.TypeDouble,
		"us", qwp.TypeTimestamp, "ns", qwp.TypeTimestampNanos),
		wire{}.u8(0).i64(1).u8(0).u32(1).u8(0).f64(1).u8(0).i64(1).u8(0).i64(1)...)))
	rows := []struct {
		name  string
		col   string
		typ   qwp.ColumnType
		value wire
		want  any
	}{
		{"INT NULL into LONG is a value", "l", qwp.TypeInt, wire{}.u32(0x80000000), int64(math.MinInt32)},
		{"LONG -2^31 into INT is NULL", "i", qwp.TypeLong, wire{}.i64(math.MinInt32), nil},
		{"DOUBLE -2^63 into LONG is NULL", "l", qwp.TypeDouble, wire{}.f64(-math.Pow(2, 63)), nil},
		{"DOUBLE 2^63 into LONG saturates", "l", qwp.TypeDouble, wire{}.f64(math.Pow(2, 63)), int64(math.MaxInt64)},
		{"DOUBLE -2^31 into INT is NULL", "i", qwp.TypeDouble, wire{}.f64(math.MinInt32), nil},
		{"INT NULL into DOUBLE is a value", "d", qwp.TypeInt, wire{}.u32(0x80000000), float64(math.MinInt32)},
		{"LONG NULL into DOUBLE is a value", "d", qwp.TypeLong, wire{}.i64(math.MinInt64), float64(math.MinInt64)},
		{"NaN FLOAT into DOUBLE is NULL", "d", qwp.TypeFloat, wire{}.u32(math.Float32bits(float32(math.NaN()))), nil},
		{"TIMESTAMP_NANOS NULL into µs is a value", "us", qwp.TypeTimestampNanos, wire{}.i64(math.MinInt64), int64(math.MinInt64 / 1000)},
		{"TIMESTAMP -1 into ns", "ns", qwp.TypeTimestamp, wire{}.i64(-1), int64(-1000)},
	}
	for i, r := range rows {
		c.send(message(0, 1, append(blockHeader("conv", 1, r.col, r.typ), append(wire{}.u8(0), r.value...)...)))
		c.ackedThrough(int64(i + 1))
		td, _ := s.Rows("conv")
		j := map[string]int{"l": 0, "i": 1, "d": 2, "us": 3, "ns": 4}[r.col]
		assert.Equal(t, r.want, td.Rows[i+1][j], r.name)
	}
}

// Values QuestDB's appender refuses get WRITE_ERROR (a non-critical
// CairoException), and nothing of the frame is stored.
func TestValuesRefused(t *testing.T) {
	cases := []struct {
		name  string
		frame []byte
		msg   string
	}{
		{"µs into ns overflows", message(0, 1, append(blockHeader("base", 1, "ns", qwp.TypeTimestamp), wire{}.u8(0).i64(math.MaxInt64/1000+1)...)),
			"timestamp overflow converting micros to nanos: 9223372036854776"},
		{"µs NULL into ns overflows", message(0, 1, append(blockHeader("base", 1, "ns", qwp.TypeTimestamp), wire{}.u8(0).i64(math.MinInt64)...)),
			"timestamp overflow converting micros to nanos: -9223372036854775808"},
		{"NaN into LONG", message(0, 1, append(blockHeader("base", 1, "l", qwp.TypeDouble), wire{}.u8(0).f64(math.NaN())...)),
			"double value NaN loses precision when converted to LONG"},
		{"+Inf into LONG", message(0, 1, append(blockHeader("base", 1, "l", qwp.TypeDouble), wire{}.u8(0).f64(math.Inf(1))...)),
			"double value +Inf loses precision when converted to LONG"},
		{"2^63 into INT", message(0, 1, append(blockHeader("base", 1, "i", qwp.TypeDouble), wire{}.u8(0).f64(math.Pow(2, 63))...)),
			"integer value 9223372036854775807 out of range for INT"},
		{"designated µs NULL", message(0, 1, append(blockHeader("base", 1, "", qwp.TypeTimestamp), wire{}.u8(0).i64(math.MinInt64)...)),
			"designated timestamp column cannot be NULL"},
		{"designated µs before 1970", message(0, 1, append(blockHeader("base", 1, "", qwp.TypeTimestamp), wire{}.u8(0).i64(-1)...)),
			"designated timestamp before 1970-01-01 is not allowed"},
		{"designated µs in the year 10000", message(0, 1, append(blockHeader("base", 1, "", qwp.TypeTimestamp), wire{}.u8(0).i64(year10000Micros)...)),
			"designated timestamp beyond 9999-12-31 is not allowed"},
		{"designated ns into µs before 1970", message(0, 1, append(blockHeader("base", 1, "", qwp.TypeTimestampNanos), wire{}.u8(0).i64(-1000)...)),
			"designated timestamp before 1970-01-01 is not allowed"},
		{"designated ns NULL", message(0, 1, append(blockHeader("nanos", 1, "", qwp.TypeTimestampNanos), wire{}.u8(0).i64(math.MinInt64)...)),
			"designated timestamp column cannot be NULL"},
		{"designated ns before 1970", message(0, 1, append(blockHeader("nanos", 1, "", qwp.TypeTimestampNanos), wire{}.u8(0).i64(-1)...)),
			"designated timestamp_ns before 1970-01-01"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, Options{})
			c := dial(t, s, nil)
			c.send(message(0, 1, append(blockHeader("base", 1, "ns", qwp.TypeTimestampNanos, "l", qwp.TypeLong, "i", qwp.TypeInt, "", qwp.TypeTimestamp),
				wire{}.u8(0).i64(1).u8(0).i64(1).u8(0).u32(1).u8(0).i64(1)...)))
			c.send(message(0, 1, append(blockHeader("nanos", 1, "", qwp.TypeTimestampNanos), wire{}.u8(0).i64(1)...)))
			c.ackedThrough(1)
			c.send(tc.frame)
			r := c.resp()
			assert.Equal(t, qwp.StatusWriteError, r.Status, r.Message)
			assert.Contains(t, r.Message, tc.msg)
			assert.Equal(t, int64(2), r.Seq)
			for _, name := range []string{"base", "nanos"} {
				td, _ := s.Rows(name)
				assert.Len(t, td.Rows, 1, name)
			}
		})
	}
}

// The designated timestamp's bounds are inclusive where QuestDB's are: the
// epoch, the last microsecond of 9999 and the largest nanosecond value.
func TestDesignatedTimestampEdgesAccepted(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s, nil)
	c.send(message(0, 1, append(blockHeader("us", 2, "", qwp.TypeTimestamp), wire{}.u8(0).i64(0).i64(year10000Micros-1)...)))
	c.send(message(0, 1, append(blockHeader("ns", 2, "", qwp.TypeTimestampNanos), wire{}.u8(0).i64(0).i64(math.MaxInt64)...)))
	c.ackedThrough(1)
	td, _ := s.Rows("us")
	assert.Equal(t, [][]any{{int64(0)}, {int64(year10000Micros - 1)}}, td.Rows)
	td, _ = s.Rows("ns")
	assert.Equal(t, [][]any{{int64(0)}, {int64(math.MaxInt64)}}, td.Rows)
}

// Dedup compares stored values: a key sent as its type's NULL value equals
// a key sent as NULL, and a BYTE key sent as NULL equals one sent as 0.
func TestDedupSentinelKeyEqualsNull(t *testing.T) {
	s := newServer(t, Options{})
	mustExec(t, s, "CREATE TABLE d (k INT, b BYTE, v LONG, timestamp TIMESTAMP) TIMESTAMP(timestamp) PARTITION BY DAY WAL DEDUP UPSERT KEYS(timestamp, k, b)")
	c := dial(t, s, nil)
	row := func(k wire, b wire, v int64) []byte {
		return message(0, 1, append(blockHeader("d", 1, "k", qwp.TypeInt, "b", qwp.TypeByte, "v", qwp.TypeLong, "", qwp.TypeTimestamp),
			append(append(k, b...), wire{}.u8(0).i64(v).u8(0).i64(5)...)...))
	}
	c.send(row(wire{}.u8(1, 1), wire{}.u8(1, 1), 1))              // k NULL, b NULL
	c.send(row(wire{}.u8(0).u32(0x80000000), wire{}.u8(0, 0), 2)) // k INT NULL value, b 0
	c.send(row(wire{}.u8(0).u32(0x80000001), wire{}.u8(0, 0), 3)) // another key
	c.ackedThrough(2)
	td, _ := s.Rows("d")
	assert.Equal(t, [][]any{
		{nil, int8(0), int64(2), int64(5)},
		{int32(math.MinInt32 + 1), int8(0), int64(3), int64(5)},
	}, td.Rows)
}

// QuestDB writes an array value through MutableArray.setDimLen, which
// refuses a dimension longer than ArrayView.DIM_MAX_LEN (2^28-1) with a
// non-critical CairoException (WRITE_ERROR). The wire only bounds the
// element count, so an empty array can carry such a dimension; the longest
// allowed one is stored.
func TestArrayDimensionLengthLimit(t *testing.T) {
	const maxLen = 1<<28 - 1
	s := newServer(t, Options{})
	c := dial(t, s, nil)
	c.send(message(0, 1, append(blockHeader("arr", 1, "a", qwp.TypeDoubleArray), wire{}.u8(0).u8(2).u32(maxLen).u32(0)...)))
	c.ackedThrough(0)
	td, _ := s.Rows("arr")
	require.Len(t, td.Rows, 1)
	assert.Equal(t, Array{Shape: []int32{maxLen, 0}, Doubles: []float64{}}, td.Rows[0][0])

	c.send(message(0, 1, append(blockHeader("arr", 2, "a", qwp.TypeDoubleArray),
		wire{}.u8(0).u8(2).u32(0).u32(1).u8(2).u32(0).u32(maxLen+1)...)))
	r := c.resp()
	assert.Equal(t, qwp.StatusWriteError, r.Status, r.Message)
	assert.Equal(t, int64(1), r.Seq)
	assert.Contains(t, r.Message, "dimension length out of range [dim=1, dimLen=268435456, maxLen=268435455]")
	assert.Contains(t, r.Message, "row 1")
	td, _ = s.Rows("arr")
	assert.Len(t, td.Rows, 1, "the refused block is rolled back")
}

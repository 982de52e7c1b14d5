package qwp

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// tsColumn encodes a one-column table whose designated TIMESTAMP_NANOS takes
// vals (nil = NULL, with a LONG column keeping the row) and returns the
// timestamp column's data section and the decoded values.
func tsColumn(t *testing.T, opts EncoderOptions, vals []*int64) ([]byte, []any) {
	t.Helper()
	e := NewEncoder(nil, opts)
	tb := mustTable(t, e, "t")
	ts := mustCol(t, tb, "", TypeTimestampNanos)
	k := mustCol(t, tb, "k", TypeLong)
	for _, v := range vals {
		tb.Long(k, 0)
		if v != nil {
			tb.TimestampNanos(ts, *v)
		}
		mustEndRow(t, tb)
	}
	frame := e.Finish(nil)
	msg, err := decodeMessage(frame)
	if err != nil {
		t.Fatalf("decode: %v\n%x", err, frame)
	}
	// The LONG column comes first (it is set first); the timestamp
	// column's data section follows its 1+8*rows bytes to the end.
	rows := len(vals)
	head := HeaderSize + 2 + uvarintLen(uint64(rows)) + 1 + 3 + 2
	col := frame[head+1+8*rows:]
	var got []any
	for _, c := range msg.tables[0].cols {
		if c.name == "" {
			got = c.vals
		}
	}
	return col, got
}

func ptrs(vals ...int64) []*int64 {
	out := make([]*int64, len(vals))
	for i := range vals {
		out[i] = &vals[i]
	}
	return out
}

func le64(vals ...int64) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func checkValues(t *testing.T, got []any, want []*int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d values decoded, want %d", len(got), len(want))
	}
	for i := range want {
		if (want[i] == nil) != (got[i] == nil) || (want[i] != nil && got[i].(int64) != *want[i]) {
			t.Fatalf("row %d: got %v, want %v", i, got[i], want[i])
		}
	}
}

// TestGorillaBuckets puts one delta-of-delta exactly on each side of every
// bucket boundary and checks the stream's size, its bytes where worked out
// by hand from the specification, and the decoded values.
func TestGorillaBuckets(t *testing.T) {
	const t0, t1 = 1_700_000_000_000_000_000, 1_700_000_000_000_001_000
	for _, tc := range []struct {
		dod    int64
		bits   int
		stream []byte // nil: not worked out by hand
	}{
		{0, 1, []byte{0x00}},
		{1, 9, nil},
		{-1, 9, nil},
		{-64, 9, []byte{0x01, 0x01}}, // 1,0 then 1000000 LSB first
		{63, 9, []byte{0xFD, 0x00}},  // 1,0 then 0111111 LSB first
		{-65, 12, nil},
		{64, 12, nil},
		{-256, 12, nil},
		{255, 12, []byte{0xFB, 0x07}}, // 1,1,0 then 011111111 LSB first
		{-257, 16, nil},
		{256, 16, nil},
		{-2048, 16, nil},
		{2047, 16, []byte{0xF7, 0x7F}}, // 1,1,1,0 then 011111111111 LSB first
		{-2049, 36, nil},
		{2048, 36, nil},
		{math.MinInt32, 36, nil},
		{math.MaxInt32, 36, []byte{0xFF, 0xFF, 0xFF, 0xFF, 0x07}}, // 1,1,1,1 then 0x7FFFFFFF
	} {
		vals := ptrs(t0, t1, t1+(t1-t0)+tc.dod)
		col, got := tsColumn(t, EncoderOptions{Gorilla: true}, vals)
		checkValues(t, got, vals)
		want := 1 + 1 + 16 + (tc.bits+7)/8
		if len(col) != want || col[0] != 0 || col[1] != tsGorilla {
			t.Fatalf("dod %d: column %x, want %d bytes in Gorilla mode", tc.dod, col, want)
		}
		if tc.stream != nil && !bytes.Equal(col[18:], tc.stream) {
			t.Errorf("dod %d: stream %x, want %x", tc.dod, col[18:], tc.stream)
		}
	}
}

// TestGorillaShapes covers the short and the fallback cases.
func TestGorillaShapes(t *testing.T) {
	const base = 1_000_000_000
	steady := make([]int64, 100)
	for i := range steady {
		steady[i] = base + int64(i)*1000
	}
	jump := append([]int64{}, steady...)
	jump[60] += math.MaxInt32 + 1 // one DoD past int32 sends the whole column uncompressed
	for _, tc := range []struct {
		name string
		vals []*int64
		want []byte
	}{
		{"one value", ptrs(base), cat([]byte{0, tsGorilla}, le64(base))},
		{"two values", ptrs(base, base+7), cat([]byte{0, tsGorilla}, le64(base, base+7))},
		{"steady", ptrs(steady...), cat([]byte{0, tsGorilla}, le64(steady[0], steady[1]), make([]byte, 13))}, // 98 zero bits
		{"dod above int32", ptrs(0, 0, math.MaxInt32+1), cat([]byte{0, tsUncompressed}, le64(0, 0, math.MaxInt32+1))},
		{"dod below int32", ptrs(0, 0, math.MinInt32-1), cat([]byte{0, tsUncompressed}, le64(0, 0, math.MinInt32-1))},
		{"overflow mid-run", ptrs(jump...), cat([]byte{0, tsUncompressed}, le64(jump...))},
		// Deltas wrap as int64 arithmetic does on both ends: +1 then -1 is a DoD of -2.
		{"wrapping deltas", ptrs(math.MaxInt64, math.MinInt64, math.MaxInt64), cat([]byte{0, tsGorilla}, le64(math.MaxInt64, math.MinInt64), []byte{0xF9, 0x01})},
		{"nulls", []*int64{nil, ptrs(base)[0], nil, ptrs(base + 10)[0], ptrs(base + 20)[0]},
			cat([]byte{1, 0b00101, tsGorilla}, le64(base, base+10), []byte{0})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			col, got := tsColumn(t, EncoderOptions{Gorilla: true}, tc.vals)
			checkValues(t, got, tc.vals)
			if !bytes.Equal(col, tc.want) {
				t.Fatalf("column\n got %x\nwant %x", col, tc.want)
			}
		})
	}
}

// TestTimestampWithoutGorilla: no encoding byte without FlagGorilla.
func TestTimestampWithoutGorilla(t *testing.T) {
	vals := ptrs(5, 6, 100)
	col, got := tsColumn(t, EncoderOptions{}, vals)
	checkValues(t, got, vals)
	if want := cat([]byte{0}, le64(5, 6, 100)); !bytes.Equal(col, want) {
		t.Fatalf("column %x, want %x", col, want)
	}
}

// TestDateNeverGorilla: DATE is a plain int64 column even with FlagGorilla.
func TestDateNeverGorilla(t *testing.T) {
	e := NewEncoder(nil, EncoderOptions{Gorilla: true})
	tb := mustTable(t, e, "t")
	d := mustCol(t, tb, "d", TypeDate)
	for _, v := range []int64{1000, 2000, 3000} {
		tb.Date(d, v)
		mustEndRow(t, tb)
	}
	frame := e.Finish(nil)
	want := cat([]byte{0}, le64(1000, 2000, 3000))
	if !bytes.HasSuffix(frame, want) || len(frame) != HeaderSize+2+1+1+(1+1+1)+len(want) {
		t.Fatalf("DATE column: frame %x, want it to end with %x", frame, want)
	}
	if frame[5] != FlagGorilla {
		t.Fatalf("flags %#x", frame[5])
	}
}

// TestGorillaAddReturnsGrowth: what add returns is valueBytes' change, for
// steady, jittery and overflowing timestamp sequences.
func TestGorillaAddReturnsGrowth(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for seq := range 200 {
		var g gorilla
		ts := int64(1_700_000_000_000_000_000)
		for i := range 50 {
			switch seq % 4 {
			case 0:
				ts += 1_000_000
			case 1:
				ts += 1_000_000 + r.Int64N(5000) - 2500
			case 2:
				ts += r.Int64N(1 << 40) // deltas of deltas past int32: overflow
			default:
				ts += int64(i%3) * 100
			}
			before := g.valueBytes()
			if got, want := g.add(ts), g.valueBytes()-before; got != want {
				t.Fatalf("sequence %d, value %d: add returned %d, valueBytes grew by %d", seq, i, got, want)
			}
		}
	}
}

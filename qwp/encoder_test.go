package qwp

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// metricsRow writes a typical metrics row: 3 SYMBOL, 3 DOUBLE, a ~60-byte
// VARCHAR and the designated TIMESTAMP_NANOS.
type metricsTable struct {
	tb                *Table
	s1, s2, s3        Col
	d1, d2, d3, v, ts Col
}

func newMetricsTable(t testing.TB, e *Encoder, name string) *metricsTable {
	tb := mustTable(t, e, name)
	return &metricsTable{
		tb: tb,
		s1: mustCol(t, tb, "service", TypeSymbol), s2: mustCol(t, tb, "metric", TypeSymbol),
		s3: mustCol(t, tb, "host", TypeSymbol), d1: mustCol(t, tb, "value", TypeDouble),
		d2: mustCol(t, tb, "min", TypeDouble), d3: mustCol(t, tb, "max", TypeDouble),
		v: mustCol(t, tb, "attributes", TypeVarchar), ts: mustCol(t, tb, "", TypeTimestampNanos),
	}
}

var (
	metricServices = []string{"checkout", "payments", "frontend"}
	metricNames    = []string{"http.server.duration", "process.cpu.time", "jvm.memory.used", "db.client.connections"}
	metricHosts    = []string{"node-1.eu-west-1", "node-2.eu-west-1", "node-3.us-east-2"}
	metricAttrs    = []string{
		`{"http.method":"GET","http.route":"/api/v1/orders","status":200}`,
		`{"http.method":"POST","http.route":"/api/v1/payment","status":201}`,
	}
)

func (m *metricsTable) row(i int) { m.rowWith(i, i) }

// rowWith is row i with the symbols of row sym.
func (m *metricsTable) rowWith(i, sym int) {
	tb := m.tb
	tb.SymbolString(m.s1, metricServices[sym%len(metricServices)])
	tb.SymbolString(m.s2, metricNames[sym%len(metricNames)])
	tb.SymbolString(m.s3, metricHosts[sym%len(metricHosts)])
	tb.Double(m.d1, float64(i)*0.5)
	tb.Double(m.d2, float64(i)*0.25)
	tb.Double(m.d3, float64(i)*2)
	tb.VarcharString(m.v, metricAttrs[i%len(metricAttrs)])
	tb.TimestampNanos(m.ts, 1_700_000_000_000_000_000+int64(i)*10_000_000_000)
}

// TestFrameFullRollsBack fills frames under a byte limit: ErrFrameFull
// leaves the frame byte-identical, every frame is within the limit, and
// redoing the row in the next frame loses nothing.
func TestFrameFullRollsBack(t *testing.T) {
	dict := NewMemDict()
	e := NewEncoder(dict, EncoderOptions{MaxFrameBytes: 700, Gorilla: true, DeltaSymbolDict: true})
	m := newMetricsTable(t, e, "metrics")
	var frames [][]byte
	rows, fullSeen := 0, 0
	for i := 0; i < 50; i++ {
		m.row(i)
		err := m.tb.EndRow()
		if err == nil {
			rows++
			continue
		}
		if !errors.Is(err, ErrFrameFull) {
			t.Fatal(err)
		}
		fullSeen++
		size, n := e.Size(), e.Rows()
		if size > 700 {
			t.Fatalf("frame of %d bytes over the limit", size)
		}
		frame := e.Finish(nil)
		if len(frame) != size {
			t.Fatalf("after ErrFrameFull: Size() %d, frame %d bytes", size, len(frame))
		}
		msg, err := decodeMessage(frame)
		if err != nil || msg.tables[0].rows != n || e.FinishedRows() != n {
			t.Fatalf("frame after rollback: %v rows %v, FinishedRows %d; want %d", err, msg, e.FinishedRows(), n)
		}
		frames = append(frames, frame)
		m.row(i)
		mustEndRow(t, m.tb)
		rows++
	}
	frames = append(frames, e.Finish(nil))
	if fullSeen < 3 {
		t.Fatalf("only %d ErrFrameFull; the limit should have split 50 rows more often", fullSeen)
	}
	// Every row arrived exactly once, in order.
	total := 0
	var lastTS int64
	for _, f := range frames {
		msg, err := decodeMessage(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range msg.tables[0].cols {
			if c.name != "" {
				continue
			}
			for _, v := range c.vals {
				if ts := v.(int64); ts <= lastTS {
					t.Fatalf("timestamp %d after %d: a row was duplicated or lost", ts, lastTS)
				} else {
					lastTS = ts
				}
			}
		}
		total += msg.tables[0].rows
	}
	if total != 50 || rows != 50 {
		t.Fatalf("%d rows in frames, %d ended; want 50", total, rows)
	}
}

// TestRollbackIsInvisible compares a frame that saw rolled-back and
// cancelled rows (new tables, new columns, new symbols) with one that never
// did: identical except for dictionary entries, which move to the next frame.
func TestRollbackIsInvisible(t *testing.T) {
	build := func(noise bool) ([]byte, *MemDict) {
		dict := NewMemDict()
		e := NewEncoder(dict, EncoderOptions{Gorilla: true, DeltaSymbolDict: true})
		a := mustTable(t, e, "a")
		x := mustCol(t, a, "x", TypeLong)
		sym := mustCol(t, a, "s", TypeSymbol)
		ts := mustCol(t, a, "", TypeTimestampNanos)
		a.Long(x, 1)
		a.SymbolString(sym, "kept")
		a.TimestampNanos(ts, 100)
		mustEndRow(t, a)
		if noise {
			b := mustTable(t, e, "b")
			y := mustCol(t, b, "y", TypeVarchar)
			b.VarcharString(y, "never")
			b.CancelRow()
			extra := mustCol(t, a, "extra", TypeDouble)
			a.Double(extra, 1)
			a.Long(x, 99)
			a.TimestampNanos(ts, 1<<62) // would overflow the Gorilla DoD
			a.CancelRow()
		}
		a.Long(x, 2)
		a.SymbolString(sym, "kept")
		a.TimestampNanos(ts, 200)
		mustEndRow(t, a)
		return e.Finish(nil), dict
	}
	clean, _ := build(false)
	noisy, dict := build(true)
	if !bytes.Equal(clean, noisy) {
		t.Fatalf("cancelled rows changed the frame:\nclean %x\nnoisy %x", clean, noisy)
	}
	if dict.Len() != 1 {
		t.Fatalf("dictionary has %d entries, want 1", dict.Len())
	}
}

// TestRolledBackSymbolsGoToNextFrame: a row rolled back after registering
// new symbols leaves them in the dictionary; the frame that ends does not
// carry them and the next one does, so no frame references an id it (or an
// earlier frame) did not define.
func TestRolledBackSymbolsGoToNextFrame(t *testing.T) {
	dict := NewMemDict()
	e := NewEncoder(dict, EncoderOptions{MaxFrameBytes: 65, DeltaSymbolDict: true})
	tb := mustTable(t, e, "t")
	s := mustCol(t, tb, "s", TypeSymbol)
	tb.SymbolString(s, "first")
	mustEndRow(t, tb)
	tb.SymbolString(s, strings.Repeat("y", 40))
	if err := tb.EndRow(); !errors.Is(err, ErrFrameFull) {
		t.Fatalf("EndRow = %v, want ErrFrameFull", err)
	}
	if from, to := e.SymbolRange(); from != 0 || to != 1 || dict.Len() != 2 {
		t.Fatalf("SymbolRange %d..%d dict %d; want 0..1 and 2 entries", from, to, dict.Len())
	}
	f1 := e.Finish(nil)
	if m, err := decodeMessage(f1); err != nil || len(m.dict) != 1 {
		t.Fatalf("first frame: %v %+v", err, m)
	}
	tb.SymbolString(s, strings.Repeat("y", 40))
	mustEndRow(t, tb)
	m, err := decodeMessage(e.Finish(nil))
	if err != nil {
		t.Fatal(err)
	}
	if m.dictStart != 1 || len(m.dict) != 1 || m.tables[0].cols[0].vals[0] != uint64(1) {
		t.Fatalf("second frame: start %d, %d entries, id %v; want start 1, 1 entry, id 1", m.dictStart, len(m.dict), m.tables[0].cols[0].vals[0])
	}
}

// TestRolledBackSymbolsRideWithTheNextRow: EndRow looks for new dictionary
// entries only after a SYMBOL lookup (dictLooked), so the lookup of a row
// that was rolled back must still bring its entry into the delta section
// of the next row that ends, even one without SYMBOL values.
func TestRolledBackSymbolsRideWithTheNextRow(t *testing.T) {
	dict := NewMemDict()
	e := NewEncoder(dict, EncoderOptions{DeltaSymbolDict: true})
	tb := mustTable(t, e, "t")
	s := mustCol(t, tb, "s", TypeSymbol)
	n := mustCol(t, tb, "n", TypeLong)
	tb.SymbolString(s, "orphan")
	tb.CancelRow()
	tb.Long(n, 7)
	mustEndRow(t, tb)
	if from, to := e.SymbolRange(); from != 0 || to != 1 {
		t.Fatalf("SymbolRange %d..%d, want 0..1: the cancelled row's entry", from, to)
	}
	m, err := decodeMessage(e.Finish(nil))
	if err != nil || len(m.dict) != 1 || string(m.dict[0]) != "orphan" {
		t.Fatalf("frame: %v, dictionary %q; want [orphan]", err, m.dict)
	}
}

func TestRowTooLarge(t *testing.T) {
	e := NewEncoder(nil, EncoderOptions{MaxFrameBytes: 100})
	tb := mustTable(t, e, "big_table")
	v := mustCol(t, tb, "v", TypeVarchar)
	small := mustCol(t, tb, "n", TypeInt)
	tb.VarcharString(v, strings.Repeat("x", 200))
	err := tb.EndRow()
	var tl *RowTooLargeError
	if !errors.As(err, &tl) {
		t.Fatalf("EndRow = %v, want *RowTooLargeError", err)
	}
	if tl.Table != "big_table" || tl.Limit != 100 || tl.Size != HeaderSize+1+len("big_table")+1+1+3+1+8+200 {
		t.Fatalf("RowTooLargeError %+v", tl)
	}
	if !strings.Contains(err.Error(), "big_table") || !strings.Contains(err.Error(), "100") {
		t.Fatalf("message %q does not name the table and limit", err)
	}
	if e.Size() != 0 || e.Rows() != 0 {
		t.Fatalf("too-large row left Size %d Rows %d", e.Size(), e.Rows())
	}
	tb.Int(small, 7) // the encoder is still usable
	mustEndRow(t, tb)
	if m, err := decodeMessage(e.Finish(nil)); err != nil || len(m.tables[0].cols) != 1 {
		t.Fatalf("after too-large row: %v %+v", err, m)
	}
}

func TestFinishEdgeCases(t *testing.T) {
	dict := NewMemDict()
	e := NewEncoder(dict, EncoderOptions{DeltaSymbolDict: true})
	if got := e.Finish([]byte("keep")); string(got) != "keep" || e.FinishedRows() != 0 {
		t.Fatalf("empty frame appended %q, FinishedRows %d", got[4:], e.FinishedRows())
	}
	tb := mustTable(t, e, "t")
	c := mustCol(t, tb, "c", TypeLong)
	tb.Long(c, 1)
	mustEndRow(t, tb)
	tb.Long(c, 2) // in progress at Finish: cancelled
	f := e.Finish(nil)
	m, err := decodeMessage(f)
	if err != nil || m.tables[0].rows != 1 || m.tables[0].cols[0].vals[0] != int64(1) || e.FinishedRows() != 1 {
		t.Fatalf("frame %v %+v, FinishedRows %d; want the one ended row", err, m, e.FinishedRows())
	}
	if e.Finish(nil); e.FinishedRows() != 0 {
		t.Fatalf("FinishedRows %d after a Finish that appended nothing", e.FinishedRows())
	}
	// Handles survive frames; a table untouched in a frame is left out.
	other := mustTable(t, e, "other")
	oc := mustCol(t, other, "c", TypeLong)
	other.Long(oc, 5)
	mustEndRow(t, other)
	m, err = decodeMessage(e.Finish(nil))
	if err != nil || len(m.tables) != 1 || m.tables[0].name != "other" {
		t.Fatalf("second frame %v %+v; want only table other", err, m)
	}
	// Reset drops the frame and restarts the dictionary range.
	tb.SymbolString(mustCol(t, tb, "s", TypeSymbol), "a")
	mustEndRow(t, tb)
	fresh := NewMemDict()
	e.Reset(fresh)
	if e.Rows() != 0 || e.Size() != 0 {
		t.Fatalf("Reset left rows %d size %d", e.Rows(), e.Size())
	}
	tb.SymbolString(mustCol(t, tb, "s", TypeSymbol), "b")
	mustEndRow(t, tb)
	m, err = decodeMessage(e.Finish(nil))
	if err != nil || m.dictStart != 0 || len(m.dict) != 1 || string(m.dict[0]) != "b" {
		t.Fatalf("after Reset: %v %+v", err, m)
	}
}

// TestColumnJoinsMidFrame: a column first set in a later row is NULL in the
// earlier rows.
func TestColumnJoinsMidFrame(t *testing.T) {
	e := NewEncoder(nil, EncoderOptions{})
	tb := mustTable(t, e, "t")
	a := mustCol(t, tb, "a", TypeInt)
	b := mustCol(t, tb, "b", TypeBoolean)
	for i := 0; i < 11; i++ {
		tb.Int(a, int32(i))
		if i >= 9 {
			tb.Bool(b, true)
		}
		mustEndRow(t, tb)
	}
	m, err := decodeMessage(e.Finish(nil))
	if err != nil {
		t.Fatal(err)
	}
	bc := m.tables[0].cols[1]
	if bc.nullFlag == 0 || bc.vals[8] != nil || bc.vals[9] != true || bc.vals[10] != true {
		t.Fatalf("late column: %+v", bc)
	}
}

func TestBlockLimits(t *testing.T) {
	t.Run("columns", func(t *testing.T) {
		e := NewEncoder(nil, EncoderOptions{})
		tb := mustTable(t, e, "t")
		for i := 0; i < MaxColumnsPerBlock; i++ {
			tb.Bool(mustCol(t, tb, "c"+itoa(i), TypeBoolean), true)
		}
		mustEndRow(t, tb)
		over := mustCol(t, tb, "one_too_many", TypeBoolean)
		tb.Bool(over, true)
		if err := tb.EndRow(); err == nil || !strings.Contains(err.Error(), "one_too_many") {
			t.Fatalf("EndRow = %v, want the column limit naming one_too_many", err)
		}
	})
	t.Run("rows", func(t *testing.T) {
		e := NewEncoder(nil, EncoderOptions{})
		tb := mustTable(t, e, "t")
		c := mustCol(t, tb, "c", TypeBoolean)
		for i := 0; i < MaxRowsPerBlock; i++ {
			tb.Bool(c, true)
			if err := tb.EndRow(); err != nil {
				t.Fatalf("row %d: %v", i, err)
			}
		}
		tb.Bool(c, true)
		if err := tb.EndRow(); !errors.Is(err, ErrFrameFull) {
			t.Fatalf("row %d: EndRow = %v, want ErrFrameFull", MaxRowsPerBlock, err)
		}
		if e.Size() != len(e.Finish(nil)) {
			t.Fatal("Size mismatch at the row limit")
		}
	})
}

func itoa(i int) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + i%10)}, b...)
		if i /= 10; i == 0 {
			return string(b)
		}
	}
}

func TestNames(t *testing.T) {
	long := strings.Repeat("n", MaxNameBytes)
	for _, tc := range []struct {
		name  string
		valid bool
	}{
		{"otel_metrics_gauge", true}, {"a.b", true}, {long, true}, {"таблица", true}, {"with space", true},
		{"", false}, {long + "n", false}, {".a", false}, {"a.", false}, {"a..b", false},
		{" a", false}, {"a ", false}, {"a/b", false}, {"a?b", false}, {"a*b", false}, {"a\x01", false},
		{"a\x7f", false}, {"\ufeffa", false}, {"bad\xff", false},
	} {
		_, err := NewEncoder(nil, EncoderOptions{}).Table(tc.name)
		if (err == nil) != tc.valid {
			t.Errorf("table name %q: err %v, valid %v", tc.name, err, tc.valid)
		}
		if err != nil && !strings.Contains(err.Error(), "table name") {
			t.Errorf("table name %q: error %q does not say what was wrong", tc.name, err)
		}
	}
	for _, tc := range []struct {
		name  string
		typ   ColumnType
		valid bool
	}{
		{"value", TypeDouble, true}, {long, TypeDouble, true}, {"", TypeTimestamp, true}, {"", TypeTimestampNanos, true},
		{"", TypeLong, false}, {"", TypeDate, false}, {long + "x", TypeDouble, false}, {"a.b", TypeDouble, false},
		{"a-b", TypeDouble, false}, {"a,b", TypeDouble, false}, {"bad\xff", TypeDouble, false},
		{"c", ColumnType(0x08), false}, {"c", ColumnType(0x19), false}, {"g", TypeGeohash, false},
		{"s", TypeSymbol, false}, // needs DeltaSymbolDict
	} {
		tb := mustTable(t, NewEncoder(nil, EncoderOptions{}), "t")
		_, err := tb.Column(tc.name, tc.typ)
		if (err == nil) != tc.valid {
			t.Errorf("column %q %s: err %v, valid %v", tc.name, tc.typ, err, tc.valid)
		}
		if err != nil && !strings.Contains(err.Error(), `"t"`) {
			t.Errorf("column %q: error %q does not name the table", tc.name, err)
		}
	}
}

func TestColumnDeclarations(t *testing.T) {
	tb := mustTable(t, NewEncoder(NewMemDict(), EncoderOptions{DeltaSymbolDict: true}), "t")
	a := mustCol(t, tb, "a", TypeLong)
	if again := mustCol(t, tb, "a", TypeLong); again != a {
		t.Fatal("redeclaring with the same type returned another handle")
	}
	g, err := tb.GeohashColumn("g", 20)
	if err != nil {
		t.Fatal(err)
	}
	d, err := tb.DecimalColumn("d", TypeDecimal128, 38)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what string
		err  error
		want string
	}{
		{"other type", second(tb.Column("a", TypeDouble)), "LONG"},
		{"case clash", second(tb.Column("A", TypeLong)), "case-insensitive"},
		{"geohash precision changed", second(tb.GeohashColumn("g", 21)), "GEOHASH(20 bits)"},
		{"geohash 0 bits", second(tb.GeohashColumn("g0", 0)), "1..60"},
		{"geohash 61 bits", second(tb.GeohashColumn("g61", 61)), "1..60"},
		{"decimal scale changed", second(tb.DecimalColumn("d", TypeDecimal128, 2)), "scale 38"},
		{"decimal scale too big", second(tb.DecimalColumn("d64", TypeDecimal64, 19)), "0..18"},
		{"decimal scale negative", second(tb.DecimalColumn("d256", TypeDecimal256, -1)), "0..76"},
		{"not a decimal", second(tb.DecimalColumn("x", TypeLong, 1)), "not a decimal"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: err %v, want it to mention %q", tc.what, tc.err, tc.want)
		}
	}
	_, _ = g, d
}

func second[T any](_ T, err error) error { return err }

// TestSetterErrors: a bad handle or value fails EndRow with an error naming
// the column, and the row leaves no trace.
func TestSetterErrors(t *testing.T) {
	dict := NewMemDict()
	e := NewEncoder(dict, EncoderOptions{DeltaSymbolDict: true})
	tb := mustTable(t, e, "t")
	other := mustTable(t, e, "other")
	l := mustCol(t, tb, "l", TypeLong)
	vc := mustCol(t, tb, "vc", TypeVarchar)
	sym := mustCol(t, tb, "sym", TypeSymbol)
	da := mustCol(t, tb, "da", TypeDoubleArray)
	la := mustCol(t, tb, "la", TypeLongArray)
	g, _ := tb.GeohashColumn("geo", 5)
	oc := mustCol(t, other, "oc", TypeLong)
	for _, tc := range []struct {
		what string
		set  func()
		want string
	}{
		{"wrong type", func() { tb.Double(l, 1) }, `"l"`},
		{"other table's handle", func() { tb.Long(oc, 1) }, "another table"},
		{"zero handle", func() { tb.Long(Col{}, 1) }, "another table or is zero"},
		{"bad UTF-8 varchar", func() { tb.Varchar(vc, []byte{0xff}) }, `"vc"`},
		{"bad UTF-8 varchar string", func() { tb.VarcharString(vc, "\xc3") }, "UTF-8"},
		{"bad UTF-8 symbol", func() { tb.Symbol(sym, []byte{0xfe}) }, `"sym"`},
		{"no dims", func() { tb.DoubleArray(da, nil, nil) }, "0 dimensions"},
		{"33 dims", func() { tb.LongArray(la, make([]int32, 33), nil) }, "33 dimensions"},
		{"negative dim", func() { tb.DoubleArray(da, []int32{2, -1}, nil) }, "negative"},
		{"count mismatch", func() { tb.DoubleArray(da, []int32{2, 2}, []float64{1, 2, 3}) }, "needs 4 values, got 3"},
		{"element overflow", func() { tb.LongArray(la, []int32{1 << 16, 1 << 16}, nil) }, "more than"},
		{"geohash too wide", func() { tb.Geohash(g, 1<<5) }, "more than 5 bits"},
	} {
		tb.Long(l, 42)
		tc.set()
		err := tb.EndRow()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: EndRow = %v, want an error mentioning %s", tc.what, err, tc.want)
		}
		if e.Rows() != 0 || e.Size() != 0 || dict.Len() != 0 {
			t.Fatalf("%s: rejected row left rows %d size %d dict %d", tc.what, e.Rows(), e.Size(), dict.Len())
		}
	}
	tb.Long(l, 1) // the table still works
	mustEndRow(t, tb)
	if m, err := decodeMessage(e.Finish(nil)); err != nil || len(m.tables[0].cols) != 1 {
		t.Fatalf("%v %+v", err, m)
	}
}

// TestSteadyStateAllocatesNothing: once buffers have grown, whole frames of
// rows, Finish included, allocate nothing.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	e := NewEncoder(NewMemDict(), EncoderOptions{Gorilla: true, DeltaSymbolDict: true})
	m := newMetricsTable(t, e, "metrics")
	var buf []byte
	frame := func() {
		for i := 0; i < 100; i++ {
			m.row(i)
			if err := m.tb.EndRow(); err != nil {
				t.Fatal(err)
			}
		}
		buf = e.Finish(buf[:0])
	}
	frame()
	frame()
	if allocs := testing.AllocsPerRun(20, frame); allocs != 0 {
		t.Fatalf("%v allocations per 100-row frame, want 0", allocs)
	}
}

// TestFinishCancelsFailedRow: a row in progress that only recorded an error
// is cancelled by Finish like any other; the error does not leak into the
// next frame's first row.
func TestFinishCancelsFailedRow(t *testing.T) {
	e := NewEncoder(nil, EncoderOptions{})
	tb := mustTable(t, e, "t")
	l := mustCol(t, tb, "l", TypeLong)
	tb.Double(l, 1) // wrong type: recorded, not yet reported
	if f := e.Finish(nil); len(f) != 0 {
		t.Fatalf("frame of a failed row: %x", f)
	}
	tb.Long(l, 1)
	if err := tb.EndRow(); err != nil {
		t.Fatalf("first row of the next frame: %v", err)
	}
}

// TestSymbolTooLargeForAnyFrame: a symbol whose dictionary entry alone
// cannot fit in a frame is refused before it reaches the dictionary.
func TestSymbolTooLargeForAnyFrame(t *testing.T) {
	dict := NewMemDict()
	e := NewEncoder(dict, EncoderOptions{MaxFrameBytes: 100, DeltaSymbolDict: true})
	tb := mustTable(t, e, "t")
	s := mustCol(t, tb, "s", TypeSymbol)
	tb.SymbolString(s, strings.Repeat("x", 80))
	if err := tb.EndRow(); err == nil || !strings.Contains(err.Error(), "80-byte symbol cannot fit in a 100-byte frame") {
		t.Fatalf("EndRow = %v", err)
	}
	if dict.Len() != 0 {
		t.Fatalf("the refused symbol was registered")
	}
	tb.SymbolString(s, strings.Repeat("x", 40))
	mustEndRow(t, tb)
}

// TestNilDictWithDeltaDictPanics: a missing dictionary is a programming
// error caught at construction, not at the first SYMBOL value.
func TestNilDictWithDeltaDictPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"NewEncoder": func() { NewEncoder(nil, EncoderOptions{DeltaSymbolDict: true}) },
		"Reset":      func() { NewEncoder(NewMemDict(), EncoderOptions{DeltaSymbolDict: true}).Reset(nil) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "requires a SymbolDict") {
					t.Errorf("%s: recovered %v, want a panic naming the missing SymbolDict", name, r)
				}
			}()
			f()
		}()
	}
}

// TestValidSettersSkipOnlyTheUTF8Check: SymbolValid and VarcharValid write
// the same bytes as Symbol and Varchar, take invalid UTF-8 as given (the
// caller's guarantee replaces the check) and keep every other check.
func TestValidSettersSkipOnlyTheUTF8Check(t *testing.T) {
	type setters struct {
		sym, vc func(tb *Table, c Col, v []byte)
	}
	checked := setters{(*Table).Symbol, (*Table).Varchar}
	trusted := setters{(*Table).SymbolValid, (*Table).VarcharValid}
	frame := func(s setters, vals []string) []byte {
		e := NewEncoder(NewMemDict(), EncoderOptions{DeltaSymbolDict: true})
		tb := mustTable(t, e, "t")
		sym, vc := mustCol(t, tb, "sym", TypeSymbol), mustCol(t, tb, "vc", TypeVarchar)
		for _, v := range vals {
			s.sym(tb, sym, []byte(v))
			s.vc(tb, vc, []byte(v))
			mustEndRow(t, tb)
		}
		return e.Finish(nil)
	}

	valid := []string{"a", "a", "é€😀", "", "a"}
	if a, b := frame(checked, valid), frame(trusted, valid); !bytes.Equal(a, b) {
		t.Fatalf("valid values: frames differ\nchecked %x\ntrusted %x", a, b)
	}

	bad := "x\xff"
	m, err := decodeMessage(frame(trusted, []string{bad}))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.dict) != 1 || string(m.dict[0]) != bad {
		t.Errorf("dictionary %q, want the unchecked symbol %q", m.dict, bad)
	}
	if got, _ := m.tables[0].cols[1].vals[0].([]byte); string(got) != bad {
		t.Errorf("varchar %q, want the unchecked bytes %q", got, bad)
	}

	// Handle and size checks still apply.
	e := NewEncoder(NewMemDict(), EncoderOptions{MaxFrameBytes: 100, DeltaSymbolDict: true})
	tb := mustTable(t, e, "t")
	sym, vc := mustCol(t, tb, "sym", TypeSymbol), mustCol(t, tb, "vc", TypeVarchar)
	for _, tc := range []struct {
		what string
		set  func()
		want string
	}{
		{"symbol into a varchar column", func() { tb.SymbolValid(vc, []byte("a")) }, `"vc"`},
		{"varchar into a symbol column", func() { tb.VarcharValid(sym, []byte("a")) }, `"sym"`},
		{"zero handle", func() { tb.SymbolValid(Col{}, []byte("a")) }, "another table or is zero"},
		{"symbol too large for any frame", func() { tb.SymbolValid(sym, bytes.Repeat([]byte("x"), 80)) }, "80-byte symbol"},
	} {
		tc.set()
		if err := tb.EndRow(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: EndRow = %v, want an error mentioning %s", tc.what, err, tc.want)
		}
	}
}

// TestIncrementalBlockSize: EndRow's running block size (rowFast rows skip
// the pass over the columns) always equals the size computed column by
// column, through random runs of full rows, NULLs, values set twice,
// refused and cancelled rows, columns joining mid-frame, and Gorilla on and
// off; and every frame is exactly Size() bytes and decodes.
func TestIncrementalBlockSize(t *testing.T) {
	ended := func(tb *Table) int { // block size of the ended rows, column by column
		n := tb.nameHdr + uvarintLen(uint64(tb.rows)) + uvarintLen(uint64(len(tb.active))) + tb.schema
		for _, c := range tb.active {
			n += c.size(tb.rows, c.nullCount, tb.e.opts.Gorilla)
		}
		return n
	}
	var specs []colSpec
	for _, s := range allSpecs() {
		if s.gen != nil { // not the designated timestamp: set below on a clock
			specs = append(specs, s)
		}
	}
	for _, gorillaOn := range []bool{false, true} {
		r := rand.New(rand.NewPCG(7, 11))
		e := NewEncoder(NewMemDict(), EncoderOptions{Gorilla: gorillaOn, DeltaSymbolDict: true})
		tb := mustTable(t, e, "t")
		ts := mustCol(t, tb, "", TypeTimestampNanos)
		cols := make([]Col, len(specs))
		for i, s := range specs {
			var err error
			switch s.typ {
			case TypeGeohash:
				cols[i], err = tb.GeohashColumn(s.name, s.param)
			case TypeDecimal64, TypeDecimal128, TypeDecimal256:
				cols[i], err = tb.DecimalColumn(s.name, s.typ, s.param)
			default:
				cols[i], err = tb.Column(s.name, s.typ)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		fast, fastBitmaps := 0, 0
		for frame := range iterations(400) {
			width := 1 + r.IntN(len(specs)) // later columns join when the frame grows
			for row := range 1 + r.IntN(40) {
				if row == 10 {
					width = len(specs)
				}
				tb.TimestampNanos(ts, int64(frame)*1e12+int64(row)*1e9)
				for i := range width {
					if r.IntN(200) == 0 {
						continue // NULL: bitmaps for the rest of the frame
					}
					set, _ := specs[i].gen(r)
					set(tb, cols[i])
					if r.IntN(100) == 0 {
						set(tb, cols[i])
					}
				}
				switch r.IntN(50) {
				case 0:
					tb.CancelRow()
					continue
				case 1:
					tb.Long(Col{}, 1)
					if err := tb.EndRow(); err == nil {
						t.Fatal("EndRow accepted a zero handle")
					}
					continue
				}
				fastRow, withBitmaps := tb.rowFast()
				mustEndRow(t, tb)
				if fastRow {
					fast++
				}
				if withBitmaps {
					fastBitmaps++
				}
				if want := ended(tb); tb.size != want {
					t.Fatalf("gorilla %v frame %d row %d (fast %v): block size %d, column by column %d",
						gorillaOn, frame, row, fastRow, tb.size, want)
				}
			}
			size := e.Size()
			f := e.Finish(nil)
			if len(f) != size {
				t.Fatalf("frame %d: %d bytes, Size() said %d", frame, len(f), size)
			}
			if _, err := decodeMessage(f); err != nil {
				t.Fatalf("frame %d: %v", frame, err)
			}
		}
		if fast == 0 || fastBitmaps == 0 {
			t.Fatalf("%d rows took the fast path, %d of them into a block with NULL bitmaps: want both", fast, fastBitmaps)
		}
	}
}

// TestLookupBeforeAFullFrameRidesWithTheRetry: a row whose SYMBOL lookup
// added an entry and then did not fit (ErrFrameFull) is written again
// after Finish; the second SymbolValidHashed hits its slot and looks
// nothing up, so the entry the first lookup added must still enter the
// next frame's delta section (dictLooked survives Finish).
func TestLookupBeforeAFullFrameRidesWithTheRetry(t *testing.T) {
	dict := NewMemDict()
	e := NewEncoder(dict, EncoderOptions{DeltaSymbolDict: true, MaxFrameBytes: 70})
	tb := mustTable(t, e, "t")
	s := mustCol(t, tb, "s", TypeSymbol)
	v := mustCol(t, tb, "v", TypeVarchar)
	tb.SymbolValidHashed(s, []byte("a"), 1)
	tb.VarcharString(v, strings.Repeat("x", 30)) // leaves too little room for the next row
	mustEndRow(t, tb)
	long := []byte("a-longish-symbol-value")
	tb.SymbolValidHashed(s, long, 77)
	if err := tb.EndRow(); !errors.Is(err, ErrFrameFull) {
		t.Fatalf("EndRow = %v, want ErrFrameFull (raise the row's size if the limit changed)", err)
	}
	first, err := decodeMessage(e.Finish(nil))
	if err != nil || len(first.dict) != 1 {
		t.Fatalf("first frame: %v, dictionary %q; want [a]", err, first.dict)
	}
	tb.SymbolValidHashed(s, long, 77)
	mustEndRow(t, tb)
	m, err := decodeMessage(e.Finish(nil))
	if err != nil || len(m.dict) != 1 || string(m.dict[0]) != string(long) || m.dictStart != 1 {
		t.Fatalf("retry frame: %v, start %d, dictionary %q; want start 1 with %q", err, m.dictStart, m.dict, long)
	}
}

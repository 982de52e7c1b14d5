package qwp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"testing"
)

// longTests runs the long variants of randomized tests (QWP_LONG_TESTS=1).
var longTests = os.Getenv("QDB_LONG") == "1"

// iterations is n for the long variant, n/20 (at least 10) under -short.
func iterations(n int) int {
	if testing.Short() && !longTests {
		return max(n/20, 10)
	}
	return n
}

// colSpec describes a column of the randomized tests and generates values
// for it: gen returns a setter call and the value the decoder must read.
type colSpec struct {
	name  string
	typ   ColumnType
	param int
	gen   func(r *rand.Rand) (set func(t *Table, c Col), want any)
}

var symbolPool = []string{"host-a", "host-b", "", "ünïcødé", "x"}

func randBytes(r *rand.Rand, max int) []byte {
	b := make([]byte, r.IntN(max+1))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func randText(r *rand.Rand) string {
	runes := []rune{'a', 'z', ' ', 'é', '€', '𝄞', '"'}
	n := r.IntN(12)
	s := make([]rune, n)
	for i := range s {
		s[i] = runes[r.IntN(len(runes))]
	}
	return string(s)
}

func randShape(r *rand.Rand) []int32 {
	shape := make([]int32, 1+r.IntN(3))
	for i := range shape {
		shape[i] = int32(r.IntN(4)) // 0 makes an empty array
	}
	return shape
}

func shapeLen(shape []int32) int {
	n := 1
	for _, d := range shape {
		n *= int(d)
	}
	return n
}

// allSpecs has one column of every ingress type.
func allSpecs() []colSpec {
	u64 := func(r *rand.Rand) uint64 { return r.Uint64() }
	// One SymbolRun per column and value, kept across rows, frames and
	// rollbacks as a caller keeps it, so that its armed path runs.
	type runKey struct {
		c Col
		v string
	}
	runs := map[runKey]*SymbolRun{}
	return []colSpec{
		{name: "b", typ: TypeBoolean, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			v := r.IntN(2) == 1
			return func(t *Table, c Col) { t.Bool(c, v) }, v
		}},
		{name: "i8", typ: TypeByte, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			v := int8(r.Uint32())
			return func(t *Table, c Col) { t.Byte(c, v) }, v
		}},
		{name: "i16", typ: TypeShort, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			v := int16(r.Uint32())
			return func(t *Table, c Col) { t.Short(c, v) }, v
		}},
		{name: "ch", typ: TypeChar, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			v := uint16(r.Uint32())
			return func(t *Table, c Col) { t.Char(c, v) }, v
		}},
		{name: "i32", typ: TypeInt, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			v := int32(r.Uint32())
			return func(t *Table, c Col) { t.Int(c, v) }, v
		}},
		{name: "ip", typ: TypeIPv4, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			v := r.Uint32()
			return func(t *Table, c Col) { t.IPv4(c, v) }, v
		}},
		{name: "f32", typ: TypeFloat, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			v := float32(r.NormFloat64())
			return func(t *Table, c Col) { t.Float(c, v) }, v
		}},
		{name: "i64", typ: TypeLong, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			v := int64(r.Uint64())
			return func(t *Table, c Col) { t.Long(c, v) }, v
		}},
		{name: "f64", typ: TypeDouble, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			v := r.NormFloat64() * 1e6
			return func(t *Table, c Col) { t.Double(c, v) }, v
		}},
		{name: "d", typ: TypeDate, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			v := int64(r.Uint64())
			return func(t *Table, c Col) { t.Date(c, v) }, v
		}},
		{name: "tsu", typ: TypeTimestamp, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			v := int64(r.Uint64()) // arbitrary: exercises the uncompressed fallback
			return func(t *Table, c Col) { t.Timestamp(c, v) }, v
		}},
		{name: "uuid", typ: TypeUUID, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			v := [2]uint64{u64(r), u64(r)}
			return func(t *Table, c Col) { t.UUID(c, v[0], v[1]) }, v
		}},
		{name: "l256", typ: TypeLong256, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			v := [4]uint64{u64(r), u64(r), u64(r), u64(r)}
			return func(t *Table, c Col) { t.Long256(c, v) }, v
		}},
		{name: "geo", typ: TypeGeohash, param: 25, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			v := r.Uint64() >> (64 - 25)
			return func(t *Table, c Col) { t.Geohash(c, v) }, v
		}},
		{name: "geo60", typ: TypeGeohash, param: 60, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			v := r.Uint64() >> 4
			return func(t *Table, c Col) { t.Geohash(c, v) }, v
		}},
		{name: "vc", typ: TypeVarchar, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			v := randText(r)
			if r.IntN(2) == 0 {
				return func(t *Table, c Col) { t.VarcharString(c, v) }, []byte(v)
			}
			return func(t *Table, c Col) { t.Varchar(c, []byte(v)) }, []byte(v)
		}},
		{name: "bin", typ: TypeBinary, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			v := randBytes(r, 20)
			return func(t *Table, c Col) { t.Binary(c, v) }, append([]byte{}, v...)
		}},
		{name: "sym", typ: TypeSymbol, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			v := symbolPool[r.IntN(len(symbolPool))]
			switch r.IntN(4) {
			case 0:
				return func(t *Table, c Col) { t.SymbolString(c, v) }, v
			case 1: // a hash shared by every value of that length: slots collide
				return func(t *Table, c Col) { t.SymbolValidHashed(c, []byte(v), uint64(len(v))) }, v
			case 2:
				return func(t *Table, c Col) {
					run := runs[runKey{c, v}]
					if run == nil {
						run = new(SymbolRun)
						run.AddString(c, v)
						runs[runKey{c, v}] = run
					}
					t.Symbols(run)
				}, v
			}
			return func(t *Table, c Col) { t.Symbol(c, []byte(v)) }, v
		}},
		{name: "sym2", typ: TypeSymbol, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			v := fmt.Sprintf("s%d", r.IntN(1000)) // grows the dictionary
			return func(t *Table, c Col) { t.SymbolString(c, v) }, v
		}},
		{name: "da", typ: TypeDoubleArray, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			shape := randShape(r)
			var vals []float64
			for range shapeLen(shape) {
				vals = append(vals, r.Float64())
			}
			return func(t *Table, c Col) { t.DoubleArray(c, shape, vals) }, arrayVal{shape: shape, f64: vals}
		}},
		{name: "la", typ: TypeLongArray, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			shape := randShape(r)
			var vals []int64
			for range shapeLen(shape) {
				vals = append(vals, int64(r.Uint64()))
			}
			return func(t *Table, c Col) { t.LongArray(c, shape, vals) }, arrayVal{shape: shape, i64: vals}
		}},
		{name: "dec64", typ: TypeDecimal64, param: 3, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			v := int64(r.Uint64())
			return func(t *Table, c Col) { t.Decimal64(c, v) }, v
		}},
		{name: "dec128", typ: TypeDecimal128, param: 20, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			v := [2]uint64{u64(r), u64(r)}
			return func(t *Table, c Col) { t.Decimal128(c, v[0], v[1]) }, v
		}},
		{name: "dec256", typ: TypeDecimal256, param: 76, gen: func(r *rand.Rand) (func(*Table, Col), any) {
			v := [4]uint64{u64(r), u64(r), u64(r), u64(r)}
			return func(t *Table, c Col) { t.Decimal256(c, v) }, v
		}},
		{name: "", typ: TypeTimestampNanos, gen: nil}, // designated; values come from a clock
	}
}

func declare(t testing.TB, tb *Table, s colSpec) Col {
	t.Helper()
	var c Col
	var err error
	switch s.typ {
	case TypeGeohash:
		c, err = tb.GeohashColumn(s.name, s.param)
	case TypeDecimal64, TypeDecimal128, TypeDecimal256:
		c, err = tb.DecimalColumn(s.name, s.typ, s.param)
	default:
		c, err = tb.Column(s.name, s.typ)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// modelTable is what a table block of the frame being built must decode to.
type modelTable struct {
	order []string         // schema order: first set in an ended row
	vals  map[string][]any // per column, one value per row (nil = NULL)
	rows  int
}

type model struct {
	tables map[string]*modelTable
}

func (m *model) table(name string) *modelTable {
	mt := m.tables[name]
	if mt == nil {
		mt = &modelTable{vals: map[string][]any{}}
		m.tables[name] = mt
	}
	return mt
}

// endRow records a row whose columns were set in the order of names.
func (mt *modelTable) endRow(names []string, vals map[string]any) {
	for _, n := range names {
		if _, ok := mt.vals[n]; !ok {
			mt.order = append(mt.order, n)
			mt.vals[n] = make([]any, mt.rows)
		}
	}
	for n := range mt.vals {
		mt.vals[n] = append(mt.vals[n], vals[n])
	}
	mt.rows++
}

// checkFrame decodes frame and compares it with m and the dictionary.
func checkFrame(t *testing.T, frame []byte, m *model, dict *MemDict, opts EncoderOptions, symFrom, symTo int) {
	t.Helper()
	msg, err := decodeMessage(frame)
	if err != nil {
		t.Fatalf("decode: %v\n%x", err, frame)
	}
	wantFlags := byte(0)
	if opts.Gorilla {
		wantFlags |= FlagGorilla
	}
	if opts.DeltaSymbolDict {
		wantFlags |= FlagDeltaSymbolDict
		if msg.dictStart != symFrom || len(msg.dict) != symTo-symFrom {
			t.Fatalf("delta dict [%d,+%d), want [%d,%d)", msg.dictStart, len(msg.dict), symFrom, symTo)
		}
		for i, e := range msg.dict {
			if string(e) != string(dict.Entry(symFrom+i)) {
				t.Fatalf("delta entry %d = %q, want %q", symFrom+i, e, dict.Entry(symFrom+i))
			}
		}
	}
	if msg.flags != wantFlags {
		t.Fatalf("flags %#x, want %#x", msg.flags, wantFlags)
	}
	nonEmpty := 0
	for _, mt := range m.tables {
		if mt.rows > 0 {
			nonEmpty++
		}
	}
	if len(msg.tables) != nonEmpty {
		t.Fatalf("%d tables, want %d", len(msg.tables), nonEmpty)
	}
	seen := map[string]bool{}
	for _, dt := range msg.tables {
		if seen[dt.name] {
			t.Fatalf("table %q twice in a frame", dt.name)
		}
		seen[dt.name] = true
		mt := m.tables[dt.name]
		if mt == nil || mt.rows != dt.rows {
			t.Fatalf("table %q: %d rows, model %+v", dt.name, dt.rows, mt)
		}
		var names []string
		for _, c := range dt.cols {
			names = append(names, c.name)
			got := c.vals
			hasNull := false
			for i, v := range got {
				if v == nil {
					hasNull = true
				}
				if id, ok := v.(uint64); ok && c.typ == TypeSymbol {
					if id >= uint64(symTo) {
						t.Fatalf("symbol id %d beyond the dictionary the frame defines (%d)", id, symTo)
					}
					got[i] = string(dict.Entry(int(id)))
				}
			}
			if (c.nullFlag != 0) != hasNull {
				t.Fatalf("table %q column %q: null flag %d with NULLs %v", dt.name, c.name, c.nullFlag, hasNull)
			}
			if want := mt.vals[c.name]; !reflect.DeepEqual(got, want) {
				t.Fatalf("table %q column %q (%s):\n got %v\nwant %v", dt.name, c.name, c.typ, got, want)
			}
		}
		if !reflect.DeepEqual(names, mt.order) {
			t.Fatalf("table %q schema %q, want %q", dt.name, names, mt.order)
		}
	}
}

// harness writes rows through an Encoder and, in step, into a model of
// what each frame must decode to; every finished frame is checked.
type harness struct {
	t       *testing.T
	opts    EncoderOptions
	dict    *MemDict
	e       *Encoder
	specs   []colSpec
	tables  []string
	cols    map[string][]Col
	m       *model
	symFrom int
	rows    map[string]*pendingRow // rows in progress
	frames  int                    // non-empty frames checked
	large   int                    // rows refused as too large
}

// pendingRow is a row in progress: its columns in first-set order, the
// values that must arrive, and the calls that set them.
type pendingRow struct {
	names []string
	vals  map[string]any
	sets  []func()
}

func newHarness(t *testing.T, dict *MemDict, opts EncoderOptions) *harness {
	h := &harness{t: t, opts: opts, dict: dict, e: NewEncoder(dict, opts), tables: []string{"t1", "t2", "t3"},
		cols: map[string][]Col{}, m: &model{tables: map[string]*modelTable{}}, rows: map[string]*pendingRow{}}
	for _, s := range allSpecs() {
		if s.typ != TypeSymbol || opts.DeltaSymbolDict {
			h.specs = append(h.specs, s)
		}
	}
	for _, name := range h.tables {
		tb := mustTable(t, h.e, name)
		for _, s := range h.specs {
			h.cols[name] = append(h.cols[name], declare(t, tb, s))
		}
	}
	h.symFrom, _ = h.e.SymbolRange()
	return h
}

// set sets column spec of table to a value; a second set in a row wins.
func (h *harness) set(table, spec int, set func(*Table, Col), want any) {
	name := h.tables[table]
	tb, c := mustTable(h.t, h.e, name), h.cols[name][spec]
	row := h.rows[name]
	if row == nil {
		row = &pendingRow{vals: map[string]any{}}
		h.rows[name] = row
	}
	col := h.specs[spec].name
	if _, ok := row.vals[col]; !ok {
		row.names = append(row.names, col)
	}
	row.vals[col] = want
	call := func() { set(tb, c) }
	row.sets = append(row.sets, call)
	call()
}

func (h *harness) cancel(table int) {
	name := h.tables[table]
	mustTable(h.t, h.e, name).CancelRow()
	delete(h.rows, name)
}

// endRow ends table's row; on ErrFrameFull it finishes the frame and
// writes the row again, as a caller must.
func (h *harness) endRow(table int) {
	name := h.tables[table]
	tb := mustTable(h.t, h.e, name)
	row := h.rows[name]
	if row == nil {
		row = &pendingRow{vals: map[string]any{}}
	}
	delete(h.rows, name)
	for {
		err := tb.EndRow()
		if err == nil {
			h.m.table(name).endRow(row.names, row.vals)
			return
		}
		var tl *RowTooLargeError
		if errors.As(err, &tl) {
			if h.e.Rows() != 0 || tl.Table != name || tl.Size <= tl.Limit {
				h.t.Fatalf("RowTooLargeError %+v with %d rows in the frame", tl, h.e.Rows())
			}
			h.large++
			return
		}
		if !errors.Is(err, ErrFrameFull) {
			h.t.Fatal(err)
		}
		h.finish()
		for _, set := range row.sets {
			set()
		}
	}
}

// finish finishes the frame (cancelling rows in progress) and checks it.
func (h *harness) finish() {
	_, symTo := h.e.SymbolRange()
	size := h.e.Size()
	frame := h.e.Finish(nil)
	if size != len(frame) {
		h.t.Fatalf("Size() = %d, Finish appended %d bytes", size, len(frame))
	}
	if len(frame) > h.e.MaxFrameBytes() {
		h.t.Fatalf("frame of %d bytes over the %d limit", len(frame), h.e.MaxFrameBytes())
	}
	if len(frame) > 0 {
		checkFrame(h.t, frame, h.m, h.dict, h.opts, h.symFrom, symTo)
		h.frames++
	}
	h.m = &model{tables: map[string]*modelTable{}}
	h.rows = map[string]*pendingRow{}
	h.symFrom = symTo
}

// TestRandomFramesRoundTrip writes random rows of every type, with NULLs,
// repeated sets, cancelled and rolled-back rows, into frames of random size
// limits, and checks every frame: Size() equals its length and it decodes to
// exactly the rows written.
func TestRandomFramesRoundTrip(t *testing.T) {
	for _, opts := range []EncoderOptions{
		{Gorilla: true, DeltaSymbolDict: true},
		{Gorilla: false, DeltaSymbolDict: true},
		{Gorilla: true, DeltaSymbolDict: false}, // no SYMBOL columns then
	} {
		t.Run(fmt.Sprintf("gorilla=%v,dict=%v", opts.Gorilla, opts.DeltaSymbolDict), func(t *testing.T) {
			roundTrip(t, opts, iterations(400))
		})
	}
}

func roundTrip(t *testing.T, opts EncoderOptions, nFrames int) {
	r := rand.New(rand.NewPCG(1, uint64(nFrames)))
	dict := NewMemDict()
	frames, large := 0, 0
	for frames < nFrames {
		opts.MaxFrameBytes = 200 + r.IntN(6000)
		h := newHarness(t, dict, opts)
		clock := map[int]int64{}
		pSet := make([]float64, len(h.specs)) // per-column chance of a value
		for i := range pSet {
			pSet[i] = []float64{0, 0.3, 0.9, 1}[r.IntN(4)]
		}
		for row := 0; row < 300; row++ {
			table := r.IntN(len(h.tables))
			// Sometimes abandon a garbage row first.
			for attempt := r.IntN(10) == 0; ; attempt = false {
				for i, s := range h.specs {
					if r.Float64() >= pSet[i] {
						continue
					}
					if s.gen != nil {
						set, want := s.gen(r)
						h.set(table, i, set, want)
						continue
					}
					step := int64(1000)
					if r.IntN(50) == 0 {
						step = int64(r.Uint64() >> 1) // an occasional huge jump: DoD overflow
					}
					clock[table] += step + int64(r.IntN(3))
					v := clock[table]
					h.set(table, i, func(t *Table, c Col) { t.TimestampNanos(c, v) }, v)
				}
				if !attempt {
					break
				}
				h.cancel(table)
			}
			if r.IntN(10) == 0 { // a second value for a column: it wins
				i := r.IntN(len(h.specs))
				if s := h.specs[i]; s.gen != nil {
					set, want := s.gen(r)
					h.set(table, i, set, want)
				}
			}
			h.endRow(table)
		}
		h.finish()
		frames += h.frames
		large += h.large
	}
	if large == 0 {
		t.Log("no row was too large for its frame")
	}
}

// FuzzEncoderRoundTrip drives the encoder with operations read from the
// input: set a column of one of three tables to a value derived from eight
// input bytes, end or cancel a row, finish the frame. Every frame must be
// within the limit, exactly Size() long and decode to the rows ended.
func FuzzEncoderRoundTrip(f *testing.F) {
	f.Add(uint16(300), []byte{0x00, 1, 1, 2, 3, 4, 5, 6, 7, 8, 0x05, 0x07})
	f.Add(uint16(0), bytes.Repeat([]byte{0x08, 17, 0xff, 0, 0, 0, 0, 0, 0, 0x80, 0x0d}, 20))
	f.Fuzz(func(t *testing.T, limit uint16, ops []byte) {
		// At least 64 bytes: every generated symbol fits in a frame.
		opts := EncoderOptions{MaxFrameBytes: 64 + int(limit), Gorilla: limit%2 == 0, DeltaSymbolDict: true}
		h := newHarness(t, NewMemDict(), opts)
		for len(ops) > 0 {
			op := ops[0]
			table := int(op>>3) % len(h.tables)
			ops = ops[1:]
			switch op & 7 {
			case 5:
				h.endRow(table)
			case 6:
				h.cancel(table)
			case 7:
				h.finish()
			default: // set: a column byte and an 8-byte value seed
				if len(ops) < 9 {
					ops = nil
					break
				}
				i := int(ops[0]) % len(h.specs)
				seed := binary.LittleEndian.Uint64(ops[1:9])
				ops = ops[9:]
				if s := h.specs[i]; s.gen != nil {
					set, want := s.gen(rand.New(rand.NewPCG(seed, 0)))
					h.set(table, i, set, want)
				} else {
					v := int64(seed)
					h.set(table, i, func(t *Table, c Col) { t.TimestampNanos(c, v) }, v)
				}
			}
		}
		h.finish()
	})
}

// TestSizeExactAfterEveryRow checks Size() against Finish at every row count
// of a frame: a clone of the encoder's rows is not possible, so each length
// is rebuilt from scratch with the same rows.
func TestSizeExactAfterEveryRow(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	specs := allSpecs()
	type rowFn func(tb *Table, cols []Col)
	var rows []rowFn
	for i := 0; i < 40; i++ {
		var sets []func(*Table, Col)
		var idx []int
		for j, s := range specs {
			if s.gen == nil || r.IntN(3) == 0 {
				continue
			}
			set, _ := s.gen(r)
			sets = append(sets, set)
			idx = append(idx, j)
		}
		ts := int64(i)*1_000_000 + int64(r.IntN(100))
		rows = append(rows, func(tb *Table, cols []Col) {
			for k, set := range sets {
				set(tb, cols[idx[k]])
			}
			tb.TimestampNanos(cols[len(cols)-1], ts)
		})
	}
	for n := 1; n <= len(rows); n++ {
		dict := NewMemDict()
		e := NewEncoder(dict, EncoderOptions{Gorilla: true, DeltaSymbolDict: true})
		tb := mustTable(t, e, "t")
		var cols []Col
		for _, s := range specs {
			cols = append(cols, declare(t, tb, s))
		}
		for _, row := range rows[:n] {
			row(tb, cols)
			mustEndRow(t, tb)
		}
		size := e.Size()
		if got := len(e.Finish(nil)); got != size {
			t.Fatalf("%d rows: Size() = %d, Finish appended %d", n, size, got)
		}
	}
}

package qwp

import (
	"bytes"
	"slices"
	"strconv"
	"testing"
)

// keyedPair writes the same rows into two encoders: one through a
// SymbolRun (kept across rows while its values stay the same, as a caller
// keeps it), the other value by value through SymbolKeyed. Their frames
// must be byte for byte the same.
type keyedPair struct {
	t       *testing.T
	encs    [2]*Encoder
	tbs     [2]*Table
	cols    [2][3]Col // SYMBOL columns a, b, c
	n       [2]Col    // an INT column
	other   [2]Col    // a column of another table
	run     SymbolRun
	runSpec []sym // what run holds
	written int
}

func newKeyedPair(t *testing.T) *keyedPair {
	p := &keyedPair{t: t}
	for i := range 2 {
		p.encs[i] = NewEncoder(NewMemDict(), EncoderOptions{DeltaSymbolDict: true, Gorilla: true})
		p.tbs[i] = mustTable(t, p.encs[i], "t")
		for j, name := range []string{"a", "b", "c"} {
			p.cols[i][j] = mustCol(t, p.tbs[i], name, TypeSymbol)
		}
		p.n[i] = mustCol(t, p.tbs[i], "n", TypeInt)
		p.other[i] = mustCol(t, mustTable(t, p.encs[i], "u"), "x", TypeSymbol)
	}
	return p
}

// sym is one value of a row: column index (-1: the other table's column),
// value and key.
type sym struct {
	col int
	v   string
	key uint64
}

// row writes one row on both sides: before, set individually on both, then
// the run, then n; cancel drops it instead of ending it. It returns the
// EndRow errors.
func (p *keyedPair) row(before []sym, run []sym, cancel bool) [2]error {
	p.t.Helper()
	var errs [2]error
	for i := range 2 {
		tb := p.tbs[i]
		col := func(s sym) Col {
			if s.col < 0 {
				return p.other[i]
			}
			return p.cols[i][s.col]
		}
		for _, s := range before {
			tb.SymbolStringKeyed(col(s), s.v, s.key)
		}
		if i == 0 {
			if !slices.Equal(run, p.runSpec) {
				p.run.Reset()
				for _, s := range run {
					p.run.AddString(col(s), s.v)
				}
				p.runSpec = slices.Clone(run)
			}
			tb.Symbols(&p.run)
		} else {
			for _, s := range run {
				tb.SymbolKeyed(col(s), []byte(s.v), s.key)
			}
		}
		tb.Int(p.n[i], int32(p.written))
		if cancel {
			tb.CancelRow()
		} else {
			errs[i] = tb.EndRow()
		}
	}
	if (errs[0] == nil) != (errs[1] == nil) {
		p.t.Fatalf("row %d: EndRow %v through a SymbolRun, %v value by value", p.written, errs[0], errs[1])
	}
	if p.encs[0].Size() != p.encs[1].Size() {
		p.t.Fatalf("row %d: frame size %d through a SymbolRun, %d value by value", p.written, p.encs[0].Size(), p.encs[1].Size())
	}
	p.written++
	return errs
}

func (p *keyedPair) finish() {
	p.t.Helper()
	a, b := p.encs[0].Finish(nil), p.encs[1].Finish(nil)
	if !bytes.Equal(a, b) {
		p.t.Fatalf("frames differ after %d rows:\nSymbolRun  %x\none by one %x", p.written, a, b)
	}
	if len(a) != 0 {
		if _, err := decodeMessage(a); err != nil {
			p.t.Fatal(err)
		}
	}
}

func TestSymbolRunIsSymbolKeyedValueByValue(t *testing.T) {
	p := newKeyedPair(t)
	k1, k2, k3 := NewSymbolKey(), NewSymbolKey(), NewSymbolKey()
	run := []sym{{0, "svc", k1}, {1, "metric", k2}, {2, "unit", k2}}
	for range 5 { // the first row joins the columns, the rest hit the cache
		p.row(nil, run, false)
	}
	// A new key for the same bytes (a new metric with the same unit), then
	// a new value; a NULL; a key of 0 (no key).
	k4 := NewSymbolKey()
	p.row(nil, []sym{{0, "svc", k1}, {1, "metric2", k4}, {2, "unit", k4}}, false)
	p.row(nil, []sym{{0, "svc", k1}, {1, "metric2", k4}, {2, "unit", k4}}, false)
	p.row(nil, []sym{{0, "svc", k1}, {2, "unit", k4}}, false)
	p.row(nil, []sym{{0, "svc", 0}, {1, "metric2", k4}, {2, "unit", k4}}, false)
	// A column set before the run in the same row (set twice), a row
	// cancelled after the run, a run holding another table's column.
	p.row([]sym{{1, "early", k3}}, run, false)
	p.row(nil, run, true)
	p.row(nil, run, false)
	if errs := p.row(nil, []sym{{0, "svc", k1}, {-1, "x", k1}}, false); errs[0] == nil {
		t.Fatal("a run holding another table's column was accepted")
	}
	p.row(nil, run, false)
	p.finish()
	// A new frame: the cache of the previous one must not be used.
	for range 3 {
		p.row(nil, run, false)
	}
	p.finish()
	// A frame whose first row is cancelled after the run: its columns
	// leave the block again, so the next row must not take the ids alone.
	p.row(nil, run, true)
	for range 3 {
		p.row(nil, run, false)
	}
	p.finish()
}

// TestSymbolRunsAlternating: two runs kept side by side over the same
// columns, written in turn (two metrics of one resource interleaved), with
// a plain setter writing a third value between them; every id a run holds
// must still be its own value's.
func TestSymbolRunsAlternating(t *testing.T) {
	encs := [2]*Encoder{}
	var frames [2][]byte
	for i := range 2 {
		encs[i] = NewEncoder(NewMemDict(), EncoderOptions{DeltaSymbolDict: true})
		tb := mustTable(t, encs[i], "t")
		a, b := mustCol(t, tb, "a", TypeSymbol), mustCol(t, tb, "b", TypeSymbol)
		var runs [2]SymbolRun
		runs[0].AddString(a, "one")
		runs[0].AddString(b, "x")
		runs[1].AddString(a, "two")
		runs[1].AddString(b, "y")
		vals := [3][2]string{{"one", "x"}, {"two", "y"}, {"three", "z"}}
		for row := range 12 {
			k := row % 3
			if i == 0 && k < 2 {
				tb.Symbols(&runs[k])
			} else {
				tb.SymbolString(a, vals[k][0])
				tb.SymbolString(b, vals[k][1])
			}
			if err := tb.EndRow(); err != nil {
				t.Fatal(err)
			}
			if row == 7 { // a new frame midway
				frames[i] = encs[i].Finish(frames[i])
			}
		}
		frames[i] = encs[i].Finish(frames[i])
	}
	if !bytes.Equal(frames[0], frames[1]) {
		t.Fatalf("frames differ:\nruns       %x\none by one %x", frames[0], frames[1])
	}
}

// TestSymbolRunWithLongIds: a run whose values have ids of one, two and
// three uvarint bytes (a dictionary that already holds thousands of
// entries, as under series churn) writes the same frames as the values one
// by one, over enough rows that a column's data runs out of room at every
// offset; runs of one- and two-byte ids take the armed loop, one with a
// three-byte id the general path.
func TestSymbolRunWithLongIds(t *testing.T) {
	p := newKeyedPair(t)
	fill := func(n int) {
		for k := range n {
			p.row(nil, []sym{{2, "fill-" + strconv.Itoa(p.written) + "-" + strconv.Itoa(k), 0}}, false)
		}
	}
	k1, k2, k3 := NewSymbolKey(), NewSymbolKey(), NewSymbolKey()
	p.row(nil, []sym{{0, "early", k1}}, false) // id 0
	fill(200)
	p.row(nil, []sym{{1, "mid", k2}}, false) // id 201
	fill(16400)
	p.row(nil, []sym{{2, "late", k3}}, false) // id 16602
	p.finish()
	if id := p.encs[0].dict.ID([]byte("late")); id < 1<<14 {
		t.Fatalf("setup: \"late\" has id %d, want one of three uvarint bytes", id)
	}
	for _, run := range [][]sym{
		{{0, "early", k1}, {1, "mid", k2}},
		{{1, "mid", k2}, {0, "early", k1}},
		{{0, "early", k1}, {1, "mid", k2}, {2, "late", k3}},
		{{1, "mid", k2}},
	} {
		for range 300 {
			p.row(nil, run, false)
		}
		// A column set before the run in the same row, and a cancelled row.
		p.row([]sym{{1, "mid", k2}}, run, false)
		p.row(nil, run, true)
		p.row(nil, run, false)
		p.finish()
	}
}

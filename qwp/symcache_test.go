package qwp

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// rotatingDict is a dictionary that starts a new generation in place, as
// the exporter's persistent dictionary does: same object, ids from 0 again.
type rotatingDict struct{ *MemDict }

func (d *rotatingDict) rotate() { d.MemDict = NewMemDict() }

// symEnv drives one SYMBOL column and plays the server: it keeps the
// connection's dictionary from the frames' delta sections and resolves every
// id through it, so a stale id reused from an earlier frame or generation
// shows up as a wrong or undefined symbol.
type symEnv struct {
	t      *testing.T
	dict   *rotatingDict
	e      *Encoder
	tb     *Table
	s, n   Col
	server []string // the server's dictionary
	got    []string // the symbols of the rows received, in order
}

func newSymEnv(t *testing.T, opts EncoderOptions) *symEnv {
	opts.DeltaSymbolDict = true
	v := &symEnv{t: t, dict: &rotatingDict{NewMemDict()}}
	v.e = NewEncoder(v.dict, opts)
	v.tb = mustTable(t, v.e, "t")
	v.s = mustCol(t, v.tb, "s", TypeSymbol)
	v.n = mustCol(t, v.tb, "n", TypeInt)
	return v
}

// row writes a row holding sym.
func (v *symEnv) row(sym string) {
	v.t.Helper()
	v.tb.SymbolString(v.s, sym)
	mustEndRow(v.t, v.tb)
}

// rowKeyed writes a row holding sym through SymbolStringKeyed.
func (v *symEnv) rowKeyed(sym string, key uint64) {
	v.t.Helper()
	v.tb.SymbolStringKeyed(v.s, sym, key)
	mustEndRow(v.t, v.tb)
}

// badRow writes a row holding sym that EndRow refuses (an INT set through
// a zero handle), after sym has been registered.
func (v *symEnv) badRow(sym string) {
	v.t.Helper()
	v.tb.Symbol(v.s, []byte(sym))
	v.tb.Int(Col{}, 1)
	if err := v.tb.EndRow(); err == nil {
		v.t.Fatal("EndRow accepted a row with a zero column handle")
	}
}

// finish finishes the frame and receives it.
func (v *symEnv) finish() {
	v.t.Helper()
	frame := v.e.Finish(nil)
	if len(frame) == 0 {
		return
	}
	m, err := decodeMessage(frame)
	if err != nil {
		v.t.Fatal(err)
	}
	if m.dictStart != len(v.server) {
		v.t.Fatalf("delta section starts at id %d; the server holds %d entries", m.dictStart, len(v.server))
	}
	for _, e := range m.dict {
		v.server = append(v.server, string(e))
	}
	for _, val := range m.tables[0].cols[0].vals {
		id := int(val.(uint64))
		if id >= len(v.server) {
			v.t.Fatalf("symbol id %d undefined: the server holds %d entries", id, len(v.server))
		}
		v.got = append(v.got, v.server[id])
	}
}

// newGeneration discards the frame in progress and continues with the
// dictionary cleared in place; the server starts a new dictionary too.
func (v *symEnv) newGeneration() {
	v.dict.rotate()
	v.e.Reset(v.dict)
	v.server = nil
}

// TestRepeatedSymbolCache checks the encoder's reuse of the previous row's
// SYMBOL id: it must never outlive the frame, a Reset or a dictionary
// generation, and a value registered by a refused row keeps its id.
func TestRepeatedSymbolCache(t *testing.T) {
	long := strings.Repeat("z", 40)
	ka, kb := NewSymbolKey(), NewSymbolKey()
	if ka == 0 || ka == kb {
		t.Fatalf("NewSymbolKey returned %d then %d; want distinct non-zero keys", ka, kb)
	}
	cases := []struct {
		name string
		opts EncoderOptions
		run  func(v *symEnv)
		want []string
	}{
		{"repeats within a frame", EncoderOptions{}, func(v *symEnv) {
			for _, s := range []string{"a", "a", "b", "b", "a", "", ""} {
				v.row(s)
			}
			v.finish()
		}, []string{"a", "a", "b", "b", "a", "", ""}},
		{"repeat in the next frame", EncoderOptions{}, func(v *symEnv) {
			v.row("a")
			v.finish()
			v.row("a")
			v.row("b")
			v.finish()
		}, []string{"a", "a", "b"}},
		{"repeat after a new generation of the same dictionary", EncoderOptions{}, func(v *symEnv) {
			v.row("x")
			v.row("a")
			v.finish()
			v.newGeneration()
			v.row("a")
			v.finish()
		}, []string{"x", "a", "a"}},
		{"repeat after Reset discarded a frame in progress", EncoderOptions{}, func(v *symEnv) {
			v.row("x")
			v.row("a")
			v.newGeneration()
			v.row("a")
			v.finish()
		}, []string{"a"}},
		{"repeat after a refused row registered the symbol", EncoderOptions{}, func(v *symEnv) {
			v.row("a")
			v.badRow("b")
			v.row("b")
			v.finish()
		}, []string{"a", "b"}},
		{"refused row, then a frame boundary", EncoderOptions{}, func(v *symEnv) {
			v.badRow("b")
			v.finish()
			v.row("b")
			v.finish()
		}, []string{"b"}},
		{"repeat after ErrFrameFull, in the next frame", EncoderOptions{MaxFrameBytes: 65}, func(v *symEnv) {
			v.row("first")
			v.tb.SymbolString(v.s, long)
			if err := v.tb.EndRow(); !errors.Is(err, ErrFrameFull) {
				v.t.Fatalf("EndRow = %v, want ErrFrameFull", err)
			}
			v.finish()
			v.row(long)
			v.finish()
		}, []string{"first", long}},
		{"keyed repeats", EncoderOptions{}, func(v *symEnv) {
			v.rowKeyed("a", ka)
			v.rowKeyed("a", ka)
			v.rowKeyed("b", kb)
			v.rowKeyed("a", ka)
			v.row("b")
			v.rowKeyed("a", ka)
			v.rowKeyed("a", 0)
			v.rowKeyed("b", 0)
			v.finish()
		}, []string{"a", "a", "b", "a", "b", "a", "a", "b"}},
		{"keyed repeat after a new generation", EncoderOptions{}, func(v *symEnv) {
			v.row("x")
			v.rowKeyed("a", ka)
			v.finish()
			v.newGeneration()
			v.rowKeyed("a", ka)
			v.finish()
		}, []string{"x", "a", "a"}},
		{"keyed repeat in the next frame", EncoderOptions{}, func(v *symEnv) {
			v.rowKeyed("a", ka)
			v.finish()
			v.row("x")
			v.rowKeyed("a", ka)
			v.finish()
		}, []string{"a", "x", "a"}},
		{"keyed repeat after a refused row", EncoderOptions{}, func(v *symEnv) {
			v.row("a")
			v.tb.SymbolStringKeyed(v.s, "b", kb)
			v.tb.Int(Col{}, 1)
			if err := v.tb.EndRow(); err == nil {
				v.t.Fatal("EndRow accepted a row with a zero column handle")
			}
			v.rowKeyed("b", kb)
			v.finish()
		}, []string{"a", "b"}},
		// The key is trusted: a caller that gives it to other bytes gets
		// the first value again. This pins why keys must never be reused.
		{"key names the value", EncoderOptions{}, func(v *symEnv) {
			v.rowKeyed("a", ka)
			v.rowKeyed("not read", ka)
			v.finish()
		}, []string{"a", "a"}},
		{"value replaced within a row", EncoderOptions{}, func(v *symEnv) {
			v.row("a")
			v.tb.SymbolString(v.s, "a")
			v.row("b")
			v.row("a")
			v.finish()
		}, []string{"a", "b", "a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := newSymEnv(t, c.opts)
			c.run(v)
			if !slices.Equal(v.got, c.want) {
				t.Fatalf("received %q, want %q", v.got, c.want)
			}
		})
	}
}

// TestRepeatedBadSymbolIsRefusedAgain: only accepted values are reused, so
// a bad value repeated row after row, keyed or not, is refused every time.
func TestRepeatedBadSymbolIsRefusedAgain(t *testing.T) {
	key := NewSymbolKey()
	for _, bad := range [][]byte{{0xff}, []byte(strings.Repeat("w", 80))} {
		v := newSymEnv(t, EncoderOptions{MaxFrameBytes: 64})
		for i := range 4 {
			if i%2 == 0 {
				v.tb.Symbol(v.s, bad)
			} else {
				v.tb.SymbolKeyed(v.s, bad, key)
			}
			if err := v.tb.EndRow(); err == nil || errors.Is(err, ErrFrameFull) {
				t.Fatalf("row %d with symbol %q: EndRow = %v, want the value refused", i, bad, err)
			}
		}
	}
}

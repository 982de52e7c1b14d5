package qwp

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustCol(t testing.TB, tb *Table, name string, typ ColumnType) Col {
	t.Helper()
	c, err := tb.Column(name, typ)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustTable(t testing.TB, e *Encoder, name string) *Table {
	t.Helper()
	tb, err := e.Table(name)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func mustEndRow(t testing.TB, tb *Table) {
	t.Helper()
	if err := tb.EndRow(); err != nil {
		t.Fatal(err)
	}
}

// TestGoldenExample1 is the specification's first worked example: table
// sensors, LONG id, DOUBLE value, designated TIMESTAMP, no flags.
func TestGoldenExample1(t *testing.T) {
	e := NewEncoder(nil, EncoderOptions{})
	tb := mustTable(t, e, "sensors")
	id := mustCol(t, tb, "id", TypeLong)
	val := mustCol(t, tb, "value", TypeDouble)
	ts := mustCol(t, tb, "", TypeTimestamp)
	for _, r := range []struct {
		id int64
		v  float64
		ts int64
	}{{1, 1.3, 10000000000}, {2, 2.2, 400000}} {
		tb.Long(id, r.id)
		tb.Double(val, r.v)
		tb.Timestamp(ts, r.ts)
		mustEndRow(t, tb)
	}
	want := readGolden(t, "example1.bin")
	if e.Size() != len(want) {
		t.Errorf("Size() = %d, want %d", e.Size(), len(want))
	}
	got := e.Finish(nil)
	if !bytes.Equal(got, want) {
		t.Fatalf("example 1:\n got %x\nwant %x", got, want)
	}
	if e.Size() != 0 || e.Rows() != 0 {
		t.Errorf("after Finish: Size %d Rows %d, want 0 0", e.Size(), e.Rows())
	}
}

// TestGoldenExample3 is the specification's Gorilla and delta dictionary
// example, with timestamps of our choosing (two values: no DoD stream).
func TestGoldenExample3(t *testing.T) {
	e := NewEncoder(NewMemDict(), EncoderOptions{Gorilla: true, DeltaSymbolDict: true})
	tb := mustTable(t, e, "sensors")
	host := mustCol(t, tb, "host", TypeSymbol)
	temp := mustCol(t, tb, "temp", TypeDouble)
	ts := mustCol(t, tb, "", TypeTimestamp)
	for _, r := range []struct {
		host string
		temp float64
		ts   int64
	}{{"server1", 91.6, 1700000000000000}, {"server2", 92.4, 1700000001000000}} {
		tb.SymbolString(host, r.host)
		tb.Double(temp, r.temp)
		tb.Timestamp(ts, r.ts)
		mustEndRow(t, tb)
	}
	want := readGolden(t, "example3.bin")
	if from, to := e.SymbolRange(); from != 0 || to != 2 {
		t.Errorf("SymbolRange() = %d, %d; want 0, 2", from, to)
	}
	size := e.Size()
	got := e.Finish(nil)
	if size != len(got) || !bytes.Equal(got, want) {
		t.Fatalf("example 3 (Size %d):\n got %x\nwant %x", size, got, want)
	}
}

// TestGoldenExample2Varchar checks the specification's nullable VARCHAR
// column bytes (rows foo, NULL, bar, baz) inside a whole frame.
func TestGoldenExample2Varchar(t *testing.T) {
	e := NewEncoder(nil, EncoderOptions{})
	tb := mustTable(t, e, "t")
	v := mustCol(t, tb, "v", TypeVarchar)
	for _, s := range []string{"foo", "", "bar", "baz"} {
		if s != "" {
			tb.VarcharString(v, s)
		}
		mustEndRow(t, tb)
	}
	col := readGolden(t, "example2_varchar_column.bin")
	block := cat([]byte{1, 't', 4, 1, 1, 'v', byte(TypeVarchar)}, col)
	want := appendHeader(nil, 0, 1, len(block))
	want = append(want, block...)
	if got := e.Finish(nil); !bytes.Equal(got, want) {
		t.Fatalf("example 2:\n got %x\nwant %x", got, want)
	}
}

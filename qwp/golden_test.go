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

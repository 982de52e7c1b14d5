package sfqueuetest

import (
	"io"
	"slices"
	"testing"

	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// Symbols returns the entries of dictionary generation gen of q in id
// order, read through q.OpenSymbols; a read error fails the test, so that
// no test compares against a generation cut short.
func Symbols(t testing.TB, q interface {
	OpenSymbols(gen uint32) (*sfqueue.SymbolReader, error)
}, gen uint32) [][]byte {
	t.Helper()
	r, err := q.OpenSymbols(gen)
	if err != nil {
		t.Fatalf("opening symbol generation %d: %v", gen, err)
	}
	defer r.Close()
	out := make([][]byte, 0, r.Len())
	for {
		e, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("reading symbol generation %d: %v", gen, err)
		}
		out = append(out, slices.Clone(e))
	}
}

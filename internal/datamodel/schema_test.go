package datamodel

import (
	"strings"
	"testing"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// TestGuessTable recognises every table of the data model from its columns,
// whole and as a frame that set only some of them, and gives the DDL the
// exporter itself runs for that table.
func TestGuessTable(t *testing.T) {
	tables := DefaultTables()
	promoted := []PromotedColumn{{Key: "host.name", Column: "host_name"}}
	for _, varchar := range []bool{false, true} {
		attrsType := qwp.TypeSymbol
		if varchar {
			attrsType = qwp.TypeVarchar
		}
		want, err := DDL(tables, varchar, promoted, "30d")
		if err != nil {
			t.Fatal(err)
		}
		for k := range numTables {
			tb := table{kind: k}
			all := map[string]qwp.ColumnType{"host_name": qwp.TypeSymbol}
			for _, c := range tb.columns(attrsType) {
				all[c.name] = c.typ
			}
			name := tables.of(k)
			g, err := GuessTable(name, all)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if g.Kind != kindLabel(k) || len(g.Promoted) != 1 || g.Promoted[0].Column != "host_name" {
				t.Errorf("%s: guessed %+v", name, g)
			}
			d, err := g.DDL("30d")
			if err != nil {
				t.Fatal(err)
			}
			if d != want[k] {
				t.Errorf("%s: DDL\n%+v\nwant the exporter's\n%+v", name, d, want[k])
			}
		}
	}
	// A frame sets only the columns its rows set: a gauge without
	// exemplars is still a gauge, not a sum (which would also hold it).
	partial := map[string]qwp.ColumnType{"": qwp.TypeTimestampNanos, "metric_name": qwp.TypeSymbol, "series_id": qwp.TypeLong, "value": qwp.TypeDouble}
	if g, err := GuessTable("g", partial); err != nil || g.Kind != "gauge" || len(g.Promoted) != 0 {
		t.Errorf("partial gauge: %+v, %v", g, err)
	}
	for _, bad := range []map[string]qwp.ColumnType{
		{"": qwp.TypeTimestampNanos, "value": qwp.TypeVarchar},                                   // a built-in column of the wrong type
		{"": qwp.TypeTimestampNanos, "mystery": qwp.TypeLong},                                    // a column no table has
		{"": qwp.TypeTimestampNanos, "record_id": qwp.TypeLong, "is_monotonic": qwp.TypeBoolean}, // two tables' columns
	} {
		if g, err := GuessTable("x", bad); err == nil || !strings.Contains(err.Error(), "table x: its columns") {
			t.Errorf("%v: guessed %+v, %v; want an error", bad, g, err)
		}
	}
}

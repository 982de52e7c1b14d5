package datamodel

import (
	"fmt"
	"slices"
	"strings"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// TableGuess is a table of the data model recognised from the columns that
// frames wrote to it, for a tool that must create the table without the
// exporter's configuration (cmd/questdb-slot salvage).
type TableGuess struct {
	Table string
	// Kind is the signal the table holds: gauge, sum, histogram,
	// exponential histogram, summary, logs or traces.
	Kind              string
	AttributesVarchar bool
	// Promoted are the SYMBOL columns that are no built-in column: the
	// attributes_as_symbols columns. Their attribute keys are unknown, only
	// the column names matter to the DDL.
	Promoted []PromotedColumn

	kind tableKind
}

// GuessTable recognises table name from cols, the column names and wire
// types its frames wrote (the designated timestamp under ""). A frame holds
// only the columns its rows set, so cols may lack some. The table is the
// kind whose built-in columns hold every column of cols with its type (a
// SYMBOL column that is no built-in column of any kind being a promoted
// attribute); of several such kinds, the one that accounts for the most
// columns, then the one with the fewest built-in columns.
func GuessTable(name string, cols map[string]qwp.ColumnType) (TableGuess, error) {
	best, bestHits, bestSize := tableKind(-1), -1, 0
	var bestPromoted []PromotedColumn
	attrsVarchar := cols[colAttributes] == qwp.TypeVarchar
	for k := range numTables {
		attrsType := qwp.TypeSymbol
		if attrsVarchar {
			attrsType = qwp.TypeVarchar
		}
		tb := table{kind: k}
		builtin := map[string]qwp.ColumnType{}
		for _, c := range tb.columns(attrsType) {
			builtin[c.name] = c.typ
		}
		hits, fits := 0, true
		var promoted []PromotedColumn
		for c, typ := range cols {
			want, ok := builtin[c]
			switch {
			case ok && want == typ:
				hits++
			case !ok && typ == qwp.TypeSymbol && !reservedColumns[strings.ToLower(c)]:
				promoted = append(promoted, PromotedColumn{Column: c})
			default:
				fits = false
			}
		}
		if !fits {
			continue
		}
		if hits > bestHits || hits == bestHits && len(builtin) < bestSize {
			best, bestHits, bestSize, bestPromoted = k, hits, len(builtin), promoted
		}
	}
	if best < 0 {
		var names []string
		for c, typ := range cols {
			names = append(names, fmt.Sprintf("%q %s", c, typ))
		}
		slices.Sort(names)
		return TableGuess{}, fmt.Errorf("table %s: its columns (%s) are not those of any table of the data model", name, strings.Join(names, ", "))
	}
	slices.SortFunc(bestPromoted, func(a, b PromotedColumn) int { return strings.Compare(a.Column, b.Column) })
	return TableGuess{Table: name, Kind: kindLabel(best), AttributesVarchar: attrsVarchar && best != tableLogs && best != tableTraces,
		Promoted: bestPromoted, kind: best}, nil
}

// DDL returns the statements that create the guessed table with its dedup
// keys and ttl.
func (g TableGuess) DDL(ttl string) (TableDDL, error) {
	attrsType := qwp.TypeSymbol
	if g.AttributesVarchar {
		attrsType = qwp.TypeVarchar
	}
	return tableDDL(g.Table, g.kind, attrsType, g.Promoted, ttl)
}

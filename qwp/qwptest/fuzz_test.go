package qwptest

import (
	"errors"
	"reflect"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// FuzzDecodeMessage checks that the decoder never panics, that refusals
// are PARSE_ERROR or DICTIONARY_GAP and leave the dictionary unchanged,
// that accepted messages have one value per row in every column, and that
// count-only mode reaches the same verdict. The committed corpus holds the
// spec's examples and encoder output of every type.
func FuzzDecodeMessage(f *testing.F) {
	f.Add(specExample1(f))
	f.Add(specExample3(f))
	f.Add(oneColumn(0, qwp.TypeVarchar, 4, fromHex(f, `01 02 00 00 00 00 03 00 00 00 06 00 00 00 09 00 00 00 66 6F 6F 62 61 72 62 61 7A`)))
	f.Fuzz(func(t *testing.T, frame []byte) {
		full := Decoder{}
		full.Dict.entries = []string{"pre0", "pre1"} // so that ids 0 and 1 resolve
		counting := Decoder{CountOnly: true}
		counting.Dict.entries = []string{"pre0", "pre1"}
		m, err := full.Decode(frame)
		_, cerr := counting.Decode(frame)
		if (err == nil) != (cerr == nil) {
			t.Fatalf("full decode error %v, count-only error %v", err, cerr)
		}
		if err != nil {
			var se *StatusError
			if !errors.As(err, &se) || (se.Status != qwp.StatusParseError && se.Status != qwp.StatusDictionaryGap) {
				t.Fatalf("unexpected refusal %v", err)
			}
			if full.Dict.Len() != 2 || full.Dict.Entry(0) != "pre0" || full.Dict.Entry(1) != "pre1" {
				t.Fatalf("refused message changed the dictionary: %v", full.Dict.entries)
			}
			return
		}
		for _, b := range m.Tables {
			for _, c := range b.Columns {
				if len(c.Values) != b.Rows {
					t.Fatalf("table %q column %q: %d values for %d rows", b.Table, c.Name, len(c.Values), b.Rows)
				}
			}
		}
	})
}

// FuzzExec checks that any query gets either success or a *SQLError whose
// position lies within the query, that a refused statement creates no
// table, and that a CREATE TABLE that succeeded is idempotent with IF NOT
// EXISTS. Seeds are the exporter's statements and a few edge cases.
func FuzzExec(f *testing.F) {
	for _, q := range []string{gaugeDDL, histogramDDL, logsDDL, metricsDDL,
		`CREATE TABLE "a""b" ('c' DOUBLE[][]) TIMESTAMP(c) PARTITION BY HOUR TTL 2w`,
		"ALTER TABLE m DEDUP ENABLE UPSERT KEYS(ts)", "SELECT * FROM tables();", "SELECT table_name, dedup FROM tables()"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		s := &Server{store: newStore(false, time.Now)}
		err := s.Exec(q)
		if err != nil {
			var se *SQLError
			if !errors.As(err, &se) {
				t.Fatalf("Exec(%q) = %T %v, want *SQLError", q, err, err)
			}
			if se.Position < 0 || se.Position > utf8.RuneCountInString(q) {
				t.Fatalf("Exec(%q): position %d outside the query", q, se.Position)
			}
			if len(s.store.tables) != 0 {
				t.Fatalf("Exec(%q) failed but left tables %v", q, s.TableNames())
			}
			return
		}
		if len(s.store.tables) == 1 {
			before := s.Snapshot()
			stmt, _, _ := parseStatement(q)
			if c, ok := stmt.(*createStmt); ok && c.ifNotExists {
				if err := s.Exec(q); err != nil {
					t.Fatalf("repeating %q: %v", q, err)
				}
				if after := s.Snapshot(); !reflect.DeepEqual(before, after) {
					t.Fatalf("repeating %q changed the table", q)
				}
			}
		}
	})
}

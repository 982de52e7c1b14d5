package datamodel

import (
	"strings"
	"testing"

	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
)

// TestDDLAcceptedByQuestDBParser runs every statement DDL emits, for each
// kind of configuration, against qwptest, which parses CREATE TABLE and
// ALTER TABLE as QuestDB's SqlParser does (clause order, keywords, quoting,
// TTL granularity, dedup key rules), and checks that each table ends up
// with its dedup keys and TTL. It also shows the stand-in refusing what a
// real QuestDB refuses: the TTL after WAL and a bare keyword as a name.
func TestDDLAcceptedByQuestDBParser(t *testing.T) {
	withTables := func(f func(*Tables)) Tables {
		n := DefaultTables()
		f(&n)
		return n
	}
	cases := []struct {
		name     string
		tables   Tables
		varchar  bool
		promoted []string
		ttl      string
		wantTTL  string
	}{
		{name: "default", tables: DefaultTables()},
		{name: "ttl hours", tables: DefaultTables(), ttl: "48h", wantTTL: "48 HOURS"},
		{name: "ttl days", tables: DefaultTables(), ttl: "30d", wantTTL: "30 DAYS"},
		{name: "ttl weeks", tables: DefaultTables(), ttl: "2w", wantTTL: "2 WEEKS"},
		{name: "ttl months", tables: DefaultTables(), ttl: "6M", wantTTL: "6 MONTHS"},
		{name: "ttl years", tables: DefaultTables(), ttl: "1y", wantTTL: "1 YEARS"},
		{name: "keyword attributes", tables: DefaultTables(), ttl: "7d", wantTTL: "7 DAYS",
			promoted: []string{"order", "limit", "from", "host.name", "End", "table"}},
		{name: "varchar attributes", tables: DefaultTables(), varchar: true},
		{name: "table names with a dot, a space, a keyword", ttl: "1d", wantTTL: "1 DAYS",
			tables: withTables(func(n *Tables) {
				n.Gauge, n.Sum, n.Logs = "team.gauge", "my sums", "order"
				n.Histogram, n.Summary = "from", "Limit"
			})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			promoted, err := PromotedColumns(tc.promoted)
			if err != nil {
				t.Fatal(err)
			}
			ddl, err := DDL(tc.tables, tc.varchar, promoted, tc.ttl)
			if err != nil {
				t.Fatal(err)
			}
			s, err := qwptest.NewServer(qwptest.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for _, d := range ddl {
				for _, stmt := range []string{d.Create, d.Create, d.EnableDedup, d.SetTTL} {
					if stmt == "" {
						continue
					}
					if err := s.Exec(stmt); err != nil {
						t.Fatalf("QuestDB's parser refuses\n  %s\n  %v", stmt, err)
					}
				}
				td, ok := s.Rows(d.Table)
				if !ok {
					t.Fatalf("table %q not created by %s", d.Table, d.Create)
				}
				if len(td.DedupKeys) != 2 || td.DedupKeys[0] != "timestamp" {
					t.Errorf("%s: dedup keys %v", d.Table, td.DedupKeys)
				}
				if td.TTL != tc.wantTTL {
					t.Errorf("%s: TTL %q, want %q", d.Table, td.TTL, tc.wantTTL)
				}
				for _, p := range promoted {
					if !hasColumn(td, p.Column) {
						t.Errorf("%s: no column %q", d.Table, p.Column)
					}
				}
			}
		})
	}
}

func hasColumn(td qwptest.TableData, name string) bool {
	for _, c := range td.Columns {
		if c.Name == name {
			return true
		}
	}
	return false
}

// TestDDLStandInRefusesWhatQuestDBRefuses keeps the stand-in honest about
// the two mistakes the exporter once made: TTL after WAL, and keywords
// left bare.
func TestDDLStandInRefusesWhatQuestDBRefuses(t *testing.T) {
	promoted, err := PromotedColumns([]string{"order"})
	if err != nil {
		t.Fatal(err)
	}
	ddl, err := DDL(DefaultTables(), false, promoted, "30d")
	if err != nil {
		t.Fatal(err)
	}
	s, err := qwptest.NewServer(qwptest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stmt := ddl[0].Create
	for _, bad := range []struct{ stmt, want string }{
		{strings.Replace(strings.Replace(stmt, " TTL 30 DAYS", "", 1), " WAL", " WAL TTL 30 DAYS", 1), "unexpected token [TTL]"},
		{strings.Replace(stmt, `"order" SYMBOL`, "order SYMBOL", 1), `SQL keywords have to be enclosed in double quotes, such as "order"`},
	} {
		if bad.stmt == stmt {
			t.Fatalf("the variant of %s is the statement itself", stmt)
		}
		if err := s.Exec(bad.stmt); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s\n  got %v, want %q", bad.stmt, err, bad.want)
		}
	}
}

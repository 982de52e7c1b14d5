package datamodel

import (
	"strings"
	"testing"

	"github.com/questdbexporter/questdbexporter/qwp"
)

func TestCreateTableSQLGauge(t *testing.T) {
	got, err := createTableSQL("otel_metrics_gauge", tableGauge, qwp.TypeSymbol,
		[]PromotedColumn{{Key: "host.name", Column: "host_name"}}, "30d")
	if err != nil {
		t.Fatal(err)
	}
	want := "CREATE TABLE IF NOT EXISTS otel_metrics_gauge (timestamp TIMESTAMP_NS, service_name SYMBOL, " +
		"metric_name SYMBOL, metric_unit SYMBOL, metric_description SYMBOL, scope_name SYMBOL, " +
		"scope_version SYMBOL, resource_attributes SYMBOL, scope_attributes SYMBOL, attributes SYMBOL, " +
		"series_id LONG, flags INT, value DOUBLE, exemplars VARCHAR, host_name SYMBOL) " +
		"TIMESTAMP(timestamp) PARTITION BY DAY WAL TTL 30 DAYS DEDUP UPSERT KEYS(timestamp, series_id)"
	if got != want {
		t.Fatalf("statement:\n got %s\nwant %s", got, want)
	}
}

func TestCreateTableSQLEveryTable(t *testing.T) {
	for k := range numTables {
		name := DefaultTables().of(k)
		stmt, err := createTableSQL(name, k, qwp.TypeVarchar, nil, "")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		key := "series_id"
		if k == tableLogs {
			key = "record_id"
		}
		if !strings.HasSuffix(stmt, "DEDUP UPSERT KEYS(timestamp, "+key+")") || strings.Contains(stmt, " TTL ") {
			t.Errorf("%s: %s", name, stmt)
		}
		// Every column the row encoder writes is declared, with its type.
		tb := table{kind: k}
		for _, c := range tb.columns(qwp.TypeVarchar) {
			if c.name == "" {
				continue
			}
			typ, _ := sqlType(c.typ)
			if !strings.Contains(stmt, " "+c.name+" "+typ) {
				t.Errorf("%s: column %s %s missing from %s", name, c.name, typ, stmt)
			}
		}
	}
}

func TestQuoteIdent(t *testing.T) {
	for in, want := range map[string]string{
		"otel_logs": "otel_logs", "team.logs": `"team.logs"`, "9lives": `"9lives"`,
		"a b": `"a b"`, `x"y`: `"x""y"`, "zé": `"zé"`,
	} {
		if got := quoteIdent(in); got != want {
			t.Errorf("quoteIdent(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestTTLClause(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"", "", ""}, {"30d", " TTL 30 DAYS", ""}, {"2w", " TTL 2 WEEKS", ""}, {"48h", " TTL 48 HOURS", ""},
		{"6M", " TTL 6 MONTHS", ""}, {"1y", " TTL 1 YEARS", ""},
		{"12h", "", "multiple of 24"}, {"0d", "", "positive"}, {"d", "", "positive"}, {"5x", "", "unit"},
		{"-3d", "", "positive"},
	} {
		got, err := ttlClause(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "ttl") {
				t.Errorf("ttlClause(%q) error = %v, want one naming ttl and %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ttlClause(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

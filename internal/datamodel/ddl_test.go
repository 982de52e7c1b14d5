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
		"TIMESTAMP(timestamp) PARTITION BY DAY TTL 30 DAYS WAL DEDUP UPSERT KEYS(timestamp, series_id)"
	if got != want {
		t.Fatalf("statement:\n got %s\nwant %s", got, want)
	}
}

func TestCreateTableSQLTraces(t *testing.T) {
	got, err := createTableSQL("otel_traces", tableTraces, qwp.TypeSymbol, nil, "7d")
	if err != nil {
		t.Fatal(err)
	}
	want := "CREATE TABLE IF NOT EXISTS otel_traces (timestamp TIMESTAMP_NS, end_timestamp TIMESTAMP_NS, " +
		"duration LONG, service_name SYMBOL, span_name SYMBOL, span_kind SYMBOL, trace_id VARCHAR, " +
		"span_id VARCHAR, parent_span_id VARCHAR, trace_state VARCHAR, status_code SYMBOL, " +
		"status_message VARCHAR, scope_name SYMBOL, scope_version SYMBOL, resource_attributes SYMBOL, " +
		"scope_attributes SYMBOL, attributes VARCHAR, events VARCHAR, links VARCHAR, flags INT, " +
		"dropped_attributes_count INT, dropped_events_count INT, dropped_links_count INT, span_key LONG) " +
		"TIMESTAMP(timestamp) PARTITION BY DAY TTL 7 DAYS WAL DEDUP UPSERT KEYS(timestamp, span_key)"
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
		key := map[tableKind]string{tableLogs: "record_id", tableTraces: "span_key"}[k]
		if key == "" {
			key = "series_id"
		}
		if !strings.HasSuffix(stmt, "DEDUP UPSERT KEYS(timestamp, "+key+")") || strings.Contains(stmt, " TTL ") {
			t.Errorf("%s: %s", name, stmt)
		}
		// Every column the row encoder writes is declared, with its type.
		tb := table{kind: k}
		seen := map[string]bool{}
		for _, c := range tb.columns(qwp.TypeVarchar) {
			if seen[c.name] {
				t.Errorf("%s: column %q declared twice", name, c.name)
			}
			seen[c.name] = true
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
		"order": `"order"`, "Limit": `"Limit"`, "FROM": `"FROM"`, "end": `"end"`, "ends": "ends",
	} {
		if got := quoteIdent(in); got != want {
			t.Errorf("quoteIdent(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestTTLValue(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"", "", ""}, {"30d", "30 DAYS", ""}, {"2w", "2 WEEKS", ""}, {"48h", "48 HOURS", ""},
		{"6M", "6 MONTHS", ""}, {"1y", "1 YEARS", ""},
		{"12h", "", "multiple of 24"}, {"0d", "", "positive"}, {"d", "", "positive"}, {"5x", "", "unit"},
		{"-3d", "", "positive"},
	} {
		got, err := ttlValue(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "ttl") {
				t.Errorf("ttlValue(%q) error = %v, want one naming ttl and %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ttlValue(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

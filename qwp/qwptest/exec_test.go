package qwptest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// Statements in the form the exporter writes them (qwptest does not import
// the exporter), in QuestDB's clause order.
const (
	gaugeDDL = "CREATE TABLE IF NOT EXISTS otel_metrics_gauge (timestamp TIMESTAMP_NS, service_name SYMBOL, " +
		"metric_name SYMBOL, metric_unit SYMBOL, metric_description SYMBOL, scope_name SYMBOL, " +
		"scope_version SYMBOL, resource_attributes SYMBOL, scope_attributes SYMBOL, attributes SYMBOL, " +
		"series_id LONG, flags INT, value DOUBLE, exemplars VARCHAR, host_name SYMBOL) " +
		"TIMESTAMP(timestamp) PARTITION BY DAY TTL 30 DAYS WAL DEDUP UPSERT KEYS(timestamp, series_id)"
	histogramDDL = "CREATE TABLE IF NOT EXISTS otel_metrics_histogram (timestamp TIMESTAMP_NS, start_timestamp TIMESTAMP_NS, " +
		"service_name SYMBOL, metric_name SYMBOL, metric_unit SYMBOL, metric_description SYMBOL, scope_name SYMBOL, " +
		"scope_version SYMBOL, resource_attributes SYMBOL, scope_attributes SYMBOL, attributes SYMBOL, series_id LONG, " +
		"flags INT, count LONG, sum DOUBLE, min DOUBLE, max DOUBLE, bucket_counts DOUBLE[], explicit_bounds DOUBLE[], " +
		"temporality SYMBOL, exemplars VARCHAR) TIMESTAMP(timestamp) PARTITION BY DAY WAL DEDUP UPSERT KEYS(timestamp, series_id)"
	logsDDL = "CREATE TABLE IF NOT EXISTS \"team.logs\" (timestamp TIMESTAMP_NS, observed_timestamp TIMESTAMP_NS, " +
		"service_name SYMBOL, severity_text SYMBOL, severity_number INT, body VARCHAR, trace_id VARCHAR, span_id VARCHAR, " +
		"trace_flags INT, event_name SYMBOL, scope_name SYMBOL, scope_version SYMBOL, resource_attributes SYMBOL, " +
		"scope_attributes SYMBOL, attributes VARCHAR, record_id LONG, host_name SYMBOL) " +
		"TIMESTAMP(timestamp) PARTITION BY DAY TTL 2 WEEKS WAL DEDUP UPSERT KEYS(timestamp, record_id)"
)

// execGet runs GET /exec with the query and header and returns the status
// and body.
func execGet(t *testing.T, s *Server, query string, h http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+s.Addr()+"/exec?query="+url.QueryEscape(query), nil)
	require.NoError(t, err)
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// mustExec runs a statement that must succeed with {"ddl":"OK"}.
func mustExec(t *testing.T, s *Server, query string) {
	t.Helper()
	code, body := execGet(t, s, query, nil)
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `{"ddl":"OK"}`, body)
}

func TestExecCreatesExporterTables(t *testing.T) {
	cases := []struct {
		stmt, table string
		cols        int
		keys        []string
		ttl         string
		types       map[string]qwp.ColumnType
	}{
		{gaugeDDL, "otel_metrics_gauge", 15, []string{"timestamp", "series_id"}, "30 DAYS", map[string]qwp.ColumnType{
			"timestamp": qwp.TypeTimestampNanos, "metric_name": qwp.TypeSymbol, "series_id": qwp.TypeLong,
			"flags": qwp.TypeInt, "value": qwp.TypeDouble, "exemplars": qwp.TypeVarchar, "host_name": qwp.TypeSymbol}},
		{histogramDDL, "otel_metrics_histogram", 21, []string{"timestamp", "series_id"}, "", map[string]qwp.ColumnType{
			"start_timestamp": qwp.TypeTimestampNanos, "count": qwp.TypeLong, "bucket_counts": qwp.TypeDoubleArray}},
		{logsDDL, "team.logs", 17, []string{"timestamp", "record_id"}, "2 WEEKS", map[string]qwp.ColumnType{
			"severity_number": qwp.TypeInt, "body": qwp.TypeVarchar, "record_id": qwp.TypeLong}},
	}
	s := newServer(t, Options{})
	for _, tc := range cases {
		t.Run(tc.table, func(t *testing.T) {
			mustExec(t, s, tc.stmt)
			td, ok := s.Rows(tc.table)
			require.True(t, ok)
			assert.Equal(t, tc.table, td.Name)
			assert.Len(t, td.Columns, tc.cols)
			assert.Equal(t, ColumnInfo{Name: "timestamp", Type: qwp.TypeTimestampNanos}, td.Columns[0])
			for _, c := range td.Columns {
				if want, ok := tc.types[c.Name]; ok {
					assert.Equal(t, want, c.Type, c.Name)
				}
			}
			assert.Equal(t, tc.keys, td.DedupKeys)
			assert.Equal(t, tc.ttl, td.TTL)
			assert.Zero(t, td.RowCount)

			// IF NOT EXISTS on an existing table: OK, and the table is left
			// alone even though the statement declares another column
			require.NoError(t, s.Exec(strings.Replace(tc.stmt, "(timestamp TIMESTAMP_NS, ", "(timestamp TIMESTAMP_NS, extra LONG, ", 1)))
			again, _ := s.Rows(tc.table)
			assert.Equal(t, td, again)
		})
	}
	assert.Equal(t, map[string]int64{"otel_metrics_gauge": 0, "otel_metrics_histogram": 0, "team.logs": 0}, s.Tables())
	rec := adminDo(t, s.AdminHandler(), http.MethodGet, "/tables/team.logs")
	assert.Contains(t, rec.Body.String(), `"dedup_keys":["timestamp","record_id"],"ttl":"2 WEEKS"`)
	rec = adminDo(t, s.AdminHandler(), http.MethodGet, "/tables/otel_metrics_histogram")
	assert.NotContains(t, rec.Body.String(), `"ttl"`, "no TTL, no key")
}

// keyedRow is one row of keyedRows; key nil is a NULL.
type keyedRow struct {
	ts    int64
	key   any
	value float64
}

// keyedRows is a message of one block: the designated timestamp
// (TIMESTAMP_NANOS, empty name), series_id LONG and value DOUBLE.
func keyedRows(flags byte, table string, rows ...keyedRow) []byte {
	w := blockHeader(table, len(rows), "", qwp.TypeTimestampNanos, "series_id", qwp.TypeLong, "value", qwp.TypeDouble).u8(0)
	for _, r := range rows {
		w = w.i64(r.ts)
	}
	bitmap := make([]byte, (len(rows)+7)/8)
	nulls := false
	for i, r := range rows {
		if r.key == nil {
			bitmap[i/8] |= 1 << (i % 8)
			nulls = true
		}
	}
	if nulls {
		w = w.u8(1).u8(bitmap...)
	} else {
		w = w.u8(0)
	}
	for _, r := range rows {
		if r.key != nil {
			w = w.i64(r.key.(int64))
		}
	}
	w = w.u8(0)
	for _, r := range rows {
		w = w.f64(r.value)
	}
	return message(flags, 1, w)
}

const metricsDDL = "CREATE TABLE m (ts TIMESTAMP_NS, series_id LONG, value DOUBLE) " +
	"TIMESTAMP(ts) PARTITION BY DAY WAL DEDUP UPSERT KEYS(ts, series_id)"

// values reads table's rows as (ts, series_id, value) in storage order.
func values(t *testing.T, s *Server, table string) [][]any {
	t.Helper()
	td, ok := s.Rows(table)
	require.True(t, ok)
	require.Equal(t, int64(len(td.Rows)), td.RowCount)
	return td.Rows
}

func TestDedupUpsert(t *testing.T) {
	s := newServer(t, Options{})
	mustExec(t, s, metricsDDL)
	c := dial(t, s, nil)

	// within one commit: the later row of a key replaces the earlier one;
	// a NULL key is a key like any other
	c.send(keyedRows(0, "m",
		keyedRow{100, int64(1), 1}, keyedRow{100, int64(2), 2}, keyedRow{100, int64(1), 3},
		keyedRow{200, int64(1), 4}, keyedRow{100, nil, 5}, keyedRow{100, nil, 6}))
	c.ackedThrough(0)
	assert.Equal(t, [][]any{{int64(100), int64(1), 3.0}, {int64(100), int64(2), 2.0}, {int64(200), int64(1), 4.0}, {int64(100), nil, 6.0}},
		values(t, s, "m"))

	// across commits: an update in place, a new row appended
	c.send(keyedRows(0, "m", keyedRow{100, int64(2), 20}, keyedRow{300, int64(2), 30}))
	c.ackedThrough(1)
	assert.Equal(t, [][]any{{int64(100), int64(1), 3.0}, {int64(100), int64(2), 20.0}, {int64(200), int64(1), 4.0}, {int64(100), nil, 6.0}, {int64(300), int64(2), 30.0}},
		values(t, s, "m"))

	// a deferred group commits its frames as one transaction
	c.send(keyedRows(qwp.FlagDeferCommit, "m", keyedRow{400, int64(1), 40}), keyedRows(0, "m", keyedRow{400, int64(1), 41}))
	c.ackedThrough(3)
	assert.Equal(t, int64(6), s.RowCount("m"))
	assert.Equal(t, []any{int64(400), int64(1), 41.0}, values(t, s, "m")[5])

	// every commit takes a seqTxn, whether it adds rows or not
	td, _ := s.Rows("m")
	assert.Equal(t, int64(3), td.SeqTxn)
}

func TestDedupMakesReplayIdempotent(t *testing.T) {
	cases := []struct {
		name  string
		ddl   string // "" leaves the table to QWP's auto-create
		after int64  // rows after the frame was written twice
	}{
		{"created with dedup keys", metricsDDL, 3},
		{"auto-created: every duplicate kept", "", 6},
		{"created without dedup keys", "CREATE TABLE m (ts TIMESTAMP_NS, series_id LONG, value DOUBLE) TIMESTAMP(ts) PARTITION BY DAY WAL", 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, Options{})
			if tc.ddl != "" {
				mustExec(t, s, tc.ddl)
			}
			f := keyedRows(0, "m", keyedRow{1, int64(7), 1}, keyedRow{2, int64(7), 2}, keyedRow{2, int64(8), 3})
			// the first connection's OK is lost with it; the replay goes
			// over a second connection, as after a reconnect
			s.DropAfter(1, false)
			c := dial(t, s, nil)
			c.send(f)
			c.expect("gone")
			require.Equal(t, int64(3), s.RowCount("m"), "the frame was committed before the drop")
			c2 := dial(t, s, nil)
			c2.send(f)
			c2.ackedThrough(0)
			assert.Equal(t, tc.after, s.RowCount("m"))
			assert.Len(t, values(t, s, "m"), int(tc.after))
		})
	}
}

func TestDedupTypeChecksOnCreatedTable(t *testing.T) {
	s := newServer(t, Options{})
	mustExec(t, s, "CREATE TABLE m (ts TIMESTAMP_NS, series_id LONG, value VARCHAR) TIMESTAMP(ts) PARTITION BY DAY")
	c := dial(t, s, nil)
	c.send(keyedRows(0, "m", keyedRow{1, int64(1), 1}))
	r := c.resp()
	assert.Equal(t, qwp.StatusSchemaMismatch, r.Status)
	assert.Contains(t, r.Message, `column "value": cannot write DOUBLE into a VARCHAR column`)

	// a non-WAL table refuses QWP writes, as QuestDB does
	mustExec(t, s, "CREATE TABLE nowal (ts TIMESTAMP, v LONG) TIMESTAMP(ts) PARTITION BY DAY BYPASS WAL")
	c2 := dial(t, s, nil)
	c2.send(longRows(0, "NOWAL", 1))
	r = c2.resp()
	assert.Equal(t, qwp.StatusSchemaMismatch, r.Status)
	assert.Contains(t, r.Message, "not a WAL table")
	assert.Zero(t, s.RowCount("nowal"))
}

func TestDedupCreatedTableTakesNewColumnsAndArrays(t *testing.T) {
	s := newServer(t, Options{})
	mustExec(t, s, `create table if not exists "My Table" ('when' TIMESTAMP, "my col" DOUBLE[][]) timestamp("WHEN") partition by hour`)
	td, ok := s.Rows("my table")
	require.True(t, ok, "names are case-insensitive")
	assert.Equal(t, []ColumnInfo{{"when", qwp.TypeTimestamp}, {"my col", qwp.TypeDoubleArray}}, td.Columns)
	assert.Nil(t, td.DedupKeys)
	code, body := execGet(t, s, "SELECT * FROM tables()", nil)
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"query":"SELECT * FROM tables()","columns":[{"name":"table_name","type":"STRING"},
		{"name":"designatedTimestamp","type":"STRING"},{"name":"partitionBy","type":"STRING"},
		{"name":"walEnabled","type":"BOOLEAN"},{"name":"dedup","type":"BOOLEAN"}],"timestamp":-1,
		"dataset":[["My Table","when","HOUR",true,false]],"count":1}`, body)

	// the empty-name timestamp maps onto the designated "when"; a new
	// column is added as on an auto-created table
	c := dial(t, s, nil)
	c.send(message(0, 1, append(blockHeader("MY TABLE", 1, "", qwp.TypeTimestamp, "extra", qwp.TypeLong), wire{}.u8(0).i64(5).u8(0).i64(9)...)))
	c.ackedThrough(0)
	td, _ = s.Rows("my table")
	assert.Equal(t, []ColumnInfo{{"when", qwp.TypeTimestamp}, {"my col", qwp.TypeDoubleArray}, {"extra", qwp.TypeLong}}, td.Columns)
	assert.Equal(t, [][]any{{int64(5), nil, int64(9)}}, td.Rows)

	// DOUBLE[][] fixed the column's dimensions: a 1-dimensional array is refused
	c.send(message(0, 1, append(blockHeader("my table", 1, "my col", qwp.TypeDoubleArray), wire{}.u8(0).u8(1).u32(1).f64(1.5)...)))
	r := c.resp()
	assert.Equal(t, qwp.StatusSchemaMismatch, r.Status)
	assert.Contains(t, r.Message, "1-dimensional array into a 2-dimensional column")
}

func TestExecErrors(t *testing.T) {
	const ts = "CREATE TABLE t (ts TIMESTAMP) TIMESTAMP(ts) "
	cases := []struct {
		query string
		err   string
		pos   int
	}{
		{"", "empty query", 0},
		{"DROP TABLE x", "unsupported statement", 0},
		{"CREATE TABLE t (a INT", "',' or ')' expected", 21},
		{"CREATE TABLE t (a FOO)", "unsupported column type: FOO", 18},
		{"CREATE TABLE t (a INT,)", "missing column definition", 22},
		{`CREATE TABLE "zé" (a FOO)`, "unsupported column type", 21}, // in characters, not bytes
		{`CREATE TABLE "t (a INT)`, "unclosed quoted name", 13},
		{"CREATE TABLE t (a INT) TIMESTAMP(a) PARTITION BY DAY", "TIMESTAMP column expected [actual=INT, columnName=a]", 33},
		{"CREATE TABLE t (ts TIMESTAMP) TIMESTAMP(x)", "invalid designated timestamp column [name=x]", 40},
		{"CREATE TABLE t (ts TIMESTAMP) TIMESTAMP(ts, ts)", "')' expected", 42},
		{"CREATE TABLE t (a INT, A LONG)", "duplicate column [name=A]", 23},
		{"CREATE TABLE t (a INT) PARTITION BY DAY", "only on tables with designated timestamps", 36},
		{ts + "PARTITION BY CENTURY", "'NONE', 'HOUR', 'DAY', 'WEEK', 'MONTH' or 'YEAR' expected", 57},
		{ts + "PARTITION BY DAY TTL 12 HOURS", "TTL value must be an integer multiple of partition size", 64},
		{ts + "PARTITION BY MONTH TTL 8 WEEKS", "multiple of partition size", 66},
		{ts + "PARTITION BY YEAR TTL 6 MONTHS", "multiple of partition size", 65},
		{ts + "PARTITION BY NONE TTL 1 DAY", "cannot set TTL on a non-partitioned table", 65},
		{ts + "PARTITION BY DAY TTL 3 FORTNIGHTS", "invalid unit, expected 'HOUR(S)', 'DAY(S)', 'WEEK(S)', 'MONTH(S)' or 'YEAR(S)', but was 'FORTNIGHTS'", 67},
		{ts + "PARTITION BY DAY TTL 3", "missing unit", 66},
		{ts + "PARTITION BY DAY TTL 3x", "invalid time unit, expecting 'H', 'D', 'W', 'M' or 'Y', but was 'x'", 66},
		{ts + "PARTITION BY DAY TTL x DAYS", "invalid syntax, should be <number> <unit> but was x", 65},
		{ts + "PARTITION BY NONE WAL", "WAL Write Mode can only be used on partitioned tables", 62},
		{ts + "PARTITION BY DAY BYPASS", "should be BYPASS WAL", 67},
		// the exporter's old clause order: QuestDB reads no TTL after WAL
		{ts + "PARTITION BY DAY WAL TTL 30 DAYS DEDUP UPSERT KEYS(ts)", "unexpected token [TTL]", 65},
		{ts + "WAL", "unexpected token [WAL]", 44},
		{ts + "TTL 1 DAY", "unexpected token [TTL]", 44},
		{ts + "DEDUP UPSERT KEYS(ts) PARTITION BY DAY", "deduplication is possible only on WAL tables", 49},
		{ts + "PARTITION BY DAY DEDUP UPSERT KEYS(ts) WAL", "unexpected token [WAL]", 83},
		{ts + "PARTITION BY DAY IN VOLUME v", "IN clauses are not supported by this test server", 61},
		{ts + "PARTITION BY DAY BYPASS WAL DEDUP UPSERT KEYS(ts)", "deduplication is possible only on WAL tables", 77},
		{"CREATE TABLE t (ts TIMESTAMP, k LONG) TIMESTAMP(ts) PARTITION BY DAY DEDUP UPSERT KEYS(k)", "must include dedicated timestamp", 87},
		{ts + "PARTITION BY DAY DEDUP UPSERT KEYS(ts, nope)", "deduplicate key column not found [column=nope]", 83},
		{ts + "PARTITION BY DAY DEDUP UPSERT KEYS(ts, TS)", "duplicate dedup column [column=TS]", 83},
		{"CREATE TABLE t (ts TIMESTAMP, a DOUBLE[]) TIMESTAMP(ts) PARTITION BY DAY DEDUP UPSERT KEYS(ts, a)", "dedup key columns cannot include ARRAY [column=a, type=DOUBLE[]]", 95},
		{ts + "PARTITION BY DAY DEDUP KEYS(ts)", "expected 'upsert'", 67},
		{ts + "PARTITION BY DAY DEDUP UPSERT ts", "expected 'keys'", 74},
		{ts + "PARTITION BY DAY DEDUP UPSERT KEYS ts", "column list expected", 79},
		{"CREATE TABLE t (a LONG[])", "unsupported column type: LONG[]", 18},
		{"CREATE TABLE t (a DOUBLE[)", "']' expected", 25},
		{"CREATE TABLE t (a INT) garbage", "unexpected token [garbage]", 23},
		{"CREATE TABLE t (a INT); x", "unexpected token [x]", 24},
		{"CREATE TABLE t (a INT) @", "unexpected character '@'", 23},
		// SQL keywords as bare names: QuestDB wants them double-quoted
		{"CREATE TABLE t (order SYMBOL)", `table and column names that are SQL keywords have to be enclosed in double quotes, such as "order"`, 16},
		{"CREATE TABLE t (ts TIMESTAMP, Limit SYMBOL)", `such as "Limit"`, 30},
		{"CREATE TABLE from (a INT)", `such as "from"`, 13},
		{"CREATE TABLE IF NOT EXISTS end (a INT)", `such as "end"`, 27},
		{"CREATE TABLE t (ts TIMESTAMP) TIMESTAMP(table)", `such as "table"`, 40},
		// a '.' or a space in a name needs quotes
		{"CREATE TABLE team.logs (a INT)", "table names containing '.' have to be enclosed in double quotes", 13},
		{"CREATE TABLE my table (a INT)", "'(' expected", 16},
		{"CREATE TABLE t (host.name SYMBOL)", "new column name contains invalid characters", 16},
		{`CREATE TABLE "a""b" (x INT)`, `table name "a\"b" contains the forbidden character '"'`, 13},
		{`CREATE TABLE t ("x-y" INT)`, "new column name contains invalid characters", 16},
		{"CREATE TABLE IF EXISTS t (a INT)", "'not' expected", 16},
		{"CREATE TABLE (a INT)", "table name expected", 13},
		{"CREATE INDEX", "'table' expected", 7},
		{"SELECT nope FROM tables()", "Invalid column: nope", 7},
		{"SELECT table_name FROM otel_logs", "tables() only", 23},
		{"SELECT table_name FROM tables(", "')' expected", 30},
		{"ALTER TABLE nope DEDUP DISABLE", "table does not exist [table=nope]", 12},
		{"ALTER TABLE t DEDUP ENABLE KEYS(ts)", "expected 'upsert'", 27},
		{"ALTER TABLE select DEDUP DISABLE", `such as "select"`, 12},
		{"ALTER TABLE t SET PARAM x", "'ttl' expected", 18},
	}
	s := newServer(t, Options{})
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			code, body := execGet(t, s, tc.query, nil)
			require.Equal(t, http.StatusBadRequest, code, body)
			var r struct {
				Query    string
				Error    string
				Position *int
			}
			require.NoError(t, json.Unmarshal([]byte(body), &r), body)
			assert.Equal(t, tc.query, r.Query)
			assert.Contains(t, r.Error, tc.err)
			require.NotNil(t, r.Position)
			assert.Equal(t, tc.pos, *r.Position, r.Error)
			var se *SQLError
			require.ErrorAs(t, s.Exec(tc.query), &se, "Exec refuses it too")
			assert.Equal(t, tc.pos, se.Position)
		})
	}
	assert.Empty(t, s.Tables(), "no failed statement leaves a table behind")
}

func TestExecExistingTable(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s, nil)
	c.send(longRows(0, "m", 2))
	c.ackedThrough(0)
	// the auto-created table exists: without IF NOT EXISTS it is an error,
	// with it the table keeps its schema and rows
	err := s.Exec(metricsDDL)
	var se *SQLError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, SQLError{Msg: "table already exists", Position: 13}, *se)
	assert.EqualError(t, err, "table already exists (at 13)")
	require.NoError(t, s.Exec(strings.Replace(metricsDDL, "TABLE m", "TABLE IF NOT EXISTS M", 1)))
	td, _ := s.Rows("m")
	assert.Equal(t, []ColumnInfo{{"v", qwp.TypeLong}, {"timestamp", qwp.TypeTimestamp}}, td.Columns)
	assert.Nil(t, td.DedupKeys)
	assert.Equal(t, int64(2), td.RowCount)
}

func TestExecSelectTablesAndAlterDedup(t *testing.T) {
	s := newServer(t, Options{})
	mustExec(t, s, metricsDDL)
	c := dial(t, s, nil)
	row := keyedRow{1, int64(1), 1}
	c.send(keyedRows(0, "auto", row, row))
	c.ackedThrough(0)
	const q = "SELECT table_name, dedup FROM tables();"
	code, body := execGet(t, s, q, nil)
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"query":"SELECT table_name, dedup FROM tables();",
		"columns":[{"name":"table_name","type":"STRING"},{"name":"dedup","type":"BOOLEAN"}],
		"timestamp":-1,"dataset":[["auto",false],["m",true]],"count":2}`, body)

	// the fix the exporter suggests for a table without dedup keys works;
	// the duplicates already there stay, later replays replace the last one
	mustExec(t, s, "ALTER TABLE auto DEDUP ENABLE UPSERT KEYS(timestamp, series_id)")
	_, body = execGet(t, s, q, nil)
	assert.Contains(t, body, `"dataset":[["auto",true],["m",true]]`)
	c.send(keyedRows(0, "auto", keyedRow{1, int64(1), 9}))
	c.ackedThrough(1)
	assert.Equal(t, [][]any{{int64(1), int64(1), 1.0}, {int64(1), int64(1), 9.0}}, values(t, s, "auto"))
	td, _ := s.Rows("auto")
	assert.Equal(t, []string{"timestamp", "series_id"}, td.DedupKeys)

	mustExec(t, s, `ALTER TABLE "m" DEDUP DISABLE`)
	c.send(keyedRows(0, "m", row), keyedRows(0, "m", row))
	c.ackedThrough(3)
	assert.Equal(t, int64(2), s.RowCount("m"), "without dedup keys a replay duplicates")
	_, body = execGet(t, s, "select DEDUP from tables()", nil)
	assert.Contains(t, body, `"dataset":[[true],[false]]`)
}

func TestExecAuthMethodAndOutage(t *testing.T) {
	basic := http.Header{"Authorization": {"Basic YWRtaW46cXVlc3Q="}} // admin:quest
	bearer := http.Header{"Authorization": {"Bearer tok"}}
	cases := []struct {
		name string
		opts Options
		h    http.Header
		code int
	}{
		{"open server", Options{}, nil, http.StatusOK},
		{"basic ok", Options{Username: "admin", Password: "quest"}, basic, http.StatusOK},
		{"basic missing", Options{Username: "admin", Password: "quest"}, nil, http.StatusUnauthorized},
		{"basic wrong", Options{Username: "admin", Password: "other"}, basic, http.StatusUnauthorized},
		{"token ok", Options{Token: "tok"}, bearer, http.StatusOK},
		{"token for basic server", Options{Username: "admin", Password: "quest"}, bearer, http.StatusUnauthorized},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, tc.opts)
			code, body := execGet(t, s, metricsDDL, tc.h)
			assert.Equal(t, tc.code, code, body)
			_, created := s.Rows("m")
			assert.Equal(t, tc.code == http.StatusOK, created)
		})
	}

	s := newServer(t, Options{})
	resp, err := http.Post("http://"+s.Addr()+"/exec?query="+url.QueryEscape(metricsDDL), "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Equal(t, "GET", resp.Header.Get("Allow"))

	s.Outage(time.Minute)
	code, _ := execGet(t, s, metricsDDL, nil)
	assert.Equal(t, http.StatusServiceUnavailable, code, "QuestDB is down: /exec too")
	s.Outage(0)
	mustExec(t, s, metricsDDL)
}

func TestDedupCountOnlyKeepsEveryRow(t *testing.T) {
	s := newServer(t, Options{CountOnly: true})
	mustExec(t, s, metricsDDL)
	c := dial(t, s, nil)
	row := keyedRow{1, int64(1), 1}
	c.send(keyedRows(0, "m", row), keyedRows(0, "m", row))
	c.ackedThrough(1)
	assert.Equal(t, int64(2), s.RowCount("m"), "count-only keeps no values, so it cannot apply dedup")
}

func TestExecCloseLeavesNoGoroutine(t *testing.T) {
	s, err := NewServer(Options{})
	require.NoError(t, err)
	tr := &http.Transport{}
	client := &http.Client{Transport: tr}
	resp, err := client.Get("http://" + s.Addr() + "/exec?query=" + url.QueryEscape(metricsDDL))
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	resp.Body.Close() // the keep-alive connection stays open
	require.NoError(t, s.Close())
	tr.CloseIdleConnections()
	goleak.VerifyNone(t)
}

func TestExecTTLForms(t *testing.T) {
	cases := []struct {
		partition, ttl, want string
	}{
		{"DAY", "TTL 2w", "2 WEEKS"},
		{"DAY", "ttl 1 day", "1 DAYS"},
		{"DAY", "TTL 48 HOURS", "48 HOURS"},
		{"DAY", "TTL 6 M", "6 MONTHS"},
		{"DAY", "TTL 0 DAYS", ""}, // 0 is no TTL
		{"HOUR", "TTL 5h", "5 HOURS"},
		{"WEEK", "TTL 14 DAYS", "14 DAYS"},
		{"MONTH", "TTL 1y", "1 YEARS"},
		{"YEAR", "TTL 2 YEARS", "2 YEARS"},
		{"WEEK", "TTL 1 MONTH", "1 MONTHS"},
		{"DAY", "TTL 30 DAYS WAL", "30 DAYS"},
		{"DAY", "TTL 3d BYPASS WAL", "3 DAYS"},
	}
	for _, tc := range cases {
		t.Run(tc.partition+" "+tc.ttl, func(t *testing.T) {
			s := newServer(t, Options{})
			mustExec(t, s, "CREATE TABLE t (ts TIMESTAMP) TIMESTAMP(ts) PARTITION BY "+tc.partition+" "+tc.ttl)
			td, _ := s.Rows("t")
			assert.Equal(t, tc.want, td.TTL)
		})
	}
	s := newServer(t, Options{})
	for _, refused := range []string{"YEAR TTL 6 MONTHS", "YEAR TTL 48 HOURS", "WEEK TTL 10 DAYS", "MONTH TTL 30 DAYS"} {
		err := s.Exec("CREATE TABLE t (ts TIMESTAMP) TIMESTAMP(ts) PARTITION BY " + refused)
		assert.ErrorContains(t, err, "multiple of partition size", refused)
	}
}

func TestExecQuotedKeywordsAndNames(t *testing.T) {
	s := newServer(t, Options{})
	mustExec(t, s, `CREATE TABLE IF NOT EXISTS "order" (timestamp TIMESTAMP_NS, "limit" SYMBOL, "From" SYMBOL, "end" LONG) `+
		`TIMESTAMP(timestamp) PARTITION BY DAY TTL 1 YEARS WAL DEDUP UPSERT KEYS(timestamp, "end")`)
	mustExec(t, s, `CREATE TABLE "team.logs" (ts TIMESTAMP) TIMESTAMP(ts) PARTITION BY DAY`)
	mustExec(t, s, `CREATE TABLE "my logs" (ts TIMESTAMP) TIMESTAMP(ts) PARTITION BY DAY`)
	td, ok := s.Rows("order")
	require.True(t, ok)
	assert.Equal(t, []ColumnInfo{{"timestamp", qwp.TypeTimestampNanos}, {"limit", qwp.TypeSymbol}, {"From", qwp.TypeSymbol}, {"end", qwp.TypeLong}}, td.Columns)
	assert.Equal(t, []string{"timestamp", "end"}, td.DedupKeys)
	assert.Equal(t, "1 YEARS", td.TTL)
	assert.ElementsMatch(t, []string{"order", "team.logs", "my logs"}, s.TableNames())
	mustExec(t, s, `ALTER TABLE "order" DEDUP DISABLE`)
	td, _ = s.Rows("order")
	assert.Nil(t, td.DedupKeys)
}

func TestExecAlterSetTTL(t *testing.T) {
	s := newServer(t, Options{})
	mustExec(t, s, "CREATE TABLE t (ts TIMESTAMP) TIMESTAMP(ts) PARTITION BY DAY WAL")
	mustExec(t, s, "ALTER TABLE t SET TTL 30 DAYS")
	td, _ := s.Rows("t")
	assert.Equal(t, "30 DAYS", td.TTL)
	mustExec(t, s, "ALTER TABLE t SET TTL 2w")
	td, _ = s.Rows("t")
	assert.Equal(t, "2 WEEKS", td.TTL)
	err := s.Exec("ALTER TABLE t SET TTL 12 HOURS")
	assert.ErrorContains(t, err, "multiple of partition size")
	mustExec(t, s, "ALTER TABLE t SET TTL 0 DAYS")
	td, _ = s.Rows("t")
	assert.Empty(t, td.TTL, "0 removes the TTL")
}

func TestFaultFailExec(t *testing.T) {
	s := newServer(t, Options{})
	s.FailExec(1, ExecFailure{Message: "resource is busy and retry queue is full"})
	s.FailExec(1, ExecFailure{Message: "timeout, query aborted", AfterRun: true})
	s.FailExec(1, ExecFailure{Message: "unexpected", Status: http.StatusInternalServerError})
	s.FailExec(1, ExecFailure{Message: "Write permission denied", Status: http.StatusForbidden})

	code, body := execGet(t, s, metricsDDL, nil)
	assert.Equal(t, http.StatusBadRequest, code)
	var doc execErrorJSON
	require.NoError(t, json.Unmarshal([]byte(body), &doc))
	assert.Equal(t, execErrorJSON{Query: metricsDDL, Error: "resource is busy and retry queue is full"}, doc)
	assert.Empty(t, s.Tables(), "not run")

	code, body = execGet(t, s, metricsDDL, nil)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, `"error":"timeout, query aborted","position":0`)
	assert.Equal(t, map[string]int64{"m": 0}, s.Tables(), "run, but the answer is the failure")

	code, _ = execGet(t, s, "SELECT * FROM tables()", nil)
	assert.Equal(t, http.StatusInternalServerError, code)

	// An authorization error is QuestDB's JSON document at position 0.
	code, body = execGet(t, s, metricsDDL, nil)
	assert.Equal(t, http.StatusForbidden, code)
	require.NoError(t, json.Unmarshal([]byte(body), &doc))
	assert.Equal(t, execErrorJSON{Query: metricsDDL, Error: "Write permission denied"}, doc)

	code, body = execGet(t, s, strings.Replace(metricsDDL, "TABLE m", "TABLE IF NOT EXISTS m", 1), nil)
	assert.Equal(t, http.StatusOK, code, "faults used up; IF NOT EXISTS finds the table")
	assert.JSONEq(t, `{"ddl":"OK"}`, body)
}

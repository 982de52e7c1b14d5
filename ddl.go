package questdbexporter

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"go.uber.org/zap"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// Replay is at-least-once: a frame QuestDB committed but whose OK was lost is
// sent again after a reconnect. Tables created with DEDUP UPSERT KEYS make
// that replay idempotent, so the exporter creates its tables itself (when
// create_tables is on) instead of leaving them to QWP's auto-create, which
// makes tables without dedup keys.

// dedupKey is the column that, with the designated timestamp, identifies a
// row of a table: series_id for metrics, record_id for logs.
func (k tableKind) dedupKey() string {
	if k == tableLogs {
		return colRecordID
	}
	return colSeriesID
}

// sqlType is the QuestDB SQL type of a QWP wire type, for the types the data
// model writes.
func sqlType(t qwp.ColumnType) (string, error) {
	switch t {
	case qwp.TypeTimestampNanos:
		return "TIMESTAMP_NS", nil
	case qwp.TypeSymbol:
		return "SYMBOL", nil
	case qwp.TypeVarchar:
		return "VARCHAR", nil
	case qwp.TypeInt:
		return "INT", nil
	case qwp.TypeLong:
		return "LONG", nil
	case qwp.TypeDouble:
		return "DOUBLE", nil
	case qwp.TypeBoolean:
		return "BOOLEAN", nil
	case qwp.TypeDoubleArray:
		return "DOUBLE[]", nil
	}
	return "", fmt.Errorf("no SQL type for wire type %s", t)
}

// quoteIdent returns name bare when it is a plain identifier and double-quoted
// otherwise (a table name may hold '.', which SQL would read as a qualifier).
func quoteIdent(name string) string {
	plain := name != ""
	for i, r := range name {
		if !(r == '_' || r < unicode.MaxASCII && (unicode.IsLetter(r) || i > 0 && unicode.IsDigit(r))) {
			plain = false
			break
		}
	}
	if plain {
		return name
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// ttlClause renders a ttl setting ("30d", "2w", "12h", "6M", "1y"; empty for
// none) as QuestDB's TTL clause. Tables are partitioned by day, and QuestDB
// drops whole partitions, so an hour count must be a whole number of days.
func ttlClause(ttl string) (string, error) {
	if ttl == "" {
		return "", nil
	}
	n, err := strconv.Atoi(ttl[:len(ttl)-1])
	if err != nil || n <= 0 {
		return "", fmt.Errorf("ttl %q: want a positive whole number and a unit (h, d, w, M, y), e.g. 30d", ttl)
	}
	unit := map[byte]string{'h': "HOURS", 'd': "DAYS", 'w': "WEEKS", 'M': "MONTHS", 'y': "YEARS"}[ttl[len(ttl)-1]]
	if unit == "" {
		return "", fmt.Errorf("ttl %q: unit must be one of h, d, w, M, y", ttl)
	}
	if unit == "HOURS" && n%24 != 0 {
		return "", fmt.Errorf("ttl %q: tables are partitioned by day, so hours must be a multiple of 24", ttl)
	}
	return fmt.Sprintf(" TTL %d %s", n, unit), nil
}

// createTableSQL is the statement that creates one table of the data model
// with its dedup keys, if it does not exist yet.
func createTableSQL(name string, k tableKind, attrsType qwp.ColumnType, promoted []promotedColumn, ttl string) (string, error) {
	tb := table{kind: k}
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS ")
	b.WriteString(quoteIdent(name))
	b.WriteString(" (")
	cols := tb.columns(attrsType)
	for _, p := range promoted {
		cols = append(cols, column{name: p.Column, typ: qwp.TypeSymbol})
	}
	for i, c := range cols {
		typ, err := sqlType(c.typ)
		if err != nil {
			return "", fmt.Errorf("table %s column %q: %w", name, c.name, err)
		}
		if i > 0 {
			b.WriteString(", ")
		}
		col := c.name
		if col == "" {
			col = colDesignated
		}
		b.WriteString(quoteIdent(col))
		b.WriteByte(' ')
		b.WriteString(typ)
	}
	clause, err := ttlClause(ttl)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, ") TIMESTAMP(%s) PARTITION BY DAY WAL%s DEDUP UPSERT KEYS(%s, %s)",
		colDesignated, clause, colDesignated, k.dedupKey())
	return b.String(), nil
}

// enableDedupSQL is what an operator runs to give an existing table the
// exporter's dedup keys.
func enableDedupSQL(name string, k tableKind) string {
	return fmt.Sprintf("ALTER TABLE %s DEDUP ENABLE UPSERT KEYS(%s, %s)", quoteIdent(name), colDesignated, k.dedupKey())
}

// tableCreator runs the DDL against QuestDB's HTTP /exec endpoint, which
// shares host, port, TLS and credentials with the QWP endpoint. It runs on
// every new connection (QuestDB may have been rebuilt meanwhile), only once the
// WebSocket upgrade succeeded, so never while QuestDB is down. A failure is
// logged with its statement and never holds back the frames.
type tableCreator struct {
	tables   [numTables]string
	stmts    [numTables]string
	client   *http.Client
	username string
	password string
	token    string
	logger   *zap.Logger

	mu     sync.Mutex
	warned map[string]bool // tables already reported as lacking dedup keys
}

// tableCreatorConfig is what newTableCreator needs from the exporter's
// configuration.
type tableCreatorConfig struct {
	Tables            tableNames
	AttributesVarchar bool
	Promoted          []promotedColumn
	TTL               string
	TLS               *tls.Config
	Username          string
	Password          string
	Token             string
	Timeout           time.Duration
	Logger            *zap.Logger
}

func newTableCreator(c tableCreatorConfig) (*tableCreator, error) {
	attrsType := qwp.TypeSymbol
	if c.AttributesVarchar {
		attrsType = qwp.TypeVarchar
	}
	tc := &tableCreator{
		username: c.Username, password: c.Password, token: c.Token,
		logger: c.Logger, warned: map[string]bool{},
		client: &http.Client{
			Timeout:   c.Timeout,
			Transport: &http.Transport{TLSClientConfig: c.TLS, Proxy: http.ProxyFromEnvironment},
		},
	}
	if tc.logger == nil {
		tc.logger = zap.NewNop()
	}
	for k := range numTables {
		tc.tables[k] = c.Tables.of(k)
		stmt, err := createTableSQL(tc.tables[k], k, attrsType, c.Promoted, c.TTL)
		if err != nil {
			return nil, err
		}
		tc.stmts[k] = stmt
	}
	return tc, nil
}

// execURL turns a QWP endpoint (ws://host:port/write/v4) into QuestDB's HTTP
// /exec endpoint on the same host and port.
func execURL(wsURL string) (string, error) {
	u, err := url.Parse(wsURL)
	if err != nil {
		return "", err
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	default:
		return "", fmt.Errorf("endpoint %q: want ws:// or wss://", wsURL)
	}
	u.Path, u.RawQuery, u.Fragment = "/exec", "", ""
	return u.String(), nil
}

// execReply is QuestDB's JSON answer from /exec: {"ddl":"OK"} for DDL,
// columns and dataset for a query, error (with position) for a failure.
type execReply struct {
	DDL     string  `json:"ddl"`
	Error   string  `json:"error"`
	Dataset [][]any `json:"dataset"`
	Columns []struct {
		Name string `json:"name"`
	} `json:"columns"`
}

// transientDDLError is a failure to get an answer from QuestDB (no
// connection, a timeout, a 5xx or 429, a reply that is not QuestDB's): the
// statement may well succeed on the next connection.
type transientDDLError struct{ err error }

func (e *transientDDLError) Error() string { return e.err.Error() }
func (e *transientDDLError) Unwrap() error { return e.err }

// exec runs one statement. A refusal of the statement itself (QuestDB's JSON
// error) is a plain error; anything else is a *transientDDLError.
func (tc *tableCreator) exec(ctx context.Context, endpoint, query string) (*execReply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"?query="+url.QueryEscape(query), nil)
	if err != nil {
		return nil, err
	}
	switch {
	case tc.token != "":
		req.Header.Set("Authorization", "Bearer "+tc.token)
	case tc.username != "":
		req.SetBasicAuth(tc.username, tc.password)
	}
	resp, err := tc.client.Do(req)
	if err != nil {
		return nil, &transientDDLError{err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, &transientDDLError{err}
	}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		return nil, &transientDDLError{fmt.Errorf("HTTP %d: %.200q", resp.StatusCode, body)}
	}
	var r execReply
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, &transientDDLError{fmt.Errorf("HTTP %d, not a QuestDB /exec reply: %.200q", resp.StatusCode, body)}
	}
	if r.Error != "" {
		return nil, errors.New(r.Error)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return &r, nil
}

// ensure creates the missing tables and reports, once per table and process,
// each existing table that has no dedup keys. A statement QuestDB refuses is
// logged with its SQL and counted in refused; the rows then flow into
// whatever table exists. When QuestDB could not be asked (see
// transientDDLError) ensure returns an error: the caller holds the frames and
// tries again on a new connection, because a table auto-created by the first
// frame would lack dedup keys for good.
func (tc *tableCreator) ensure(ctx context.Context, wsURL string) (refused int, err error) {
	endpoint, err := execURL(wsURL)
	if err != nil {
		tc.logger.Error("Cannot derive QuestDB's /exec endpoint; tables are left to auto-create", zap.Error(err))
		return 1, nil
	}
	// failed logs a failure; it reports whether it was transient.
	failed := func(msg, table, stmt string, err error) bool {
		var te *transientDDLError
		if errors.As(err, &te) {
			tc.logger.Warn(msg+"; retrying on a new connection before any row is sent",
				zap.String("table", table), zap.String("statement", stmt), zap.Error(err))
			return true
		}
		refused++
		tc.logger.Warn(msg+"; rows still flow, into a table without dedup keys if QWP creates it",
			zap.String("table", table), zap.String("statement", stmt), zap.Error(err))
		return false
	}
	for k, stmt := range tc.stmts {
		if _, err := tc.exec(ctx, endpoint, stmt); err != nil && failed("CREATE TABLE failed", tc.tables[k], stmt, err) {
			return refused, err
		}
	}
	const q = "SELECT table_name, dedup FROM tables()"
	r, err := tc.exec(ctx, endpoint, q)
	if err != nil {
		if failed("Cannot check the tables' dedup keys", "", q, err) {
			return refused, err
		}
		return refused, nil
	}
	for _, row := range r.Dataset {
		if len(row) < 2 {
			continue
		}
		name, _ := row[0].(string)
		dedup, _ := row[1].(bool)
		for k, t := range tc.tables {
			if dedup || !strings.EqualFold(name, t) {
				continue
			}
			tc.mu.Lock()
			first := !tc.warned[t]
			tc.warned[t] = true
			tc.mu.Unlock()
			if first {
				tc.logger.Warn("Table exists without dedup keys: a replay after a reconnect or restart can duplicate rows",
					zap.String("table", t), zap.String("fix", enableDedupSQL(t, tableKind(k))))
			}
		}
	}
	return refused, nil
}

// close releases the idle HTTP connections.
func (tc *tableCreator) close() { tc.client.CloseIdleConnections() }

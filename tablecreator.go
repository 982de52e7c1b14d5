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
	"strings"
	"sync"
	"time"

	"github.com/questdbexporter/questdbexporter/internal/datamodel"
	"go.uber.org/zap"
)

// tableCreator runs the DDL against QuestDB's HTTP /exec endpoint, which
// shares host, port, TLS and credentials with the QWP endpoint. It runs on
// every new connection (QuestDB may have been rebuilt meanwhile) except one
// replacing a connection the sender recycled itself and reaching the same
// server (sender.Options.OnConnect),
// only once the WebSocket upgrade succeeded, so never while QuestDB is down,
// and before the connection's first frame.
//
// What QuestDB answers decides what happens next (see exec): a statement
// refused for its content is a DDL failure, loud (Error log once per table,
// the ddl_failures counter, the component status) and final for this
// connection, whose rows then flow into whatever table exists; anything that
// failed for the moment holds the frames and is retried on a new connection,
// like a transport failure.
type tableCreator struct {
	ddl      []datamodel.TableDDL
	client   *http.Client
	username string
	password string
	token    string
	logger   *zap.Logger
	// onRefused counts a statement QuestDB refused; onOutcome hears, after
	// each run that reached QuestDB, what leaves tables without the dedup
	// keys the exporter wants (nil when every table has them).
	onRefused func(table string)
	onOutcome func(error)

	// maxUncertain is how many consecutive runs an uncertain failure may
	// hold the frames (see bound).
	maxUncertain int

	mu      sync.Mutex
	warned  map[string]bool // tables already reported as lacking dedup keys
	refused map[string]bool // tables whose refusal was already logged at Error
	// uncertainRuns counts the consecutive runs of ensure that met an
	// uncertain failure.
	uncertainRuns int
}

// maxUncertainRuns is tableCreator.maxUncertain.
const maxUncertainRuns = 10

// tableCreatorConfig is what newTableCreator needs from the exporter's
// configuration.
type tableCreatorConfig struct {
	Tables            datamodel.Tables
	AttributesVarchar bool
	Promoted          []datamodel.PromotedColumn
	TTL               string
	TLS               *tls.Config
	Username          string
	Password          string
	Token             string
	Timeout           time.Duration
	Logger            *zap.Logger
	OnRefused         func(table string) // optional
	OnOutcome         func(error)        // optional
	// DDL, when set, is run instead of the statements the data-model keys
	// above give: cmd/questdb-slot's, for the tables a slot's frames write.
	DDL []datamodel.TableDDL
}

func newTableCreator(c tableCreatorConfig) (*tableCreator, error) {
	ddl := c.DDL
	if ddl == nil {
		var err error
		if ddl, err = datamodel.DDL(c.Tables, c.AttributesVarchar, c.Promoted, c.TTL); err != nil {
			return nil, err
		}
	}
	tc := &tableCreator{
		username: c.Username, password: c.Password, token: c.Token,
		ddl: ddl, logger: c.Logger, warned: map[string]bool{}, refused: map[string]bool{},
		onRefused: c.OnRefused, onOutcome: c.OnOutcome, maxUncertain: maxUncertainRuns,
		client: &http.Client{
			Timeout:   c.Timeout,
			Transport: &http.Transport{TLSClientConfig: c.TLS, Proxy: http.ProxyFromEnvironment},
		},
	}
	if tc.logger == nil {
		tc.logger = zap.NewNop()
	}
	if tc.onRefused == nil {
		tc.onRefused = func(string) {}
	}
	if tc.onOutcome == nil {
		tc.onOutcome = func(error) {}
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
// columns and dataset for a query, error and position for a failure.
type execReply struct {
	DDL      string  `json:"ddl"`
	Error    string  `json:"error"`
	Position *int    `json:"position"`
	Dataset  [][]any `json:"dataset"`
	Columns  []struct {
		Name string `json:"name"`
	} `json:"columns"`
}

// transientDDLError is a statement that could not run now: no answer (no
// connection, a timeout), a 5xx or 429, or QuestDB's error document for a
// condition its source marks as passing. The statement may well succeed on
// the next connection. An uncertain one is an answer that is neither (see
// classify): it is retried only a bounded number of times (see bound).
type transientDDLError struct {
	err       error
	uncertain bool
	status    int // QuestDB's HTTP status, for an uncertain one
}

func (e *transientDDLError) Error() string { return e.err.Error() }
func (e *transientDDLError) Unwrap() error { return e.err }

// refusedDDLError is a statement QuestDB refused for what it says: a parse
// or validation error pointing into the statement, an authorization
// failure, or an answer that stayed uncertain past the bound. Sending it
// again gives the same answer.
type refusedDDLError struct {
	status   int
	msg      string
	position int
}

func (e *refusedDDLError) Error() string {
	return fmt.Sprintf("QuestDB refused the statement (HTTP %d, at character %d): %s", e.status, e.position, e.msg)
}

// refusedMarkers are QuestDB's messages for statements it refuses whatever
// the position: its security contexts' "permission denied" / "Write
// permission denied" (a read-only instance, or an account without the
// right) and the engine's "invalid table name".
var refusedMarkers = []string{"permission denied", "invalid table name"}

// transientMarkers are QuestDB's messages for a statement that could not
// run now: the HTTP server's retry queue for a busy table ("resource is
// busy and retry queue is full"), the statement timeout and circuit
// breaker ("timeout, query aborted", "Query timeout"), a query cancelled
// by an operator ("cancelled by user") and a table lock ("could not
// lock"). They can come at any position.
var transientMarkers = []string{"busy", "timeout", "cancelled by user", "could not lock"}

// ambiguousMarkers are messages about something else holding the table's
// name: a concurrent CREATE TABLE IF NOT EXISTS waits for the other one
// and succeeds in current QuestDB (CairoEngine), so "already exists" or
// "name is reserved" (a directory that is not a table) may never go away,
// or may. They are uncertain at any position.
var ambiguousMarkers = []string{"already exists", "is reserved"}

// classify sorts QuestDB's error document r, answered with HTTP status,
// into a refusal, a passing failure, or an uncertain one (transient, but
// bounded). QuestDB's JsonQueryProcessor answers a SqlException with 400
// at the position of the token refused, and a CairoException with 400, or
// 403 when it is an authorization error, at the position it was given,
// which is 0 unless the code set one; anything unexpected is 500 at 0. So
// an engine's permanent refusal ("invalid table name", "permission
// denied") comes at position 0 just like a passing failure ("timeout,
// query aborted"): the position does not tell them apart, the message
// does where QuestDB's wording is known. A position past 0 points into the
// statement: a refusal. Position 0 or none with a message of no known kind
// is uncertain (a full disk, an out-of-memory, an engine failure QuestDB
// may or may not get over), as are ambiguousMarkers.
func classify(status int, r *execReply) error {
	msg := strings.ToLower(r.Error)
	switch {
	case containsAny(msg, refusedMarkers):
		return &refusedDDLError{status: status, msg: r.Error, position: positionOf(r)}
	case containsAny(msg, transientMarkers):
		return &transientDDLError{err: fmt.Errorf("HTTP %d: QuestDB could not run it now: %s", status, r.Error)}
	case r.Position != nil && *r.Position > 0 && !containsAny(msg, ambiguousMarkers):
		return &refusedDDLError{status: status, msg: r.Error, position: *r.Position}
	}
	return &transientDDLError{uncertain: true, status: status,
		err: fmt.Errorf("HTTP %d, at character %d: QuestDB's answer does not say whether the statement may succeed later: %s", status, positionOf(r), r.Error)}
}

func positionOf(r *execReply) int {
	if r.Position == nil {
		return 0
	}
	return *r.Position
}

// exec runs one statement and sorts QuestDB's answer: 401 and 403 (an
// authorization error) are refusals, as is any other 4xx that is not
// QuestDB's JSON (no /exec there); 5xx and 429 are passing; QuestDB's
// error document is sorted by classify; a 200 that is not QuestDB's reply
// (a proxy's page) is uncertain. A refusal is a *refusedDDLError, the rest
// a *transientDDLError.
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
		return nil, &transientDDLError{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, &transientDDLError{err: err}
	}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		return nil, &transientDDLError{err: fmt.Errorf("HTTP %d: %.200q", resp.StatusCode, body)}
	}
	var r execReply
	jsonErr := json.Unmarshal(body, &r)
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		msg := r.Error
		if jsonErr != nil || msg == "" {
			msg = fmt.Sprintf("%.200s", body)
		}
		return nil, &refusedDDLError{status: resp.StatusCode, msg: "not authorized: " + msg}
	case jsonErr != nil && resp.StatusCode >= 400: // no /exec here (404, 405): asking again will not help
		return nil, &refusedDDLError{status: resp.StatusCode, msg: fmt.Sprintf("not a QuestDB /exec reply: %.200q", body)}
	case jsonErr != nil:
		return nil, &transientDDLError{uncertain: true, status: resp.StatusCode, err: fmt.Errorf("HTTP %d, not a QuestDB /exec reply: %.200q", resp.StatusCode, body)}
	case r.Error != "":
		return nil, classify(resp.StatusCode, &r)
	case resp.StatusCode != http.StatusOK:
		return nil, &refusedDDLError{status: resp.StatusCode, msg: fmt.Sprintf("unexpected reply: %.200q", body)}
	}
	return &r, nil
}

// bound lets uncertain failures hold the frames for at most maxUncertain
// consecutive runs of ensure (with the sender's reconnect backoff between
// them, 10 runs take about 20 s with the default backoff): in the run that
// reaches it, every uncertain failure is a refusal, so the rows flow into
// the tables QWP auto-creates instead of waiting in the queue until the
// disk is full. Later runs keep refusing them at once until a run sees no
// uncertain failure, which starts the count again. seen records that this
// run had one.
func (tc *tableCreator) bound(err error, seen *bool) error {
	var te *transientDDLError
	if !errors.As(err, &te) || !te.uncertain {
		return err
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if !*seen {
		*seen = true
		tc.uncertainRuns++
	}
	if tc.uncertainRuns < tc.maxUncertain {
		return err
	}
	return &refusedDDLError{status: te.status,
		msg: fmt.Sprintf("no definite answer in %d runs, the last: %v", tc.uncertainRuns, te.err)}
}

// endRun starts the count of bound again after a run that went through
// every statement without an uncertain failure (a run stopped by a passing
// failure does not: alternating answers must not defeat the bound).
func (tc *tableCreator) endRun(seen bool) {
	if seen {
		return
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.uncertainRuns = 0
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// ensure creates the missing tables and reports, once per table and process,
// each existing table that has no dedup keys. A statement QuestDB refuses is
// logged at Error with its SQL and QuestDB's message (once per table),
// counted and reported in the status; the rows then flow into whatever table
// exists, which QWP's auto-create makes without dedup keys or TTL. When the
// failure is transient (see exec) ensure stops and returns it: the caller
// holds the frames and tries again on a new connection, because a table
// auto-created by the first frame would lack dedup keys for good. After such
// a retry CREATE TABLE IF NOT EXISTS finding the table is success. An
// uncertain failure does so only maxUncertain times in a row (see bound),
// then it is a refusal like any other.
func (tc *tableCreator) ensure(ctx context.Context, wsURL string) (refused int, err error) {
	endpoint, err := execURL(wsURL)
	if err != nil {
		tc.logger.Error("Cannot derive QuestDB's /exec endpoint; tables are left to auto-create, without dedup keys", zap.Error(err))
		tc.onOutcome(err)
		return 1, nil
	}
	var problems []error
	var uncertain bool
	for _, d := range tc.ddl {
		_, err := tc.exec(ctx, endpoint, d.Create)
		err = tc.bound(err, &uncertain)
		var te *transientDDLError
		switch {
		case errors.As(err, &te):
			tc.logger.Warn("CREATE TABLE failed for the moment; retrying on a new connection before any row is sent",
				zap.String("table", d.Table), zap.String("statement", d.Create), zap.Error(err),
				zap.Bool("uncertain", te.uncertain))
			return refused, err
		case err != nil:
			refused++
			tc.onRefused(d.Table)
			problems = append(problems, fmt.Errorf("CREATE TABLE %s refused: %w", d.Table, err))
			if tc.firstTime(tc.refused, d.Table) {
				tc.logger.Error("QuestDB refused the CREATE TABLE: the table will be auto-created by the first row without "+
					"dedup keys (replays after a reconnect or restart duplicate rows) and without the configured ttl; "+
					"fix the cause, or fix the table with the statements in 'fix'",
					zap.String("table", d.Table), zap.String("statement", d.Create), zap.Error(err),
					zap.Strings("fix", fixes(d)))
			}
		}
	}
	const q = "SELECT table_name, dedup FROM tables()"
	r, err := tc.exec(ctx, endpoint, q)
	err = tc.bound(err, &uncertain)
	var te *transientDDLError
	switch {
	case errors.As(err, &te):
		tc.logger.Warn("Cannot check the tables' dedup keys for the moment; retrying on a new connection",
			zap.String("statement", q), zap.Error(err))
		return refused, err
	case err != nil:
		tc.logger.Warn("Cannot check the tables' dedup keys", zap.String("statement", q), zap.Error(err))
		tc.onOutcome(errors.Join(problems...))
		tc.endRun(uncertain)
		return refused, nil
	}
	for _, row := range r.Dataset {
		if len(row) < 2 {
			continue
		}
		name, _ := row[0].(string)
		dedup, _ := row[1].(bool)
		for _, d := range tc.ddl {
			if dedup || !strings.EqualFold(name, d.Table) {
				continue
			}
			problems = append(problems, fmt.Errorf("table %s has no dedup keys (fix: %s)", d.Table, d.EnableDedup))
			if tc.firstTime(tc.warned, d.Table) {
				tc.logger.Warn("Table exists without dedup keys: a replay after a reconnect or restart can duplicate rows",
					zap.String("table", d.Table), zap.String("fix", d.EnableDedup))
			}
		}
	}
	tc.onOutcome(errors.Join(problems...))
	tc.endRun(uncertain)
	return refused, nil
}

// tables are the names of the tables the creator makes.
func (tc *tableCreator) tables() []string {
	out := make([]string, len(tc.ddl))
	for i, d := range tc.ddl {
		out[i] = d.Table
	}
	return out
}

// firstTime reports whether table is new to seen, and records it.
func (tc *tableCreator) firstTime(seen map[string]bool, table string) bool {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	first := !seen[table]
	seen[table] = true
	return first
}

// fixes are the statements that give an auto-created table what the
// refused CREATE TABLE would have: the dedup keys, and the TTL if one is
// configured.
func fixes(d datamodel.TableDDL) []string {
	if d.SetTTL == "" {
		return []string{d.EnableDedup}
	}
	return []string{d.EnableDedup, d.SetTTL}
}

// close releases the idle HTTP connections.
func (tc *tableCreator) close() { tc.client.CloseIdleConnections() }

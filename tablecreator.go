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
// every new connection (QuestDB may have been rebuilt meanwhile), only once the
// WebSocket upgrade succeeded, so never while QuestDB is down. A failure is
// logged with its statement and never holds back the frames.
type tableCreator struct {
	ddl      []datamodel.TableDDL
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
}

func newTableCreator(c tableCreatorConfig) (*tableCreator, error) {
	ddl, err := datamodel.DDL(c.Tables, c.AttributesVarchar, c.Promoted, c.TTL)
	if err != nil {
		return nil, err
	}
	tc := &tableCreator{
		username: c.Username, password: c.Password, token: c.Token,
		ddl: ddl, logger: c.Logger, warned: map[string]bool{},
		client: &http.Client{
			Timeout:   c.Timeout,
			Transport: &http.Transport{TLSClientConfig: c.TLS, Proxy: http.ProxyFromEnvironment},
		},
	}
	if tc.logger == nil {
		tc.logger = zap.NewNop()
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
	for _, d := range tc.ddl {
		if _, err := tc.exec(ctx, endpoint, d.Create); err != nil && failed("CREATE TABLE failed", d.Table, d.Create, err) {
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
		for _, d := range tc.ddl {
			t := d.Table
			if dedup || !strings.EqualFold(name, t) {
				continue
			}
			tc.mu.Lock()
			first := !tc.warned[t]
			tc.warned[t] = true
			tc.mu.Unlock()
			if first {
				tc.logger.Warn("Table exists without dedup keys: a replay after a reconnect or restart can duplicate rows",
					zap.String("table", t), zap.String("fix", d.EnableDedup))
			}
		}
	}
	return refused, nil
}

// close releases the idle HTTP connections.
func (tc *tableCreator) close() { tc.client.CloseIdleConnections() }

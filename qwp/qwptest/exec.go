package qwptest

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// QuestDB's HTTP /exec endpoint, for the statements a QWP client runs to
// prepare its tables (see the package documentation for the grammar).

type execErrorJSON struct {
	Query    string `json:"query"`
	Error    string `json:"error"`
	Position int    `json:"position"`
}

type ddlJSON struct {
	DDL string `json:"ddl"`
}

type datasetJSON struct {
	Query     string       `json:"query"`
	Columns   []columnJSON `json:"columns"`
	Timestamp int          `json:"timestamp"`
	Dataset   [][]any      `json:"dataset"`
	Count     int          `json:"count"`
}

// serveExec answers GET /exec?query=... like QuestDB's JsonQueryProcessor:
// 200 with {"ddl":"OK"} or a dataset; a statement refused by the parser
// (SqlException) or by the engine (CairoException) is 400 with
// {"query","error","position"}. It requires the same credentials as the QWP
// endpoints and is down during an Outage. A failure armed by FailExec is
// answered as QuestDB answers an engine failure.
func (s *Server) serveExec(w http.ResponseWriter, r *http.Request) {
	if s.inOutage() {
		http.Error(w, "server restarting", http.StatusServiceUnavailable)
		return
	}
	if !s.authorized(r) {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query().Get("query")
	fail := s.takeExecFailure()
	if fail != nil && !fail.AfterRun {
		s.answerExecFailure(w, q, fail)
		return
	}
	reply, err := s.exec(q)
	if fail != nil {
		s.answerExecFailure(w, q, fail)
		return
	}
	if err != nil {
		s.logf("exec %q: %s", q, err)
		writeJSON(w, http.StatusBadRequest, execErrorJSON{Query: q, Error: err.Msg, Position: err.Position})
		return
	}
	writeJSON(w, http.StatusOK, reply)
}

// ExecFailure is an /exec request that fails, answered as QuestDB's
// JsonQueryProcessor answers a failure: HTTP 400 (or Status) with
// {"query","error","position"}. Position 0, the default, is where QuestDB
// reports every engine error (a CairoException carries position 0 unless
// the engine set one), whether it passes or not: "resource is busy and
// retry queue is full" (its HTTP server gave up retrying a busy table),
// "timeout, query aborted [fd=..]" (the circuit breaker), "cancelled by
// user", but also "permission denied", "invalid table name [table=..]",
// "could not open read-write [file=..]" (a full disk). Status 403 with
// position 0 is an authorization error ("Write permission denied" on a
// read-only instance); 500 at position 0 is an unexpected exception. With
// a Position it is a refusal of the statement's content (a SqlException),
// such as a QuestDB release that does not know a clause would answer.
type ExecFailure struct {
	Message  string
	Position int
	// Status is the HTTP status; 0 means 400.
	Status int
	// AfterRun runs the statement before answering the failure, as when
	// QuestDB applied the DDL but the answer timed out.
	AfterRun bool
}

// FailExec makes the next n /exec requests fail with f.
func (s *Server) FailExec(n int, f ExecFailure) {
	if f.Status == 0 {
		f.Status = http.StatusBadRequest
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.execFailures = append(s.execFailures, f)
	}
}

func (s *Server) takeExecFailure() *ExecFailure {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.execFailures) == 0 {
		return nil
	}
	f := s.execFailures[0]
	s.execFailures = s.execFailures[1:]
	return &f
}

func (s *Server) answerExecFailure(w http.ResponseWriter, q string, f *ExecFailure) {
	s.logf("exec %q: failing with %d %s (fault)", q, f.Status, f.Message)
	writeJSON(w, f.Status, execErrorJSON{Query: q, Error: f.Message, Position: f.Position})
}

// Exec runs one statement as /exec would, without HTTP; a refusal is a
// *SQLError.
func (s *Server) Exec(query string) error {
	if _, err := s.exec(query); err != nil {
		return err
	}
	return nil
}

func (s *Server) exec(q string) (any, *SQLError) {
	stmt, p, err := parseStatement(q)
	if err != nil {
		return nil, err
	}
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	switch st := stmt.(type) {
	case *createStmt:
		return ddlJSON{DDL: "OK"}, s.store.create(p, st)
	case *alterStmt:
		return ddlJSON{DDL: "OK"}, s.store.alter(p, st)
	case *selectTablesStmt:
		return s.store.selectTables(p, q, st)
	}
	panic(fmt.Sprintf("qwptest: unhandled statement %T", stmt))
}

// create runs a parsed CREATE TABLE; the caller holds s.mu.
func (s *store) create(p *parser, st *createStmt) *SQLError {
	key := strings.ToLower(st.t.name)
	if s.tables[key] != nil {
		if st.ifNotExists {
			return nil
		}
		return p.errAt(st.nameTok.pos, "table already exists")
	}
	if err := validTableName(st.t.name); err != nil {
		return p.errAt(st.nameTok.pos, "table name %q %s", st.t.name, err)
	}
	s.tables[key] = st.t
	return nil
}

// dedupColumns resolves DEDUP UPSERT KEYS against the table with QuestDB's
// messages: keys must exist, appear once, not be arrays, and include the
// designated timestamp (reported at listPos). The designated timestamp
// comes first in the result.
func dedupColumns(p *parser, t *table, keys []token, listPos int) ([]int, *SQLError) {
	out := []int{t.designated}
	seen := map[int]bool{}
	for _, k := range keys {
		j, ok := t.byName[strings.ToLower(k.text)]
		switch {
		case !ok:
			return nil, p.errAt(k.pos, "deduplicate key column not found [column=%s]", k.text)
		case seen[j]:
			return nil, p.errAt(k.pos, "duplicate dedup column [column=%s]", k.text)
		case t.cols[j].Type == qwp.TypeDoubleArray || t.cols[j].Type == qwp.TypeLongArray:
			return nil, p.errAt(k.pos, "dedup key columns cannot include ARRAY [column=%s, type=%s]", k.text, sqlTypeName(t.cols[j].Type, t.arrayDims[j]))
		}
		seen[j] = true
		if j != t.designated {
			out = append(out, j)
		}
	}
	if !seen[t.designated] {
		return nil, p.errAt(listPos, "deduplicate key list must include dedicated timestamp column")
	}
	return out, nil
}

// alter runs ALTER TABLE ... DEDUP or SET TTL; the caller holds s.mu.
func (s *store) alter(p *parser, st *alterStmt) *SQLError {
	t := s.tables[strings.ToLower(st.table.text)]
	if t == nil {
		return p.errAt(st.table.pos, "table does not exist [table=%s]", st.table.text)
	}
	switch {
	case st.ttl != nil:
		if err := p.checkTTL(*st.ttl, t.partitionBy); err != nil {
			return err
		}
		t.ttl = ""
		if st.ttl.n > 0 {
			t.ttl = st.ttl.String()
		}
	case !st.enable:
		t.setDedup(nil)
	case !t.wal:
		return p.errAt(st.table.pos, "deduplication is possible only on WAL tables")
	default:
		keys, err := dedupColumns(p, t, st.keys, st.listPos)
		if err != nil {
			return err
		}
		t.setDedup(keys)
	}
	return nil
}

// tablesColumns are the columns of tables() this server reports.
var tablesColumns = []struct {
	name, typ string
	value     func(*table) any
}{
	{"table_name", "STRING", func(t *table) any { return t.name }},
	{"designatedTimestamp", "STRING", func(t *table) any {
		if t.designated < 0 {
			return nil
		}
		return t.cols[t.designated].Name
	}},
	{"partitionBy", "STRING", func(t *table) any { return t.partitionBy }},
	{"walEnabled", "BOOLEAN", func(t *table) any { return t.wal }},
	{"dedup", "BOOLEAN", func(t *table) any { return t.dedupKeys != nil }},
}

// selectTables answers SELECT ... FROM tables(), one row per table in name
// order; the caller holds s.mu.
func (s *store) selectTables(p *parser, q string, st *selectTablesStmt) (any, *SQLError) {
	var picked []int
	if st.columns == nil {
		for i := range tablesColumns {
			picked = append(picked, i)
		}
	}
	for _, c := range st.columns {
		i := -1
		for k, tc := range tablesColumns {
			if strings.EqualFold(tc.name, c.text) {
				i = k
			}
		}
		if i < 0 {
			return nil, p.errAt(c.pos, "Invalid column: %s", c.text)
		}
		picked = append(picked, i)
	}
	out := datasetJSON{Query: q, Timestamp: -1, Dataset: [][]any{}}
	for _, i := range picked {
		out.Columns = append(out.Columns, columnJSON{Name: tablesColumns[i].name, Type: tablesColumns[i].typ})
	}
	names := make([]string, 0, len(s.tables))
	for k := range s.tables {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		row := make([]any, len(picked))
		for c, i := range picked {
			row[c] = tablesColumns[i].value(s.tables[k])
		}
		out.Dataset = append(out.Dataset, row)
	}
	out.Count = len(out.Dataset)
	return out, nil
}

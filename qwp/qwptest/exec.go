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

// serveExec answers GET /exec?query=... like QuestDB: 200 with {"ddl":"OK"}
// or a dataset, 400 with the error and its position. It requires the same
// credentials as the QWP endpoints and is down during an Outage.
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
	reply, err := s.exec(q)
	if err != nil {
		s.logf("exec %q: %s", q, err)
		writeJSON(w, http.StatusBadRequest, execErrorJSON{Query: q, Error: err.Msg, Position: err.Position})
		return
	}
	writeJSON(w, http.StatusOK, reply)
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
	case *alterDedupStmt:
		return ddlJSON{DDL: "OK"}, s.store.alterDedup(p, st)
	case *selectTablesStmt:
		return s.store.selectTables(p, q, st)
	}
	panic(fmt.Sprintf("qwptest: unhandled statement %T", stmt))
}

// create runs CREATE TABLE; the caller holds s.mu.
func (s *store) create(p *parser, st *createStmt) *SQLError {
	key := strings.ToLower(st.table.text)
	if s.tables[key] != nil {
		if st.ifNotExists {
			return nil
		}
		return p.errAt(st.table.pos, "table already exists")
	}
	if err := validTableName(st.table.text); err != nil {
		return p.errAt(st.table.pos, "table name %q %s", st.table.text, err)
	}
	t := &table{name: st.table.text, byName: map[string]int{}, arrayDims: map[int]int{}, designated: -1,
		partitionBy: st.partitionBy, wal: st.wal}
	for _, c := range st.columns {
		if err := validColumnName(c.name.text); err != nil {
			return p.errAt(c.name.pos, "column name %q %s", c.name.text, err)
		}
		lower := strings.ToLower(c.name.text)
		if _, dup := t.byName[lower]; dup {
			return p.errAt(c.name.pos, "duplicate column [name=%s]", c.name.text)
		}
		t.byName[lower] = len(t.cols)
		if c.dims > 0 {
			t.arrayDims[len(t.cols)] = c.dims
		}
		t.cols = append(t.cols, ColumnInfo{Name: c.name.text, Type: c.typ})
	}
	if d := st.designated; d != nil {
		j, ok := t.byName[strings.ToLower(d.text)]
		switch {
		case !ok:
			return p.errAt(d.pos, "invalid designated timestamp column [name=%s]", d.text)
		case !isTimestamp(t.cols[j].Type):
			return p.errAt(d.pos, "TIMESTAMP column expected [actual=%s]", t.cols[j].Type)
		}
		t.designated = j
	}
	if st.ttl != nil {
		if err := checkTTL(p, *st.ttl, st.partitionBy); err != nil {
			return err
		}
		if st.ttl.n > 0 {
			t.ttl = st.ttl.String()
		}
	}
	if st.dedupKeys != nil {
		keys, err := dedupColumns(p, t, st.dedupKeys)
		if err != nil {
			return err
		}
		t.setDedup(keys)
	}
	s.tables[key] = t
	return nil
}

// checkTTL applies QuestDB's rule that a TTL covers whole partitions.
func checkTTL(p *parser, ttl ttlDef, partitionBy string) *SQLError {
	hours := map[string]int{"HOURS": 1, "DAYS": 24, "WEEKS": 7 * 24}[ttl.unit] * ttl.n
	months := map[string]int{"MONTHS": 1, "YEARS": 12}[ttl.unit] * ttl.n
	var ok bool
	switch partitionBy {
	case "NONE":
		return p.errAt(ttl.pos, "TTL needs a partitioned table")
	case "HOUR":
		ok = true
	case "DAY":
		ok = ttl.calendar || hours%24 == 0
	case "WEEK":
		ok = !ttl.calendar && hours%(7*24) == 0
	case "MONTH":
		ok = ttl.calendar
	case "YEAR":
		ok = ttl.calendar && months%12 == 0
	}
	if !ok {
		return p.errAt(ttl.pos, "TTL value must be an integer multiple of partition size [ttl=%s, partitionBy=%s]", ttl, partitionBy)
	}
	return nil
}

// dedupColumns resolves DEDUP UPSERT KEYS against the table: a WAL table
// with a designated timestamp, which must be one of the keys, and no array
// keys. The designated timestamp comes first in the result.
func dedupColumns(p *parser, t *table, keys []token) ([]int, *SQLError) {
	if !t.wal {
		return nil, p.errAt(keys[0].pos, "deduplication is possible only on WAL tables")
	}
	if t.designated < 0 {
		return nil, p.errAt(keys[0].pos, "deduplication is possible only on tables with a designated timestamp")
	}
	out := []int{t.designated}
	for _, k := range keys {
		j, ok := t.byName[strings.ToLower(k.text)]
		switch {
		case !ok:
			return nil, p.errAt(k.pos, "deduplicate key column not found [column=%s]", k.text)
		case t.cols[j].Type == qwp.TypeDoubleArray || t.cols[j].Type == qwp.TypeLongArray:
			return nil, p.errAt(k.pos, "deduplicate key column cannot be an array [column=%s]", k.text)
		case j != t.designated && !containsInt(out, j):
			out = append(out, j)
		}
	}
	for _, k := range keys {
		if t.byName[strings.ToLower(k.text)] == t.designated {
			return out, nil
		}
	}
	return nil, p.errAt(keys[0].pos, "deduplicate key list must include dedicated timestamp column")
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// alterDedup runs ALTER TABLE ... DEDUP; the caller holds s.mu.
func (s *store) alterDedup(p *parser, st *alterDedupStmt) *SQLError {
	t := s.tables[strings.ToLower(st.table.text)]
	if t == nil {
		return p.errAt(st.table.pos, "table does not exist [table=%s]", st.table.text)
	}
	if !st.enable {
		t.setDedup(nil)
		return nil
	}
	keys, err := dedupColumns(p, t, st.keys)
	if err != nil {
		return err
	}
	t.setDedup(keys)
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

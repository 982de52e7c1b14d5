package qwptest

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// SQLError is a statement refused by Exec or /exec: QuestDB's kind of
// message and the position (in characters from the start of the query) of
// the token it refers to.
type SQLError struct {
	Msg      string
	Position int
}

func (e *SQLError) Error() string { return fmt.Sprintf("%s (at %d)", e.Msg, e.Position) }

type tokKind int

const (
	tokEOF    tokKind = iota
	tokWord           // a bare identifier or keyword
	tokQuoted         // a "double-" or 'single-'quoted name, unescaped
	tokNumber         // decimal digits
	tokPunct          // one of ( ) , ; [ ] *
)

type token struct {
	kind tokKind
	text string
	pos  int // byte offset in the query
}

// parser reads one statement of the small SQL subset the server knows.
type parser struct {
	q    string
	toks []token
	i    int
}

func newParser(q string) (*parser, *SQLError) {
	p := &parser{q: q}
	for i := 0; i < len(q); {
		r, size := utf8.DecodeRuneInString(q[i:])
		switch {
		case unicode.IsSpace(r):
			i += size
		case r == '"' || r == '\'':
			text, end, ok := unquote(q, i)
			if !ok {
				return nil, p.errAt(i, "unclosed quoted name")
			}
			p.toks = append(p.toks, token{tokQuoted, text, i})
			i = end
		case r >= '0' && r <= '9':
			j := i
			for j < len(q) && q[j] >= '0' && q[j] <= '9' {
				j++
			}
			p.toks = append(p.toks, token{tokNumber, q[i:j], i})
			i = j
		case r == '_' || unicode.IsLetter(r):
			j := i
			for j < len(q) {
				r, size := utf8.DecodeRuneInString(q[j:])
				if r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
					break
				}
				j += size
			}
			p.toks = append(p.toks, token{tokWord, q[i:j], i})
			i = j
		case strings.ContainsRune("(),;[]*", r):
			p.toks = append(p.toks, token{tokPunct, string(r), i})
			i += size
		default:
			return nil, p.errAt(i, "unexpected character %q", r)
		}
	}
	p.toks = append(p.toks, token{kind: tokEOF, pos: len(q)})
	return p, nil
}

// unquote reads the quoted name starting at q[start]; a doubled quote
// character stands for itself.
func unquote(q string, start int) (text string, end int, ok bool) {
	quote := q[start]
	var b strings.Builder
	for i := start + 1; i < len(q); i++ {
		if q[i] != quote {
			b.WriteByte(q[i])
			continue
		}
		if i+1 < len(q) && q[i+1] == quote {
			b.WriteByte(quote)
			i++
			continue
		}
		return b.String(), i + 1, true
	}
	return "", 0, false
}

// errAt builds an error at a byte offset, reported in characters as
// QuestDB does.
func (p *parser) errAt(pos int, format string, args ...any) *SQLError {
	return &SQLError{Msg: fmt.Sprintf(format, args...), Position: utf8.RuneCountInString(p.q[:pos])}
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

// describe names a token for "expected X, found Y" messages.
func describe(t token) string {
	if t.kind == tokEOF {
		return "end of query"
	}
	return strconv.Quote(t.text)
}

// isKeyword reports whether the next token is the (case-insensitive)
// keyword kw.
func (p *parser) isKeyword(kw string) bool {
	t := p.peek()
	return t.kind == tokWord && strings.EqualFold(t.text, kw)
}

// acceptKeyword consumes the keyword kw if it comes next.
func (p *parser) acceptKeyword(kw string) bool {
	if p.isKeyword(kw) {
		p.i++
		return true
	}
	return false
}

func (p *parser) expectKeyword(kws ...string) *SQLError {
	for _, kw := range kws {
		if !p.acceptKeyword(kw) {
			t := p.peek()
			return p.errAt(t.pos, "'%s' expected, found %s", strings.ToLower(kw), describe(t))
		}
	}
	return nil
}

func (p *parser) acceptPunct(c string) bool {
	if t := p.peek(); t.kind == tokPunct && t.text == c {
		p.i++
		return true
	}
	return false
}

func (p *parser) expectPunct(c string) *SQLError {
	if !p.acceptPunct(c) {
		t := p.peek()
		return p.errAt(t.pos, "'%s' expected, found %s", c, describe(t))
	}
	return nil
}

// name reads a bare or quoted identifier.
func (p *parser) name(what string) (token, *SQLError) {
	t := p.peek()
	if t.kind != tokWord && t.kind != tokQuoted || t.text == "" {
		return t, p.errAt(t.pos, "%s expected, found %s", what, describe(t))
	}
	p.i++
	return t, nil
}

// nameList reads '(' name {',' name} ')'.
func (p *parser) nameList(what string) ([]token, *SQLError) {
	if err := p.expectPunct("("); err != nil {
		return nil, err
	}
	var out []token
	for {
		t, err := p.name(what)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
		if !p.acceptPunct(",") {
			break
		}
	}
	return out, p.expectPunct(")")
}

// end accepts an optional ';' and requires the end of the query.
func (p *parser) end() *SQLError {
	p.acceptPunct(";")
	if t := p.peek(); t.kind != tokEOF {
		return p.errAt(t.pos, "unexpected token %s", describe(t))
	}
	return nil
}

// columnDef is one column of CREATE TABLE.
type columnDef struct {
	name token
	typ  qwp.ColumnType
	dims int // array dimensions, 0 for a scalar
}

// createStmt is CREATE TABLE [IF NOT EXISTS] name (columns)
// [TIMESTAMP(col) [PARTITION BY unit [WAL | BYPASS WAL] [TTL n unit]]]
// [DEDUP UPSERT KEYS(col, ...)].
type createStmt struct {
	table       token
	ifNotExists bool
	columns     []columnDef
	designated  *token
	partitionBy string // NONE without a PARTITION BY clause
	wal         bool
	ttl         *ttlDef
	dedupKeys   []token
}

// ttlDef is a TTL clause: a count of hours or of months.
type ttlDef struct {
	pos      int
	n        int
	unit     string // HOURS, DAYS, WEEKS, MONTHS or YEARS
	calendar bool   // MONTHS and YEARS
}

func (t ttlDef) String() string { return fmt.Sprintf("%d %s", t.n, t.unit) }

// alterDedupStmt is ALTER TABLE name DEDUP ENABLE UPSERT KEYS(col, ...) or
// ALTER TABLE name DEDUP DISABLE.
type alterDedupStmt struct {
	table  token
	enable bool
	keys   []token
}

// selectTablesStmt is SELECT col, ... FROM tables() (or SELECT *).
type selectTablesStmt struct {
	columns []token // nil for *
}

// parseStatement parses one statement of the supported subset; the parser
// returned places later errors.
func parseStatement(q string) (any, *parser, *SQLError) {
	p, err := newParser(q)
	if err != nil {
		return nil, nil, err
	}
	first := p.peek()
	var stmt any
	switch {
	case first.kind == tokEOF:
		return nil, nil, p.errAt(0, "empty query")
	case p.acceptKeyword("CREATE"):
		stmt, err = p.create()
	case p.acceptKeyword("ALTER"):
		stmt, err = p.alterDedup()
	case p.acceptKeyword("SELECT"):
		stmt, err = p.selectTables()
	default:
		return nil, nil, p.errAt(first.pos, "unsupported statement %s: this server runs CREATE TABLE, ALTER TABLE ... DEDUP and SELECT ... FROM tables()", describe(first))
	}
	if err == nil {
		err = p.end()
	}
	if err != nil {
		return nil, nil, err
	}
	return stmt, p, nil
}

func (p *parser) create() (*createStmt, *SQLError) {
	if err := p.expectKeyword("TABLE"); err != nil {
		return nil, err
	}
	s := &createStmt{partitionBy: "NONE"}
	if p.acceptKeyword("IF") {
		if err := p.expectKeyword("NOT", "EXISTS"); err != nil {
			return nil, err
		}
		s.ifNotExists = true
	}
	var err *SQLError
	if s.table, err = p.name("table name"); err != nil {
		return nil, err
	}
	if err := p.expectPunct("("); err != nil {
		return nil, err
	}
	for {
		c, err := p.columnDef()
		if err != nil {
			return nil, err
		}
		s.columns = append(s.columns, c)
		if !p.acceptPunct(",") {
			break
		}
	}
	if err := p.expectPunct(")"); err != nil {
		return nil, err
	}
	if p.acceptKeyword("TIMESTAMP") {
		keys, err := p.nameList("designated timestamp column")
		if err != nil {
			return nil, err
		}
		if len(keys) != 1 {
			return nil, p.errAt(keys[1].pos, "one designated timestamp column expected")
		}
		s.designated = &keys[0]
		if err := p.partition(s); err != nil {
			return nil, err
		}
	}
	if p.acceptKeyword("DEDUP") {
		if err := p.expectKeyword("UPSERT", "KEYS"); err != nil {
			return nil, err
		}
		if s.dedupKeys, err = p.nameList("dedup key column"); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// partition reads [PARTITION BY unit [WAL | BYPASS WAL] [TTL n unit]].
func (p *parser) partition(s *createStmt) *SQLError {
	if !p.acceptKeyword("PARTITION") {
		return nil
	}
	if err := p.expectKeyword("BY"); err != nil {
		return err
	}
	t := p.next()
	unit := strings.ToUpper(t.text)
	switch {
	case t.kind == tokWord && strings.Contains(" NONE YEAR MONTH WEEK DAY HOUR ", " "+unit+" "):
		s.partitionBy = unit
	default:
		return p.errAt(t.pos, "partition unit (NONE, YEAR, MONTH, WEEK, DAY, HOUR) expected, found %s", describe(t))
	}
	// Tables partitioned by time are WAL tables unless told otherwise
	// (cairo.wal.enabled.default is true).
	s.wal = s.partitionBy != "NONE"
	switch {
	case p.acceptKeyword("WAL"):
		if s.partitionBy == "NONE" {
			return p.errAt(t.pos, "WAL needs a partitioned table")
		}
		s.wal = true
	case p.acceptKeyword("BYPASS"):
		if err := p.expectKeyword("WAL"); err != nil {
			return err
		}
		s.wal = false
	}
	if p.isKeyword("TTL") {
		ttl, err := p.ttl()
		if err != nil {
			return err
		}
		s.ttl = ttl
	}
	return nil
}

// ttl reads TTL n unit, where unit is HOUR[S], DAY[S], WEEK[S], MONTH[S],
// YEAR[S] or the letters H, D, W, M, Y (also written without a space: 2w).
func (p *parser) ttl() (*ttlDef, *SQLError) {
	kw := p.next()
	n := p.next()
	count, err := strconv.Atoi(n.text)
	if n.kind != tokNumber || err != nil {
		return nil, p.errAt(n.pos, "TTL count expected, found %s", describe(n))
	}
	u := p.next()
	word := strings.ToUpper(u.text)
	for _, unit := range []string{"HOURS", "DAYS", "WEEKS", "MONTHS", "YEARS"} {
		if u.kind == tokWord && (word == unit || word == unit[:len(unit)-1] || word == unit[:1]) {
			return &ttlDef{pos: kw.pos, n: count, unit: unit, calendar: unit == "MONTHS" || unit == "YEARS"}, nil
		}
	}
	return nil, p.errAt(u.pos, "TTL unit (HOURS, DAYS, WEEKS, MONTHS, YEARS) expected, found %s", describe(u))
}

// sqlTypes maps QuestDB's SQL column types to the wire type that stores
// them here. STRING has no wire type of its own and is kept as VARCHAR.
var sqlTypes = map[string]qwp.ColumnType{
	"BOOLEAN": qwp.TypeBoolean, "BYTE": qwp.TypeByte, "SHORT": qwp.TypeShort, "CHAR": qwp.TypeChar,
	"INT": qwp.TypeInt, "INTEGER": qwp.TypeInt, "LONG": qwp.TypeLong, "FLOAT": qwp.TypeFloat,
	"DOUBLE": qwp.TypeDouble, "DATE": qwp.TypeDate, "TIMESTAMP": qwp.TypeTimestamp,
	"TIMESTAMP_NS": qwp.TypeTimestampNanos, "SYMBOL": qwp.TypeSymbol, "VARCHAR": qwp.TypeVarchar,
	"STRING": qwp.TypeVarchar, "UUID": qwp.TypeUUID, "LONG256": qwp.TypeLong256,
	"BINARY": qwp.TypeBinary, "IPV4": qwp.TypeIPv4,
}

func (p *parser) columnDef() (columnDef, *SQLError) {
	name, err := p.name("column name")
	if err != nil {
		return columnDef{}, err
	}
	t := p.next()
	typ, ok := sqlTypes[strings.ToUpper(t.text)]
	if t.kind != tokWord || !ok {
		return columnDef{}, p.errAt(t.pos, "unsupported column type %s for column %q", describe(t), name.text)
	}
	c := columnDef{name: name, typ: typ}
	for p.acceptPunct("[") {
		if err := p.expectPunct("]"); err != nil {
			return columnDef{}, err
		}
		c.dims++
	}
	switch {
	case c.dims == 0:
	case typ != qwp.TypeDouble:
		return columnDef{}, p.errAt(t.pos, "arrays of %s are not supported; only DOUBLE[]", strings.ToUpper(t.text))
	case c.dims > qwp.MaxArrayDims:
		return columnDef{}, p.errAt(t.pos, "array of %d dimensions; the limit is %d", c.dims, qwp.MaxArrayDims)
	default:
		c.typ = qwp.TypeDoubleArray
	}
	return c, nil
}

func (p *parser) alterDedup() (*alterDedupStmt, *SQLError) {
	if err := p.expectKeyword("TABLE"); err != nil {
		return nil, err
	}
	var s alterDedupStmt
	var err *SQLError
	if s.table, err = p.name("table name"); err != nil {
		return nil, err
	}
	if err := p.expectKeyword("DEDUP"); err != nil {
		return nil, err
	}
	if p.acceptKeyword("DISABLE") {
		return &s, nil
	}
	if err := p.expectKeyword("ENABLE", "UPSERT", "KEYS"); err != nil {
		return nil, err
	}
	s.enable = true
	if s.keys, err = p.nameList("dedup key column"); err != nil {
		return nil, err
	}
	return &s, nil
}

func (p *parser) selectTables() (*selectTablesStmt, *SQLError) {
	var s selectTablesStmt
	if !p.acceptPunct("*") {
		for {
			c, err := p.name("column name")
			if err != nil {
				return nil, err
			}
			s.columns = append(s.columns, c)
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	if err := p.expectKeyword("FROM"); err != nil {
		return nil, err
	}
	t := p.peek()
	if err := p.expectKeyword("TABLES"); err != nil {
		return nil, p.errAt(t.pos, "this server answers queries on tables() only, found %s", describe(t))
	}
	if err := p.expectPunct("("); err != nil {
		return nil, err
	}
	return &s, p.expectPunct(")")
}

package qwptest

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/questdbexporter/questdbexporter/internal/sqlkeywords"
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
	tokWord           // a bare identifier, keyword or literal such as 30d
	tokQuoted         // a "double-" or 'single-'quoted name, unescaped
	tokNumber         // decimal digits only
	tokPunct          // one of ( ) , ; [ ] *
)

type token struct {
	kind tokKind
	text string
	pos  int // byte offset in the query
	end  int // byte offset just past the token
}

// parser reads one statement of the small SQL subset the server knows.
type parser struct {
	q    string
	toks []token
	i    int
}

// newParser splits q into tokens the way QuestDB's lexer does for the
// statements here: whitespace and ( ) , ; [ ] * separate tokens, quotes
// delimit names, and any other run of letters, digits, '_' and '.' is one
// token (so 30d and team.logs are single tokens).
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
			p.toks = append(p.toks, token{tokQuoted, text, i, end})
			i = end
		case r == '_' || r == '.' || unicode.IsLetter(r) || unicode.IsDigit(r):
			j, digits := i, true
			for j < len(q) {
				r, size := utf8.DecodeRuneInString(q[j:])
				if r != '_' && r != '.' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
					break
				}
				digits = digits && r >= '0' && r <= '9'
				j += size
			}
			kind := tokWord
			if digits {
				kind = tokNumber
			}
			p.toks = append(p.toks, token{kind, q[i:j], i, j})
			i = j
		case strings.ContainsRune("(),;[]*", r):
			p.toks = append(p.toks, token{tokPunct, string(r), i, i + size})
			i += size
		default:
			return nil, p.errAt(i, "unexpected character %q", r)
		}
	}
	p.toks = append(p.toks, token{kind: tokEOF, pos: len(q), end: len(q)})
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

// describe names a token in "unexpected token [X]" messages.
func describe(t token) string {
	if t.kind == tokEOF {
		return "end of query"
	}
	return t.text
}

// isKeyword reports whether the next token is the (case-insensitive)
// keyword kw, written bare.
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

// expectKeyword consumes the keywords kws in order; QuestDB's message for a
// missing one is "'kw' expected" at the token found instead.
func (p *parser) expectKeyword(kws ...string) *SQLError {
	for _, kw := range kws {
		if !p.acceptKeyword(kw) {
			return p.errAt(p.peek().pos, "'%s' expected", strings.ToLower(kw))
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
		return p.errAt(p.peek().pos, "'%s' expected", c)
	}
	return nil
}

// name reads a bare or quoted identifier.
func (p *parser) name(what string) (token, *SQLError) {
	t := p.peek()
	if t.kind != tokWord && t.kind != tokNumber && t.kind != tokQuoted || t.text == "" {
		return t, p.errAt(t.pos, "%s expected", what)
	}
	p.i++
	return t, nil
}

// notKeyword applies QuestDB's assertNameIsQuotedOrNotAKeyword to a table
// or column name.
func (p *parser) notKeyword(t token) *SQLError {
	if t.kind != tokQuoted && sqlkeywords.Is(t.text) {
		return p.errAt(t.pos, "table and column names that are SQL keywords have to be enclosed in double quotes, such as %q", t.text)
	}
	return nil
}

// tableName reads a table name: not a bare keyword, and quoted when it
// holds a '.' (the CREATE TABLE reference: "Table names containing spaces
// or period . character must be enclosed in double quotes").
func (p *parser) tableName() (token, *SQLError) {
	t, err := p.name("table name")
	if err == nil {
		err = p.notKeyword(t)
	}
	if err == nil && t.kind != tokQuoted && strings.Contains(t.text, ".") {
		err = p.errAt(t.pos, "table names containing '.' have to be enclosed in double quotes, such as %q", t.text)
	}
	return t, err
}

// end accepts an optional ';' and requires the end of the query; QuestDB
// reports anything left over as an unexpected token.
func (p *parser) end() *SQLError {
	p.acceptPunct(";")
	if t := p.peek(); t.kind != tokEOF {
		return p.errAt(t.pos, "unexpected token [%s]", describe(t))
	}
	return nil
}

// createStmt is a parsed CREATE TABLE: the table it makes, fully checked
// except for what needs the catalogue (an existing table, the table name's
// characters).
type createStmt struct {
	nameTok     token
	ifNotExists bool
	t           *table
}

// ttlDef is a TTL clause: a count of hours or of months.
type ttlDef struct {
	pos      int // where QuestDB reports a granularity error: just past TTL
	n        int
	unit     string // HOURS, DAYS, WEEKS, MONTHS or YEARS
	calendar bool   // MONTHS and YEARS
}

func (t ttlDef) String() string { return fmt.Sprintf("%d %s", t.n, t.unit) }

// alterStmt is ALTER TABLE name DEDUP ENABLE UPSERT KEYS(col, ...), ALTER
// TABLE name DEDUP DISABLE or ALTER TABLE name SET TTL n unit.
type alterStmt struct {
	table   token
	dedup   bool // a DEDUP statement, else SET TTL
	enable  bool
	keys    []token
	listPos int
	ttl     *ttlDef
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
		stmt, err = p.alter()
	case p.acceptKeyword("SELECT"):
		stmt, err = p.selectTables()
	default:
		return nil, nil, p.errAt(first.pos, "unsupported statement %q: this server runs CREATE TABLE, ALTER TABLE ... DEDUP | SET TTL and SELECT ... FROM tables()", first.text)
	}
	if err == nil {
		err = p.end()
	}
	if err != nil {
		return nil, nil, err
	}
	return stmt, p, nil
}

// create reads CREATE TABLE in the order QuestDB's SqlParser.parseCreateTable
// does:
//
//	TABLE [IF NOT EXISTS] name (col type, ...) [TIMESTAMP(col)]
//	[PARTITION BY unit [TTL n unit] [WAL | BYPASS WAL]] [DEDUP UPSERT KEYS(col, ...)]
//
// A clause out of this order is left over and refused as an unexpected
// token, as QuestDB refuses it.
func (p *parser) create() (*createStmt, *SQLError) {
	if err := p.expectKeyword("TABLE"); err != nil {
		return nil, err
	}
	s := &createStmt{}
	if p.acceptKeyword("IF") {
		if err := p.expectKeyword("NOT", "EXISTS"); err != nil {
			return nil, err
		}
		s.ifNotExists = true
	}
	var err *SQLError
	if s.nameTok, err = p.tableName(); err != nil {
		return nil, err
	}
	t := &table{name: s.nameTok.text, byName: map[string]int{}, arrayDims: map[int]int{}, designated: -1, partitionBy: "NONE"}
	s.t = t
	if err := p.expectPunct("("); err != nil {
		return nil, err
	}
	for {
		if err := p.columnDef(t); err != nil {
			return nil, err
		}
		if p.acceptPunct(")") {
			break
		}
		if !p.acceptPunct(",") {
			return nil, p.errAt(p.peek().pos, "',' or ')' expected")
		}
	}
	if p.acceptKeyword("TIMESTAMP") {
		if err := p.designated(t); err != nil {
			return nil, err
		}
	}
	if p.isKeyword("PARTITION") {
		if err := p.partition(t); err != nil {
			return nil, err
		}
	}
	if kw := p.peek(); p.isKeyword("WITH") || p.isKeyword("IN") {
		return nil, p.errAt(kw.pos, "%s clauses are not supported by this test server", strings.ToUpper(kw.text))
	}
	if p.isKeyword("DEDUP") || p.isKeyword("DEDUPLICATE") {
		kw := p.next()
		if !t.wal {
			return nil, p.errAt(kw.end, "deduplication is possible only on WAL tables")
		}
		keys, listPos, err := p.dedupKeys()
		if err != nil {
			return nil, err
		}
		idx, err := dedupColumns(p, t, keys, listPos)
		if err != nil {
			return nil, err
		}
		t.setDedup(idx)
	}
	return s, nil
}

// designated reads (col) after TIMESTAMP and makes col the designated
// timestamp.
func (p *parser) designated(t *table) *SQLError {
	if err := p.expectPunct("("); err != nil {
		return err
	}
	d, err := p.name("literal")
	if err == nil {
		err = p.notKeyword(d)
	}
	if err != nil {
		return err
	}
	if err := p.expectPunct(")"); err != nil {
		return err
	}
	j, ok := t.byName[strings.ToLower(d.text)]
	switch {
	case !ok:
		return p.errAt(d.pos, "invalid designated timestamp column [name=%s]", d.text)
	case !isTimestamp(t.cols[j].Type):
		return p.errAt(d.pos, "TIMESTAMP column expected [actual=%s, columnName=%s]", sqlTypeName(t.cols[j].Type, t.arrayDims[j]), d.text)
	}
	t.designated = j
	return nil
}

// partition reads PARTITION BY unit [TTL n unit] [WAL | BYPASS WAL]. A
// table partitioned by time is a WAL table unless BYPASS WAL
// (cairo.wal.enabled.default is true).
func (p *parser) partition(t *table) *SQLError {
	p.next()
	if err := p.expectKeyword("BY"); err != nil {
		return err
	}
	u := p.next()
	if t.designated < 0 {
		return p.errAt(u.pos, "partitioning is possible only on tables with designated timestamps")
	}
	unit := strings.ToUpper(u.text)
	if u.kind != tokWord || !strings.Contains(" NONE YEAR MONTH WEEK DAY HOUR ", " "+unit+" ") {
		return p.errAt(u.pos, "'NONE', 'HOUR', 'DAY', 'WEEK', 'MONTH' or 'YEAR' expected")
	}
	t.partitionBy = unit
	if p.isKeyword("TTL") {
		ttl, err := p.ttl()
		if err == nil {
			err = p.checkTTL(*ttl, unit)
		}
		if err != nil {
			return err
		}
		if ttl.n > 0 {
			t.ttl = ttl.String()
		}
	}
	t.wal = unit != "NONE"
	switch {
	case p.isKeyword("WAL"):
		if unit == "NONE" {
			return p.errAt(p.peek().pos, "WAL Write Mode can only be used on partitioned tables")
		}
		p.next()
	case p.acceptKeyword("BYPASS"):
		if !p.acceptKeyword("WAL") {
			return p.errAt(p.peek().pos, "invalid syntax, should be BYPASS WAL but was BYPASS %s", p.peek().text)
		}
		t.wal = false
	}
	return nil
}

// ttlUnits maps QuestDB's TTL unit spellings (PartitionBy.ttlUnitFromString,
// case-insensitive) to the unit.
var ttlUnits = map[string]string{
	"h": "HOURS", "hour": "HOURS", "hours": "HOURS", "d": "DAYS", "day": "DAYS", "days": "DAYS",
	"w": "WEEKS", "week": "WEEKS", "weeks": "WEEKS", "m": "MONTHS", "month": "MONTHS", "months": "MONTHS",
	"y": "YEARS", "year": "YEARS", "years": "YEARS",
}

// ttl reads TTL n unit or TTL n<letter> (2w), as
// SqlParser.parseTtlHoursOrMonths does.
func (p *parser) ttl() (*ttlDef, *SQLError) {
	kw := p.next()
	d := &ttlDef{pos: kw.end}
	v := p.next()
	text := v.text
	if v.kind == tokWord && len(text) > 1 {
		if unit, ok := ttlUnits[strings.ToLower(text[len(text)-1:])]; ok {
			d.unit, text = unit, text[:len(text)-1]
		} else if _, err := strconv.Atoi(text[:len(text)-1]); err == nil {
			return nil, p.errAt(v.end-1, "invalid time unit, expecting 'H', 'D', 'W', 'M' or 'Y', but was '%s'", text[len(text)-1:])
		}
	}
	if v.kind == tokEOF {
		return nil, p.errAt(v.pos, "missing argument, should be <number> <unit> or <number_with_unit>")
	}
	n, err := strconv.Atoi(text)
	if err != nil || n < 0 {
		return nil, p.errAt(v.pos, "invalid syntax, should be <number> <unit> but was %s", v.text)
	}
	d.n = n
	if d.unit == "" {
		u := p.next()
		if u.kind == tokEOF {
			return nil, p.errAt(u.pos, "missing unit, 'HOUR(S)', 'DAY(S)', 'WEEK(S)', 'MONTH(S)' or 'YEAR(S)' expected")
		}
		unit, ok := ttlUnits[strings.ToLower(u.text)]
		if u.kind != tokWord || !ok {
			return nil, p.errAt(u.pos, "invalid unit, expected 'HOUR(S)', 'DAY(S)', 'WEEK(S)', 'MONTH(S)' or 'YEAR(S)', but was '%s'", u.text)
		}
		d.unit = unit
	}
	d.calendar = d.unit == "MONTHS" || d.unit == "YEARS"
	return d, nil
}

// checkTTL is PartitionBy.validateTtlGranularity: the TTL must be a whole
// number of partitions (hours and days count as hours, months and years as
// months).
func (p *parser) checkTTL(ttl ttlDef, partitionBy string) *SQLError {
	hours := map[string]int{"HOURS": 1, "DAYS": 24, "WEEKS": 7 * 24}[ttl.unit] * ttl.n
	months := map[string]int{"MONTHS": 1, "YEARS": 12}[ttl.unit] * ttl.n
	ok := true
	switch partitionBy {
	case "NONE":
		return p.errAt(ttl.pos, "cannot set TTL on a non-partitioned table")
	case "DAY":
		ok = ttl.calendar || hours%24 == 0
	case "WEEK":
		ok = ttl.calendar || hours%(7*24) == 0
	case "MONTH":
		ok = ttl.calendar
	case "YEAR":
		ok = ttl.calendar && months%12 == 0
	}
	if !ok {
		return p.errAt(ttl.pos, "TTL value must be an integer multiple of partition size")
	}
	return nil
}

// sqlTypes maps QuestDB's SQL column type names (ColumnType's nameTypeMap)
// to the wire type that stores them here. STRING has no wire type of its
// own and is kept as VARCHAR.
var sqlTypes = map[string]qwp.ColumnType{
	"BOOLEAN": qwp.TypeBoolean, "BYTE": qwp.TypeByte, "SHORT": qwp.TypeShort, "SMALLINT": qwp.TypeShort,
	"CHAR": qwp.TypeChar, "INT": qwp.TypeInt, "INTEGER": qwp.TypeInt, "LONG": qwp.TypeLong, "BIGINT": qwp.TypeLong,
	"FLOAT": qwp.TypeFloat, "REAL": qwp.TypeFloat, "DOUBLE": qwp.TypeDouble, "DATE": qwp.TypeDate,
	"TIMESTAMP": qwp.TypeTimestamp, "TIMESTAMP_NS": qwp.TypeTimestampNanos, "SYMBOL": qwp.TypeSymbol,
	"VARCHAR": qwp.TypeVarchar, "STRING": qwp.TypeVarchar, "TEXT": qwp.TypeVarchar, "UUID": qwp.TypeUUID,
	"LONG256": qwp.TypeLong256, "BINARY": qwp.TypeBinary, "IPV4": qwp.TypeIPv4,
}

// sqlTypeName is QuestDB's name of a column type (ColumnType.nameOf).
func sqlTypeName(t qwp.ColumnType, dims int) string {
	if t == qwp.TypeDoubleArray {
		return "DOUBLE" + strings.Repeat("[]", dims)
	}
	for name, wt := range sqlTypes {
		if wt == t && !strings.Contains(" SMALLINT INTEGER BIGINT REAL STRING TEXT ", " "+name+" ") {
			return name
		}
	}
	return t.String()
}

// columnDef reads one "name type" of CREATE TABLE into t.
func (p *parser) columnDef(t *table) *SQLError {
	if tok := p.peek(); tok.kind == tokPunct && (tok.text == ")" || tok.text == ",") {
		return p.errAt(tok.pos, "missing column definition")
	}
	name, err := p.name("column name")
	if err == nil {
		err = p.notKeyword(name)
	}
	if err != nil {
		return err
	}
	typTok := p.next()
	typ, ok := sqlTypes[strings.ToUpper(typTok.text)]
	if typTok.kind != tokWord || !ok {
		return p.errAt(typTok.pos, "unsupported column type: %s", describe(typTok))
	}
	dims := 0
	for p.acceptPunct("[") {
		if err := p.expectPunct("]"); err != nil {
			return err
		}
		dims++
	}
	switch {
	case dims == 0:
	case typ != qwp.TypeDouble || dims > qwp.MaxArrayDims:
		return p.errAt(typTok.pos, "unsupported column type: %s%s", typTok.text, strings.Repeat("[]", dims))
	default:
		typ = qwp.TypeDoubleArray
	}
	if err := validColumnName(name.text); err != nil {
		return p.errAt(name.pos, " new column name contains invalid characters")
	}
	lower := strings.ToLower(name.text)
	if _, dup := t.byName[lower]; dup {
		return p.errAt(name.pos, "duplicate column [name=%s]", name.text)
	}
	t.byName[lower] = len(t.cols)
	if dims > 0 {
		t.arrayDims[len(t.cols)] = dims
	}
	t.cols = append(t.cols, ColumnInfo{Name: name.text, Type: typ})
	return nil
}

// dedupKeys reads UPSERT KEYS(col, ...) after DEDUP; listPos is where
// QuestDB reports a list without the designated timestamp.
func (p *parser) dedupKeys() (keys []token, listPos int, err *SQLError) {
	if !p.acceptKeyword("UPSERT") {
		return nil, 0, p.errAt(p.peek().pos, "expected 'upsert'")
	}
	if !p.acceptKeyword("KEYS") {
		return nil, 0, p.errAt(p.peek().pos, "expected 'keys'")
	}
	if !p.acceptPunct("(") {
		return nil, 0, p.errAt(p.peek().pos, "column list expected")
	}
	listPos = p.peek().pos
	for !p.acceptPunct(")") {
		k, err := p.name("literal")
		if err != nil {
			return nil, 0, err
		}
		keys = append(keys, k)
		p.acceptPunct(",")
	}
	return keys, listPos, nil
}

// alter reads ALTER TABLE name DEDUP ENABLE UPSERT KEYS(col, ...), ALTER
// TABLE name DEDUP DISABLE or ALTER TABLE name SET TTL n unit.
func (p *parser) alter() (*alterStmt, *SQLError) {
	if err := p.expectKeyword("TABLE"); err != nil {
		return nil, err
	}
	var s alterStmt
	var err *SQLError
	if s.table, err = p.tableName(); err != nil {
		return nil, err
	}
	if p.acceptKeyword("SET") {
		if !p.isKeyword("TTL") {
			return nil, p.errAt(p.peek().pos, "'ttl' expected")
		}
		s.ttl, err = p.ttl()
		return &s, err
	}
	if err := p.expectKeyword("DEDUP"); err != nil {
		return nil, err
	}
	s.dedup = true
	if p.acceptKeyword("DISABLE") {
		return &s, nil
	}
	if err := p.expectKeyword("ENABLE"); err != nil {
		return nil, err
	}
	s.enable = true
	if s.keys, s.listPos, err = p.dedupKeys(); err != nil {
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

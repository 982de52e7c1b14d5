package qwptest

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// ColumnInfo names a stored column and its type. The designated timestamp
// is stored as "timestamp".
type ColumnInfo struct {
	Name string
	Type qwp.ColumnType
}

// TableData is a copy of one table: its columns and its rows in commit
// order, each row one value per column as QuestDB stores it: nil for NULL,
// including a value equal to its type's NULL value (INT math.MinInt32;
// LONG, DATE and the timestamps math.MinInt64; FLOAT and DOUBLE NaN; CHAR 0;
// IPv4 0; UUID and LONG256 all words math.MinInt64; GEOHASH all ones), and
// false or 0 for a NULL BOOLEAN, BYTE or SHORT, types without one. A column
// added later reads so in older rows. In count-only mode Rows is empty. Values are
// shared with the server and must not be modified.
type TableData struct {
	Name     string
	Columns  []ColumnInfo
	Rows     [][]any
	RowCount int64
	SeqTxn   int64 // the table's last sequencer transaction (1, 2, ...)
	// DedupKeys are the DEDUP UPSERT KEYS columns (designated timestamp
	// included), nil for a table without dedup, such as an auto-created one.
	DedupKeys []string
	// TTL is the table's TTL clause value ("30 DAYS"), "" for none.
	TTL string
}

// designatedName is the name QuestDB gives the designated timestamp of an
// auto-created table.
const designatedName = "timestamp"

type table struct {
	name        string
	cols        []ColumnInfo
	byName      map[string]int // lower-case column name -> index
	arrayDims   map[int]int    // array column -> dimensions, once known
	designated  int
	partitionBy string
	wal         bool
	ttl         string
	rows        [][]any
	rowCount    int64
	seqTxn      int64
	durableTxn  int64

	// dedupKeys are the DEDUP UPSERT KEYS column indexes (designated
	// first); dedupRows maps a committed row's key to its index in rows.
	dedupKeys []int
	dedupRows map[string]int
	keyBuf    []byte
}

// store holds the committed tables, shared by every connection; it outlives
// connections (an outage keeps it).
type store struct {
	mu        sync.Mutex
	tables    map[string]*table // lower-case name -> table
	countOnly bool
	now       func() time.Time
	changed   chan struct{} // closed and replaced on every commit
}

func newStore(countOnly bool, now func() time.Time) *store {
	return &store{tables: map[string]*table{}, countOnly: countOnly, now: now, changed: make(chan struct{})}
}

// pending is a connection's uncommitted rows, per table in first-touch order.
type pending struct {
	order []*table
	rows  map[*table]*stagedRows
}

type stagedRows struct {
	rows  [][]any
	count int64
}

func (p *pending) reset() { p.order, p.rows = nil, nil }

func (p *pending) empty() bool { return len(p.order) == 0 }

// maxTablesPerConn is the number of distinct tables one connection may
// write.
const maxTablesPerConn = 10_000

// stage validates one block against the stored schema (creating the table
// and adding columns as QuestDB does, outside the transaction) and stages its
// rows on p. seen holds the tables the connection has written. A block
// without rows still resolves its table, creating it if need be
// (QwpIngressProcessorState.processMessage looks every block's table up
// before QwpWalAppender skips an empty block), and stops there.
func (s *store) stage(b *Block, p *pending, seen map[*table]bool) *StatusError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := validTableName(b.Table); err != nil {
		return &StatusError{Status: qwp.StatusInternalError,
			Msg: fmt.Sprintf("failed to create table update details: table name %q %s", b.Table, err)}
	}
	t := s.tables[strings.ToLower(b.Table)]
	if (t == nil || !seen[t]) && len(seen) >= maxTablesPerConn {
		return &StatusError{Status: qwp.StatusWriteError,
			Msg: fmt.Sprintf("table %q would be the connection's %d-th table; the limit is %d", b.Table, len(seen)+1, maxTablesPerConn)}
	}
	if t == nil {
		var err *StatusError
		if t, err = newTable(b); err != nil {
			return err
		}
		s.tables[strings.ToLower(b.Table)] = t
	}
	if !t.wal {
		return &StatusError{Status: qwp.StatusSchemaMismatch,
			Msg: fmt.Sprintf("table %q is not a WAL table", t.name)}
	}
	seen[t] = true
	if b.Rows == 0 {
		return nil
	}
	idx, err := t.mapColumns(b)
	if err != nil {
		return err
	}
	sr := p.rows[t]
	if sr == nil {
		if p.rows == nil {
			p.rows = map[*table]*stagedRows{}
		}
		sr = &stagedRows{}
		p.rows[t] = sr
		p.order = append(p.order, t)
	}
	if s.countOnly {
		sr.count += int64(b.Rows)
		return nil
	}
	rows, err := t.convertRows(b, idx, s.now())
	if err != nil {
		return err
	}
	sr.rows = append(sr.rows, rows...)
	sr.count += int64(b.Rows)
	return nil
}

// commit appends the staged rows of every table, or only of those whose
// staged row count pick accepts when pick is not nil; each table committed
// gets the next seqTxn and leaves p.
func (s *store) commit(p *pending, pick func(rows int64) bool) []tableTxn {
	if p.empty() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []tableTxn
	kept := p.order[:0]
	for _, t := range p.order {
		sr := p.rows[t]
		if pick != nil && !pick(sr.count) {
			kept = append(kept, t)
			continue
		}
		if t.dedupKeys != nil && !s.countOnly {
			t.upsert(sr.rows)
		} else {
			t.rows = append(t.rows, sr.rows...)
			t.rowCount += sr.count
		}
		t.seqTxn++
		out = append(out, tableTxn{t: t, name: t.name, seqTxn: t.seqTxn})
		delete(p.rows, t)
	}
	p.order = kept
	if len(out) > 0 {
		close(s.changed)
		s.changed = make(chan struct{})
	}
	return out
}

type tableTxn struct {
	t      *table
	name   string
	seqTxn int64
}

func newTable(b *Block) (*table, *StatusError) {
	t := &table{name: b.Table, byName: map[string]int{}, arrayDims: map[int]int{}, designated: -1,
		partitionBy: "DAY", wal: true}
	for _, c := range b.Columns {
		name := c.Name
		if name == "" && isTimestamp(c.Type) {
			name = designatedName
		} else if err := validColumnName(name); err != nil {
			return nil, &StatusError{Status: qwp.StatusInternalError,
				Msg: fmt.Sprintf("failed to create table update details: table %q column name %q %s", b.Table, name, err)}
		}
		key := strings.ToLower(name)
		if _, dup := t.byName[key]; dup || allNullArray(c) {
			continue // mapColumns reports duplicates and skips all-NULL arrays
		}
		t.byName[key] = len(t.cols)
		if (c.Name == "" || key == designatedName) && isTimestamp(c.Type) {
			if t.designated < 0 {
				t.designated = len(t.cols)
			}
		}
		t.cols = append(t.cols, ColumnInfo{Name: name, Type: c.Type})
	}
	// QuestDB checks every name before it maps the types, so a LONG_ARRAY
	// column is refused only when the names pass.
	for _, c := range b.Columns {
		if c.Type == qwp.TypeLongArray {
			return nil, longArrayRefused(b.Table, c.Name)
		}
	}
	if t.designated < 0 {
		if _, taken := t.byName[designatedName]; taken {
			return nil, &StatusError{Status: qwp.StatusSchemaMismatch,
				Msg: fmt.Sprintf("table %q: column %q is not a timestamp and cannot be the designated timestamp", b.Table, designatedName)}
		}
		t.designated = len(t.cols)
		t.byName[designatedName] = t.designated
		t.cols = append(t.cols, ColumnInfo{Name: designatedName, Type: qwp.TypeTimestamp})
	}
	return t, nil
}

// longArrayRefused is QuestDB's answer to a LONG_ARRAY column it would
// have to create: QwpWalAppender.mapQwpTypeToQuestDB maps only DOUBLE_ARRAY
// to a column type and raises a non-critical CairoException (WRITE_ERROR)
// for LONG_ARRAY, NULL values or not.
func longArrayRefused(table, column string) *StatusError {
	return &StatusError{Status: qwp.StatusWriteError,
		Msg: fmt.Sprintf("table %q column %q: long arrays are not supported, only double arrays", table, column)}
}

func isTimestamp(t qwp.ColumnType) bool {
	return t == qwp.TypeTimestamp || t == qwp.TypeTimestampNanos
}

// allNullArray reports an array column whose values are all NULL: QuestDB
// takes an array column's dimensions from its first value, so it does not
// create one from a block without values. (Unknown in count-only mode,
// where values are not kept: the column is created.)
func allNullArray(c Column) bool {
	if c.Type != qwp.TypeDoubleArray || c.Values == nil {
		return false
	}
	for _, v := range c.Values {
		if v != nil {
			return false
		}
	}
	return true
}

// mapColumns returns, per block column, the table column it writes (-1 for
// a skipped all-NULL array column), adding new columns and refusing
// incompatible types.
func (t *table) mapColumns(b *Block) ([]int, *StatusError) {
	idx := make([]int, len(b.Columns))
	seen := make(map[int]bool, len(b.Columns))
	for i, c := range b.Columns {
		j := t.designated
		if c.Name != "" || !isTimestamp(c.Type) {
			var ok bool
			if j, ok = t.byName[strings.ToLower(c.Name)]; !ok {
				if err := validColumnName(c.Name); err != nil {
					return nil, &StatusError{Status: qwp.StatusWriteError,
						Msg: fmt.Sprintf("table %q: new column name %q %s", t.name, c.Name, err)}
				}
				if c.Type == qwp.TypeLongArray {
					return nil, longArrayRefused(t.name, c.Name)
				}
				if allNullArray(c) {
					idx[i] = -1
					continue
				}
				j = len(t.cols)
				t.byName[strings.ToLower(c.Name)] = j
				t.cols = append(t.cols, ColumnInfo{Name: c.Name, Type: c.Type})
			}
		}
		if seen[j] {
			return nil, &StatusError{Status: qwp.StatusWriteError,
				Msg: fmt.Sprintf("table %q: column %q appears twice in one block", t.name, t.cols[j].Name)}
		}
		seen[j] = true
		if !compatible(c.Type, t.cols[j].Type) {
			return nil, &StatusError{Status: qwp.StatusSchemaMismatch,
				Msg: fmt.Sprintf("table %q column %q: cannot write %s into a %s column", t.name, t.cols[j].Name, c.Type, t.cols[j].Type)}
		}
		if err := t.checkArrayDims(j, c); err != nil {
			return nil, err
		}
		idx[i] = j
	}
	return idx, nil
}

// checkArrayDims fixes an array column's dimensions from its first non-null
// value and refuses other dimensions afterwards.
func (t *table) checkArrayDims(j int, c Column) *StatusError {
	for _, v := range c.Values {
		a, ok := v.(Array)
		if !ok {
			continue
		}
		want, known := t.arrayDims[j]
		if !known {
			t.arrayDims[j] = len(a.Shape)
			continue
		}
		if len(a.Shape) != want {
			return &StatusError{Status: qwp.StatusSchemaMismatch,
				Msg: fmt.Sprintf("table %q column %q: %d-dimensional array into a %d-dimensional column", t.name, t.cols[j].Name, len(a.Shape), want)}
		}
	}
	return nil
}

// convertRows lays the block out as table rows, converting values to the
// column types, storing them as QuestDB does (see storedValue, nullFill)
// and filling a missing or NULL designated timestamp with the server's
// time.
func (t *table) convertRows(b *Block, idx []int, now time.Time) ([][]any, *StatusError) {
	rows := make([][]any, b.Rows)
	width := len(t.cols)
	cells := make([]any, width*b.Rows)
	for r := range rows {
		rows[r] = cells[r*width : (r+1)*width : (r+1)*width]
	}
	for i, c := range b.Columns {
		j := idx[i]
		if j < 0 {
			continue // a skipped all-NULL array column
		}
		col := t.cols[j]
		for r, v := range c.Values {
			if v == nil {
				continue
			}
			cv, refused := convertValue(v, c.Type, col.Type)
			if refused != "" {
				return nil, valueError(t, col.Name, r, "%s", refused)
			}
			if j == t.designated {
				if msg := checkDesignated(cv.(int64), col.Type); msg != "" {
					return nil, valueError(t, col.Name, r, "%s", msg)
				}
				rows[r][j] = cv
				continue
			}
			rows[r][j] = storedValue(cv, col.Type)
		}
	}
	var serverTime int64
	if t.cols[t.designated].Type == qwp.TypeTimestampNanos {
		serverTime = now.UnixNano()
	} else {
		serverTime = now.UnixMicro()
	}
	for _, row := range rows {
		for j, v := range row {
			if v == nil {
				row[j] = nullFill(t.cols[j].Type)
			}
		}
		if row[t.designated] == nil {
			row[t.designated] = serverTime
		}
	}
	return rows, nil
}

func isInteger(t qwp.ColumnType) bool {
	switch t {
	case qwp.TypeByte, qwp.TypeShort, qwp.TypeInt, qwp.TypeLong:
		return true
	}
	return false
}

func isText(t qwp.ColumnType) bool { return t == qwp.TypeVarchar || t == qwp.TypeSymbol }

func isFloat(t qwp.ColumnType) bool { return t == qwp.TypeFloat || t == qwp.TypeDouble }

// compatible is the subset of QuestDB's wire-to-column conversions this
// server implements: identity, TIMESTAMP <-> TIMESTAMP_NANOS, integers into
// any numeric, DATE or TIMESTAMP column, floats into numeric columns,
// VARCHAR <-> SYMBOL. Everything else is a SCHEMA_MISMATCH.
func compatible(wire, col qwp.ColumnType) bool {
	switch {
	case wire == col:
		return true
	case isText(wire) && isText(col):
		return true
	case isTimestamp(wire) && isTimestamp(col):
		return true
	case isInteger(wire):
		return isInteger(col) || isFloat(col) || col == qwp.TypeDate || col == qwp.TypeTimestamp
	case isFloat(wire):
		return isInteger(col) || isFloat(col)
	}
	return false
}

// convertValue converts a decoded value to the column type as QuestDB's
// WalColumnarRowAppender does (putTimestampColumnWithConversion,
// putIntegerToNumericColumn, putFloatToNumericColumn); refused says why
// QuestDB refuses the value (out of the column's range, a float that is not
// a whole number into an integer column, a microsecond timestamp whose
// nanoseconds overflow, an array dimension over 2^28-1), "" when it takes it.
func convertValue(v any, wire, col qwp.ColumnType) (cv any, refused string) {
	if a, ok := v.(Array); ok {
		return a, arrayRefused(a)
	}
	if wire == col || (isText(wire) && isText(col)) {
		return v, ""
	}
	if isTimestamp(wire) && isTimestamp(col) {
		ts := v.(int64)
		if col == qwp.TypeTimestampNanos {
			if ts > math.MaxInt64/1000 || ts < math.MinInt64/1000 {
				return nil, fmt.Sprintf("timestamp overflow converting micros to nanos: %d", ts)
			}
			return ts * 1000, ""
		}
		return ts / 1000, "" // truncated toward zero, as Java's division
	}
	var f float64
	var i int64
	integral := true
	switch x := v.(type) {
	case int8:
		i = int64(x)
	case int16:
		i = int64(x)
	case int32:
		i = int64(x)
	case int64:
		i = x
	case float32:
		f, integral = float64(x), false
	case float64:
		f, integral = x, false
	default:
		return nil, fmt.Sprintf("%s value %v cannot be written to a %s column", wire, v, col)
	}
	if !integral && isInteger(col) {
		// checkDoubleToInteger: Java's (long) cast saturates, and the value
		// is taken when it casts back to the same double
		i = javaLong(f)
		if float64(i) != f {
			return nil, fmt.Sprintf("double value %v loses precision when converted to %s", f, col)
		}
		integral = true
	}
	if integral {
		f = float64(i)
	}
	inRange := func(lo, hi int64) string {
		if i < lo || i > hi {
			return fmt.Sprintf("integer value %d out of range for %s [min=%d, max=%d]", i, col, lo, hi)
		}
		return ""
	}
	switch col {
	case qwp.TypeByte:
		return int8(i), inRange(math.MinInt8, math.MaxInt8)
	case qwp.TypeShort:
		return int16(i), inRange(math.MinInt16, math.MaxInt16)
	case qwp.TypeInt:
		return int32(i), inRange(math.MinInt32, math.MaxInt32)
	case qwp.TypeLong, qwp.TypeDate, qwp.TypeTimestamp:
		return i, ""
	case qwp.TypeFloat:
		return float32(f), ""
	case qwp.TypeDouble:
		return f, ""
	}
	return nil, fmt.Sprintf("%s value %v cannot be written to a %s column", wire, v, col)
}

// javaLong is Java's (long) cast of a double: NaN is 0, values beyond the
// range saturate.
func javaLong(f float64) int64 {
	switch {
	case math.IsNaN(f):
		return 0
	case f >= math.MaxInt64: // float64(MaxInt64) is 2^63
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}

// validTableName applies QuestDB's table name rules; the error completes
// the sentence "table name X ...".
func validTableName(name string) error {
	if utf8.RuneCountInString(name) > qwp.MaxNameBytes {
		return fmt.Errorf("is longer than %d characters", qwp.MaxNameBytes)
	}
	if strings.HasPrefix(name, " ") || strings.HasSuffix(name, " ") {
		return fmt.Errorf("starts or ends with a space")
	}
	if strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, "..") {
		return fmt.Errorf("has a '.' at an end or doubled")
	}
	return badChar(name, "")
}

// validColumnName applies QuestDB's column name rules, which also refuse
// '.' and '-'.
func validColumnName(name string) error {
	if name == "" {
		return fmt.Errorf("is empty (only a TIMESTAMP or TIMESTAMP_NANOS column may be unnamed: the designated timestamp)")
	}
	if utf8.RuneCountInString(name) > qwp.MaxNameBytes {
		return fmt.Errorf("is longer than %d characters", qwp.MaxNameBytes)
	}
	return badChar(name, ".-")
}

func badChar(name, extra string) error {
	for _, r := range name {
		if r <= 0x0F || r == 0x7F || r == 0xFEFF || strings.ContainsRune(`?,'"\/:)(+*%~`+extra, r) {
			return fmt.Errorf("contains the forbidden character %q", r)
		}
	}
	return nil
}

// snapshot copies one table; rows are padded to the current column count
// with each column's NULL fill.
func (t *table) snapshot(limit int) TableData {
	td := TableData{Name: t.name, Columns: append([]ColumnInfo(nil), t.cols...), RowCount: t.rowCount, SeqTxn: t.seqTxn,
		DedupKeys: t.dedupKeyNames(), TTL: t.ttl}
	n := len(t.rows)
	if limit >= 0 && limit < n {
		n = limit
	}
	td.Rows = make([][]any, n)
	for i := range n {
		row := make([]any, len(t.cols))
		for j := range row {
			row[j] = t.cell(t.rows[i], j)
		}
		td.Rows[i] = row
	}
	return td
}

// makeDurable advances the durable seqTxn of the given commits, or of every
// table to its last seqTxn when txns is nil.
func (s *store) makeDurable(txns []tableTxn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if txns == nil {
		for _, t := range s.tables {
			t.durableTxn = t.seqTxn
		}
		return
	}
	for _, tx := range txns {
		tx.t.durableTxn = max(tx.t.durableTxn, tx.seqTxn)
	}
}

// durableTxn reads a table's durable seqTxn.
func (s *store) durableTxn(t *table) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return t.durableTxn
}

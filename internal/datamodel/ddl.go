package datamodel

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/questdbexporter/questdbexporter/internal/sqlkeywords"
	"github.com/questdbexporter/questdbexporter/qwp"
)

// Replay is at-least-once: a frame QuestDB committed but whose OK was lost is
// sent again after a reconnect. Tables created with DEDUP UPSERT KEYS make
// that replay idempotent, so the exporter creates its tables itself (when
// create_tables is on) instead of leaving them to QWP's auto-create, which
// makes tables without dedup keys.

// dedupKey is the column that, with the designated timestamp, identifies a
// row of a table: series_id for metrics, record_id for logs, span_key for
// traces.
func (k tableKind) dedupKey() string {
	switch k {
	case tableLogs:
		return colRecordID
	case tableTraces:
		return colSpanKey
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

// quoteIdent returns name bare when it is a plain identifier that is no SQL
// keyword, and double-quoted otherwise: a table name may hold '.' or a
// space (QuestDB requires quotes for both), and any name may be a keyword
// ("order" as an attributes_as_symbols key, a table configured as "from").
func quoteIdent(name string) string {
	plain := name != "" && !sqlkeywords.Is(name)
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

// ttlValue renders a ttl setting ("30d", "2w", "12h", "6M", "1y"; empty for
// none) as QuestDB's TTL value ("30 DAYS"). Tables are partitioned by day,
// and QuestDB drops whole partitions, so an hour count must be a whole
// number of days (PartitionBy.validateTtlGranularity).
func ttlValue(ttl string) (string, error) {
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
	return fmt.Sprintf("%d %s", n, unit), nil
}

// createTableSQL is the statement that creates one table of the data model
// with its dedup keys, if it does not exist yet.
func createTableSQL(name string, k tableKind, attrsType qwp.ColumnType, promoted []PromotedColumn, ttl string) (string, error) {
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
	ttlv, err := ttlValue(ttl)
	if err != nil {
		return "", err
	}
	// QuestDB's order (SqlParser.parseCreateTable): PARTITION BY unit, then
	// TTL, then WAL, then DEDUP; a TTL after WAL is an unexpected token.
	fmt.Fprintf(&b, ") TIMESTAMP(%s) PARTITION BY DAY", quoteIdent(colDesignated))
	if ttlv != "" {
		b.WriteString(" TTL " + ttlv)
	}
	b.WriteString(" WAL DEDUP UPSERT KEYS(" + dedupKeys(k) + ")")
	return b.String(), nil
}

// dedupKeys is the DEDUP UPSERT KEYS list of a table: its designated
// timestamp and the column that identifies a row.
func dedupKeys(k tableKind) string {
	return quoteIdent(colDesignated) + ", " + quoteIdent(k.dedupKey())
}

// enableDedupSQL is what an operator runs to give an existing table the
// exporter's dedup keys.
func enableDedupSQL(name string, k tableKind) string {
	return "ALTER TABLE " + quoteIdent(name) + " DEDUP ENABLE UPSERT KEYS(" + dedupKeys(k) + ")"
}

// TableDDL is the DDL of one table of the data model.
type TableDDL struct {
	// Table is the table's configured name.
	Table string
	// Create creates the table with its dedup keys if it does not exist.
	Create string
	// EnableDedup gives an existing table the data model's dedup keys.
	EnableDedup string
	// SetTTL gives an existing table the configured TTL; empty without one.
	SetTTL string
}

// DDL returns, for every table of the data model in a fixed order, the
// statements that create it with its dedup keys and ttl ("30d", "12h", ...;
// empty for none). attrsVarchar is metric_attributes_type: varchar.
func DDL(tables Tables, attrsVarchar bool, promoted []PromotedColumn, ttl string) ([]TableDDL, error) {
	attrsType := qwp.TypeSymbol
	if attrsVarchar {
		attrsType = qwp.TypeVarchar
	}
	out := make([]TableDDL, numTables)
	for k := range numTables {
		d, err := tableDDL(tables.of(k), k, attrsType, promoted, ttl)
		if err != nil {
			return nil, err
		}
		out[k] = d
	}
	return out, nil
}

// tableDDL is the DDL of one table.
func tableDDL(name string, k tableKind, attrsType qwp.ColumnType, promoted []PromotedColumn, ttl string) (TableDDL, error) {
	stmt, err := createTableSQL(name, k, attrsType, promoted, ttl)
	if err != nil {
		return TableDDL{}, err
	}
	d := TableDDL{Table: name, Create: stmt, EnableDedup: enableDedupSQL(name, k)}
	if ttl != "" {
		v, _ := ttlValue(ttl) // createTableSQL accepted it
		d.SetTTL = "ALTER TABLE " + quoteIdent(name) + " SET TTL " + v
	}
	return d, nil
}

// CheckTTL reports whether ttl is a setting DDL accepts; its message starts
// with ttl "<value>".
func CheckTTL(ttl string) error {
	_, err := ttlValue(ttl)
	return err
}

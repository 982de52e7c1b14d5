package qwptest

import (
	"fmt"
	"math"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// Values as QuestDB stores them. QuestDB's WAL appender copies a value into
// its column as it is (WalColumnarRowAppender.putFixedColumn and the
// conversions beside it), and a column holding its type's NULL value reads
// back as NULL: a value equal to the sentinel is indistinguishable from a
// NULL. Types without a NULL value store a NULL as their zero.

// storedValue is v, already converted to a column of type col, as the
// column holds it: nil where v is the type's NULL value.
func storedValue(v any, col qwp.ColumnType) any {
	switch x := v.(type) {
	case int32:
		if col == qwp.TypeInt && x == math.MinInt32 {
			return nil // Numbers.INT_NULL
		}
	case int64:
		if x == math.MinInt64 {
			return nil // Numbers.LONG_NULL: LONG, DATE, TIMESTAMP, TIMESTAMP_NANOS
		}
	case float64:
		if math.IsNaN(x) {
			return nil // Double.NaN; the infinities are values
		}
	case float32:
		if math.IsNaN(float64(x)) {
			return nil // Float.NaN
		}
	case uint16:
		if x == 0 {
			return nil // CHAR's NULL is the zero char
		}
	}
	return v
}

// nullFill is what a column of type col holds for a NULL: nil, except for
// the types without a NULL value (BOOLEAN, BYTE, SHORT), which store false
// or 0 - for a NULL sent, a row that leaves the column out, and rows
// written before the column was added.
func nullFill(col qwp.ColumnType) any {
	switch col {
	case qwp.TypeBoolean:
		return false
	case qwp.TypeByte:
		return int8(0)
	case qwp.TypeShort:
		return int16(0)
	}
	return nil
}

// cell is row's value of column j, the column's NULL fill for a row
// shorter than the table (written before the column was added).
func (t *table) cell(row []any, j int) any {
	if j < len(row) && row[j] != nil {
		return row[j]
	}
	return nullFill(t.cols[j].Type)
}

// year10000Micros is 10000-01-01T00:00:00Z in microseconds, QuestDB's
// Micros.YEAR_10000.
const year10000Micros = 253_402_300_800_000_000

// checkDesignated applies QuestDB's bounds on a designated timestamp, in
// the column's unit (MicrosTimestampDriver and NanosTimestampDriver
// .validateBounds): not NULL, not before 1970, and for microseconds before
// the year 10000. QuestDB raises a non-critical CairoException, answered
// as WRITE_ERROR.
func checkDesignated(v int64, col qwp.ColumnType) string {
	switch {
	case v == math.MinInt64:
		return "designated timestamp column cannot be NULL"
	case v < 0 && col == qwp.TypeTimestampNanos:
		return "designated timestamp_ns before 1970-01-01 and beyond 2262-04-11T23:47:16.854775807Z is not allowed"
	case v < 0:
		return "designated timestamp before 1970-01-01 is not allowed"
	case v >= year10000Micros && col == qwp.TypeTimestamp:
		return "designated timestamp beyond 9999-12-31 is not allowed"
	}
	return ""
}

// arrayDimMaxLen is QuestDB's ArrayView.DIM_MAX_LEN, 2^28-1.
const arrayDimMaxLen = 1<<28 - 1

// arrayRefused says why QuestDB refuses to write an array value, "" when it
// takes it: WalColumnarRowAppender.putArrayColumn sets each dimension with
// MutableArray.setDimLen, which refuses one longer than DIM_MAX_LEN. The wire
// bounds only the element count, so an empty array can carry such a
// dimension.
func arrayRefused(a Array) string {
	for d, n := range a.Shape {
		if n > arrayDimMaxLen {
			return fmt.Sprintf("dimension length out of range [dim=%d, dimLen=%d, maxLen=%d]", d, n, arrayDimMaxLen)
		}
	}
	return ""
}

// valueError is a value QuestDB's appender refuses: a non-critical
// CairoException, which its QWP processor answers with WRITE_ERROR (0x09,
// NOT_ACCEPTING_WRITES), not SCHEMA_MISMATCH.
func valueError(t *table, col string, row int, format string, args ...any) *StatusError {
	return &StatusError{Status: qwp.StatusWriteError,
		Msg: fmt.Sprintf("table %q column %q row %d: ", t.name, col, row) + fmt.Sprintf(format, args...)}
}

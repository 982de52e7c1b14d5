package qwptest

import (
	"encoding/binary"
	"fmt"
	"math"
)

// DEDUP UPSERT KEYS, as QuestDB applies them on a WAL table: a committed
// row whose designated timestamp and key values equal those of a row
// already in the table (or earlier in the same commit) replaces that row,
// so replaying a frame leaves the table as it was. Rows are indexed by key,
// so a row costs one map lookup.

// setDedup gives the table dedup keys (nil turns dedup off) and indexes the
// rows it already holds. Existing duplicates stay, as in QuestDB, which
// only deduplicates what is written from then on; the index keeps the last.
func (t *table) setDedup(keys []int) {
	t.dedupKeys, t.dedupRows = keys, nil
	if keys == nil {
		return
	}
	t.dedupRows = make(map[string]int, len(t.rows))
	for i, row := range t.rows {
		t.dedupRows[string(t.dedupKey(row))] = i
	}
}

// upsert commits rows, each replacing the row with the same key if there is
// one.
func (t *table) upsert(rows [][]any) {
	for _, row := range rows {
		k := t.dedupKey(row)
		if i, ok := t.dedupRows[string(k)]; ok {
			t.rows[i] = row
			continue
		}
		t.dedupRows[string(k)] = len(t.rows)
		t.rows = append(t.rows, row)
		t.rowCount++
	}
}

// dedupKey encodes the row's key columns unambiguously into t.keyBuf: a
// NULL byte or a presence byte, then the value (fixed width for numbers,
// length-prefixed otherwise). The result is valid until the next call.
func (t *table) dedupKey(row []any) []byte {
	b := t.keyBuf[:0]
	for _, j := range t.dedupKeys {
		v := t.cell(row, j) // older rows are shorter than columns added later
		if v == nil {
			b = append(b, 0)
			continue
		}
		b = append(b, 1)
		switch x := v.(type) {
		case int64:
			b = binary.LittleEndian.AppendUint64(b, uint64(x))
		case int32:
			b = binary.LittleEndian.AppendUint64(b, uint64(x))
		case int16:
			b = binary.LittleEndian.AppendUint64(b, uint64(x))
		case int8:
			b = binary.LittleEndian.AppendUint64(b, uint64(x))
		case float64:
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
		case float32:
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(x)))
		case bool:
			b = append(b, boolByte(x))
		case string:
			b = binary.AppendUvarint(b, uint64(len(x)))
			b = append(b, x...)
		default: // UUID, LONG256, decimals, CHAR, IPv4, GEOHASH, BINARY
			s := fmt.Sprint(x)
			b = binary.AppendUvarint(b, uint64(len(s)))
			b = append(b, s...)
		}
	}
	t.keyBuf = b
	return b
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// dedupKeyNames lists the key columns' names, nil without dedup.
func (t *table) dedupKeyNames() []string {
	if t.dedupKeys == nil {
		return nil
	}
	out := make([]string, len(t.dedupKeys))
	for i, j := range t.dedupKeys {
		out[i] = t.cols[j].Name
	}
	return out
}

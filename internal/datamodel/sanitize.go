package datamodel

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// replacementChar is U+FFFD in UTF-8. Every byte that is not part of a valid
// UTF-8 sequence becomes one replacement character, the same rule as Go's
// `for range` over a string, so a repaired value has a predictable length.
const replacementChar = "\uFFFD"

// appendValidUTF8 appends s to dst, replacing each byte of an invalid UTF-8
// sequence with U+FFFD. A real QuestDB rejects a whole message with a parse
// error when one VARCHAR or symbol is not UTF-8; repairing the one value keeps
// the rest of the batch.
func appendValidUTF8(dst []byte, s string) []byte {
	// Almost all text is valid: checked eight bytes at a time, where the
	// loop below decodes byte by byte.
	if validUTF8(s) {
		return append(dst, s...)
	}
	start := 0
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, replacementChar...)
			i++
			start = i
			continue
		}
		i += size
	}
	return append(dst, s[start:]...)
}

// maxColumnNameBytes is QuestDB's limit on a column name (and the wire's).
const maxColumnNameBytes = 127

// sanitizeColumnName maps an attribute key to a QuestDB column name: every
// character that is not a letter, a digit or '_' becomes '_' (QuestDB refuses
// '.', '-' and a list of punctuation in column names), invalid UTF-8 included,
// and the result is cut to 127 bytes at a character boundary. "host.name"
// becomes "host_name".
func sanitizeColumnName(key string) string {
	out := make([]byte, 0, len(key))
	for i := 0; i < len(key); {
		r, size := utf8.DecodeRuneInString(key[i:])
		i += size
		if r == utf8.RuneError && size == 1 || !(r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
			r = '_'
		}
		if len(out)+utf8.RuneLen(r) > maxColumnNameBytes {
			break
		}
		out = utf8.AppendRune(out, r)
	}
	return string(out)
}

// PromotedColumn is one entry of attributes_as_symbols: the attribute key
// looked up on the data point, then the scope, then the resource, and the
// SYMBOL column it is written to.
type PromotedColumn struct {
	Key    string
	Column string
}

// PromotedColumns derives the promoted SYMBOL columns from the configured
// attribute keys. It refuses an empty key, a key listed twice, and a key whose
// sanitised name is taken (ignoring case, as QuestDB does) by a built-in column
// of any table or by another key, because two values would then compete for
// one column.
func PromotedColumns(keys []string) ([]PromotedColumn, error) {
	out := make([]PromotedColumn, 0, len(keys))
	byColumn := make(map[string]string, len(keys))
	for _, key := range keys {
		if key == "" {
			return nil, fmt.Errorf("attributes_as_symbols: empty attribute key; list attribute names such as host.name")
		}
		col := sanitizeColumnName(key)
		folded := strings.ToLower(col) // QuestDB column names are case-insensitive
		if reservedColumns[folded] {
			return nil, fmt.Errorf("attributes_as_symbols: key %q maps to column %q, which is a built-in column; remove the key", key, col)
		}
		if prev, dup := byColumn[folded]; dup {
			return nil, fmt.Errorf("attributes_as_symbols: keys %q and %q both map to column %q; keep one", prev, key, col)
		}
		byColumn[folded] = key
		out = append(out, PromotedColumn{Key: key, Column: col})
	}
	return out, nil
}

// validString returns s when it is valid UTF-8 (no copy, the common case) and
// otherwise a repaired copy (see appendValidUTF8).
func validString(s string) string {
	if validUTF8(s) {
		return s
	}
	return string(appendValidUTF8(make([]byte, 0, len(s)+8), s))
}

// validUTF8 is utf8.ValidString with a faster path for ASCII, the usual
// text: eight bytes at a time to the end, the last eight overlapping the
// ones before, where ValidString goes back to single bytes for each tail
// shorter than its 32-byte stride.
func validUTF8(s string) bool {
	const hiBits = 0x8080808080808080
	if len(s) < 8 {
		if len(s) >= 4 { // two overlapping halves: short texts such as "INFO"
			le := binary.LittleEndian
			b := stringBytes(s)
			return (le.Uint32(b)|le.Uint32(b[len(b)-4:]))&0x80808080 == 0 || utf8.ValidString(s)
		}
		for i := 0; i < len(s); i++ {
			if s[i] >= utf8.RuneSelf {
				return utf8.ValidString(s)
			}
		}
		return true
	}
	var or uint64
	b := stringBytes(s)
	i := 0
	for ; i+32 <= len(s); i += 32 {
		w := (*[32]byte)(b[i : i+32]) // one bounds check for the four words
		or |= binary.LittleEndian.Uint64(w[:8]) | binary.LittleEndian.Uint64(w[8:16]) |
			binary.LittleEndian.Uint64(w[16:24]) | binary.LittleEndian.Uint64(w[24:32])
	}
	for ; i+8 <= len(s); i += 8 {
		or |= binary.LittleEndian.Uint64(b[i : i+8])
	}
	or |= binary.LittleEndian.Uint64(b[len(b)-8:])
	return or&hiBits == 0 || utf8.ValidString(s)
}

// stringBytes is s's bytes, only to be read, for loading words out of s:
// []byte(s[i:j]) in a word load compiles to a nil-pointer fix-up (three
// instructions) at every conversion, where this converts once.
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

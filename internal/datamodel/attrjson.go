package datamodel

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// jsonWriter renders pdata attribute maps and values as compact, deterministic
// JSON, appending into a caller's buffer:
//
//   - map keys are sorted by their bytes; when a map holds a key twice (pdata
//     built from the wire can) the first entry wins, as with Map.Get;
//   - strings (keys included) are escaped per RFC 8259 and invalid UTF-8 is
//     repaired as U+FFFD, one per bad byte; '<', '>', '&', U+2028 and U+2029
//     are not escaped;
//   - ints are decimal; doubles use the shortest round-trip form, with ".0"
//     added to whole numbers so an int 1 and a double 1.0 stay distinct, and
//     an exponent outside [1e-6, 1e21); NaN and ±Inf, which JSON cannot
//     express, become the strings "NaN", "+Inf" and "-Inf";
//   - bytes are standard base64 strings, slices are arrays, an empty value is
//     null.
//
// The same input always yields the same bytes, which is what lets the JSON be
// a SYMBOL and feed series_id. A jsonWriter keeps one reusable entry stack for
// sorting (nested maps push above their parent), so rendering allocates
// nothing once the stack has grown. Not safe for concurrent use.
type jsonWriter struct {
	kvs   []keyValue
	bytes []byte // scratch copy of a bytes value (ByteSlice.AsRaw allocates)
}

type keyValue struct {
	key   string
	value pcommon.Value
}

func compareKeys(a, b keyValue) int { return strings.Compare(a.key, b.key) }

// appendMap appends m as a JSON object ("{}" when empty).
func (w *jsonWriter) appendMap(dst []byte, m pcommon.Map) []byte {
	start := len(w.kvs)
	for k, v := range m.All() {
		w.kvs = append(w.kvs, keyValue{k, v})
	}
	return w.renderSorted(dst, start)
}

// renderSorted sorts the stack entries from start on, appends them as a JSON
// object and pops them.
func (w *jsonWriter) renderSorted(dst []byte, start int) []byte {
	slices.SortStableFunc(w.kvs[start:], compareKeys)
	dst = append(dst, '{')
	n := len(w.kvs)
	for i := start; i < n; i++ {
		kv := w.kvs[i] // index each time: nested maps may grow (move) the stack
		if i > start && kv.key == w.kvs[i-1].key {
			continue
		}
		if i > start {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, kv.key)
		dst = append(dst, ':')
		dst = w.appendValue(dst, kv.value)
	}
	clear(w.kvs[start:]) // drop references into the batch
	w.kvs = w.kvs[:start]
	return append(dst, '}')
}

// keyLayout remembers how an attribute map with a given key sequence
// renders, so that the next map with the same keys in the same order (the
// data points of one metric usually have them) skips sorting and escaping
// its keys. The keys are copied: a layout keeps no batch reachable.
type keyLayout struct {
	keys     []byte      // the keys in map order, concatenated
	mapKeys  []layoutKey // each map position's key
	prefixes []byte      // the output entries' prefixes, concatenated
	out      []layoutOut // the output entries in order, repeated keys dropped

	order, ends []int // build's scratch: map positions by key, prefix ends
}

// layoutKey is a key of a keyLayout: its bytes, within keys, and for a
// key of 4 to 16 bytes (most attribute keys) its first and last words (of
// 8 bytes, or of 4 for a key under 8), which together cover it: a map's
// key is checked against those two words without a call of memequal.
type layoutKey struct {
	key    []byte
	words  int // 8 or 4: lo and hi hold the key's first and last words of that size; 0: none
	lo, hi uint64
}

// set makes lk the layout key whose bytes key holds.
func (lk *layoutKey) set(key []byte) {
	le := binary.LittleEndian
	*lk = layoutKey{key: key}
	switch n := len(key); {
	case n >= 8 && n <= 16:
		lk.words, lk.lo, lk.hi = 8, le.Uint64(key), le.Uint64(key[n-8:])
	case n >= 4 && n < 8:
		lk.words, lk.lo, lk.hi = 4, uint64(le.Uint32(key)), uint64(le.Uint32(key[n-4:]))
	}
}

// is reports whether k is the layout's key.
func (lk *layoutKey) is(k string) bool {
	if len(k) != len(lk.key) {
		return false
	}
	le, b := binary.LittleEndian, stringBytes(k)
	switch lk.words {
	case 8:
		return le.Uint64(b) == lk.lo && le.Uint64(b[len(b)-8:]) == lk.hi
	case 4:
		return uint64(le.Uint32(b)) == lk.lo && uint64(le.Uint32(b[len(b)-4:])) == lk.hi
	}
	return k == string(lk.key)
}

// layoutOut is an output entry of a keyLayout: where its value is in the
// map, and its prefix (',' but for the first, the quoted key, ':', and a
// string value's opening '"'), within prefixes. One struct per entry, so
// that the render loop loads one slice and no offsets.
type layoutOut struct {
	pos    int
	prefix []byte
}

// matches reports whether kvs has exactly the layout's keys in its order.
func (l *keyLayout) matches(kvs []keyValue) bool {
	if len(kvs) != len(l.mapKeys) {
		return false
	}
	for i, kv := range kvs {
		if !l.mapKeys[i].is(kv.key) {
			return false
		}
	}
	return true
}

// build makes the layout of kvs: sorted by key bytes, the first of repeated
// keys kept (as renderSorted does).
func (l *keyLayout) build(kvs []keyValue) {
	l.keys, l.mapKeys, l.order = l.keys[:0], l.mapKeys[:0], l.order[:0]
	for i, kv := range kvs {
		l.keys = append(l.keys, kv.key...)
		l.mapKeys = append(l.mapKeys, layoutKey{})
		l.order = append(l.order, i)
	}
	from := 0
	for i, kv := range kvs { // keys has its final array now
		l.mapKeys[i].set(l.keys[from : from+len(kv.key) : from+len(kv.key)])
		from += len(kv.key)
	}
	slices.SortStableFunc(l.order, func(a, b int) int { return strings.Compare(kvs[a].key, kvs[b].key) })
	l.prefixes, l.out, l.ends = l.prefixes[:0], l.out[:0], l.ends[:0]
	for j, pos := range l.order {
		if j > 0 && kvs[pos].key == kvs[l.out[len(l.out)-1].pos].key {
			continue
		}
		if len(l.out) > 0 {
			l.prefixes = append(l.prefixes, ',')
		}
		l.prefixes = append(appendJSONString(l.prefixes, kvs[pos].key), ':', '"') // a string value's opening quote
		l.out = append(l.out, layoutOut{pos: pos})
		l.ends = append(l.ends, len(l.prefixes))
	}
	from = 0
	for j, end := range l.ends { // prefixes has its final array now
		l.out[j].prefix = l.prefixes[from:end:end]
		from = end
	}
}

// appendMapLayout is appendMap for maps that usually share their key
// sequence with the previous one rendered through l; the output is the
// same, except that an empty map appends nothing (its callers store NULL).
// When the keys match it makes one pass over the map, keeping its values on
// the stack (maps of up to layoutStack entries), and renders them in the
// layout's order.
func (w *jsonWriter) appendMapLayout(dst []byte, m pcommon.Map, l *keyLayout) []byte {
	n := m.Len()
	if n == 0 {
		return dst
	}
	if n > layoutStack || n != len(l.mapKeys) {
		return w.appendMapRebuild(dst, m, l)
	}
	var vals [layoutStack]pcommon.Value // on the stack: nothing of the batch stays reachable
	keys := l.mapKeys[:n]
	i := 0
	for k, v := range m.All() {
		if !keys[i].is(k) {
			break // a break, not a return, out of the iterator: less bookkeeping in every step
		}
		vals[i&(layoutStack-1)] = v
		i++
	}
	if i != n {
		return w.appendMapRebuild(dst, m, l)
	}
	dst = append(dst, '{')
	for _, o := range l.out {
		v := vals[o.pos&(layoutStack-1)]
		// Most attribute values are strings (the quote is in the prefix)
		// or ints: no appendValue call and type switch for those.
		switch v.Type() {
		case pcommon.ValueTypeStr:
			dst = appendJSONStringBody(append(dst, o.prefix...), v.Str())
		case pcommon.ValueTypeInt:
			dst = appendInt(append(dst, o.prefix[:len(o.prefix)-1]...), v.Int())
		default:
			dst = w.appendValue(append(dst, o.prefix[:len(o.prefix)-1]...), v)
		}
	}
	return append(dst, '}')
}

// layoutStack is the largest map appendMapLayout renders from the stack; a
// power of two (its index mask drops a bounds check). Larger maps take the
// general path; the array is zeroed at every call, so it is not larger.
const layoutStack = 8

// appendMapRebuild is appendMapLayout for a map whose keys are not the
// layout's: it collects the entries on the stack, rebuilds l and renders
// through it.
func (w *jsonWriter) appendMapRebuild(dst []byte, m pcommon.Map, l *keyLayout) []byte {
	start := len(w.kvs)
	for k, v := range m.All() {
		w.kvs = append(w.kvs, keyValue{k, v})
	}
	return w.renderLayout(dst, start, l)
}

// renderLayout is renderSorted through l, rebuilt first when the stack
// entries from start on do not have its keys.
func (w *jsonWriter) renderLayout(dst []byte, start int, l *keyLayout) []byte {
	if !l.matches(w.kvs[start:]) {
		l.build(w.kvs[start:])
	}
	dst = append(dst, '{')
	for _, o := range l.out {
		dst = append(dst, o.prefix[:len(o.prefix)-1]...)   // without the string quote
		dst = w.appendValue(dst, w.kvs[start+o.pos].value) // index each time: nested maps may grow (move) the stack
	}
	clear(w.kvs[start:])
	w.kvs = w.kvs[:start]
	return append(dst, '}')
}

// appendValue appends v as JSON.
func (w *jsonWriter) appendValue(dst []byte, v pcommon.Value) []byte {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return appendJSONString(dst, v.Str())
	case pcommon.ValueTypeInt:
		return appendInt(dst, v.Int())
	case pcommon.ValueTypeDouble:
		return appendJSONFloat(dst, v.Double())
	case pcommon.ValueTypeBool:
		return strconv.AppendBool(dst, v.Bool())
	case pcommon.ValueTypeBytes:
		w.bytes = w.bytes[:0]
		for _, b := range v.Bytes().All() {
			w.bytes = append(w.bytes, b)
		}
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, w.bytes)
		return append(dst, '"')
	case pcommon.ValueTypeMap:
		return w.appendMap(dst, v.Map())
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		dst = append(dst, '[')
		for i := 0; i < s.Len(); i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = w.appendValue(dst, s.At(i))
		}
		return append(dst, ']')
	default: // ValueTypeEmpty
		return append(dst, "null"...)
	}
}

// appendText appends the text form of v used for a log body and for promoted
// attribute columns: a string as it is (UTF-8 repaired), any other kind as
// JSON. ok is false for an empty value, which the caller stores as NULL.
func (w *jsonWriter) appendText(dst []byte, v pcommon.Value) (out []byte, ok bool) {
	switch v.Type() {
	case pcommon.ValueTypeEmpty:
		return dst, false
	case pcommon.ValueTypeStr:
		return appendValidUTF8(dst, v.Str()), true
	default:
		return w.appendValue(dst, v), true
	}
}

// appendJSONString appends s as a quoted JSON string, escaping what RFC 8259
// requires and repairing invalid UTF-8. Plain printable ASCII, the usual
// attribute text, is found eight bytes at a time and copied in one piece.
func appendJSONString(dst []byte, s string) []byte {
	return appendJSONStringBody(append(dst, '"'), s)
}

// appendJSONStringBody is appendJSONString after the opening quote.
// The bytes past the last whole word are checked as one more word that
// overlaps the one before (four to seven bytes as two overlapping 32-bit
// halves), not one at a time: attribute values are mostly short.
func appendJSONStringBody(dst []byte, s string) []byte {
	le, b := binary.LittleEndian, stringBytes(s)
	n := len(s)
	var last uint64 // the word that covers s[from:]
	from := 0
	switch {
	case n >= 8:
		for ; from+8 < n; from += 8 {
			if !plain8(le.Uint64(b[from : from+8])) {
				return appendJSONStringFrom(dst, s, from)
			}
		}
		last = le.Uint64(b[n-8:])
	case n >= 4:
		last = uint64(le.Uint32(b)) | uint64(le.Uint32(b[n-4:]))<<32
	default:
		for i := range n {
			if !jsonPlain[s[i]] {
				return appendJSONStringFrom(dst, s, i)
			}
		}
		return append(append(dst, s...), '"')
	}
	if !plain8(last) {
		return appendJSONStringFrom(dst, s, from)
	}
	dst = append(dst, s...)
	return append(dst, '"')
}

// appendJSONStringFrom is appendJSONString's general path; s[:i] is plain.
func appendJSONStringFrom(dst []byte, s string, i int) []byte {
	const hexDigits = "0123456789abcdef"
	start := 0
	for i < len(s) {
		b := s[i]
		if jsonPlain[b] {
			i++
			continue
		}
		if b < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
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
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// jsonPlain marks the bytes a JSON string holds as they are: printable
// ASCII except '"' and '\\'.
var jsonPlain = func() (t [256]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// plain8 reports that none of the 8 bytes of x (little-endian: x holds
// s[i:i+8]) needs attention from appendJSONString: no control character,
// '"', '\\' or non-ASCII byte. It tests all eight at once (SWAR): for a
// byte b below 0x80, b+0x60 has its top bit set unless b < 0x20, and
// (b^c)+0x7F has it set unless b == c; no byte carries into the next
// while all are below 0x80, and a word with a byte at or above 0x80 is
// refused by its own top bit whatever the sums say. A false "no" would
// only send the bytes through the byte-at-a-time path.
func plain8(x uint64) bool {
	const lsb, msb = 0x0101010101010101, 0x8080808080808080
	ok := (x + lsb*0x60) & ((x ^ lsb*'"') + lsb*0x7F) & ((x ^ lsb*'\\') + lsb*0x7F)
	return (x|^ok)&msb == 0
}

// appendInt is strconv.AppendInt in base 10, with the small non-negative
// numbers of attribute values (status codes, counts, ports below 1000)
// written directly: strconv's general path costs about 100 instructions.
func appendInt(dst []byte, v int64) []byte {
	switch {
	case v < 0 || v >= 1000:
		return strconv.AppendInt(dst, v, 10)
	case v < 10:
		return append(dst, byte('0'+v))
	case v < 100:
		return append(dst, byte('0'+v/10), byte('0'+v%10))
	}
	return append(dst, byte('0'+v/100), byte('0'+v/10%10), byte('0'+v%10))
}

// appendJSONFloat appends f as a JSON number, or as one of the strings "NaN",
// "+Inf", "-Inf" (see jsonWriter).
func appendJSONFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"+Inf"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Inf"`...)
	}
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		n := len(dst)
		dst = strconv.AppendFloat(dst, f, 'e', -1, 64)
		// Shorten "e-07" to "e-7" as encoding/json does.
		if e := len(dst) - 4; e >= n && dst[e] == 'e' && dst[e+1] == '-' && dst[e+2] == '0' {
			dst[e+2] = dst[e+3]
			dst = dst[:len(dst)-1]
		}
		return dst
	}
	n := len(dst)
	dst = strconv.AppendFloat(dst, f, 'f', -1, 64)
	for _, c := range dst[n:] {
		if c == '.' {
			return dst
		}
	}
	return append(dst, '.', '0')
}

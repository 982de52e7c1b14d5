package datamodel

import (
	"encoding/binary"
	"math"
	"math/bits"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Row identities: series_id (metric tables) and record_id (otel_logs).
//
// Both are XXH64 (the published xxHash 64-bit algorithm, implemented in
// xxh64 below and checked against its reference test vectors) over a
// canonical byte encoding of the row's identity. XXH64 with an explicit seed
// has no per-process state, so an id is the same in every process, on every
// machine and in every version of this exporter; a change to the encoding
// below changes stored ids and is a breaking change, which hash_test.go pins
// with fixed values. (hash/maphash is seeded per process; FNV-1a, one
// multiply per byte, cost over 10 % of the encoding time of a gauge point.)
//
// The encoding hashes the values exactly as they are stored in the row's
// columns (UTF-8 already repaired, attribute maps as the sorted-key JSON of
// the *_attributes columns, an empty map as empty JSON), so an id can be
// recomputed from a stored row. Integers are little-endian; field(x) is the
// byte length of x as unsigned LEB128 followed by x, which keeps adjacent
// variable-length fields from running into each other ("ab"+"c" ≠ "a"+"bc").
// The part shared by all rows of a scope is hashed once and seeds the hash
// of each row:
//
//	scope(tag) = tag byte ('S' or 'R'),
//	    field(resource_attributes JSON),
//	    field(scope_name), field(scope_version), field(scope_attributes JSON)
//
//	series_id = XXH64(seed = XXH64(seed 0, scope('S'), kind byte, field(metric_name)),
//	                  attributes JSON)
//
// kind is 1 gauge, 2 sum, 3 histogram, 4 exponential histogram, 5 summary:
// one name used by two instruments gives two series. Unit and description
// are not part of the identity (a reworded description must not fork a
// series); service.name is inside the resource attributes.
//
//	record_key = XXH64(seed = XXH64(seed 0, scope('R')),
//	    u64 time_unix_nano, u64 observed_time_unix_nano (as received, 0 if unset),
//	    u32 severity_number, field(severity_text),
//	    body kind byte (pcommon.ValueType), field(body as stored),
//	    field(attributes JSON), 16 bytes trace_id, 8 bytes span_id,
//	    u32 flags, field(event_name), u32 dropped_attributes_count)
//	record_id = XXH64(seed = record_key, u32 ordinal)
//
// ordinal numbers identical records (same record_key) within one batch: 0
// for the first, 1 for its first repeat, ... So two genuinely repeated log
// lines stay two rows under DEDUP, while a replayed batch yields the same
// ids again.
//
// Collisions, taking the ids as uniform 64-bit values: among n distinct
// identities the chance of any collision is about n²/2⁶⁵. For 10⁶ series
// that is 2.7·10⁻⁸. For 10⁹ log records a day it is about 3 % a day, but the
// DEDUP key is (timestamp, record_id), so two records merge only if they
// also share the nanosecond timestamp: even 10⁶ records on one timestamp
// collide with probability 2.7·10⁻⁸.
//
// QuestDB stores math.MinInt64 in a LONG column as NULL, and a NULL DEDUP
// key makes every row holding it one and the same row. keyID moves the one
// hash value equal to it to math.MinInt64+1: that value then stands for two
// hashes, which adds 2⁻⁶⁴ per identity to the collision chances above.
const (
	seriesTag byte = 'S'
	recordTag byte = 'R'
)

// keyID is a 64-bit hash as a LONG key column's value: never math.MinInt64,
// which QuestDB stores as NULL (see above).
func keyID(h uint64) int64 {
	if int64(h) == math.MinInt64 {
		return math.MinInt64 + 1
	}
	return int64(h)
}

// seriesID is series_id: XXH64 of the point's attributes JSON, seeded with
// the scope and metric identity.
func seriesID(seed uint64, attrJSON []byte) int64 { return keyID(xxh64(seed, attrJSON)) }

// appendField appends a length-prefixed byte string to a canonical encoding.
func appendField(dst, b []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(b))), b...)
}

func appendFieldString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// appendScopeIdentity appends scope(tag) (see above).
func appendScopeIdentity(dst []byte, tag byte, resourceJSON []byte, scopeName, scopeVersion string, scopeJSON []byte) []byte {
	dst = append(dst, tag)
	dst = appendField(dst, resourceJSON)
	dst = appendFieldString(dst, scopeName)
	dst = appendFieldString(dst, scopeVersion)
	return appendField(dst, scopeJSON)
}

// appendMetricIdentity appends the metric part of the series seed.
func appendMetricIdentity(dst []byte, kind metricKind, name string) []byte {
	return appendFieldString(append(dst, byte(kind)), name)
}

// recordFields are a log record's identity fields, text as stored (UTF-8
// repaired); the attributes as a map, rendered as the identity is built.
type recordFields struct {
	time, observed uint64
	severityNumber uint32
	severityText   string
	bodyKind       pcommon.ValueType
	body           []byte
	attributes     pcommon.Map
	traceID        [16]byte
	spanID         [8]byte
	flags          uint32
	eventName      string
	dropped        uint32
}

// appendRecordIdentity appends the record part of record_key and returns
// the attributes JSON within it (nil for no attributes), which the row's
// column takes from there.
func (r *Encoder) appendRecordIdentity(dst []byte, f *recordFields) (_, attrs []byte) {
	dst = binary.LittleEndian.AppendUint64(dst, f.time)
	dst = binary.LittleEndian.AppendUint64(dst, f.observed)
	dst = binary.LittleEndian.AppendUint32(dst, f.severityNumber)
	dst = appendFieldString(dst, f.severityText)
	dst = append(dst, byte(f.bodyKind))
	dst = appendField(dst, f.body)
	dst, at := r.appendRowAttrsField(dst, f.attributes)
	end := len(dst)
	dst = append(dst, f.traceID[:]...)
	dst = append(dst, f.spanID[:]...)
	dst = binary.LittleEndian.AppendUint32(dst, f.flags)
	dst = appendFieldString(dst, f.eventName)
	dst = binary.LittleEndian.AppendUint32(dst, f.dropped)
	if at == end {
		return dst, nil
	}
	return dst, dst[at:end:end]
}

// appendRowAttrsField appends field(attributes JSON of m) and returns where
// the JSON starts; it ends at the result's end. The JSON is rendered in
// place behind a one-byte length, which is widened (the JSON moved up) when
// it has 128 bytes or more, instead of rendered apart and copied in.
func (r *Encoder) appendRowAttrsField(dst []byte, m pcommon.Map) (_ []byte, at int) {
	at = len(dst) + 1
	dst = r.appendRowAttrs(append(dst, 0), m)
	n := len(dst) - at
	if n < 0x80 {
		dst[at-1] = byte(n)
		return dst, at
	}
	var length [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(length[:], uint64(n))
	dst = append(dst, length[1:k]...) // room for the wider length
	copy(dst[at-1+k:], dst[at:at+n])
	copy(dst[at-1:], length[:k])
	return dst, at - 1 + k
}

// recordID is record_id (and span_key) from record_key and the ordinal, as
// keyID: XXH64 of the
// ordinal's four little-endian bytes seeded with the key, written out for
// that one length (the general xxh64 call walked its stripe, word and byte
// loops for four bytes, once per log record and span).
func recordID(key uint64, ordinal uint32) int64 {
	h := key + xxPrime5 + 4
	h ^= uint64(ordinal) * xxPrime1
	h = bits.RotateLeft64(h, 23)*xxPrime2 + xxPrime3
	return keyID(xxAvalanche(h))
}

// XXH64 primes.
const (
	xxPrime1 uint64 = 0x9E3779B185EBCA87
	xxPrime2 uint64 = 0xC2B2AE3D27D4EB4F
	xxPrime3 uint64 = 0x165667B19E3779F9
	xxPrime4 uint64 = 0x85EBCA77C2B2AE63
	xxPrime5 uint64 = 0x27D4EB2F165667C5
)

// xxh64 is XXH64 of b with the given seed. The loops index b by a
// re-sliced window (one bounds check per stripe) rather than advancing b.
func xxh64(seed uint64, b []byte) uint64 {
	le := binary.LittleEndian
	n := len(b)
	var h uint64
	i := 0
	if n >= 32 {
		v1 := seed + xxPrime1 + xxPrime2
		v2 := seed + xxPrime2
		v3 := seed
		v4 := seed - xxPrime1
		for ; i <= n-32; i += 32 {
			s := b[i : i+32 : i+32]
			v1 = bits.RotateLeft64(v1+le.Uint64(s[0:8])*xxPrime2, 31) * xxPrime1
			v2 = bits.RotateLeft64(v2+le.Uint64(s[8:16])*xxPrime2, 31) * xxPrime1
			v3 = bits.RotateLeft64(v3+le.Uint64(s[16:24])*xxPrime2, 31) * xxPrime1
			v4 = bits.RotateLeft64(v4+le.Uint64(s[24:32])*xxPrime2, 31) * xxPrime1
		}
		h = bits.RotateLeft64(v1, 1) + bits.RotateLeft64(v2, 7) + bits.RotateLeft64(v3, 12) + bits.RotateLeft64(v4, 18)
		h = xxMerge(h, v1)
		h = xxMerge(h, v2)
		h = xxMerge(h, v3)
		h = xxMerge(h, v4)
	} else {
		h = seed + xxPrime5
	}
	h += uint64(n)
	rest := b[i:] // the tail re-sliced as it is eaten: no bounds checks
	for len(rest) >= 8 {
		h ^= bits.RotateLeft64(le.Uint64(rest)*xxPrime2, 31) * xxPrime1 // xxRound(0, word)
		h = bits.RotateLeft64(h, 27)*xxPrime1 + xxPrime4
		rest = rest[8:]
	}
	if len(rest) >= 4 {
		h ^= uint64(le.Uint32(rest)) * xxPrime1
		h = bits.RotateLeft64(h, 23)*xxPrime2 + xxPrime3
		rest = rest[4:]
	}
	for _, c := range rest {
		h ^= uint64(c) * xxPrime5
		h = bits.RotateLeft64(h, 11) * xxPrime1
	}
	return xxAvalanche(h)
}

// xxAvalanche is XXH64's final mix.
func xxAvalanche(h uint64) uint64 {
	h ^= h >> 33
	h *= xxPrime2
	h ^= h >> 29
	h *= xxPrime3
	h ^= h >> 32
	return h
}

func xxRound(acc, lane uint64) uint64 {
	acc += lane * xxPrime2
	acc = bits.RotateLeft64(acc, 31)
	return acc * xxPrime1
}

func xxMerge(acc, v uint64) uint64 {
	acc ^= xxRound(0, v)
	return acc*xxPrime1 + xxPrime4
}

// ordinals numbers repeated keys within a batch (the ordinal of record_id
// and span_key): next returns 0 for a key's first occurrence, 1 for its
// second, and so on, until reset. An open-addressing table indexed by the
// key's low bits (the keys are XXH64 values), at most half full: a few
// instructions per record where a Go map took about 150.
type ordinals struct {
	slots []ordinalSlot // a power of two long; count 0 marks an empty slot
	used  int
}

type ordinalSlot struct {
	key   uint64
	count uint32 // occurrences of key so far
}

// minOrdinalSlots is the smallest table.
const minOrdinalSlots = 64

// next returns how many times key was seen before since reset, and counts
// this occurrence.
func (o *ordinals) next(key uint64) uint32 {
	if 2*(o.used+1) > len(o.slots) {
		o.grow()
	}
	mask := uint64(len(o.slots) - 1)
	for i := key & mask; ; i = (i + 1) & mask {
		s := &o.slots[i]
		if s.count == 0 {
			s.key, s.count = key, 1
			o.used++
			return 0
		}
		if s.key == key {
			s.count++
			return s.count - 1
		}
	}
}

// grow doubles the table, keeping its counts.
func (o *ordinals) grow() {
	old := o.slots
	o.slots = make([]ordinalSlot, max(minOrdinalSlots, 2*len(old)))
	mask := uint64(len(o.slots) - 1)
	for _, s := range old {
		if s.count == 0 {
			continue
		}
		i := s.key & mask
		for o.slots[i].count != 0 {
			i = (i + 1) & mask
		}
		o.slots[i] = s
	}
}

// reset forgets every key. The table keeps its size, but a table more than
// eight times what the last batch needed shrinks (to a prefix of itself),
// so that one huge batch does not make every later reset clear it all.
func (o *ordinals) reset() {
	clear(o.slots)
	if n := len(o.slots); n > minOrdinalSlots && 8*o.used < n {
		o.slots = o.slots[:max(minOrdinalSlots, n/2)]
	}
	o.used = 0
}

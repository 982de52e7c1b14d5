package questdbexporter

import (
	"encoding/binary"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// hash64 is a running FNV-1a 64 state (the add methods return the new
// state); it computes the row identities series_id (metric tables) and
// record_id (otel_logs).
//
// Both are 64-bit FNV-1a (the published algorithm: offset basis
// 14695981039346656037, prime 1099511628211, xor then multiply per byte; the
// same values as hash/fnv.New64a) over a canonical byte encoding of the row's
// identity. FNV-1a has no seed, so an id is the same in every process, on
// every machine and in every version of this exporter; a change to the
// encoding below is a breaking change to stored data, and hash_test.go pins
// fixed values so it cannot happen by accident. (hash/maphash would be faster
// but is seeded per process.)
//
// The encoding hashes the values exactly as they are stored in the row's
// columns (UTF-8 already repaired, attribute maps as the sorted-key JSON of
// the *_attributes columns, empty maps as zero-length JSON), so an id can be
// recomputed from a stored row. Integers are little-endian; field(x) is the
// byte length of x as unsigned LEB128 followed by x, which keeps adjacent
// variable-length fields from running into each other ("ab"+"c" ≠ "a"+"bc").
//
//	series_id = FNV1a64( 'S',
//	    field(resource_attributes JSON),
//	    field(scope_name), field(scope_version), field(scope_attributes JSON),
//	    kind byte (1 gauge, 2 sum, 3 histogram, 4 exponential histogram, 5 summary),
//	    field(metric_name),
//	    field(attributes JSON) )
//
// The kind is part of the identity so that one name used by two instruments
// gives two series; unit and description are not (a reworded description must
// not fork a series). service.name is inside the resource attributes.
//
//	record_id = FNV1a64( 'R',
//	    field(resource_attributes JSON),
//	    field(scope_name), field(scope_version), field(scope_attributes JSON),
//	    u64 time_unix_nano, u64 observed_time_unix_nano (as received, 0 if unset),
//	    u32 severity_number, field(severity_text),
//	    body kind byte (pcommon.ValueType), field(body text as stored),
//	    field(attributes JSON), 16 bytes trace_id, 8 bytes span_id,
//	    u32 flags, field(event_name), u32 dropped_attributes_count,
//	    u32 ordinal )
//
// ordinal numbers identical records within one batch (0 for the first, 1 for
// its first repeat, ...), so two genuinely repeated log lines stay two rows
// under DEDUP while a replayed batch produces the same ids again.
//
// Resource and scope are hashed once per ResourceMetrics/ScopeMetrics (and
// ResourceLogs/ScopeLogs): FNV-1a's state is the running 64-bit value, so the
// per-row hash continues from the cached prefix.
//
// Collisions, assuming the ids behave as uniform 64-bit values: among n
// distinct identities the chance of any collision is about n²/2⁶⁵. For 10⁶
// series that is 2.7·10⁻⁸. For 10⁹ log records a day it is about 3 % a day,
// but the DEDUP key is (timestamp, record_id), so two records merge only if
// they also share the nanosecond timestamp: even 10⁶ records on one timestamp
// collide with probability 2.7·10⁻⁸.
type hash64 uint64

const (
	fnvOffset64 hash64 = 14695981039346656037
	fnvPrime64  hash64 = 1099511628211
)

// Domain tags: the first byte of each identity.
const (
	seriesTag byte = 'S'
	recordTag byte = 'R'
)

func newHash(tag byte) hash64 { return fnvOffset64.addByte(tag) }

func (h hash64) addByte(b byte) hash64 {
	return (h ^ hash64(b)) * fnvPrime64
}

func (h hash64) addBytes(b []byte) hash64 {
	for _, c := range b {
		h = (h ^ hash64(c)) * fnvPrime64
	}
	return h
}

func (h hash64) addString(s string) hash64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ hash64(s[i])) * fnvPrime64
	}
	return h
}

func (h hash64) addUvarint(v uint64) hash64 {
	for v >= 0x80 {
		h = h.addByte(byte(v) | 0x80)
		v >>= 7
	}
	return h.addByte(byte(v))
}

// addField hashes a length-prefixed byte string.
func (h hash64) addField(b []byte) hash64 {
	return h.addUvarint(uint64(len(b))).addBytes(b)
}

// addFieldString is addField for a string that is already valid UTF-8.
func (h hash64) addFieldString(s string) hash64 {
	return h.addUvarint(uint64(len(s))).addString(s)
}

func (h hash64) addUint64(v uint64) hash64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	return h.addBytes(b[:])
}

func (h hash64) addUint32(v uint32) hash64 {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	return h.addBytes(b[:])
}

// resourceHash starts an identity with its tag and the resource, once per
// ResourceMetrics or ResourceLogs.
func resourceHash(tag byte, resourceJSON []byte) hash64 {
	return newHash(tag).addField(resourceJSON)
}

// addScope continues an identity with the scope, once per ScopeMetrics or
// ScopeLogs.
func (h hash64) addScope(name, version string, scopeJSON []byte) hash64 {
	return h.addFieldString(name).addFieldString(version).addField(scopeJSON)
}

// addMetric continues a series state with the metric kind and name, once per
// Metric.
func (h hash64) addMetric(kind metricKind, name string) hash64 {
	return h.addByte(byte(kind)).addFieldString(name)
}

// seriesID finishes a series state with the data point's attribute JSON.
func (h hash64) seriesID(attributesJSON []byte) int64 {
	return int64(h.addField(attributesJSON))
}

// recordFields are a log record's identity fields, text as stored (UTF-8
// repaired).
type recordFields struct {
	time, observed uint64
	severityNumber uint32
	severityText   string
	bodyKind       pcommon.ValueType
	body           []byte
	attributesJSON []byte
	traceID        [16]byte
	spanID         [8]byte
	flags          uint32
	eventName      string
	dropped        uint32
}

// addRecord continues a record state with every field of the record; the
// result is the key under which identical records of a batch are counted.
func (h hash64) addRecord(r *recordFields) hash64 {
	h = h.addUint64(r.time).addUint64(r.observed)
	h = h.addUint32(r.severityNumber).addFieldString(r.severityText)
	h = h.addByte(byte(r.bodyKind)).addField(r.body)
	h = h.addField(r.attributesJSON).addBytes(r.traceID[:]).addBytes(r.spanID[:])
	h = h.addUint32(r.flags).addFieldString(r.eventName).addUint32(r.dropped)
	return h
}

// recordID finishes a record state with the record's ordinal among identical
// records of its batch.
func (h hash64) recordID(ordinal uint32) int64 {
	return int64(h.addUint32(ordinal))
}

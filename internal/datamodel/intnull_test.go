package datamodel

import (
	"math"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// invAvalanche undoes xxAvalanche (each of its steps is a bijection), so a
// test can pick the input that hashes to a given value.
func invAvalanche(h uint64) uint64 {
	h ^= h >> 32
	h *= mulInverse(xxPrime3)
	h ^= h>>29 ^ h>>58
	h *= mulInverse(xxPrime2)
	h ^= h >> 33
	return h
}

// mulInverse is the inverse of odd a modulo 2^64 (Newton's iteration).
func mulInverse(a uint64) uint64 {
	x := a
	for range 6 {
		x *= 2 - a*x
	}
	return x
}

// TestKeysNeverNull: the hash that equals QuestDB's LONG NULL
// (math.MinInt64) is never a key column's value: series_id, record_id and
// span_key (recordID) all take math.MinInt64+1 instead; every other hash is
// its own value.
func TestKeysNeverNull(t *testing.T) {
	const null = uint64(1) << 63
	// xxh64 of no bytes is xxAvalanche(seed + prime5).
	seed := invAvalanche(null) - xxPrime5
	if xxh64(seed, nil) != null {
		t.Fatal("the test's seed does not hash to the NULL value")
	}
	if got := seriesID(seed, nil); got != math.MinInt64+1 {
		t.Fatalf("series_id of a NULL hash = %#x, want math.MinInt64+1", got)
	}
	// recordID(key, 0) is xxAvalanche(rotl(key+prime5+4, 23)*prime2 + prime3).
	g := (invAvalanche(null) - xxPrime3) * mulInverse(xxPrime2)
	key := (g>>23 | g<<41) - xxPrime5 - 4
	var zero [4]byte
	if xxh64(key, zero[:]) != null {
		t.Fatal("the test's key does not hash to the NULL value")
	}
	if got := recordID(key, 0); got != math.MinInt64+1 {
		t.Fatalf("record_id/span_key of a NULL hash = %#x, want math.MinInt64+1", got)
	}
	for _, h := range []uint64{0, 1, null - 1, null + 1, math.MaxUint64} {
		if got := keyID(h); got != int64(h) {
			t.Fatalf("keyID(%#x) = %#x, want it unchanged", h, got)
		}
	}
}

func TestIntQuantity(t *testing.T) {
	for v, want := range map[int32]int32{
		math.MinInt32: math.MinInt32 + 1, math.MinInt32 + 1: math.MinInt32 + 1, -1: -1, 0: 0, math.MaxInt32: math.MaxInt32,
	} {
		if got := intQuantity(v); got != want {
			t.Errorf("intQuantity(%d) = %d, want %d", v, got, want)
		}
	}
}

// TestIntColumnsAtTheNullValue: pdata values that are QuestDB's INT NULL
// as int32 reach the rows as intnull.go decides: quantities one above it,
// flags words as they are (they read back as NULL, as documented).
func TestIntColumnsAtTheNullValue(t *testing.T) {
	ld, lrs := oneScopeLogs()
	lr := lrs.AppendEmpty()
	lr.SetTimestamp(pcommon.Timestamp(testT1))
	lr.SetSeverityNumber(plog.SeverityNumber(math.MinInt32))
	lr.SetFlags(plog.LogRecordFlags(0x80000000))
	row := encodeLogRows(t, ld, 1)[0]
	if row["severity_number"] != int32(math.MinInt32+1) || row["trace_flags"] != int32(math.MinInt32) {
		t.Fatalf("severity_number %v trace_flags %v; want %d and the flags word's bits", row["severity_number"], row["trace_flags"], math.MinInt32+1)
	}

	md, m := oneMetric("size")
	dp := m.SetEmptyExponentialHistogram().DataPoints().AppendEmpty()
	dp.SetTimestamp(pcommon.Timestamp(testT1))
	dp.SetScale(math.MinInt32)
	dp.Positive().SetOffset(math.MinInt32)
	dp.Negative().SetOffset(math.MinInt32)
	dp.SetFlags(pmetric.DataPointFlags(0x80000000))
	h := newHarness(t, 0, EncoderConfig{})
	h.metrics(md)
	mrow := h.oneRow("otel_metrics_exp_histogram")
	for _, col := range []string{"scale", "positive_offset", "negative_offset"} {
		if mrow[col] != int32(math.MinInt32+1) {
			t.Errorf("%s = %v, want %d", col, mrow[col], math.MinInt32+1)
		}
	}
	if mrow["flags"] != int32(math.MinInt32) {
		t.Errorf("flags = %v, want the flags word's bits", mrow["flags"])
	}

	td, spans := oneScopeSpans()
	sp := spans.AppendEmpty()
	sp.SetStartTimestamp(pcommon.Timestamp(testT1))
	sp.SetFlags(0x80000000)
	ht := newHarness(t, 0, EncoderConfig{})
	ht.traces(td)
	srow := ht.oneRow("otel_traces")
	if srow["flags"] != int32(math.MinInt32) {
		t.Errorf("span flags = %v, want the flags word's bits", srow["flags"])
	}
}

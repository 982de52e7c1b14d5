package datamodel

import (
	"math"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// OTel times are uint64 nanoseconds; QuestDB's TIMESTAMP_NANOS holds
// 0..2^63-1, and 2^63 written as an int64 is its NULL value (and a
// negative designated timestamp is refused). A time at or past 2^63 is
// therefore taken as unset, like 0: the designated timestamp falls back as
// documented, any other time column stays NULL. The largest value QuestDB
// holds is kept.
func TestTimesPastTimestampNanos(t *testing.T) {
	const past = pcommon.Timestamp(1 << 63)
	const last = pcommon.Timestamp(math.MaxInt64)

	md, m := oneMetric("s")
	sum := m.SetEmptySum()
	dp := sum.DataPoints().AppendEmpty()
	dp.SetTimestamp(past)
	dp.SetStartTimestamp(past)
	dp.SetDoubleValue(1)
	dp = sum.DataPoints().AppendEmpty()
	dp.SetTimestamp(math.MaxUint64)
	dp.SetStartTimestamp(last)
	dp.SetDoubleValue(2)
	dp = sum.DataPoints().AppendEmpty()
	dp.SetTimestamp(last)
	dp.SetDoubleValue(3)
	h := newHarness(t, 0, EncoderConfig{})
	h.metrics(md)
	rows := h.table("otel_metrics_sum").rows
	if len(rows) != 3 {
		t.Fatalf("%d sum rows, want 3", len(rows))
	}
	for i, want := range []struct {
		designated int64
		start      any // nil: NULL
	}{{exportTime.UnixNano(), nil}, {exportTime.UnixNano(), int64(last)}, {int64(last), nil}} {
		if got := rows[i][""]; got != want.designated {
			t.Errorf("row %d: designated timestamp %v, want %v", i, got, want.designated)
		}
		if got := rows[i]["start_timestamp"]; got != want.start {
			t.Errorf("row %d: start_timestamp %v, want %v", i, got, want.start)
		}
	}

	ld, lrs := oneScopeLogs()
	lr := lrs.AppendEmpty()
	lr.SetTimestamp(past)
	lr.SetObservedTimestamp(pcommon.Timestamp(testT0))
	lr = lrs.AppendEmpty()
	lr.SetTimestamp(math.MaxUint64)
	lr.SetObservedTimestamp(past)
	h = newHarness(t, 0, EncoderConfig{})
	h.logs(ld)
	logs := h.table("otel_logs").rows
	if len(logs) != 2 {
		t.Fatalf("%d log rows, want 2", len(logs))
	}
	if got := logs[0][""]; got != testT0 {
		t.Errorf("log 0: designated timestamp %v, want the observed time %d", got, testT0)
	}
	if got, ok := logs[1][""], logs[1]["observed_timestamp"]; got != exportTime.UnixNano() || ok != nil {
		t.Errorf("log 1: designated timestamp %v, observed %v; want the export time and NULL", got, ok)
	}
}

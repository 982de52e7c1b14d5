package datamodel

import (
	"encoding/hex"
	"math"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// oneScopeLogs returns a batch with one resource and one scope.
func oneScopeLogs() (plog.Logs, plog.LogRecordSlice) {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "checkout")
	rl.Resource().Attributes().PutStr("host.name", "h1")
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("io.test")
	sl.Scope().SetVersion("1.0")
	return ld, sl.LogRecords()
}

func TestLogRows(t *testing.T) {
	ld, lrs := oneScopeLogs()
	full := lrs.AppendEmpty()
	full.SetTimestamp(pcommon.Timestamp(testT1))
	full.SetObservedTimestamp(pcommon.Timestamp(testT1 + 5))
	full.SetSeverityNumber(plog.SeverityNumberError)
	full.SetSeverityText("ERROR")
	full.Body().SetStr("disk \"full\"\n")
	full.Attributes().PutStr("user", "u1")
	full.Attributes().PutInt("attempt", 3)
	full.SetTraceID(pcommon.TraceID{0: 0x0a, 15: 0xff})
	full.SetSpanID(pcommon.SpanID{0: 0x01, 7: 0xee})
	full.SetFlags(plog.DefaultLogRecordFlags.WithIsSampled(true))
	full.SetEventName("disk.full")
	observedOnly := lrs.AppendEmpty()
	observedOnly.SetObservedTimestamp(pcommon.Timestamp(testT0))
	lrs.AppendEmpty() // no time at all: export time; empty body: NULL

	h := newHarness(t, 0, EncoderConfig{})
	st := h.logs(ld)
	if st.Rows[tableLogs] != 3 || st.Skipped != [NumSkipReasons]int{} {
		t.Fatalf("stats = %+v", st)
	}
	rows := h.table("otel_logs").rows
	resource := map[string]any{
		"service_name": "checkout", "scope_name": "io.test", "scope_version": "1.0",
		"resource_attributes": testResJSON, "severity_number": int32(0), "trace_flags": int32(0),
	}
	checkRow(t, rows[0], with(resource, "", testT1, "observed_timestamp", testT1+5,
		"severity_text", "ERROR", "severity_number", int32(17), "body", "disk \"full\"\n",
		"trace_id", "0a0000000000000000000000000000ff", "span_id", "01000000000000ee", "trace_flags", int32(1),
		"event_name", "disk.full", "attributes", `{"attempt":3,"user":"u1"}`, "record_id", rows[0]["record_id"]))
	checkRow(t, rows[1], with(resource, "", testT0, "observed_timestamp", testT0, "record_id", rows[1]["record_id"]))
	checkRow(t, rows[2], with(resource, "", exportTime.UnixNano(), "record_id", rows[2]["record_id"]))
	for i, row := range rows {
		if _, ok := row["record_id"].(int64); !ok {
			t.Fatalf("row %d has no LONG record_id", i)
		}
	}
	checkTypes(t, h.table("otel_logs").types, map[string]qwp.ColumnType{
		"": qwp.TypeTimestampNanos, "observed_timestamp": qwp.TypeTimestampNanos, "service_name": qwp.TypeSymbol,
		"severity_text": qwp.TypeSymbol, "severity_number": qwp.TypeInt, "body": qwp.TypeVarchar,
		"trace_id": qwp.TypeVarchar, "span_id": qwp.TypeVarchar, "trace_flags": qwp.TypeInt,
		"event_name": qwp.TypeSymbol, "scope_name": qwp.TypeSymbol, "scope_version": qwp.TypeSymbol,
		"resource_attributes": qwp.TypeSymbol, "attributes": qwp.TypeVarchar, "record_id": qwp.TypeLong,
	})
}

func TestLogBodyKinds(t *testing.T) {
	tests := []struct {
		name string
		set  func(v pcommon.Value)
		want any // nil: NULL
	}{
		{"string as is", func(v pcommon.Value) { v.SetStr(`{"not":"parsed"}`) }, `{"not":"parsed"}`},
		{"empty string", func(v pcommon.Value) { v.SetStr("") }, ""},
		{"int", func(v pcommon.Value) { v.SetInt(-5) }, "-5"},
		{"double", func(v pcommon.Value) { v.SetDouble(0.125) }, "0.125"},
		{"NaN", func(v pcommon.Value) { v.SetDouble(math.NaN()) }, `"NaN"`},
		{"bool", func(v pcommon.Value) { v.SetBool(false) }, "false"},
		{"bytes", func(v pcommon.Value) { v.SetEmptyBytes().FromRaw([]byte{0xff, 0}) }, `"/wA="`},
		{"map sorted", func(v pcommon.Value) {
			m := v.SetEmptyMap()
			m.PutStr("msg", "hi")
			m.PutInt("code", 1)
		}, `{"code":1,"msg":"hi"}`},
		{"slice", func(v pcommon.Value) { v.SetEmptySlice().AppendEmpty().SetBool(true) }, `[true]`},
		{"empty", func(pcommon.Value) {}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ld, lrs := oneScopeLogs()
			lr := lrs.AppendEmpty()
			lr.SetTimestamp(1)
			tc.set(lr.Body())
			h := newHarness(t, 0, EncoderConfig{})
			h.logs(ld)
			got, ok := h.oneRow("otel_logs")["body"]
			if tc.want == nil {
				if ok {
					t.Fatalf("body = %q, want NULL", got)
				}
				return
			}
			if got != tc.want {
				t.Fatalf("body = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLogRecordIDs(t *testing.T) {
	build := func(mutate func(lr plog.LogRecord)) plog.Logs {
		ld, lrs := oneScopeLogs()
		lr := lrs.AppendEmpty()
		lr.SetTimestamp(pcommon.Timestamp(testT1))
		lr.Body().SetStr("same")
		lr.Attributes().PutStr("k", "v")
		if mutate != nil {
			mutate(lr)
		}
		return ld
	}
	idOf := func(ld plog.Logs) int64 {
		h := newHarness(t, 0, EncoderConfig{})
		h.logs(ld)
		return h.oneRow("otel_logs")["record_id"].(int64)
	}
	base := idOf(build(nil))
	if again := idOf(build(nil)); again != base {
		t.Fatalf("record_id is not stable across encoders: %v then %v", base, again)
	}
	// Every field is part of the identity.
	for name, mutate := range map[string]func(lr plog.LogRecord){
		"time":          func(lr plog.LogRecord) { lr.SetTimestamp(pcommon.Timestamp(testT1 + 1)) },
		"observed":      func(lr plog.LogRecord) { lr.SetObservedTimestamp(1) },
		"severity":      func(lr plog.LogRecord) { lr.SetSeverityNumber(plog.SeverityNumberWarn) },
		"severity_text": func(lr plog.LogRecord) { lr.SetSeverityText("W") },
		"body":          func(lr plog.LogRecord) { lr.Body().SetStr("other") },
		"body kind":     func(lr plog.LogRecord) { lr.Body().SetEmptyBytes().FromRaw([]byte("same")) },
		"attributes":    func(lr plog.LogRecord) { lr.Attributes().PutStr("k", "w") },
		"trace_id":      func(lr plog.LogRecord) { lr.SetTraceID(pcommon.TraceID{1}) },
		"span_id":       func(lr plog.LogRecord) { lr.SetSpanID(pcommon.SpanID{1}) },
		"flags":         func(lr plog.LogRecord) { lr.SetFlags(1) },
		"event_name":    func(lr plog.LogRecord) { lr.SetEventName("e") },
		"dropped":       func(lr plog.LogRecord) { lr.SetDroppedAttributesCount(1) },
	} {
		if idOf(build(mutate)) == base {
			t.Errorf("changing %s keeps the record_id", name)
		}
	}
	// Resource and scope too.
	ld := build(nil)
	ld.ResourceLogs().At(0).Resource().Attributes().PutStr("host.name", "h2")
	if idOf(ld) == base {
		t.Error("changing the resource keeps the record_id")
	}
	ld = build(nil)
	ld.ResourceLogs().At(0).ScopeLogs().At(0).Scope().SetVersion("2.0")
	if idOf(ld) == base {
		t.Error("changing the scope keeps the record_id")
	}

	// Repeats within a batch get distinct ids; the ordinal restarts per batch.
	ld = build(nil)
	lrs := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
	lrs.At(0).CopyTo(lrs.AppendEmpty())
	lrs.At(0).CopyTo(lrs.AppendEmpty())
	h := newHarness(t, 0, EncoderConfig{})
	h.logs(ld)
	h.logs(ld)
	rows := h.table("otel_logs").rows
	if rows[0]["record_id"] != base {
		t.Fatalf("first of the repeats has id %v, want %v (ordinal 0)", rows[0]["record_id"], base)
	}
	ids := map[any]bool{}
	for _, row := range rows[:3] {
		ids[row["record_id"]] = true
	}
	if len(ids) != 3 {
		t.Fatalf("three identical records in a batch got %d distinct ids", len(ids))
	}
	for i := range 3 {
		if rows[3+i]["record_id"] != rows[i]["record_id"] {
			t.Fatalf("replaying the batch changed record %d's id", i)
		}
	}
}

func TestLogOversizedRecordSkipped(t *testing.T) {
	const limit = 8192
	ld, lrs := oneScopeLogs()
	for i := range 30 {
		lr := lrs.AppendEmpty()
		lr.SetTimestamp(pcommon.Timestamp(testT1 + int64(i)))
		lr.Body().SetStr("line")
		lr.Attributes().PutInt("i", int64(i))
		if i == 7 {
			lr.Body().SetStr(strings.Repeat("b", limit))
		}
		if i == 8 {
			lr.SetSeverityText(strings.Repeat("s", limit)) // a SYMBOL: must not enter the dictionary
		}
	}
	h := newHarness(t, limit, EncoderConfig{})
	st := h.logs(ld)
	if st.Rows[tableLogs] != 28 || st.Skipped[skipRowTooLarge] != 2 {
		t.Fatalf("stats = %+v, want 28 rows and 2 too-large skips", st)
	}
	for _, row := range h.table("otel_logs").rows {
		if a := row["attributes"]; a == `{"i":7}` || a == `{"i":8}` {
			t.Fatalf("oversized record written: %v", a)
		}
	}
	for id := range h.dict.Len() {
		if len(h.dict.Entry(id)) >= limit {
			t.Fatalf("oversized severity_text entered the symbol dictionary (id %d)", id)
		}
	}
}

func TestLogPromotedAndFrameSplit(t *testing.T) {
	promoted, err := PromotedColumns([]string{"host.name", "user"})
	if err != nil {
		t.Fatal(err)
	}
	ld, lrs := oneScopeLogs()
	n := 300
	for i := range n {
		lr := lrs.AppendEmpty()
		lr.SetTimestamp(pcommon.Timestamp(testT1 + int64(i)))
		lr.Body().SetStr(strings.Repeat("z", i%50))
		if i%2 == 0 {
			lr.Attributes().PutStr("user", "u")
		}
	}
	h := newHarness(t, 900, EncoderConfig{Promoted: promoted})
	st := h.logs(ld)
	rows := h.table("otel_logs").rows
	if st.Rows[tableLogs] != n || len(rows) != n || len(h.frames) < 5 {
		t.Fatalf("stats %+v, %d rows decoded in %d frames", st, len(rows), len(h.frames))
	}
	for i, row := range rows {
		if row[""] != testT1+int64(i) {
			t.Fatalf("row %d is the record of time %v: order or completeness broken", i, row[""])
		}
		if row["host_name"] != "h1" {
			t.Fatalf("row %d host_name = %v, want the resource's h1", i, row["host_name"])
		}
		if _, ok := row["user"]; ok != (i%2 == 0) {
			t.Fatalf("row %d user set=%v", i, ok)
		}
	}
}

// TestEncodeHexIsHexEncode: every byte value at every position of a trace
// and a span id encodes as hex.Encode does.
func TestEncodeHexIsHexEncode(t *testing.T) {
	for v := range 256 {
		var trace [16]byte
		for i := range trace {
			trace[i] = byte(v + i*7) // every byte value at every position over the runs
		}
		var got [32]byte
		encodeTraceHex(&got, &trace)
		if want := hex.EncodeToString(trace[:]); string(got[:]) != want {
			t.Fatalf("encodeTraceHex = %s\nwant             %s", got[:], want)
		}
		span := [8]byte(trace[8:])
		var gotSpan [16]byte
		encodeHex8(&gotSpan, &span)
		if want := hex.EncodeToString(span[:]); string(gotSpan[:]) != want {
			t.Fatalf("encodeHex8 = %s\nwant        %s", gotSpan[:], want)
		}
	}
}

// TestLogServiceAndSeverityRuns: service_name and severity_text go through
// runs kept across records; every row must still carry its own record's
// values when the service changes with the resource, the severity text
// changes, repeats, comes back or is empty, across frames (a small frame
// limit) and across batches.
func TestLogServiceAndSeverityRuns(t *testing.T) {
	severities := []string{"INFO", "INFO", "WARN", "", "INFO", "WARN", "WARN", "ERROR"}
	batch := func() (plog.Logs, []map[string]any) {
		ld := plog.NewLogs()
		var want []map[string]any
		for _, svc := range []string{"a", "b", ""} {
			rl := ld.ResourceLogs().AppendEmpty()
			if svc != "" {
				rl.Resource().Attributes().PutStr("service.name", svc)
			}
			lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
			for _, sev := range severities {
				lr := lrs.AppendEmpty()
				lr.SetTimestamp(pcommon.Timestamp(testT1))
				lr.SetSeverityText(sev)
				lr.Body().SetStr(strings.Repeat("b", 100))
				w := map[string]any{}
				if svc != "" {
					w["service_name"] = svc
				}
				if sev != "" {
					w["severity_text"] = sev
				}
				want = append(want, w)
			}
		}
		return ld, want
	}
	h := newHarness(t, 1200, EncoderConfig{}) // a few rows per frame
	var want []map[string]any
	for range 2 {
		ld, w := batch()
		h.logs(ld)
		want = append(want, w...)
	}
	rows := h.table("otel_logs").rows
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	if len(h.frames) < 6 {
		t.Fatalf("%d frames: too few for the runs to cross frames", len(h.frames))
	}
	for i, row := range rows {
		for _, col := range []string{"service_name", "severity_text"} {
			if got, exp := row[col], want[i][col]; got != exp {
				t.Fatalf("row %d: %s = %v, want %v", i, col, got, exp)
			}
		}
	}
}

// TestLogTraceAndSpanIDsNullOnlyWhenZero: trace_id and span_id are NULL
// exactly when every byte of the id is zero (the ids are tested as words:
// a byte set in either half of the trace id, or the last of the span id,
// must keep the value).
func TestLogTraceAndSpanIDsNullOnlyWhenZero(t *testing.T) {
	cases := []struct {
		trace pcommon.TraceID
		span  pcommon.SpanID
	}{
		{},
		{pcommon.TraceID{0: 1}, pcommon.SpanID{0: 1}},
		{pcommon.TraceID{7: 0x80}, pcommon.SpanID{7: 1}},
		{pcommon.TraceID{8: 1}, pcommon.SpanID{3: 0xff}},
		{pcommon.TraceID{15: 0xff}, pcommon.SpanID{}},
	}
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for _, c := range cases {
		lr := lrs.AppendEmpty()
		lr.SetTimestamp(pcommon.Timestamp(testT1))
		lr.SetTraceID(c.trace)
		lr.SetSpanID(c.span)
	}
	rows := encodeLogRows(t, ld, len(cases))
	for i, c := range cases {
		trace, hasTrace := rows[i]["trace_id"]
		if hasTrace != !c.trace.IsEmpty() || (hasTrace && trace != hex.EncodeToString(c.trace[:])) {
			t.Errorf("row %d: trace_id %v (set %v) for %x", i, trace, hasTrace, c.trace)
		}
		span, hasSpan := rows[i]["span_id"]
		if hasSpan != !c.span.IsEmpty() || (hasSpan && span != hex.EncodeToString(c.span[:])) {
			t.Errorf("row %d: span_id %v (set %v) for %x", i, span, hasSpan, c.span)
		}
	}
}

// TestLogSeverityTextRepairedOnRepeat: a severity text equal to the previous
// record's skips the UTF-8 check; an invalid text (which never equals a
// repaired one) must still be repaired, repeated or not, and a valid one
// after it kept.
func TestLogSeverityTextRepairedOnRepeat(t *testing.T) {
	texts := []string{"INFO", "bad\xff", "bad\xff", "bad\uFFFD", "INFO", "INFO"}
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for _, s := range texts {
		lr := lrs.AppendEmpty()
		lr.SetTimestamp(pcommon.Timestamp(testT1))
		lr.SetSeverityText(s)
	}
	rows := encodeLogRows(t, ld, len(texts))
	for i, s := range texts {
		if got, want := rows[i]["severity_text"], validString(s); got != want {
			t.Fatalf("row %d: severity_text %q, want %q", i, got, want)
		}
	}
}

// encodeLogRows encodes ld with the default configuration and returns the
// otel_logs rows, failing the test unless there are want of them.
func encodeLogRows(t *testing.T, ld plog.Logs, want int) []map[string]any {
	t.Helper()
	h := newHarness(t, 0, EncoderConfig{})
	h.logs(ld)
	rows := h.table("otel_logs").rows
	if len(rows) != want {
		t.Fatalf("%d rows, want %d", len(rows), want)
	}
	return rows
}

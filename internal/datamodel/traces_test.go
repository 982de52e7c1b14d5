package datamodel

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/questdbexporter/questdbexporter/qwp"
)

func (h *harness) traces(td ptrace.Traces) Stats {
	h.t.Helper()
	st, err := h.re.EncodeTraces(td, h.emit)
	if err != nil {
		h.t.Fatalf("EncodeTraces: %v", err)
	}
	h.flush()
	return st
}

// oneScopeSpans returns a batch with one resource and one scope.
func oneScopeSpans() (ptrace.Traces, ptrace.SpanSlice) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "checkout")
	rs.Resource().Attributes().PutStr("host.name", "h1")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("io.test")
	ss.Scope().SetVersion("1.0")
	return td, ss.Spans()
}

func TestSpanRows(t *testing.T) {
	td, spans := oneScopeSpans()
	sp := spans.AppendEmpty()
	sp.SetTraceID(pcommon.TraceID{0: 0x0a, 15: 0xff})
	sp.SetSpanID(pcommon.SpanID{0: 0x01, 7: 0xee})
	sp.SetParentSpanID(pcommon.SpanID{0: 0x02, 7: 0xdd})
	sp.TraceState().FromRaw("rojo=00f067aa0ba902b7")
	sp.SetFlags(0x301)
	sp.SetName("GET /items/{id}")
	sp.SetKind(ptrace.SpanKindServer)
	sp.SetStartTimestamp(pcommon.Timestamp(testT1))
	sp.SetEndTimestamp(pcommon.Timestamp(testT1 + 1_500_000))
	sp.Attributes().PutStr("http.route", "/items/{id}")
	sp.Attributes().PutInt("http.response.status_code", 500)
	sp.SetDroppedAttributesCount(1)
	ev := sp.Events().AppendEmpty()
	ev.SetTimestamp(pcommon.Timestamp(testT1 + 1000))
	ev.SetName("exception")
	ev.Attributes().PutStr("exception.type", "IOError")
	ev.SetDroppedAttributesCount(2)
	sp.Events().AppendEmpty().SetTimestamp(pcommon.Timestamp(testT1 + 2000)) // no name, no attributes
	sp.SetDroppedEventsCount(3)
	l := sp.Links().AppendEmpty()
	l.SetTraceID(pcommon.TraceID{0: 0x0b, 15: 0x01})
	l.SetSpanID(pcommon.SpanID{0: 0x0c, 7: 0x02})
	l.TraceState().FromRaw("k=v")
	l.Attributes().PutBool("sampled", true)
	l.SetDroppedAttributesCount(4)
	l.SetFlags(1)
	sp.Links().AppendEmpty() // an empty link: {}
	sp.SetDroppedLinksCount(5)
	sp.Status().SetCode(ptrace.StatusCodeError)
	sp.Status().SetMessage("upstream \"timeout\"")

	spans.AppendEmpty() // nothing set: export time, NULLs, zero counts

	h := newHarness(t, 0, EncoderConfig{})
	st := h.traces(td)
	if st.Rows[tableTraces] != 2 || st.Skipped != [NumSkipReasons]int{} {
		t.Fatalf("stats = %+v", st)
	}
	rows := h.table("otel_traces").rows
	resource := map[string]any{
		"service_name": "checkout", "scope_name": "io.test", "scope_version": "1.0",
		"resource_attributes": testResJSON, "flags": int32(0), "dropped_attributes_count": int32(0),
		"dropped_events_count": int32(0), "dropped_links_count": int32(0),
	}
	checkRow(t, rows[0], with(resource, "", testT1, "end_timestamp", testT1+1_500_000, "duration", int64(1_500_000),
		"span_name", "GET /items/{id}", "span_kind", "server",
		"trace_id", "0a0000000000000000000000000000ff", "span_id", "01000000000000ee", "parent_span_id", "02000000000000dd",
		"trace_state", "rojo=00f067aa0ba902b7", "status_code", "error", "status_message", `upstream "timeout"`,
		"attributes", `{"http.response.status_code":500,"http.route":"/items/{id}"}`,
		"events", `[{"time_unix_nano":1700000000000001001,"name":"exception","attributes":{"exception.type":"IOError"},"dropped_attributes_count":2},`+
			`{"time_unix_nano":1700000000000002001,"name":""}]`,
		"links", `[{"trace_id":"0b000000000000000000000000000001","span_id":"0c00000000000002","trace_state":"k=v",`+
			`"attributes":{"sampled":true},"dropped_attributes_count":4,"flags":1},{}]`,
		"flags", int32(0x301), "dropped_attributes_count", int32(1), "dropped_events_count", int32(3),
		"dropped_links_count", int32(5), "span_key", rows[0]["span_key"]))
	checkRow(t, rows[1], with(resource, "", exportTime.UnixNano(), "span_kind", "unspecified", "status_code", "unset",
		"span_key", rows[1]["span_key"]))
	for i, row := range rows {
		if _, ok := row["span_key"].(int64); !ok {
			t.Fatalf("row %d has no LONG span_key", i)
		}
	}
	for _, col := range []string{"events", "links", "attributes"} {
		if !json.Valid([]byte(rows[0][col].(string))) {
			t.Errorf("%s is not valid JSON: %s", col, rows[0][col])
		}
	}
	checkTypes(t, h.table("otel_traces").types, map[string]qwp.ColumnType{
		"": qwp.TypeTimestampNanos, "end_timestamp": qwp.TypeTimestampNanos, "duration": qwp.TypeLong,
		"service_name": qwp.TypeSymbol, "span_name": qwp.TypeSymbol, "span_kind": qwp.TypeSymbol,
		"trace_id": qwp.TypeVarchar, "span_id": qwp.TypeVarchar, "parent_span_id": qwp.TypeVarchar,
		"trace_state": qwp.TypeVarchar, "status_code": qwp.TypeSymbol, "status_message": qwp.TypeVarchar,
		"scope_name": qwp.TypeSymbol, "scope_version": qwp.TypeSymbol, "resource_attributes": qwp.TypeSymbol,
		"attributes": qwp.TypeVarchar, "events": qwp.TypeVarchar, "links": qwp.TypeVarchar, "flags": qwp.TypeInt,
		"dropped_attributes_count": qwp.TypeInt, "dropped_events_count": qwp.TypeInt,
		"dropped_links_count": qwp.TypeInt, "span_key": qwp.TypeLong,
	})
}

func TestSpanTimes(t *testing.T) {
	const maxNanos = uint64(1<<63 - 1)
	tests := []struct {
		name       string
		start, end uint64
		want       map[string]any // designated, end_timestamp, duration; absent = NULL
	}{
		{"start and end", uint64(testT1), uint64(testT1) + 7, map[string]any{"": testT1, "end_timestamp": testT1 + 7, "duration": int64(7)}},
		{"zero length", uint64(testT1), uint64(testT1), map[string]any{"": testT1, "end_timestamp": testT1, "duration": int64(0)}},
		{"end before start: both kept, no duration", uint64(testT1), uint64(testT0), map[string]any{"": testT1, "end_timestamp": testT0}},
		{"no start: the end is designated", 0, uint64(testT1), map[string]any{"": testT1, "end_timestamp": testT1}},
		{"no end", uint64(testT1), 0, map[string]any{"": testT1}},
		{"end past TIMESTAMP_NANOS", uint64(testT1), maxNanos + 1, map[string]any{"": testT1}},
		{"neither", 0, 0, map[string]any{"": exportTime.UnixNano()}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			td, spans := oneScopeSpans()
			sp := spans.AppendEmpty()
			sp.SetStartTimestamp(pcommon.Timestamp(tc.start))
			sp.SetEndTimestamp(pcommon.Timestamp(tc.end))
			h := newHarness(t, 0, EncoderConfig{})
			h.traces(td)
			row := h.oneRow("otel_traces")
			for _, col := range []string{"", "end_timestamp", "duration"} {
				got, ok := row[col]
				want, wantOK := tc.want[col]
				if ok != wantOK || ok && got != want {
					t.Errorf("%q = %v (set %v), want %v (set %v)", col, got, ok, want, wantOK)
				}
			}
		})
	}
}

// TestSpanEventTimesExact: event times are JSON integers that keep every
// nanosecond, where a float64 would round them.
func TestSpanEventTimesExact(t *testing.T) {
	td, spans := oneScopeSpans()
	sp := spans.AppendEmpty()
	sp.SetStartTimestamp(pcommon.Timestamp(testT1))
	const evTime = uint64(1_700_000_000_123_456_789)
	if uint64(float64(evTime)) == evTime {
		t.Fatal("test time is exact as a float64; pick one that is not")
	}
	sp.Events().AppendEmpty().SetTimestamp(pcommon.Timestamp(evTime))
	h := newHarness(t, 0, EncoderConfig{})
	h.traces(td)
	dec := json.NewDecoder(strings.NewReader(h.oneRow("otel_traces")["events"].(string)))
	dec.UseNumber()
	var events []map[string]any
	if err := dec.Decode(&events); err != nil {
		t.Fatal(err)
	}
	if got := events[0]["time_unix_nano"].(json.Number).String(); got != "1700000000123456789" {
		t.Fatalf("event time = %s, want 1700000000123456789", got)
	}
}

func TestSpanKindAndStatusNames(t *testing.T) {
	for kind, want := range map[ptrace.SpanKind]string{
		ptrace.SpanKindUnspecified: "unspecified", ptrace.SpanKindInternal: "internal", ptrace.SpanKindServer: "server",
		ptrace.SpanKindClient: "client", ptrace.SpanKindProducer: "producer", ptrace.SpanKindConsumer: "consumer", 42: "42",
	} {
		if got := spanKindName(kind); got != want {
			t.Errorf("spanKindName(%d) = %q, want %q", kind, got, want)
		}
	}
	for code, want := range map[ptrace.StatusCode]string{
		ptrace.StatusCodeUnset: "unset", ptrace.StatusCodeOk: "ok", ptrace.StatusCodeError: "error", 9: "9",
	} {
		if got := statusCodeName(code); got != want {
			t.Errorf("statusCodeName(%d) = %q, want %q", code, got, want)
		}
	}
}

func TestSpanKeys(t *testing.T) {
	build := func(mutate func(sp ptrace.Span)) ptrace.Traces {
		td, spans := oneScopeSpans()
		sp := spans.AppendEmpty()
		sp.SetTraceID(pcommon.TraceID{1})
		sp.SetSpanID(pcommon.SpanID{2})
		sp.SetName("op")
		sp.SetStartTimestamp(pcommon.Timestamp(testT1))
		sp.SetEndTimestamp(pcommon.Timestamp(testT1 + 10))
		sp.Attributes().PutStr("k", "v")
		if mutate != nil {
			mutate(sp)
		}
		return td
	}
	keyOf := func(td ptrace.Traces) int64 {
		h := newHarness(t, 0, EncoderConfig{})
		h.traces(td)
		return h.oneRow("otel_traces")["span_key"].(int64)
	}
	base := keyOf(build(nil))
	if again := keyOf(build(nil)); again != base {
		t.Fatalf("span_key is not stable across encoders: %v then %v", base, again)
	}
	// Every field is part of the identity.
	for name, mutate := range map[string]func(sp ptrace.Span){
		"trace_id":       func(sp ptrace.Span) { sp.SetTraceID(pcommon.TraceID{3}) },
		"span_id":        func(sp ptrace.Span) { sp.SetSpanID(pcommon.SpanID{3}) },
		"parent":         func(sp ptrace.Span) { sp.SetParentSpanID(pcommon.SpanID{3}) },
		"trace_state":    func(sp ptrace.Span) { sp.TraceState().FromRaw("a=b") },
		"flags":          func(sp ptrace.Span) { sp.SetFlags(1) },
		"name":           func(sp ptrace.Span) { sp.SetName("op2") },
		"kind":           func(sp ptrace.Span) { sp.SetKind(ptrace.SpanKindClient) },
		"start":          func(sp ptrace.Span) { sp.SetStartTimestamp(pcommon.Timestamp(testT1 - 1)) },
		"end":            func(sp ptrace.Span) { sp.SetEndTimestamp(pcommon.Timestamp(testT1 + 11)) },
		"attributes":     func(sp ptrace.Span) { sp.Attributes().PutStr("k", "w") },
		"dropped attrs":  func(sp ptrace.Span) { sp.SetDroppedAttributesCount(1) },
		"event":          func(sp ptrace.Span) { sp.Events().AppendEmpty() },
		"dropped events": func(sp ptrace.Span) { sp.SetDroppedEventsCount(1) },
		"link":           func(sp ptrace.Span) { sp.Links().AppendEmpty() },
		"dropped links":  func(sp ptrace.Span) { sp.SetDroppedLinksCount(1) },
		"status code":    func(sp ptrace.Span) { sp.Status().SetCode(ptrace.StatusCodeOk) },
		"status message": func(sp ptrace.Span) { sp.Status().SetMessage("m") },
	} {
		if keyOf(build(mutate)) == base {
			t.Errorf("changing %s keeps the span_key", name)
		}
	}
	td := build(nil)
	td.ResourceSpans().At(0).Resource().Attributes().PutStr("host.name", "h2")
	if keyOf(td) == base {
		t.Error("changing the resource keeps the span_key")
	}
	td = build(nil)
	td.ResourceSpans().At(0).ScopeSpans().At(0).Scope().SetVersion("2.0")
	if keyOf(td) == base {
		t.Error("changing the scope keeps the span_key")
	}

	// All-zero and repeated ids: spans that differ elsewhere, and exact
	// repeats, keep distinct keys; a replayed batch yields the same keys.
	td, spans := oneScopeSpans()
	for i := range 3 {
		sp := spans.AppendEmpty()
		sp.SetStartTimestamp(pcommon.Timestamp(testT1)) // same timestamp: keys alone keep them apart
		sp.SetName([]string{"a", "b", "a"}[i])
	}
	h := newHarness(t, 0, EncoderConfig{})
	h.traces(td)
	h.traces(td)
	rows := h.table("otel_traces").rows
	keys := map[any]bool{}
	for _, row := range rows[:3] {
		keys[row["span_key"]] = true
	}
	if len(keys) != 3 {
		t.Fatalf("three zero-id spans (two identical) got %d distinct keys", len(keys))
	}
	for i := range 3 {
		if rows[3+i]["span_key"] != rows[i]["span_key"] {
			t.Fatalf("replaying the batch changed span %d's key", i)
		}
	}
}

// TestSpanBadInputStored: input a server would refuse is repaired and the
// span is stored; the strict decoder of the harness checks every frame.
func TestSpanBadInputStored(t *testing.T) {
	td, spans := oneScopeSpans()
	sp := spans.AppendEmpty()
	sp.SetStartTimestamp(pcommon.Timestamp(testT1))
	sp.SetEndTimestamp(pcommon.Timestamp(testT0)) // end before start
	sp.SetName("bad\xffname")
	sp.TraceState().FromRaw("k=\xfe")
	sp.Status().SetMessage("msg\xc3")
	sp.Attributes().PutStr("big", strings.Repeat("x", 200_000))
	sp.Attributes().PutStr("k\xff", "v\xff")
	sp.Events().AppendEmpty().SetName("ev\xff")
	l := sp.Links().AppendEmpty()
	l.TraceState().FromRaw("s=\xff")
	l.Attributes().PutStr("a", "\xff")

	h := newHarness(t, 0, EncoderConfig{})
	if st := h.traces(td); st.Rows[tableTraces] != 1 {
		t.Fatalf("stats = %+v, want the span stored", st)
	}
	row := h.oneRow("otel_traces")
	for col, want := range map[string]string{
		"span_name": "bad\uFFFDname", "trace_state": "k=\uFFFD", "status_message": "msg\uFFFD",
		"events": `[{"time_unix_nano":0,"name":"ev` + "\uFFFD" + `"}]`,
		"links":  `[{"trace_state":"s=` + "\uFFFD" + `","attributes":{"a":"` + "\uFFFD" + `"}}]`,
	} {
		if row[col] != want {
			t.Errorf("%s = %q, want %q", col, row[col], want)
		}
	}
	attrs := row["attributes"].(string)
	if !strings.Contains(attrs, `"k`+"\uFFFD"+`":"v`+"\uFFFD"+`"`) || len(attrs) < 200_000 {
		t.Errorf("attributes not stored repaired and whole: %.80q...", attrs)
	}
	if _, ok := row["duration"]; ok {
		t.Error("duration set for an end before the start")
	}
}

func TestSpanOversizedSkipped(t *testing.T) {
	const limit = 8192
	td, spans := oneScopeSpans()
	for i := range 30 {
		sp := spans.AppendEmpty()
		sp.SetStartTimestamp(pcommon.Timestamp(testT1 + int64(i)))
		sp.SetName("op")
		sp.Attributes().PutInt("i", int64(i))
		switch i {
		case 7:
			sp.Events().AppendEmpty().SetName(strings.Repeat("e", limit))
		case 8:
			sp.SetName(strings.Repeat("n", limit)) // a SYMBOL: must not enter the dictionary
		}
	}
	h := newHarness(t, limit, EncoderConfig{})
	st := h.traces(td)
	if st.Rows[tableTraces] != 28 || st.Skipped[skipRowTooLarge] != 2 {
		t.Fatalf("stats = %+v, want 28 rows and 2 too-large skips", st)
	}
	for _, row := range h.table("otel_traces").rows {
		if a := row["attributes"]; a == `{"i":7}` || a == `{"i":8}` {
			t.Fatalf("oversized span written: %v", a)
		}
	}
	for id := range h.dict.Len() {
		if len(h.dict.Entry(id)) >= limit {
			t.Fatalf("oversized span name entered the symbol dictionary (id %d)", id)
		}
	}
}

func TestSpanPromotedAndFrameSplit(t *testing.T) {
	promoted, err := PromotedColumns([]string{"host.name", "user"})
	if err != nil {
		t.Fatal(err)
	}
	td, spans := oneScopeSpans()
	n := 300
	for i := range n {
		sp := spans.AppendEmpty()
		sp.SetStartTimestamp(pcommon.Timestamp(testT1 + int64(i)))
		sp.SetName(strings.Repeat("z", i%50))
		if i%2 == 0 {
			sp.Attributes().PutStr("user", "u")
		}
	}
	h := newHarness(t, 2000, EncoderConfig{Promoted: promoted})
	st := h.traces(td)
	rows := h.table("otel_traces").rows
	if st.Rows[tableTraces] != n || len(rows) != n || len(h.frames) < 5 {
		t.Fatalf("stats %+v, %d rows decoded in %d frames", st, len(rows), len(h.frames))
	}
	for i, row := range rows {
		if row[""] != testT1+int64(i) {
			t.Fatalf("row %d is the span of time %v: order or completeness broken", i, row[""])
		}
		if row["host_name"] != "h1" {
			t.Fatalf("row %d host_name = %v, want the resource's h1", i, row["host_name"])
		}
		if _, ok := row["user"]; ok != (i%2 == 0) {
			t.Fatalf("row %d user set=%v", i, ok)
		}
	}
}

// TestTraceLogJoinKey: a log record and a span of the same trace carry equal
// trace_id (and span_id) values, so otel_logs and otel_traces join on them.
func TestTraceLogJoinKey(t *testing.T) {
	tid := pcommon.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	sid := pcommon.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	td, spans := oneScopeSpans()
	sp := spans.AppendEmpty()
	sp.SetTraceID(tid)
	sp.SetSpanID(sid)
	sp.SetStartTimestamp(pcommon.Timestamp(testT1))
	ld, lrs := oneScopeLogs()
	lr := lrs.AppendEmpty()
	lr.SetTraceID(tid)
	lr.SetSpanID(sid)
	lr.SetTimestamp(pcommon.Timestamp(testT1 + 5))

	h := newHarness(t, 0, EncoderConfig{})
	h.traces(td)
	h.logs(ld)
	span, log := h.oneRow("otel_traces"), h.oneRow("otel_logs")
	if span["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" || log["trace_id"] != span["trace_id"] {
		t.Fatalf("trace_id: span %v, log %v; want both 4bf92f3577b34da6a3ce929d0e0e4736", span["trace_id"], log["trace_id"])
	}
	if span["span_id"] != "00f067aa0ba902b7" || log["span_id"] != span["span_id"] {
		t.Fatalf("span_id: span %v, log %v; want both 00f067aa0ba902b7", span["span_id"], log["span_id"])
	}
	if h.table("otel_traces").types["trace_id"] != h.table("otel_logs").types["trace_id"] {
		t.Fatal("trace_id has different column types in the two tables")
	}
}

// TestSpanBatchesShareFrames: spans, log records and data points of
// successive calls share a frame until Flush, as the writer relies on.
func TestSpanBatchesShareFrames(t *testing.T) {
	td, spans := oneScopeSpans()
	spans.AppendEmpty().SetStartTimestamp(pcommon.Timestamp(testT1))
	ld, lrs := oneScopeLogs()
	lrs.AppendEmpty().SetTimestamp(pcommon.Timestamp(testT1))
	h := newHarness(t, 0, EncoderConfig{})
	if _, err := h.re.EncodeTraces(td, h.emit); err != nil {
		t.Fatal(err)
	}
	if _, err := h.re.EncodeLogs(ld, h.emit); err != nil {
		t.Fatal(err)
	}
	h.flush()
	if len(h.frames) != 1 || len(h.table("otel_traces").rows) != 1 || len(h.table("otel_logs").rows) != 1 {
		t.Fatalf("%d frames; want one frame with a span and a log record", len(h.frames))
	}
	if !bytes.Contains(h.frames[0], []byte("otel_traces")) {
		t.Fatal("frame does not name otel_traces")
	}
}

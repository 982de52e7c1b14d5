package datamodel

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// Column names of otel_traces (the shared ones are in rows.go).
const (
	colEndTimestamp           = "end_timestamp"
	colDuration               = "duration"
	colSpanName               = "span_name"
	colSpanKind               = "span_kind"
	colParentSpanID           = "parent_span_id"
	colTraceState             = "trace_state"
	colStatusCode             = "status_code"
	colStatusMessage          = "status_message"
	colEvents                 = "events"
	colLinks                  = "links"
	colDroppedAttributes      = "dropped_attributes_count"
	colDroppedEvents          = "dropped_events_count"
	colDroppedLinks           = "dropped_links_count"
	colSpanKey                = "span_key"
	spanTag              byte = 'T' // scope(tag) of span_key (see hash.go)
)

// spanColumns are the handles of the columns only otel_traces has.
type spanColumns struct {
	end, duration, name, kind, parentSpanID, traceState, statusCode, statusMessage,
	events, links, droppedAttrs, droppedEvents, droppedLinks, spanKey qwp.Col
}

// declareSpanColumns declares otel_traces in schema order. Text columns are SYMBOL
// when their values repeat across spans (service, span name and kind,
// status code, scope, resource and scope attributes: each crosses the wire
// once per connection) and VARCHAR when they are mostly unique per span (ids,
// trace state, status message, span attributes, events, links), which would
// only grow the SYMBOL dictionary. The README's traces table says the same
// per column.
func (tb *table) declareSpanColumns(add func(*qwp.Col, string, qwp.ColumnType)) {
	s := &tb.spanCols // the designated timestamp (the span's start) is declared already
	add(&s.end, colEndTimestamp, qwp.TypeTimestampNanos)
	add(&s.duration, colDuration, qwp.TypeLong)
	add(&tb.service, colServiceName, qwp.TypeSymbol)
	add(&s.name, colSpanName, qwp.TypeSymbol)
	add(&s.kind, colSpanKind, qwp.TypeSymbol)
	add(&tb.traceID, colTraceID, qwp.TypeVarchar)
	add(&tb.spanID, colSpanID, qwp.TypeVarchar)
	add(&s.parentSpanID, colParentSpanID, qwp.TypeVarchar)
	add(&s.traceState, colTraceState, qwp.TypeVarchar)
	add(&s.statusCode, colStatusCode, qwp.TypeSymbol)
	add(&s.statusMessage, colStatusMessage, qwp.TypeVarchar)
	add(&tb.scopeName, colScopeName, qwp.TypeSymbol)
	add(&tb.scopeVersion, colScopeVersion, qwp.TypeSymbol)
	add(&tb.resAttrs, colResourceAttributes, qwp.TypeSymbol)
	add(&tb.scopeAttrs, colScopeAttributes, qwp.TypeSymbol)
	add(&tb.attrs, colAttributes, qwp.TypeVarchar)
	add(&s.events, colEvents, qwp.TypeVarchar)
	add(&s.links, colLinks, qwp.TypeVarchar)
	add(&tb.flags, colFlags, qwp.TypeInt)
	add(&s.droppedAttrs, colDroppedAttributes, qwp.TypeInt)
	add(&s.droppedEvents, colDroppedEvents, qwp.TypeInt)
	add(&s.droppedLinks, colDroppedLinks, qwp.TypeInt)
	add(&s.spanKey, colSpanKey, qwp.TypeLong)
}

// spanScratch holds EncodeTraces' reusable per-span buffers.
type spanScratch struct {
	events, links []byte
	traceState    []byte
	statusMessage []byte
	parentHex     [16]byte
	eventAttrs    keyLayout // key layout of the last event's attributes
}

// span_key identifies a span (see hash.go for the notation):
//
//	span_seed = XXH64(seed = XXH64(seed 0, scope('T')),
//	    16 bytes trace_id, 8 bytes span_id, 8 bytes parent_span_id,
//	    field(trace_state), u32 flags, field(span name), u32 kind,
//	    u64 start_time_unix_nano, u64 end_time_unix_nano (as received),
//	    field(attributes JSON), u32 dropped_attributes_count,
//	    field(events JSON), u32 dropped_events_count,
//	    field(links JSON), u32 dropped_links_count,
//	    u32 status code, field(status message))
//	span_key = XXH64(seed = span_seed, u32 ordinal)
//
// Text is hashed as stored (UTF-8 repaired, JSON as in the columns). The
// ordinal numbers identical spans within one batch, as record_id's does for
// log records, so two spans are never merged by DEDUP UPSERT KEYS(timestamp,
// span_key) unless every field is equal and they are the same occurrence of
// that span in a replayed batch: spans with all-zero or repeated ids stay
// apart. The raw ids are not the key for that reason, and because a span
// re-sent with a changed field (a late end, an added attribute) is a
// different row, not an overwrite.

// appendSpanIdentity appends the span part of span_seed.
func (r *Encoder) appendSpanIdentity(dst []byte, sp ptrace.Span, name string) []byte {
	tid, sid, pid := sp.TraceID(), sp.SpanID(), sp.ParentSpanID()
	dst = append(dst, tid[:]...)
	dst = append(dst, sid[:]...)
	dst = append(dst, pid[:]...)
	dst = appendField(dst, r.span.traceState)
	dst = binary.LittleEndian.AppendUint32(dst, sp.Flags())
	dst = appendFieldString(dst, name)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(sp.Kind()))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(sp.StartTimestamp()))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(sp.EndTimestamp()))
	dst = appendField(dst, r.attrJSON)
	dst = binary.LittleEndian.AppendUint32(dst, sp.DroppedAttributesCount())
	dst = appendField(dst, r.span.events)
	dst = binary.LittleEndian.AppendUint32(dst, sp.DroppedEventsCount())
	dst = appendField(dst, r.span.links)
	dst = binary.LittleEndian.AppendUint32(dst, sp.DroppedLinksCount())
	dst = binary.LittleEndian.AppendUint32(dst, uint32(sp.Status().Code()))
	return appendField(dst, r.span.statusMessage)
}

// EncodeTraces writes every span of td as a row of the traces table (see
// Encoder for frames and emit). The designated timestamp is the span's
// start, else its end, else the export time; end_timestamp is NULL when the
// end is unset; duration is end minus start in nanoseconds, NULL when either
// is unset or the end precedes the start (both times are kept as given).
// Empty ids, trace state, status message, attributes, events and links are
// NULL.
func (r *Encoder) EncodeTraces(td ptrace.Traces, emit func(frame []byte) error) (Stats, error) {
	r.beginBatch()
	defer r.endKeyed() // keep none of the batch reachable, on every return
	r.ordinals.reset()
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		r.beginResource(rs.Resource().Attributes(), spanTag)
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			r.beginScope(ss.Scope())
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				if err := r.writeSpan(spans.At(k), emit); err != nil {
					return r.stats, err
				}
			}
		}
	}
	r.res = pcommon.Map{}
	return r.stats, nil
}

func (r *Encoder) writeSpan(sp ptrace.Span, emit func([]byte) error) error {
	tb := &r.tables[tableTraces]
	s := &r.span
	name := validString(sp.Name())
	kind := spanKindName(sp.Kind())
	status := sp.Status()
	code := statusCodeName(status.Code())
	s.traceState = appendValidUTF8(s.traceState[:0], sp.TraceState().AsRaw())
	s.statusMessage = appendValidUTF8(s.statusMessage[:0], status.Message())
	r.attrJSON = r.appendRowAttrs(r.attrJSON[:0], sp.Attributes())
	s.events = r.appendSpanEvents(s.events[:0], sp.Events())
	s.links = r.appendSpanLinks(s.links[:0], sp.Links())

	r.idBuf = r.appendSpanIdentity(r.idBuf[:0], sp, name)
	key := xxh64(r.scopeSeed, r.idBuf)
	ordinal := r.ordinals.next(key)
	spanKey := recordID(key, ordinal)

	start, hasStart := timestampNanos(sp.StartTimestamp())
	end, hasEnd := timestampNanos(sp.EndTimestamp())
	ts := start
	if !hasStart {
		ts = r.nowNano
		if hasEnd {
			ts = end
		}
	}
	hasDuration := hasStart && hasEnd && end >= start
	tid, sid, pid := sp.TraceID(), sp.SpanID(), sp.ParentSpanID()
	hasTrace, hasSpan, hasParent := !tid.IsEmpty(), !sid.IsEmpty(), !pid.IsEmpty()
	encodeTraceHex(&r.traceHex, (*[16]byte)(&tid))
	encodeHex8(&r.spanHex, (*[8]byte)(&sid))
	encodeHex8(&s.parentHex, (*[8]byte)(&pid))

	bound := tb.fixed + r.scopeBound + symbolBound(len(name)) + symbolBound(len(kind)) + symbolBound(len(code)) +
		7*varcharOverhead + len(r.traceHex) + len(r.spanHex) + len(s.parentHex) + len(s.traceState) +
		len(s.statusMessage) + len(r.attrJSON) + len(s.events) + len(s.links) + r.pointPromoted(sp.Attributes())
	what := name // names the row in a skip's log line
	if what == "" {
		what = "span without a name"
	}
	if !r.fits(tb, bound, what) {
		return nil
	}
	t, c := tb.t, &tb.spanCols
	for attempt := 0; ; attempt++ {
		t.TimestampNanos(tb.time, ts)
		if hasEnd {
			t.TimestampNanos(c.end, end)
		}
		if hasDuration {
			t.Long(c.duration, end-start)
		}
		r.setService(tb)
		setSymbolString(t, c.name, name)
		t.SymbolString(c.kind, kind)
		if hasTrace {
			t.VarcharValid(tb.traceID, r.traceHex[:])
		}
		if hasSpan {
			t.VarcharValid(tb.spanID, r.spanHex[:])
		}
		if hasParent {
			t.VarcharValid(c.parentSpanID, s.parentHex[:])
		}
		if len(s.traceState) > 0 {
			t.VarcharValid(c.traceState, s.traceState)
		}
		t.SymbolString(c.statusCode, code)
		if len(s.statusMessage) > 0 {
			t.VarcharValid(c.statusMessage, s.statusMessage)
		}
		r.setResourceScope(tb)
		if len(r.attrJSON) > 0 {
			t.VarcharValid(tb.attrs, r.attrJSON)
		}
		if len(s.events) > 0 {
			t.VarcharValid(c.events, s.events)
		}
		if len(s.links) > 0 {
			t.VarcharValid(c.links, s.links)
		}
		t.Int(tb.flags, int32(sp.Flags()))
		t.Int(c.droppedAttrs, clampInt32(sp.DroppedAttributesCount()))
		t.Int(c.droppedEvents, clampInt32(sp.DroppedEventsCount()))
		t.Int(c.droppedLinks, clampInt32(sp.DroppedLinksCount()))
		t.Long(c.spanKey, spanKey)
		r.setPromoted(tb)
		again, err := r.endRow(tb, emit, attempt, what)
		if !again || err != nil {
			return err
		}
	}
}

// appendSpanEvents renders a span's events as a JSON array, or nothing when
// there are none:
//
//	[{"time_unix_nano":1700000000000000000,"name":"exception",
//	  "attributes":{...},"dropped_attributes_count":1}]
//
// time_unix_nano is a JSON integer, exact to the nanosecond (QuestDB's
// json_extract(events, '$[0].time_unix_nano')::long reads it whole; a
// DOUBLE would round it to ~256 ns). name is always present ("" for an event
// without one); attributes and dropped_attributes_count only when set.
func (r *Encoder) appendSpanEvents(dst []byte, evs ptrace.SpanEventSlice) []byte {
	if evs.Len() == 0 {
		return dst
	}
	dst = append(dst, '[')
	for i := 0; i < evs.Len(); i++ {
		ev := evs.At(i)
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"time_unix_nano":`...)
		dst = strconv.AppendUint(dst, uint64(ev.Timestamp()), 10)
		dst = append(dst, `,"name":`...)
		dst = appendJSONString(dst, ev.Name())
		if attrs := ev.Attributes(); attrs.Len() > 0 {
			dst = append(dst, `,"attributes":`...)
			dst = r.json.appendMapLayout(dst, attrs, &r.span.eventAttrs)
		}
		if n := ev.DroppedAttributesCount(); n > 0 {
			dst = append(dst, `,"dropped_attributes_count":`...)
			dst = strconv.AppendUint(dst, uint64(n), 10)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// appendSpanLinks renders a span's links as a JSON array, or nothing when
// there are none:
//
//	[{"trace_id":"<32 hex>","span_id":"<16 hex>","trace_state":"...",
//	  "attributes":{...},"dropped_attributes_count":1,"flags":1}]
//
// The ids are in the form of the trace_id and span_id columns, so a link
// can be followed with json_extract(links, '$[0].trace_id') = trace_id. Each
// key appears only when its value is set (non-zero ids, non-empty state and
// attributes, non-zero counts and flags).
func (r *Encoder) appendSpanLinks(dst []byte, links ptrace.SpanLinkSlice) []byte {
	if links.Len() == 0 {
		return dst
	}
	dst = append(dst, '[')
	for i := 0; i < links.Len(); i++ {
		l := links.At(i)
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		sep := false
		key := func(k string) {
			if sep {
				dst = append(dst, ',')
			}
			sep = true
			dst = append(append(append(dst, '"'), k...), `":`...)
		}
		if id := l.TraceID(); !id.IsEmpty() {
			key("trace_id")
			dst = append(hex.AppendEncode(append(dst, '"'), id[:]), '"')
		}
		if id := l.SpanID(); !id.IsEmpty() {
			key("span_id")
			dst = append(hex.AppendEncode(append(dst, '"'), id[:]), '"')
		}
		if ts := l.TraceState().AsRaw(); ts != "" {
			key("trace_state")
			dst = appendJSONString(dst, ts)
		}
		if attrs := l.Attributes(); attrs.Len() > 0 {
			key("attributes")
			dst = r.json.appendMap(dst, attrs)
		}
		if n := l.DroppedAttributesCount(); n > 0 {
			key("dropped_attributes_count")
			dst = strconv.AppendUint(dst, uint64(n), 10)
		}
		if f := l.Flags(); f != 0 {
			key("flags")
			dst = strconv.AppendUint(dst, uint64(f), 10)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// spanKindName is the span_kind SYMBOL value; a kind outside the OTLP enum
// is kept as its number.
func spanKindName(k ptrace.SpanKind) string {
	switch k {
	case ptrace.SpanKindUnspecified:
		return "unspecified"
	case ptrace.SpanKindInternal:
		return "internal"
	case ptrace.SpanKindServer:
		return "server"
	case ptrace.SpanKindClient:
		return "client"
	case ptrace.SpanKindProducer:
		return "producer"
	case ptrace.SpanKindConsumer:
		return "consumer"
	}
	return strconv.Itoa(int(k))
}

// statusCodeName is the status_code SYMBOL value; a code outside the OTLP
// enum is kept as its number.
func statusCodeName(c ptrace.StatusCode) string {
	switch c {
	case ptrace.StatusCodeUnset:
		return "unset"
	case ptrace.StatusCodeOk:
		return "ok"
	case ptrace.StatusCodeError:
		return "error"
	}
	return strconv.Itoa(int(c))
}

// clampInt32 converts a count to INT, saturating at MaxInt32.
func clampInt32(n uint32) int32 {
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(n)
}

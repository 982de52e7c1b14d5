package datamodel

import (
	"encoding/binary"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// EncodeLogs writes every log record of ld as a row of the logs table (see
// Encoder for frames and emit). The designated timestamp is the record's
// time, else its observed time, else the export time (the Encoder's clock
// when the call began). The body is the string as it is, any other kind as
// JSON (bytes as a base64 JSON string), NULL when empty.
func (r *Encoder) EncodeLogs(ld plog.Logs, emit func(frame []byte) error) (Stats, error) {
	r.beginBatch()
	defer r.endKeyed() // keep none of the batch reachable, on every return
	r.ordinals.reset()
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		r.beginResource(rl.Resource().Attributes(), recordTag)
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sl := sls.At(j)
			r.beginScope(sl.Scope())
			lrs := sl.LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				if err := r.writeLog(lrs.At(k), emit); err != nil {
					return r.stats, err
				}
			}
		}
	}
	r.res = pcommon.Map{}
	return r.stats, nil
}

func (r *Encoder) writeLog(lr plog.LogRecord, emit func([]byte) error) error {
	tb := &r.tables[tableLogs]
	bodyValue := lr.Body()
	bodyKind := bodyValue.Type()
	body, hasBody := r.bodyText(bodyValue, bodyKind)
	f := recordFields{
		time:           uint64(lr.Timestamp()),
		observed:       uint64(lr.ObservedTimestamp()),
		severityNumber: uint32(lr.SeverityNumber()),
		severityText:   lr.SeverityText(),
		bodyKind:       bodyKind,
		body:           body,
		attributes:     lr.Attributes(),
		traceID:        lr.TraceID(),
		spanID:         lr.SpanID(),
		flags:          uint32(lr.Flags()),
		eventName:      lr.EventName(),
		dropped:        lr.DroppedAttributesCount(),
	}
	if f.severityText != r.severityText { // the previous record's text is valid: no check again
		f.severityText = validString(f.severityText)
	}
	if f.eventName != "" { // most records have none: no call
		f.eventName = validString(f.eventName)
	}
	var attrs []byte
	r.idBuf, attrs = r.appendRecordIdentity(r.idBuf[:0], &f)
	key := xxh64(r.scopeSeed, r.idBuf)
	ordinal := r.ordinals.next(key)
	id := recordID(key, ordinal)

	observed, hasObserved := timestampNanos(pcommon.Timestamp(f.observed))
	ts, ok := timestampNanos(pcommon.Timestamp(f.time))
	if !ok {
		if ts, ok = observed, hasObserved; !ok {
			ts = r.nowNano
		}
	}
	le := binary.LittleEndian // the ids as words: no comparison with a zero array in memory
	hasTrace := le.Uint64(f.traceID[:8])|le.Uint64(f.traceID[8:]) != 0
	hasSpan := le.Uint64(f.spanID[:]) != 0
	encodeTraceHex(&r.traceHex, &f.traceID)
	encodeHex8(&r.spanHex, &f.spanID)

	bound := tb.fixed + r.scopeBound + symbolBound(len(f.severityText)) + symbolBound(len(f.eventName)) +
		4*varcharOverhead + len(body) + len(r.traceHex) + len(r.spanHex) + len(attrs) + r.pointPromoted(f.attributes)
	if !r.fits(tb, bound, "log record") {
		return nil
	}
	t := tb.t
	for attempt := 0; ; attempt++ {
		t.TimestampNanos(tb.time, ts)
		if hasObserved {
			t.TimestampNanos(tb.observed, observed)
		}
		r.setServiceSeverity(tb, f.severityText)
		t.Int(tb.severityNumber, intQuantity(int32(f.severityNumber)))
		if hasBody {
			t.VarcharValid(tb.body, body)
		}
		if hasTrace {
			t.VarcharValid(tb.traceID, r.traceHex[:])
		}
		if hasSpan {
			t.VarcharValid(tb.spanID, r.spanHex[:])
		}
		t.Int(tb.traceFlags, int32(f.flags))
		setSymbolString(t, tb.eventName, f.eventName)
		r.setResourceScope(tb)
		if len(attrs) > 0 {
			t.VarcharValid(tb.attrs, attrs)
		}
		t.Long(tb.recordID, id)
		r.setPromoted(tb)
		again, err := r.endRow(tb, emit, attempt, "log record")
		if !again || err != nil {
			return err
		}
	}
}

// setServiceSeverity writes service_name and severity_text (each NULL when
// empty) through one run, rebuilt only when the resource or the text
// changes from the previous record's: a Symbols call a record less than a
// run for each (a change of text also looks the service up again, in its
// column's repeat cache).
func (r *Encoder) setServiceSeverity(tb *table, text string) {
	if r.severityFor != r.resKey || text != r.severityText {
		r.severityRun.Reset()
		addKeyed(&r.severityRun, tb.service, r.service)
		addKeyed(&r.severityRun, tb.severityText, text)
		r.severityFor, r.severityText = r.resKey, text
	}
	tb.t.Symbols(&r.severityRun)
}

// bodyText is the body column's text (see appendText): a valid string
// body as it is, without a copy (it is only read), anything else rendered
// into r.text. kind is v.Type(), which the record identity needs too.
func (r *Encoder) bodyText(v pcommon.Value, kind pcommon.ValueType) ([]byte, bool) {
	if kind == pcommon.ValueTypeStr {
		if s := v.Str(); validUTF8(s) {
			return stringBytes(s), true
		}
	}
	var ok bool
	r.text, ok = r.json.appendText(r.text[:0], v)
	return r.text, ok
}

// hexPairs holds the two lowercase hex digits of every byte value, as the
// little-endian 16-bit word that stores them in order.
var hexPairs = func() (t [256]uint16) {
	const digits = "0123456789abcdef"
	for b := range t {
		t[b] = uint16(digits[b>>4]) | uint16(digits[b&0xF])<<8
	}
	return t
}()

// encodeHex8 is hex.Encode (lowercase) of an 8-byte id (a span id, half of
// a trace id): one table lookup and one 16-bit store per byte, at constant
// offsets into arrays, so without bounds checks or a loop (a loop over
// slices cost about seven instructions a byte, 166 per log record).
// (Spreading four bytes' nibbles over a word and converting them at once
// took more instructions.)
func encodeHex8(dst *[16]byte, src *[8]byte) {
	le := binary.LittleEndian
	le.PutUint16(dst[0:], hexPairs[src[0]])
	le.PutUint16(dst[2:], hexPairs[src[1]])
	le.PutUint16(dst[4:], hexPairs[src[2]])
	le.PutUint16(dst[6:], hexPairs[src[3]])
	le.PutUint16(dst[8:], hexPairs[src[4]])
	le.PutUint16(dst[10:], hexPairs[src[5]])
	le.PutUint16(dst[12:], hexPairs[src[6]])
	le.PutUint16(dst[14:], hexPairs[src[7]])
}

// encodeTraceHex is encodeHex8 of a 16-byte trace id.
func encodeTraceHex(dst *[32]byte, src *[16]byte) {
	encodeHex8((*[16]byte)(dst[:16]), (*[8]byte)(src[:8]))
	encodeHex8((*[16]byte)(dst[16:]), (*[8]byte)(src[8:]))
}

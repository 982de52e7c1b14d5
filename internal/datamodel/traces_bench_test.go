package datamodel

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// benchSpanBatch is the benchmark batch of issue #13: 1,000 spans from 20
// resources (50 each; 5 services, 4 instances each, 5 resource attributes),
// HTTP-server-like names from a set of 50, traces of 10 spans (one root,
// nine children), 10 span attributes of which 3 are unique per span
// (url.path with an id, client.address, a request id), one event per span
// with 2 attributes, status error on every 20th span. batch shifts the
// times and ids, so that successive batches are new spans.
func benchSpanBatch(batch int) ptrace.Traces {
	const resources, perResource, traceLen = 20, 50, 10
	td := ptrace.NewTraces()
	base := int64(1_700_000_000_000_000_000) + int64(batch)*1_000_000_000
	methods := [...]string{"GET", "POST", "PUT", "DELETE", "PATCH"}
	for r := range resources {
		rs := td.ResourceSpans().AppendEmpty()
		ra := rs.Resource().Attributes()
		service := fmt.Sprintf("service-%d", r%5)
		ra.PutStr("service.name", service)
		ra.PutStr("service.version", "2.4.1")
		ra.PutStr("service.instance.id", fmt.Sprintf("%s-7f9c8d6b5-%05d", service, r))
		ra.PutStr("host.name", fmt.Sprintf("ip-10-0-%d-17.eu-west-1.compute.internal", r))
		ra.PutStr("telemetry.sdk.language", "go")
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp")
		ss.Scope().SetVersion("0.72.0")
		for i := range perResource {
			n := batch*resources*perResource + r*perResource + i // unique per span
			route := fmt.Sprintf("/api/v1/resource%d/{id}", n%10)
			method := methods[(n/10)%len(methods)]
			sp := ss.Spans().AppendEmpty()
			trace := n / traceLen
			sp.SetTraceID(pcommon.TraceID{byte(trace >> 24), byte(trace >> 16), byte(trace >> 8), byte(trace), 0x9a, 0x3c, 0x11, 0x07, 0x55, 0xe2, 0x41, 0xb0, 0x6d, 0x2f, byte(r), 0x01})
			sp.SetSpanID(pcommon.SpanID{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n), 0x5d, 0x7e, 0x21, 0x90})
			if n%traceLen != 0 {
				root := n - n%traceLen
				sp.SetParentSpanID(pcommon.SpanID{byte(root >> 24), byte(root >> 16), byte(root >> 8), byte(root), 0x5d, 0x7e, 0x21, 0x90})
			}
			sp.SetName(method + " " + route)
			sp.SetKind(ptrace.SpanKindServer)
			start := base + int64(n)*1_000_003
			sp.SetStartTimestamp(pcommon.Timestamp(start))
			sp.SetEndTimestamp(pcommon.Timestamp(start + int64(200_000+n*7919%5_000_000)))
			sp.SetFlags(1)
			a := sp.Attributes()
			a.PutStr("http.request.method", method)
			a.PutStr("http.route", route)
			a.PutInt("http.response.status_code", int64([...]int{200, 200, 201, 404, 200}[n%5]))
			a.PutStr("url.scheme", "https")
			a.PutStr("server.address", "api.example.com")
			a.PutInt("server.port", 443)
			a.PutStr("network.protocol.version", "1.1")
			a.PutStr("url.path", fmt.Sprintf("/api/v1/resource%d/%d", n%10, 100_000+n*37))
			a.PutStr("client.address", fmt.Sprintf("10.%d.%d.%d", n>>16&255, n>>8&255, n&255))
			a.PutStr("http.request.id", fmt.Sprintf("%08x-%04x", n*2654435761, n&0xffff))
			ev := sp.Events().AppendEmpty()
			ev.SetTimestamp(pcommon.Timestamp(start + 150_000))
			ev.SetName("http.response.started")
			ev.Attributes().PutStr("message.type", "SENT")
			ev.Attributes().PutInt("message.uncompressed_size", int64(512+n%4096))
			if n%20 == 0 {
				sp.Status().SetCode(ptrace.StatusCodeError)
				sp.Status().SetMessage("upstream timeout")
			}
		}
	}
	return td
}

// BenchmarkSpan1000 compares, per span of the 1,000-span batch: encoding
// into QWP frames (warm symbol dictionary: a batch of new spans after a
// first one of the same services, names and attribute keys) with building
// the same batch's OTLP protobuf, and reports bytes per span of each, gzip
// included.
func BenchmarkSpan1000(b *testing.B) {
	const spans = 1000
	b.Run("qwp", func(b *testing.B) {
		enc := qwp.NewEncoder(qwp.NewMemDict(), qwp.EncoderOptions{MaxFrameBytes: 1_887_436, Gorilla: true, DeltaSymbolDict: true})
		re, err := NewEncoder(enc, EncoderConfig{Tables: DefaultTables()})
		if err != nil {
			b.Fatal(err)
		}
		var frameBytes int
		emit := func(f []byte) error { frameBytes += len(f); return nil }
		encode := func(td ptrace.Traces) {
			frameBytes = 0
			if _, err := re.EncodeTraces(td, emit); err != nil {
				b.Fatal(err)
			}
			if err := re.Flush(emit); err != nil {
				b.Fatal(err)
			}
		}
		encode(benchSpanBatch(0)) // cold: every symbol in the delta section
		cold := frameBytes
		td := benchSpanBatch(1)
		perPoint(b, spans, func() { encode(td) })
		b.ReportMetric(float64(frameBytes)/spans, "bytes/span")
		b.ReportMetric(float64(cold)/spans, "cold-bytes/span")
	})
	td := benchSpanBatch(1)
	var m ptrace.ProtoMarshaler
	benchOTLP(b, spans, "span", true, func() ([]byte, error) { return m.MarshalTraces(td) })
}

package datamodel

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// benchLogBatch is a batch of application log lines: one resource with 3
// attributes, one scope, records with an ~80-byte body, 4 attributes (two of
// them unique per record, like request ids), severity and trace context.
func benchLogBatch(records int) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	res := rl.Resource().Attributes()
	res.PutStr("service.name", "checkout")
	res.PutStr("service.version", "2.4.1")
	res.PutStr("host.name", "ip-10-0-3-17.eu-west-1.compute.internal")
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("checkout.http")
	for i := range records {
		lr := sl.LogRecords().AppendEmpty()
		lr.SetTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + int64(i)*1_000_000))
		lr.SetObservedTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + int64(i)*1_000_000 + 5000))
		lr.SetSeverityNumber(plog.SeverityNumberInfo)
		lr.SetSeverityText("INFO")
		lr.Body().SetStr(fmt.Sprintf("GET /api/v1/items/%d completed with status 200 in %d ms for tenant acme", i, i%97))
		a := lr.Attributes()
		a.PutStr("http.route", "/api/v1/items/{id}")
		a.PutInt("http.response.status_code", 200)
		a.PutStr("request.id", fmt.Sprintf("req-%08x", i*2654435761))
		a.PutStr("user.id", fmt.Sprintf("u%d", i%1000))
		lr.SetTraceID(pcommon.TraceID{byte(i), byte(i >> 8), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14})
		lr.SetSpanID(pcommon.SpanID{byte(i), 1, 2, 3, 4, 5, 6, 7})
		lr.SetFlags(plog.DefaultLogRecordFlags.WithIsSampled(true))
	}
	return ld
}

// BenchmarkLog1000 compares, per log record of a 1,000-record batch:
// encoding into QWP frames with building the batch's OTLP protobuf.
func BenchmarkLog1000(b *testing.B) {
	const records = 1000
	ld := benchLogBatch(records)
	b.Run("qwp", func(b *testing.B) {
		enc := qwp.NewEncoder(qwp.NewMemDict(), qwp.EncoderOptions{MaxFrameBytes: 1_887_436, Gorilla: true, DeltaSymbolDict: true})
		re, err := NewEncoder(enc, EncoderConfig{Tables: DefaultTables()})
		if err != nil {
			b.Fatal(err)
		}
		var frameBytes int
		emit := func(f []byte) error { frameBytes += len(f); return nil }
		encode := func() {
			frameBytes = 0
			if _, err := re.EncodeLogs(ld, emit); err != nil {
				b.Fatal(err)
			}
			if err := re.Flush(emit); err != nil {
				b.Fatal(err)
			}
		}
		encode() // grow the buffers once, as a running exporter has
		perPoint(b, records, encode)
		b.ReportMetric(float64(frameBytes)/records, "bytes/record")
	})
	var m plog.ProtoMarshaler
	benchOTLP(b, records, "record", false, func() ([]byte, error) { return m.MarshalLogs(ld) })
}

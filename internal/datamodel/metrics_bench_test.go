package datamodel

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"runtime"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// benchGaugeBatch is the benchmark batch of DESIGN.md: one resource with 3
// attributes, one scope, gauge points with 5 attributes each (10 metrics of
// points/10 series), all at one scrape time shifted by scrape seconds.
func benchGaugeBatch(points int, scrape int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	res := rm.Resource().Attributes()
	res.PutStr("service.name", "checkout")
	res.PutStr("service.version", "2.4.1")
	res.PutStr("host.name", "ip-10-0-3-17.eu-west-1.compute.internal")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp")
	sm.Scope().SetVersion("0.72.0")
	const metrics = 10
	ts := pcommon.Timestamp(1_700_000_000_000_000_000 + int64(scrape)*1_000_000_000)
	for m := range metrics {
		metric := sm.Metrics().AppendEmpty()
		metric.SetName(fmt.Sprintf("http.server.metric_%d", m))
		metric.SetUnit("ms")
		metric.SetDescription("benchmark gauge")
		dps := metric.SetEmptyGauge().DataPoints()
		for i := range points / metrics {
			dp := dps.AppendEmpty()
			dp.SetTimestamp(ts)
			dp.SetDoubleValue(float64(i*7+scrape) * 0.25)
			a := dp.Attributes()
			a.PutStr("http.request.method", [...]string{"GET", "POST", "PUT", "DELETE"}[i%4])
			a.PutStr("http.route", fmt.Sprintf("/api/v1/items/%d", i/4))
			a.PutInt("http.response.status_code", int64([...]int{200, 201, 404, 500, 503}[i%5]))
			a.PutStr("network.protocol.version", "1.1")
			a.PutStr("server.address", "checkout.internal")
		}
	}
	return md
}

// perPoint runs body b.N times and reports wall and thread CPU time per data
// point.
func perPoint(b *testing.B, points int, body func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	// The setup's garbage is collected before the loop: a mark phase it
	// started would otherwise run into the loop (write barriers, assists)
	// and move the cachegrind difference of two runs by thousands of
	// instructions per item, depending on where it ends.
	runtime.GC()
	b.ResetTimer()
	cpu0 := threadCPUTime()
	for b.Loop() {
		body()
	}
	cpu := threadCPUTime() - cpu0
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(points), "ns/point")
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(points), "cpu-ns/point")
	}
}

// BenchmarkMetricGauge1000 compares, per data point of the 1,000-point gauge
// batch: encoding into QWP frames (warm symbol dictionary: the steady state
// of a scrape repeated every interval) with building the same batch's OTLP
// protobuf, and reports bytes per point of each, gzip included.
func BenchmarkMetricGauge1000(b *testing.B) {
	const points = 1000
	b.Run("qwp", func(b *testing.B) {
		dict := qwp.NewMemDict()
		enc := qwp.NewEncoder(dict, qwp.EncoderOptions{MaxFrameBytes: 1_887_436, Gorilla: true, DeltaSymbolDict: true})
		re, err := NewEncoder(enc, EncoderConfig{Tables: DefaultTables()})
		if err != nil {
			b.Fatal(err)
		}
		var frameBytes int
		emit := func(f []byte) error { frameBytes += len(f); return nil }
		// Cold: the first batch carries every symbol in its delta section.
		if _, err := re.EncodeMetrics(benchGaugeBatch(points, 0), emit); err != nil {
			b.Fatal(err)
		}
		if err := re.Flush(emit); err != nil {
			b.Fatal(err)
		}
		cold := frameBytes
		md := benchGaugeBatch(points, 1)
		perPoint(b, points, func() {
			frameBytes = 0
			if _, err := re.EncodeMetrics(md, emit); err != nil {
				b.Fatal(err)
			}
			if err := re.Flush(emit); err != nil {
				b.Fatal(err)
			}
		})
		b.ReportMetric(float64(frameBytes)/points, "bytes/point")
		b.ReportMetric(float64(cold)/points, "cold-bytes/point")
	})
	md := benchGaugeBatch(points, 1)
	var m pmetric.ProtoMarshaler
	benchOTLP(b, points, "point", true, func() ([]byte, error) { return m.MarshalMetrics(md) })
}

// benchOTLP runs the OTLP baselines beside a qwp benchmark: "otlp-proto"
// marshals the same batch with marshal, and with gzip "otlp-proto-gzip"
// compresses that protobuf too; both report bytes per unit of n items.
func benchOTLP(b *testing.B, n int, unit string, gz bool, marshal func() ([]byte, error)) {
	b.Run("otlp-proto", func(b *testing.B) {
		var size int
		perPoint(b, n, func() {
			buf, err := marshal()
			if err != nil {
				b.Fatal(err)
			}
			size = len(buf)
		})
		b.ReportMetric(float64(size)/float64(n), "bytes/"+unit)
	})
	if !gz {
		return
	}
	b.Run("otlp-proto-gzip", func(b *testing.B) {
		var out bytes.Buffer
		zw := gzip.NewWriter(&out)
		perPoint(b, n, func() {
			buf, err := marshal()
			if err != nil {
				b.Fatal(err)
			}
			out.Reset()
			zw.Reset(&out)
			if _, err := zw.Write(buf); err != nil {
				b.Fatal(err)
			}
			if err := zw.Close(); err != nil {
				b.Fatal(err)
			}
		})
		b.ReportMetric(float64(out.Len())/float64(n), "bytes/"+unit)
	})
}

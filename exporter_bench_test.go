package questdbexporter

import (
	"bytes"
	"compress/gzip"
	"context"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/questdbexporter/questdbexporter/internal/metadata"
	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// benchPoints is the size of the benchmark's gauge batch: 1,000 points of
// 1,000 series (5 point attributes, 3 resource attributes), the same series
// every iteration as a scrape would produce them.
const benchPoints = 1000

// BenchmarkConsumeMetrics measures the write path per data point: pdata ->
// rows -> QWP frames -> a memory-only queue (no sender; acked after each
// call so the queue never fills), beside OTLP protobuf marshalling of the
// same batch. B/point is stored frame bytes in steady state (every symbol
// already defined, as after the first scrape); first-B/point is the first
// call, which defines the dictionary. OTLP's B/point is the protobuf size,
// gzip-B/point the same gzipped.
//
//	go test -run '^$' -bench BenchmarkConsumeMetrics -benchmem -count 6 .
func BenchmarkConsumeMetrics(b *testing.B) {
	md := gaugeBatch(0, benchPoints)
	b.Run("questdb", func(b *testing.B) {
		q, err := sfqueue.Open(sfqueue.Options{MaxTotalBytes: 1 << 30})
		if err != nil {
			b.Fatal(err)
		}
		defer q.Close()
		w := benchWriter(b, q)
		defer w.close()
		ctx := context.Background()
		if _, err := w.writeMetrics(ctx, md); err != nil {
			b.Fatal(err)
		}
		first := q.Stats().BytesAppended
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			fsn, err := w.writeMetrics(ctx, md)
			if err != nil {
				b.Fatal(err)
			}
			q.Ack(fsn)
		}
		b.StopTimer()
		steady := q.Stats().BytesAppended - first
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchPoints), "ns/point")
		b.ReportMetric(float64(steady)/float64(b.N*benchPoints), "B/point")
		b.ReportMetric(float64(first)/benchPoints, "first-B/point")
	})
	b.Run("otlp_proto", func(b *testing.B) {
		var m pmetric.ProtoMarshaler
		var size int
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			buf, err := m.MarshalMetrics(md)
			if err != nil {
				b.Fatal(err)
			}
			size = len(buf)
		}
		b.StopTimer()
		buf, _ := m.MarshalMetrics(md)
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(buf)
		zw.Close()
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchPoints), "ns/point")
		b.ReportMetric(float64(size)/benchPoints, "B/point")
		b.ReportMetric(float64(gz.Len())/benchPoints, "gzip-B/point")
	})
}

// benchWriter is the exporter's writer on q with the default data model.
func benchWriter(b *testing.B, q *sfqueue.Queue) *writer {
	b.Helper()
	cfg := createDefaultConfig().(*Config)
	dict, err := openGenDict(q, cfg.SymbolDictMaxEntries, 0)
	if err != nil {
		b.Fatal(err)
	}
	enc := qwp.NewEncoder(dict, qwp.EncoderOptions{MaxFrameBytes: int(cfg.MaxBatchBytes), Gorilla: true, DeltaSymbolDict: true})
	rows, err := newRowEncoder(enc, cfg.rowEncoderConfig(zap.NewNop()))
	if err != nil {
		b.Fatal(err)
	}
	tb, err := metadata.NewTelemetryBuilder(componenttest.NewNopTelemetrySettings())
	if err != nil {
		b.Fatal(err)
	}
	tel, err := newTelemetry(tb, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	return newWriter(q, dict, &rowBatchEncoder{rows: rows, enc: enc, tel: tel, dict: dict}, tel, nil)
}

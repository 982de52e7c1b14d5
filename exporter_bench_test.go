package questdbexporter

import (
	"bytes"
	"compress/gzip"
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/questdbexporter/questdbexporter/internal/datamodel"
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
// call so the queue never fills), and, interleaved in the same loop so both
// see the same machine noise, OTLP protobuf marshalling of the same batch.
// Reported per data point: questdb-ns and otlp-ns (their ratio is
// questdb/otlp), B/point = stored frame bytes in steady state (every symbol
// already defined, as after the first scrape), first-B/point = the first
// call, which defines the dictionary, otlp-B/point = protobuf size,
// gzip-B/point = the protobuf gzipped.
//
//	go test -run '^$' -bench BenchmarkConsumeMetrics -benchmem -count 6 .
func BenchmarkConsumeMetrics(b *testing.B) {
	md := gaugeBatch(0, benchPoints)
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
	var m pmetric.ProtoMarshaler
	var questdb, otlp time.Duration
	var size int
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		fsn, err := w.writeMetrics(ctx, md)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		buf, err := m.MarshalMetrics(md)
		if err != nil {
			b.Fatal(err)
		}
		otlp += time.Since(t1)
		questdb += t1.Sub(t0)
		size = len(buf)
		q.Ack(fsn)
	}
	b.StopTimer()
	steady := q.Stats().BytesAppended - first
	points := float64(b.N * benchPoints)
	b.ReportMetric(float64(questdb.Nanoseconds())/points, "questdb-ns/point")
	b.ReportMetric(float64(otlp.Nanoseconds())/points, "otlp-ns/point")
	b.ReportMetric(float64(questdb)/float64(otlp), "questdb/otlp")
	b.ReportMetric(float64(steady)/points, "B/point")
	b.ReportMetric(float64(first)/benchPoints, "first-B/point")
	b.ReportMetric(float64(size)/benchPoints, "otlp-B/point")
	buf, _ := m.MarshalMetrics(md)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(buf)
	zw.Close()
	b.ReportMetric(float64(gz.Len())/benchPoints, "gzip-B/point")
}

// benchWriter is the exporter's writer on q with the default data model.
func benchWriter(b *testing.B, q *sfqueue.Queue) *writer {
	b.Helper()
	return benchWriterFor(b, q, createDefaultConfig().(*Config))
}

// benchWriterFor is the exporter's writer on q with cfg's data model and
// dictionary bounds.
func benchWriterFor(b *testing.B, q *sfqueue.Queue, cfg *Config) *writer {
	b.Helper()
	dict, err := loadGenDict(q, cfg.SymbolDictMaxEntries, int(cfg.effectiveSymbolDictMaxBytes()), int(cfg.symbolDictStartBytes()), 0)
	if err != nil {
		b.Fatal(err)
	}
	enc := qwp.NewEncoder(dict, qwp.EncoderOptions{MaxFrameBytes: int(cfg.MaxBatchBytes), Gorilla: true, DeltaSymbolDict: true})
	rows, err := datamodel.NewEncoder(enc, cfg.rowEncoderConfig(zap.NewNop()))
	if err != nil {
		b.Fatal(err)
	}
	tb, err := metadata.NewTelemetryBuilder(componenttest.NewNopTelemetrySettings())
	if err != nil {
		b.Fatal(err)
	}
	tel, err := newTelemetry(tb, zap.NewNop(), component.MustNewID("questdb"))
	if err != nil {
		b.Fatal(err)
	}
	return newWriter(q, dict, &rowBatchEncoder{rows: rows, enc: enc, tel: tel, dict: dict}, tel, nil, int(cfg.MaxBatchBytes))
}

package questdbexporter

import (
	"context"
	"testing"

	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// BenchmarkAttributesType measures what metric_attributes_type trades: the
// bytes each gauge point costs in frames and in the SYMBOL dictionary, with
// the attributes JSON as a SYMBOL (default) or inline as VARCHAR, for
// series that repeat (the same 1,000 series every batch, as scrapes
// produce them) and for a new series on every point (the high-cardinality
// outage of issue #10). Nothing is acknowledged, so the memory-only queue
// keeps every generation and DictBytes is the whole dictionary; keep
// -benchtime to a count.
//
//	go test -run '^$' -bench BenchmarkAttributesType -benchtime 200x -count 3 .
func BenchmarkAttributesType(b *testing.B) {
	for _, typ := range []string{"symbol", "varchar"} {
		for _, newSeries := range []bool{false, true} {
			name := typ + "/repeating_series"
			if newSeries {
				name = typ + "/new_series_per_point"
			}
			b.Run(name, func(b *testing.B) {
				q, err := sfqueue.Open(sfqueue.Options{MaxTotalBytes: 8 << 30})
				if err != nil {
					b.Fatal(err)
				}
				defer q.Close()
				cfg := createDefaultConfig().(*Config)
				cfg.MetricAttributesType = typ
				w := benchWriterFor(b, q, cfg)
				defer w.close()
				ctx := context.Background()
				// The first batch defines the repeating series' symbols
				// (not measured: a scrape's series are defined once).
				if _, err := w.writeMetrics(ctx, gaugeBatch(0, benchPoints)); err != nil {
					b.Fatal(err)
				}
				before := q.Stats()
				b.ResetTimer()
				for i := range b.N {
					base := 0
					if newSeries {
						base = (i + 1) * benchPoints
					}
					if _, err := w.writeMetrics(ctx, gaugeBatch(base, benchPoints)); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				after := q.Stats()
				points := float64(b.N * benchPoints)
				frames := float64(after.BytesAppended-before.BytesAppended) / points
				dict := float64(after.DictBytes-before.DictBytes) / points
				b.ReportMetric(frames, "frame-B/point")
				b.ReportMetric(dict, "dict-B/point")
				b.ReportMetric(frames+dict, "total-B/point")
				b.ReportMetric(float64(after.DictBytes)/(1<<20), "dict-MiB")
				b.ReportMetric(float64(after.DictGenerations), "generations")
			})
		}
	}
}

package qwp

import (
	"fmt"
	"testing"
)

// BenchmarkEncodeMetricsRow encodes typical metrics rows (3 SYMBOL, 3
// DOUBLE, a ~60-byte VARCHAR, designated TIMESTAMP_NANOS) with Gorilla and
// the delta dictionary, finishing a frame every rows rows. One op is one
// row; bytes/row is the frame bytes (headers and dictionary included) per
// row.
func BenchmarkEncodeMetricsRow(b *testing.B) {
	for _, rows := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			e := NewEncoder(NewMemDict(), EncoderOptions{Gorilla: true, DeltaSymbolDict: true})
			m := newMetricsTable(b, e, "metrics")
			var buf []byte
			total := 0
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m.row(i)
				if err := m.tb.EndRow(); err != nil {
					b.Fatal(err)
				}
				if e.Rows() == rows {
					buf = e.Finish(buf[:0])
					total += len(buf)
				}
			}
			buf = e.Finish(buf[:0])
			total += len(buf)
			b.ReportMetric(float64(total)/float64(b.N), "bytes/row")
		})
	}
}

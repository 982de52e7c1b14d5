package qwp

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/questdbexporter/questdbexporter/internal/cputime"
)

// BenchmarkEncodeMetricsRow encodes typical metrics rows (3 SYMBOL, 3
// DOUBLE, a ~60-byte VARCHAR, designated TIMESTAMP_NANOS) with Gorilla and
// the delta dictionary, finishing a frame every rows rows. One op is one
// row; bytes/row is the frame bytes (headers and dictionary included) per
// row; cpu-ns/row is process CPU time per row, steadier than ns/op on a
// shared machine. Every row's symbols differ from the previous row's.
func BenchmarkEncodeMetricsRow(b *testing.B) {
	for _, rows := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) { encodeMetricsRows(b, rows, 1) })
	}
}

// BenchmarkEncodeMetricsRowRepeatedSymbols is BenchmarkEncodeMetricsRow
// (1000-row frames) with each row's symbols the same as the previous row's
// for runs of 100 rows, as the rows of one metric of one resource are.
func BenchmarkEncodeMetricsRowRepeatedSymbols(b *testing.B) { encodeMetricsRows(b, 1000, 100) }

// encodeMetricsRows is the body of the row benchmarks: frames of rows rows,
// symbols changing every symbolRun rows.
func encodeMetricsRows(b *testing.B, rows, symbolRun int) {
	e := NewEncoder(NewMemDict(), EncoderOptions{Gorilla: true, DeltaSymbolDict: true})
	m := newMetricsTable(b, e, "metrics")
	var buf []byte
	total := 0
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Process()
	for i := 0; i < b.N; i++ {
		m.rowWith(i, i/symbolRun)
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
	b.ReportMetric(float64(cputime.Process()-cpu0)/float64(b.N), "cpu-ns/row")
	b.ReportMetric(float64(total)/float64(b.N), "bytes/row")
}

// BenchmarkAppendRawMetricsRow is the yardstick for the encoder: it only
// copies the same rows' values, unencoded, into a buffer reset every 100
// rows; the ratio of the two cpu-ns/row figures is the encoder's cost over
// touching the data at all.
func BenchmarkAppendRawMetricsRow(b *testing.B) {
	var buf []byte
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Process()
	for i := 0; i < b.N; i++ {
		buf = append(buf, metricServices[i%len(metricServices)]...)
		buf = append(buf, metricNames[i%len(metricNames)]...)
		buf = append(buf, metricHosts[i%len(metricHosts)]...)
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(float64(i)*0.5))
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(float64(i)*0.25))
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(float64(i)*2))
		buf = append(buf, metricAttrs[i%len(metricAttrs)]...)
		buf = binary.LittleEndian.AppendUint64(buf, uint64(1_700_000_000_000_000_000+int64(i)*10_000_000_000))
		if i%100 == 99 {
			buf = buf[:0]
		}
	}
	b.ReportMetric(float64(cputime.Process()-cpu0)/float64(b.N), "cpu-ns/row")
}

// BenchmarkMemDictNewSymbols is the dictionary under series churn: one op
// is one new 124-byte symbol (a point's attributes JSON with a unique
// value) into a dictionary of up to 135,000 entries, about one 16 MiB
// generation of them, then a fresh dictionary. B/op is the heap it
// allocates per symbol, bytes/entry what it holds per entry (MemBytes),
// cpu-ns/symbol the process CPU time per symbol, GC included.
func BenchmarkMemDictNewSymbols(b *testing.B) {
	const perGen = 135000
	sym := []byte(`{"cloud.availability_zone":"eu-west-1a","cloud.region":"eu-west-1","cpu":"cpu0000000000","host.arch":"amd64","state":"user"}`)
	d := NewMemDict()
	var held int64
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Process()
	for i := 0; i < b.N; i++ {
		if d.Len() == perGen {
			held = d.MemBytes()
			d = NewMemDict()
		}
		binary.BigEndian.PutUint64(sym[77:85], uint64(i)) // the cpu value, unique per op
		d.ID(sym)
	}
	b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/symbol")
	if held == 0 {
		held = d.MemBytes()
		b.ReportMetric(float64(held)/float64(d.Len()), "bytes/entry")
	} else {
		b.ReportMetric(float64(held)/perGen, "bytes/entry")
	}
}

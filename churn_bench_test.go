package questdbexporter

import (
	"context"
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/questdbexporter/questdbexporter/internal/cputime"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// BenchmarkConsumeMetricsChurn is the write path under series churn, as in
// cmd/benchcollector's churn shape: batches of 1,000 gauge points (10
// metrics x 100 points, five point attributes, ~124 bytes of attribute
// JSON) whose cpu attribute is unique per point, so every point is a new
// SYMBOL; pdata -> rows -> frames -> an SF queue on disk (sf_durability
// memory, the default dictionary bounds: generations of 4 MiB), acked after
// each call. No sender. cpu-ns/point is the process's CPU time per point,
// the queue's background work and the GC included.
//
//	go test -run '^$' -bench ConsumeMetricsChurn -benchtime 400x -count 5 .
func BenchmarkConsumeMetricsChurn(b *testing.B) {
	cfg := createDefaultConfig().(*Config)
	cfg.SFDir, cfg.SFDurability = b.TempDir(), "memory"
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	q, err := sfqueue.Open(cfg.queueOptions("bench", zap.NewNop()))
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	w := benchWriterFor(b, q, cfg)
	defer w.close()
	md, points := churnBatch()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Process()
	for i := range b.N {
		j := int64(i) * benchPoints
		for _, dp := range points {
			dp.Attributes().PutStr("cpu", "cpu"+strconv.FormatInt(j, 10))
			j++
		}
		fsn, err := w.writeMetrics(ctx, md)
		if err != nil {
			b.Fatal(err)
		}
		q.Ack(fsn)
	}
	b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(b.N*benchPoints), "cpu-ns/point")
}

// churnBatch is the churn shape's batch and its points, whose cpu
// attribute the caller sets.
func churnBatch() (pmetric.Metrics, []pmetric.NumberDataPoint) {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "checkout")
	rm.Resource().Attributes().PutStr("host.name", "node-7")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("benchcollector")
	var points []pmetric.NumberDataPoint
	for m := range 10 {
		metric := sm.Metrics().AppendEmpty()
		metric.SetName("bench.metric." + strconv.Itoa(m))
		metric.SetUnit("1")
		dps := metric.SetEmptyGauge().DataPoints()
		for range benchPoints / 10 {
			dp := dps.AppendEmpty()
			dp.SetTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + int64(len(points))*1_000_000))
			dp.SetDoubleValue(float64(len(points)))
			a := dp.Attributes()
			a.PutStr("cpu", "")
			a.PutStr("state", "user")
			a.PutStr("host.arch", "amd64")
			a.PutStr("cloud.region", "eu-west-1")
			a.PutStr("cloud.availability_zone", "eu-west-1a")
			points = append(points, dp)
		}
	}
	return md, points
}

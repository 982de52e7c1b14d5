package questdbexporter

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/questdbexporter/questdbexporter/internal/datamodel"
	"github.com/questdbexporter/questdbexporter/internal/metadata"
	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/sender"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// telemetry forwards the writer's, the queue's and the sender's counters to
// the component's own metrics (internal/metadata). It is the writer's
// observer and the sender's Observer; the queue is sampled by the monitor.
type telemetry struct {
	tb     *metadata.TelemetryBuilder
	logger *zap.Logger

	// Read by the observable gauges, written by their owners.
	dictLen atomic.Int64 // entries of the current dictionary generation
	stats   atomic.Pointer[sfqueue.Stats]

	// Previous queue sample, for counters the queue keeps as totals.
	// Owned by the monitor goroutine.
	prevFsyncs  uint64
	prevFsyncNs time.Duration
	prevEvicted uint64
}

var (
	_ writerObserver                = (*telemetry)(nil)
	_ sender.Observer               = (*telemetry)(nil)
	_ sender.DrainInterruptObserver = (*telemetry)(nil)
)

func newTelemetry(tb *metadata.TelemetryBuilder, logger *zap.Logger) (*telemetry, error) {
	t := &telemetry{tb: tb, logger: logger}
	t.stats.Store(&sfqueue.Stats{})
	err := errors.Join(
		tb.RegisterExporterQuestdbQueueBytesCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(t.stats.Load().UsedBytes)
			return nil
		}),
		tb.RegisterExporterQuestdbQueueCapacityCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(t.stats.Load().CapacityBytes)
			return nil
		}),
		tb.RegisterExporterQuestdbQueueFillRatioCallback(func(_ context.Context, o metric.Float64Observer) error {
			s := t.stats.Load()
			o.Observe(fillRatio(s.UsedBytes, s.CapacityBytes))
			return nil
		}),
		tb.RegisterExporterQuestdbDictionarySizeCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(t.dictLen.Load())
			return nil
		}),
	)
	return t, err
}

// observeQueue records one queue sample: gauges read the latest, and the
// counters the queue keeps as totals advance by the difference. The queue
// reports fsyncs as a count and a total duration, so each fsync of the
// interval is recorded at the interval's mean latency.
func (t *telemetry) observeQueue(s sfqueue.Stats) {
	t.stats.Store(&s)
	ctx := context.Background()
	if s.Fsyncs > t.prevFsyncs {
		n := s.Fsyncs - t.prevFsyncs
		mean := (s.FsyncTotal - t.prevFsyncNs).Seconds() / float64(n)
		for range min(n, 1000) {
			t.tb.ExporterQuestdbFsyncLatency.Record(ctx, mean)
		}
	}
	t.prevFsyncs, t.prevFsyncNs = s.Fsyncs, s.FsyncTotal
	if s.FramesEvicted > t.prevEvicted {
		t.tb.ExporterQuestdbFramesEvicted.Add(ctx, int64(s.FramesEvicted-t.prevEvicted))
	}
	t.prevEvicted = s.FramesEvicted
}

// skipped counts data points, log records or spans the row encoder left
// out, by reason and signal.
func (t *telemetry) skipped(sig signal, stats datamodel.Stats) {
	for reason, n := range stats.Skipped {
		if n > 0 {
			t.tb.ExporterQuestdbSkippedDataPoints.Add(context.Background(), int64(n),
				metric.WithAttributes(attribute.String("reason", datamodel.SkipReason(reason).String()),
					attribute.String("signal", sig.String())))
		}
	}
}

func (t *telemetry) groupAppended(_, frames, rows int) {
	ctx := context.Background()
	t.tb.ExporterQuestdbFramesAppended.Add(ctx, int64(frames))
	t.tb.ExporterQuestdbRowsAppended.Add(ctx, int64(rows))
}

func (t *telemetry) groupStalled() {
	t.tb.ExporterQuestdbBackpressureStalls.Add(context.Background(), 1)
}

func (t *telemetry) groupFailed(callers int, err error) {
	t.logger.Debug("group of batches not stored", zap.Int("callers", callers), zap.Error(err))
}

// sender.Observer

func (t *telemetry) FramesSent(int) {}

func (t *telemetry) FramesReplayed(n int) {
	t.tb.ExporterQuestdbFramesReplayed.Add(context.Background(), int64(n))
}

func (t *telemetry) FramesAcked(n int) {
	t.tb.ExporterQuestdbFramesAcked.Add(context.Background(), int64(n))
}

func (t *telemetry) AckLatency(d time.Duration) {
	t.tb.ExporterQuestdbAckLatency.Record(context.Background(), d.Seconds())
}

func (t *telemetry) InFlight(int) {}

func (t *telemetry) ReconnectAttempt() {
	t.tb.ExporterQuestdbReconnectAttempts.Add(context.Background(), 1)
}

func (t *telemetry) ReconnectSuccess() {
	t.tb.ExporterQuestdbReconnectSuccesses.Add(context.Background(), 1)
}

func (t *telemetry) ServerError(c qwp.Category) {
	t.tb.ExporterQuestdbServerErrors.Add(context.Background(), 1,
		metric.WithAttributes(attribute.String("category", strings.ToLower(c.String()))))
}

// DictionarySize is the dictionary a connection registered; the gauge shows
// the writer's current generation instead, which is what grows.
func (t *telemetry) DictionarySize(int) {}

func (t *telemetry) DrainerStarted() {
	t.tb.ExporterQuestdbDrainersActive.Add(context.Background(), 1)
}

func (t *telemetry) DrainerSucceeded() {
	t.tb.ExporterQuestdbDrainersActive.Add(context.Background(), -1)
	t.tb.ExporterQuestdbDrainersSucceeded.Add(context.Background(), 1)
}

func (t *telemetry) DrainerFailed() {
	t.tb.ExporterQuestdbDrainersActive.Add(context.Background(), -1)
	t.tb.ExporterQuestdbDrainersFailed.Add(context.Background(), 1)
}

// DrainerInterrupted: a drainer stopped by Shutdown before its slot was
// empty; the slot keeps its frames for the next start.
func (t *telemetry) DrainerInterrupted() {
	t.tb.ExporterQuestdbDrainersActive.Add(context.Background(), -1)
}

package questdbexporter

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
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
// observer and the sender's Observer; the queue is read by the gauges when
// they are collected and sampled by the monitor for the counters it keeps as
// totals.
//
// Every measurement carries the attribute exporter=<component ID>, as the
// collector's own otelcol_exporter_* metrics do, so two questdb exporters
// in one collector are two series. Every counter is recorded as 0 when the
// instance is built, so rate() and absent() see a series from the start.
type telemetry struct {
	tb     *metadata.TelemetryBuilder
	logger *zap.Logger
	id     attribute.KeyValue       // exporter=<component ID>
	attrs  metric.MeasurementOption // just id

	// Read by the observable gauges, written by their owners.
	dictLen   atomic.Int64                  // entries of the current dictionary generation
	dictIndex atomic.Int64                  // its index in RAM (text, entry records, table)
	dictLimit atomic.Int64                  // its working limit of symbol text (genDict.Limit); the configured start before Start
	dictFill  atomic.Uint64                 // math.Float64bits of its fill (genDict.Fill)
	stopped   atomic.Int64                  // 1 while the sender is terminal
	connected atomic.Int64                  // 1 while the sender is connected
	unacked   unackedAge                    // when the unacknowledged frames were appended
	setAside  atomic.Int64                  // set-aside slots under sf_dir, per the monitor
	queue     atomic.Pointer[sfqueue.Queue] // the started queue, read live
	last      atomic.Pointer[queueSample]   // the last sample, once the queue is closed

	// The largest limit and fill (Float64bits: for fills, never negative,
	// the bits order as the values do) the writer checked since the
	// gauges last read them (dictBoundReached); 0 once read.
	dictLimitPeak atomic.Uint64
	dictFillPeak  atomic.Uint64

	// Previous queue sample, for counters the queue keeps as totals.
	// Owned by the monitor goroutine.
	prevFsyncs      uint64
	prevFsyncNs     time.Duration
	prevEvicted     uint64
	prevRowsEvicted uint64
}

var (
	_ writerObserver                = (*telemetry)(nil)
	_ sender.Observer               = (*telemetry)(nil)
	_ sender.DrainInterruptObserver = (*telemetry)(nil)
)

// exporterAttributeKey is the attribute exporterhelper puts on the
// collector's own otelcol_exporter_* metrics; ours use the same.
const exporterAttributeKey = "exporter"

func newTelemetry(tb *metadata.TelemetryBuilder, logger *zap.Logger, id component.ID) (*telemetry, error) {
	kv := attribute.String(exporterAttributeKey, id.String())
	t := &telemetry{tb: tb, logger: logger, id: kv, attrs: metric.WithAttributeSet(attribute.NewSet(kv))}
	t.last.Store(&queueSample{})
	err := errors.Join(
		tb.RegisterExporterQuestdbQueueBytesCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(t.sample().Used, t.attrs)
			return nil
		}),
		tb.RegisterExporterQuestdbQueueCapacityCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(t.sample().Capacity, t.attrs)
			return nil
		}),
		tb.RegisterExporterQuestdbQueueFillRatioCallback(func(_ context.Context, o metric.Float64Observer) error {
			o.Observe(t.sample().FillRatio(), t.attrs)
			return nil
		}),
		tb.RegisterExporterQuestdbDictionarySizeCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(t.dictLen.Load(), t.attrs)
			return nil
		}),
		tb.RegisterExporterQuestdbDictionaryLimitBytesCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(max(int64(t.dictLimitPeak.Swap(0)), t.dictLimit.Load()), t.attrs)
			return nil
		}),
		tb.RegisterExporterQuestdbDictionaryFillRatioCallback(func(_ context.Context, o metric.Float64Observer) error {
			o.Observe(math.Float64frombits(max(t.dictFillPeak.Swap(0), t.dictFill.Load())), t.attrs)
			return nil
		}),
		tb.RegisterExporterQuestdbSenderStoppedCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(t.stopped.Load(), t.attrs)
			return nil
		}),
		tb.RegisterExporterQuestdbConnectedCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(t.connected.Load(), t.attrs)
			return nil
		}),
		tb.RegisterExporterQuestdbOldestUnackedAgeCallback(func(_ context.Context, o metric.Float64Observer) error {
			o.Observe(t.oldestUnackedAge(time.Now()).Seconds(), t.attrs)
			return nil
		}),
		tb.RegisterExporterQuestdbDictionaryDiskBytesCallback(func(_ context.Context, o metric.Int64Observer) error {
			if s := t.sample(); s.DictOnDisk {
				o.Observe(s.DictBytes, t.attrs)
			} else {
				o.Observe(0, t.attrs)
			}
			return nil
		}),
		tb.RegisterExporterQuestdbDictionaryRAMBytesCallback(func(_ context.Context, o metric.Int64Observer) error {
			n := t.dictIndex.Load()
			if s := t.sample(); !s.DictOnDisk {
				n += s.DictBytes
			}
			o.Observe(n, t.attrs)
			return nil
		}),
		tb.RegisterExporterQuestdbDictionaryGenerationsCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(t.sample().DictGenerations), t.attrs)
			return nil
		}),
		tb.RegisterExporterQuestdbSetAsideSlotsCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(t.setAside.Load(), t.attrs)
			return nil
		}),
	)
	t.zeroCounters()
	return t, err
}

// zeroCounters records 0 on every counter and every attribute value the
// exporter knows in advance.
func (t *telemetry) zeroCounters() {
	ctx := context.Background()
	for _, c := range []metric.Int64Counter{
		t.tb.ExporterQuestdbBackpressureStalls, t.tb.ExporterQuestdbDrainersFailed, t.tb.ExporterQuestdbDrainersSucceeded,
		t.tb.ExporterQuestdbFramesAcked, t.tb.ExporterQuestdbFramesAppended, t.tb.ExporterQuestdbFramesEvicted,
		t.tb.ExporterQuestdbFramesReplayed, t.tb.ExporterQuestdbReconnectAttempts, t.tb.ExporterQuestdbReconnectSuccesses,
		t.tb.ExporterQuestdbRowsAppended, t.tb.ExporterQuestdbRowsEvicted,
	} {
		c.Add(ctx, 0, t.attrs)
	}
	t.tb.ExporterQuestdbDrainersActive.Add(ctx, 0, t.attrs)
	for c := qwp.CategorySchemaMismatch; c <= qwp.CategoryDataLoss; c++ {
		t.tb.ExporterQuestdbServerErrors.Add(ctx, 0, t.with(attribute.String("category", categoryName(c))))
	}
	for _, cause := range []lossCause{lossUnreplayable, lossVanished} {
		t.tb.ExporterQuestdbDataLossFrames.Add(ctx, 0, t.with(attribute.String("cause", string(cause))))
	}
	t.tb.ExporterQuestdbDictionaryLimitGrowths.Add(ctx, 0, t.attrs)
	for _, cause := range dictEndCauses {
		t.tb.ExporterQuestdbDictionaryGenerationsEnded.Add(ctx, 0, t.with(attribute.String("cause", string(cause))))
	}
	for _, cause := range sfqueue.TornCauses() {
		t.tb.ExporterQuestdbTornFrames.Add(ctx, 0, t.with(attribute.String("cause", string(cause))))
	}
	for reason := range datamodel.SkipReason(datamodel.NumSkipReasons) {
		for _, sig := range []signal{signalMetrics, signalLogs, signalTraces} {
			t.tb.ExporterQuestdbSkippedDataPoints.Add(ctx, 0, t.with(attribute.String("reason", reason.String()), attribute.String("signal", sig.String())))
		}
	}
}

// with is the exporter attribute and kvs.
func (t *telemetry) with(kvs ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributes(append([]attribute.KeyValue{t.id}, kvs...)...)
}

// categoryName is a server error category as the category attribute
// spells it.
func categoryName(c qwp.Category) string { return strings.ToLower(c.String()) }

// attachQueue makes the gauges read q live (Start), or, with nil, the last
// sample taken (Shutdown).
func (t *telemetry) attachQueue(q *sfqueue.Queue) {
	if q == nil {
		if old := t.queue.Swap(nil); old != nil {
			s := sampleQueue(old.Stats())
			t.last.Store(&s)
		}
		return
	}
	t.queue.Store(q)
}

// sample is the queue's state now, for the gauges.
func (t *telemetry) sample() queueSample {
	if q := t.queue.Load(); q != nil {
		return sampleQueue(q.Stats())
	}
	return *t.last.Load()
}

// observeQueue advances the counters the queue keeps as totals by the
// difference from the previous sample. The queue reports fsyncs as a count
// and a total duration, so each fsync of the interval is recorded at the
// interval's mean latency.
func (t *telemetry) observeQueue(s sfqueue.Stats) {
	ctx := context.Background()
	if s.Fsyncs > t.prevFsyncs {
		n := s.Fsyncs - t.prevFsyncs
		mean := (s.FsyncTotal - t.prevFsyncNs).Seconds() / float64(n)
		for range min(n, 1000) {
			t.tb.ExporterQuestdbFsyncLatency.Record(ctx, mean, t.attrs)
		}
	}
	t.prevFsyncs, t.prevFsyncNs = s.Fsyncs, s.FsyncTotal
	if s.FramesEvicted > t.prevEvicted {
		t.tb.ExporterQuestdbFramesEvicted.Add(ctx, int64(s.FramesEvicted-t.prevEvicted), t.attrs)
	}
	t.prevEvicted = s.FramesEvicted
	if s.ItemsEvicted > t.prevRowsEvicted {
		t.tb.ExporterQuestdbRowsEvicted.Add(ctx, int64(s.ItemsEvicted-t.prevRowsEvicted), t.attrs)
	}
	t.prevRowsEvicted = s.ItemsEvicted
}

// observeDict records the writer's dictionary for the gauges: the current
// generation's entries, index, working limit and fill. The writer
// goroutine calls it after each encode, so a rotation shows at once.
func (t *telemetry) observeDict(d *genDict) {
	t.dictLen.Store(int64(d.Len()))
	t.dictIndex.Store(d.IndexBytes())
	t.dictLimit.Store(int64(d.Limit()))
	t.dictFill.Store(math.Float64bits(d.Fill()))
}

// dictBoundReached raises the peaks the limit and fill gauges show and
// counts the growths and the generation's end (writerObserver). Between
// two bounds a generation's fill and limit only rise, so the values
// observeDict stores at each flush are their peaks there.
func (t *telemetry) dictBoundReached(fill float64, limit, growths int, end dictEnd) {
	raise(&t.dictFillPeak, math.Float64bits(max(fill, 0)))
	raise(&t.dictLimitPeak, uint64(limit))
	if growths > 0 {
		t.tb.ExporterQuestdbDictionaryLimitGrowths.Add(context.Background(), int64(growths), t.attrs)
	}
	if end != dictContinues {
		t.tb.ExporterQuestdbDictionaryGenerationsEnded.Add(context.Background(), 1, t.with(attribute.String("cause", string(end))))
	}
}

// raise makes p at least v; the gauges' Swap may run concurrently.
func raise(p *atomic.Uint64, v uint64) {
	for {
		old := p.Load()
		if old >= v || p.CompareAndSwap(old, v) {
			return
		}
	}
}

// senderState records whether the sender is connected and whether it
// stopped for good, for the connected and sender_stopped gauges.
func (t *telemetry) senderState(s sender.State) {
	var stopped, connected int64
	switch s.Kind {
	case sender.Terminal:
		stopped = 1
	case sender.Connected:
		connected = 1
	}
	t.stopped.Store(stopped)
	t.connected.Store(connected)
}

// oldestUnackedAge is how long the oldest frame QuestDB has not
// acknowledged has waited; 0 before Start and after Shutdown.
func (t *telemetry) oldestUnackedAge(now time.Time) time.Duration {
	q := t.queue.Load()
	if q == nil {
		return 0
	}
	// Acked before published: a frame appended in between only makes the
	// pair look further behind, never ahead.
	acked := q.AckedFSN()
	return t.unacked.age(acked, q.PublishedFSN(), now)
}

// lossCause is the cause attribute of data_loss_frames.
type lossCause string

const (
	lossUnreplayable lossCause = "unreplayable" // in a set-aside slot, readable or not
	lossVanished     lossCause = "vanished"     // recorded as on disk, found nowhere
)

// dataLoss counts accepted frames that will never be sent.
func (t *telemetry) dataLoss(cause lossCause, frames uint64) {
	t.tb.ExporterQuestdbDataLossFrames.Add(context.Background(), int64(frames), t.with(attribute.String("cause", string(cause))))
}

// tornFrames counts frames a power loss took inside the durability mode's
// loss window, by cause (sfqueue.TornCause).
func (t *telemetry) tornFrames(cause sfqueue.TornCause, frames uint64) {
	t.tb.ExporterQuestdbTornFrames.Add(context.Background(), int64(frames), t.with(attribute.String("cause", string(cause))))
}

// skipped counts data points, log records or spans the row encoder left
// out, by reason and signal.
func (t *telemetry) skipped(sig signal, stats datamodel.Stats) {
	for reason, n := range stats.Skipped {
		if n > 0 {
			t.tb.ExporterQuestdbSkippedDataPoints.Add(context.Background(), int64(n),
				t.with(attribute.String("reason", datamodel.SkipReason(reason).String()), attribute.String("signal", sig.String())))
		}
	}
}

// ddlTables records 0 refusals for each table the exporter creates, so the
// series exist before anything fails.
func (t *telemetry) ddlTables(tables []string) {
	for _, table := range tables {
		t.tb.ExporterQuestdbDdlFailures.Add(context.Background(), 0, t.with(attribute.String("table", table)))
	}
}

// ddlRefused counts a CREATE TABLE QuestDB refused.
func (t *telemetry) ddlRefused(table string) {
	t.tb.ExporterQuestdbDdlFailures.Add(context.Background(), 1, t.with(attribute.String("table", table)))
}

func (t *telemetry) groupAppended(_, frames, rows int, lastFSN uint64) {
	t.unacked.appended(lastFSN, time.Now())
	ctx := context.Background()
	t.tb.ExporterQuestdbFramesAppended.Add(ctx, int64(frames), t.attrs)
	t.tb.ExporterQuestdbRowsAppended.Add(ctx, int64(rows), t.attrs)
}

func (t *telemetry) groupStalled() {
	t.tb.ExporterQuestdbBackpressureStalls.Add(context.Background(), 1, t.attrs)
}

func (t *telemetry) groupFailed(callers int, err error) {
	t.logger.Debug("group of batches not stored", zap.Int("callers", callers), zap.Error(err))
}

// sender.Observer

func (t *telemetry) FramesSent(int) {}

func (t *telemetry) FramesReplayed(n int) {
	t.tb.ExporterQuestdbFramesReplayed.Add(context.Background(), int64(n), t.attrs)
}

func (t *telemetry) FramesAcked(n int) {
	t.tb.ExporterQuestdbFramesAcked.Add(context.Background(), int64(n), t.attrs)
}

func (t *telemetry) AckLatency(d time.Duration) {
	t.tb.ExporterQuestdbAckLatency.Record(context.Background(), d.Seconds(), t.attrs)
}

func (t *telemetry) InFlight(int) {}

func (t *telemetry) ReconnectAttempt() {
	t.tb.ExporterQuestdbReconnectAttempts.Add(context.Background(), 1, t.attrs)
}

func (t *telemetry) ReconnectSuccess() {
	t.tb.ExporterQuestdbReconnectSuccesses.Add(context.Background(), 1, t.attrs)
}

func (t *telemetry) ServerError(c qwp.Category) {
	t.tb.ExporterQuestdbServerErrors.Add(context.Background(), 1, t.with(attribute.String("category", categoryName(c))))
}

// DictionarySize is the dictionary a connection registered; the gauge shows
// the writer's current generation instead, which is what grows.
func (t *telemetry) DictionarySize(int) {}

func (t *telemetry) DrainerStarted() {
	t.tb.ExporterQuestdbDrainersActive.Add(context.Background(), 1, t.attrs)
}

func (t *telemetry) DrainerSucceeded() {
	t.tb.ExporterQuestdbDrainersActive.Add(context.Background(), -1, t.attrs)
	t.tb.ExporterQuestdbDrainersSucceeded.Add(context.Background(), 1, t.attrs)
}

func (t *telemetry) DrainerFailed() {
	t.tb.ExporterQuestdbDrainersActive.Add(context.Background(), -1, t.attrs)
	t.tb.ExporterQuestdbDrainersFailed.Add(context.Background(), 1, t.attrs)
}

// DrainerInterrupted: a drainer stopped by Shutdown before its slot was
// empty; the slot keeps its frames for the next start.
func (t *telemetry) DrainerInterrupted() {
	t.tb.ExporterQuestdbDrainersActive.Add(context.Background(), -1, t.attrs)
}

package questdbexporter

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/questdbexporter/questdbexporter/internal/metadata"
)

// instances is the process-wide registry behind NewFactory: the collector
// may build the metrics and the logs exporter of one ID from one factory
// or from two calls of NewFactory, and they must still share one instance.
var instances = newRegistry(newInstance)

// NewFactory returns the factory of the questdb exporter (metrics, logs and
// traces, alpha).
func NewFactory() exporter.Factory {
	return newFactory(instances)
}

func newFactory(r *registry) exporter.Factory {
	f := &factory{reg: r}
	return exporter.NewFactory(
		metadata.Type,
		createDefaultConfig,
		exporter.WithMetrics(f.createMetrics, metadata.MetricsStability),
		exporter.WithLogs(f.createLogs, metadata.LogsStability),
		exporter.WithTraces(f.createTraces, metadata.TracesStability),
	)
}

func createDefaultConfig() component.Config {
	return &Config{
		Endpoints:                   []string{defaultEndpoint},
		TLS:                         configoptional.Default(configtls.NewDefaultClientConfig()),
		SFDir:                       defaultSFDir,
		SFMaxSegmentBytes:           4 << 20,
		SFDurability:                "memory",
		SFSyncInterval:              5 * time.Second,
		SFAppendDeadline:            5 * time.Second,
		OnFull:                      "block",
		MaxBatchBytes:               defaultMaxBatchBytes,
		MaxInFlight:                 128,
		ReconnectInitialBackoff:     100 * time.Millisecond,
		ReconnectMaxBackoff:         5 * time.Second,
		CloseFlushTimeout:           5 * time.Second,
		DurableAckKeepaliveInterval: 200 * time.Millisecond,
		MaxFrameRejections:          4,
		OnServerError:               "auto",
		ErrorInboxCapacity:          256,
		MaxBackgroundDrainers:       4,
		SymbolDictMaxEntries:        maxSymbolDictEntries / 2,
		Tables: TablesConfig{
			Gauge:                "otel_metrics_gauge",
			Sum:                  "otel_metrics_sum",
			Histogram:            "otel_metrics_histogram",
			ExponentialHistogram: "otel_metrics_exp_histogram",
			Summary:              "otel_metrics_summary",
			Logs:                 "otel_logs",
			Traces:               "otel_traces",
		},
		MetricAttributesType: "symbol",
		CreateTables:         true,
	}
}

type factory struct{ reg *registry }

// helperOptions turn off exporterhelper's own queue, retries and timeout:
// the store-and-forward queue is the queue, the I/O loop retries forever,
// and a consume call waits only for the queue (bounded by
// sf_append_deadline and the caller's context).
func (f *factory) helperOptions(h *handle) []exporterhelper.Option {
	return []exporterhelper.Option{
		exporterhelper.WithStart(h.Start),
		exporterhelper.WithShutdown(h.Shutdown),
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{Timeout: 0}),
		exporterhelper.WithRetry(configretry.BackOffConfig{Enabled: false}),
		exporterhelper.WithQueue(configoptional.None[exporterhelper.QueueBatchConfig]()),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
	}
}

// helperSettings is set for exporterhelper, whose logger drops the Error
// line exporterhelper writes for every request the exporter returns an
// error for ("Exporting failed. Rejecting data." with advice to enable
// retry_on_failure and sending_queue, which this exporter refuses by
// design). A refusal is the backpressure that makes a source keep its data;
// the exporter reports it once per condition (the queue-full alert, the
// component status, a stopped sender's error) instead of once per request.
// exporterhelper still counts each refused request in the collector's
// otelcol_exporter_send_failed_* metrics, with error.type from the gRPC code
// (ResourceExhausted for a full queue).
func helperSettings(set exporter.Settings) exporter.Settings {
	set.Logger = set.Logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return dropRejectLine{c} }))
	return set
}

// rejectLinePrefix starts exporterhelper's per-request failure line
// (exporterhelper v0.165.0, internal/base_exporter.go).
const rejectLinePrefix = "Exporting failed. Rejecting data."

// dropRejectLine is a zap core that drops exporterhelper's per-request
// failure line and passes everything else through.
type dropRejectLine struct{ zapcore.Core }

func (d dropRejectLine) With(fields []zapcore.Field) zapcore.Core {
	return dropRejectLine{d.Core.With(fields)}
}

func (d dropRejectLine) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if strings.HasPrefix(e.Message, rejectLinePrefix) {
		return ce
	}
	return d.Core.Check(e, ce)
}

func (f *factory) acquire(set exporter.Settings, cfg component.Config) (*handle, error) {
	if err := checkPlatform(); err != nil {
		return nil, err
	}
	c, ok := cfg.(*Config)
	if !ok {
		return nil, fmt.Errorf("questdb exporter: config is %T, want *questdbexporter.Config", cfg)
	}
	// The collector validates before it creates; this covers callers that
	// do not, since the instance relies on a valid config.
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("questdb exporter %s: invalid configuration: %w", set.ID, err)
	}
	return f.reg.acquire(c, set)
}

func (f *factory) createMetrics(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
	return create(ctx, f, set, cfg, exporterhelper.NewMetrics, func(h *handle) consumer.ConsumeMetricsFunc { return h.consumeMetrics })
}

func (f *factory) createLogs(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
	return create(ctx, f, set, cfg, exporterhelper.NewLogs, func(h *handle) consumer.ConsumeLogsFunc { return h.consumeLogs })
}

func (f *factory) createTraces(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	return create(ctx, f, set, cfg, exporterhelper.NewTraces, func(h *handle) consumer.ConsumeTracesFunc { return h.consumeTraces })
}

// create builds one signal's exporter over the shared instance, the same
// way for every signal (helperSettings included: a signal built with the
// collector's settings as they are logs a stack trace per refused call).
func create[E any, P any](ctx context.Context, f *factory, set exporter.Settings, cfg component.Config,
	newHelper func(context.Context, exporter.Settings, component.Config, P, ...exporterhelper.Option) (E, error),
	push func(*handle) P,
) (E, error) {
	var zero E
	h, err := f.acquire(set, cfg)
	if err != nil {
		return zero, err
	}
	exp, err := newHelper(ctx, helperSettings(set), cfg, push(h), f.helperOptions(h)...)
	if err != nil {
		return zero, releaseAfter(ctx, h, err)
	}
	return exp, nil
}

// releaseAfter drops the handle of an exporter that could not be built, so
// the shared instance does not wait for a Shutdown that never comes.
func releaseAfter(ctx context.Context, h *handle, err error) error {
	if sErr := h.Shutdown(ctx); sErr != nil {
		return fmt.Errorf("%w (and releasing the shared instance: %v)", err, sErr)
	}
	return err
}

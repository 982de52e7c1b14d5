package questdbexporter

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/questdbexporter/questdbexporter/internal/metadata"
)

func TestFactoryTypeAndStability(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.Type, f.Type())
	assert.Equal(t, component.StabilityLevelAlpha, f.MetricsStability())
	assert.Equal(t, component.StabilityLevelAlpha, f.LogsStability())
	assert.Equal(t, component.StabilityLevelAlpha, f.TracesStability())
	require.NoError(t, componenttest.CheckConfigStruct(f.CreateDefaultConfig()))
}

func TestFactoryRefusesForeignConfig(t *testing.T) {
	type otherConfig struct{}
	f := newFactory(newRegistry((&fakes{}).newInstance))
	_, err := f.CreateMetrics(context.Background(), settingsFor("x"), &otherConfig{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "want *questdbexporter.Config")
}

func TestFactoryRefusesInvalidConfig(t *testing.T) {
	fs := &fakes{}
	f := newFactory(newRegistry(fs.newInstance))
	cfg := validConfig(t)
	cfg.OnFull = "drop"
	_, err := f.CreateLogs(context.Background(), settingsFor("bad"), cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "on_full:")
	assert.Empty(t, fs.instances(), "no instance is built from an invalid config")
}

// TestFactoryNoHelperQueueOrRetry: a consume error reaches the caller at
// once, from a single attempt — exporterhelper has no queue and no retry in
// front of the shared instance.
func TestFactoryNoHelperQueueOrRetry(t *testing.T) {
	boom := errors.New("queue full")
	fs := &fakes{prepare: func(f *fakeInstance) { f.consumeErr = boom }}
	f := newFactory(newRegistry(fs.newInstance))
	ctx := context.Background()
	exp, err := f.CreateMetrics(ctx, settingsFor("noretry"), validConfig(t))
	require.NoError(t, err)
	require.NoError(t, exp.Start(ctx, componenttest.NewNopHost()))
	assert.False(t, exp.Capabilities().MutatesData)

	md := pmetric.NewMetrics()
	md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyGauge().DataPoints().AppendEmpty()
	err = exp.ConsumeMetrics(ctx, md)
	require.ErrorIs(t, err, boom)
	_, _, metrics, _ := fs.instances()[0].counts()
	assert.Equal(t, 1, metrics, "one attempt, no retry, no queue")
	require.NoError(t, exp.Shutdown(ctx))
}

func TestFactoryPlatform(t *testing.T) {
	err := checkPlatform()
	switch runtime.GOOS {
	case "linux", "darwin":
		require.NoError(t, err)
	default:
		require.Error(t, err)
		assert.Contains(t, err.Error(), runtime.GOOS)
	}
}

// TestFactorySharedSlotReopens runs the real instance twice, as a collector
// restart (or config reload) in one process would: both signals share one
// slot, and once everything is shut down the slot is free for the next
// generation (the flock of the first is released).
func TestFactorySharedSlotReopens(t *testing.T) {
	dir := t.TempDir()
	cfg := validConfig(t)
	cfg.SFDir = dir
	cfg.CloseFlushTimeout = 0
	cfg.Endpoints = []string{"127.0.0.1:9"} // nothing listens: Start must not care
	require.NoError(t, cfg.Validate())
	ctx := context.Background()
	host := componenttest.NewNopHost()
	set := exportertest.NewNopSettings(metadata.Type)
	set.ID = component.NewIDWithName(metadata.Type, "reopen")

	for round := 1; round <= 2; round++ {
		f := NewFactory()
		me, err := f.CreateMetrics(ctx, set, cfg)
		require.NoError(t, err)
		le, err := f.CreateLogs(ctx, set, cfg)
		require.NoError(t, err)
		require.NoError(t, me.Start(ctx, host), "round %d", round)
		require.NoError(t, le.Start(ctx, host), "round %d", round)

		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		var slots []string
		for _, e := range entries {
			if e.IsDir() {
				slots = append(slots, e.Name())
			}
		}
		assert.Equal(t, []string{"questdb-reopen"}, slots, "one slot for both signals, named after the component ID")
		_, err = os.Stat(filepath.Join(dir, "questdb-reopen"))
		require.NoError(t, err)

		require.NoError(t, le.Shutdown(ctx))
		require.NoError(t, me.Shutdown(ctx))
	}
}

// TestRefusedCallsAreQuietPerSignal: a refused consume call of any signal
// logs nothing (exporterhelper's "Exporting failed. Rejecting data." line
// and its stack trace are dropped for every signal): the refusal reaches
// the caller, which keeps the data and retries, and the exporter reports
// the condition once, not per call.
func TestRefusedCallsAreQuietPerSignal(t *testing.T) {
	const calls = 20
	full := status.Error(codes.ResourceExhausted, "questdb exporter queue full")
	for _, signal := range []string{"metrics", "logs", "traces"} {
		t.Run(signal, func(t *testing.T) {
			fs := &fakes{prepare: func(f *fakeInstance) { f.consumeErr = full }}
			f := newFactory(newRegistry(fs.newInstance))
			logger, logs := collectorLogger()
			set := settingsFor("quiet")
			set.Logger = logger
			ctx := context.Background()
			var consume func() error
			var comp component.Component
			switch signal {
			case "metrics":
				exp, err := f.CreateMetrics(ctx, set, validConfig(t))
				require.NoError(t, err)
				comp, consume = exp, func() error { return exp.ConsumeMetrics(ctx, gaugeBatch(0, 3)) }
			case "logs":
				exp, err := f.CreateLogs(ctx, set, validConfig(t))
				require.NoError(t, err)
				comp, consume = exp, func() error { return exp.ConsumeLogs(ctx, logBatch(0, 3)) }
			case "traces":
				exp, err := f.CreateTraces(ctx, set, validConfig(t))
				require.NoError(t, err)
				comp, consume = exp, func() error { return exp.ConsumeTraces(ctx, spanBatch(0, 3)) }
			}
			require.NoError(t, comp.Start(ctx, componenttest.NewNopHost()))
			for range calls {
				require.Equal(t, codes.ResourceExhausted, status.Code(consume()), "the refusal reaches the caller")
			}
			require.NoError(t, comp.Shutdown(ctx))
			if n := logs.Len(); n != 0 {
				e := logs.All()[0]
				t.Errorf("%d refused %s calls logged %d lines, want none; the first: %v %q (stack %d bytes)",
					calls, signal, n, e.Level, e.Message, len(e.Stack))
			}
		})
	}
}

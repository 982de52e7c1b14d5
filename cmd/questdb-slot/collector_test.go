package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	questdbexporter "github.com/questdbexporter/questdbexporter"
	"github.com/questdbexporter/questdbexporter/internal/metadatatest"
)

// collector is the exporter as a collector runs it on a slot under sfDir
// (sender_id questdb-primary), with its logs, own telemetry and component
// status readable: the runbook's other side.
type collector struct {
	exp  exporter.Metrics
	tt   *componenttest.Telemetry
	logs *observer.ObservedLogs
	host *statusHost
	done bool
}

// statusHost records the last component status reported to it.
type statusHost struct {
	component.Host
	mu   sync.Mutex
	last *componentstatus.Event
}

func (h *statusHost) Report(ev *componentstatus.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last = ev
}

func (h *statusHost) status() componentstatus.Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last == nil {
		return componentstatus.StatusNone
	}
	return h.last.Status()
}

// startCollector starts the exporter with sf_dir sfDir, sending to endpoint
// (host:port); it is shut down at the end of the test.
func startCollector(t *testing.T, sfDir, endpoint string) *collector {
	t.Helper()
	f := questdbexporter.NewFactory()
	cfg := f.CreateDefaultConfig().(*questdbexporter.Config)
	cfg.Endpoints, cfg.SFDir, cfg.SenderID = []string{endpoint}, sfDir, "questdb-primary"
	cfg.CloseFlushTimeout = 0
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	c := &collector{tt: componenttest.NewTelemetry(), host: &statusHost{Host: componenttest.NewNopHost()}}
	set := metadatatest.NewSettings(c.tt)
	core, logs := observer.New(zapcore.InfoLevel)
	set.Logger, c.logs = zap.New(core), logs
	exp, err := f.CreateMetrics(context.Background(), set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.exp = exp
	if err := exp.Start(context.Background(), c.host); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.shutdown(t) })
	return c
}

func (c *collector) shutdown(t *testing.T) {
	t.Helper()
	if c.done {
		return
	}
	c.done = true
	if err := c.exp.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
	if err := c.tt.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// metric sums the data points of one of the exporter's own int metrics.
func (c *collector) metric(t *testing.T, name string) int64 {
	t.Helper()
	m, err := c.tt.GetMetric(name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var n int64
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			n += dp.Value
		}
	case metricdata.Gauge[int64]:
		for _, dp := range d.DataPoints {
			n += dp.Value
		}
	default:
		t.Fatalf("%s: data of type %T", name, m.Data)
	}
	return n
}

// waitStatus waits until the component status is st and set_aside_slots
// is setAside.
func (c *collector) waitStatus(t *testing.T, st componentstatus.Status, setAside int64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got, aside := c.host.status(), int64(-1)
		if m, err := c.tt.GetMetric("otelcol_exporter_questdb_set_aside_slots"); err == nil {
			if g, ok := m.Data.(metricdata.Gauge[int64]); ok && len(g.DataPoints) > 0 {
				aside = g.DataPoints[0].Value
			}
		}
		if got == st && aside == setAside {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %v, set_aside_slots %d; want %v and %d", got, aside, st, setAside)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

package questdbexporter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/questdbexporter/questdbexporter/internal/metadata"
)

// fakeInstance records what the registry does to it.
type fakeInstance struct {
	n        int // creation order, from 1
	events   *eventLog
	startErr error
	// blockShutdown, when set, holds Shutdown until it is closed.
	blockShutdown chan struct{}

	mu            sync.Mutex
	starts, stops int
	metrics, logs int
	traces        int
	consumeErr    error
}

func (f *fakeInstance) Start(context.Context, component.Host) error {
	f.mu.Lock()
	f.starts++
	f.mu.Unlock()
	f.events.add(fmt.Sprintf("start#%d", f.n))
	return f.startErr
}

func (f *fakeInstance) Shutdown(context.Context) error {
	if f.blockShutdown != nil {
		<-f.blockShutdown
	}
	f.mu.Lock()
	f.stops++
	f.mu.Unlock()
	f.events.add(fmt.Sprintf("shutdown#%d", f.n))
	return nil
}

func (f *fakeInstance) consumeMetrics(context.Context, pmetric.Metrics) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.metrics++
	return f.consumeErr
}

func (f *fakeInstance) consumeLogs(context.Context, plog.Logs) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs++
	return f.consumeErr
}

func (f *fakeInstance) consumeTraces(context.Context, ptrace.Traces) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.traces++
	return f.consumeErr
}

func (f *fakeInstance) tracesConsumed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.traces
}

func (f *fakeInstance) counts() (starts, stops, metrics, logs int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.starts, f.stops, f.metrics, f.logs
}

type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

// fakes builds fakeInstances for a registry and keeps them in order.
type fakes struct {
	mu     sync.Mutex
	all    []*fakeInstance
	events eventLog
	// prepare, when set, adjusts each new instance.
	prepare func(*fakeInstance)
}

func (fs *fakes) newInstance(*Config, exporter.Settings) (instance, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f := &fakeInstance{n: len(fs.all) + 1, events: &fs.events}
	if fs.prepare != nil {
		fs.prepare(f)
	}
	fs.all = append(fs.all, f)
	return f, nil
}

func (fs *fakes) instances() []*fakeInstance {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return append([]*fakeInstance(nil), fs.all...)
}

// testWait bounds the waits for another goroutine's progress.
const (
	testWait = 10 * time.Second
	testTick = time.Millisecond
)

func settingsFor(name string) exporter.Settings {
	set := exportertest.NewNopSettings(metadata.Type)
	set.ID = component.NewIDWithName(metadata.Type, name)
	return set
}

func validConfig(t *testing.T) *Config {
	t.Helper()
	cfg := defaultConfig(t)
	cfg.SFDir = ""
	require.NoError(t, cfg.Validate())
	return cfg
}

func TestSharedOneInstancePerID(t *testing.T) {
	fs := &fakes{}
	f := newFactory(newRegistry(fs.newInstance))
	cfg := validConfig(t)
	ctx := context.Background()
	host := componenttest.NewNopHost()

	// Two collector generations: the second builds a fresh instance after
	// the first one's full shutdown.
	for round := 1; round <= 2; round++ {
		me, err := f.CreateMetrics(ctx, settingsFor("a"), cfg)
		require.NoError(t, err)
		le, err := f.CreateLogs(ctx, settingsFor("a"), cfg)
		require.NoError(t, err)
		te, err := f.CreateTraces(ctx, settingsFor("a"), cfg)
		require.NoError(t, err)
		require.Len(t, fs.instances(), round, "metrics, logs and traces of one ID share one instance")
		inst := fs.instances()[round-1]

		require.NoError(t, me.Start(ctx, host))
		require.NoError(t, le.Start(ctx, host))
		require.NoError(t, te.Start(ctx, host))
		require.NoError(t, me.ConsumeMetrics(ctx, pmetric.NewMetrics()))
		require.NoError(t, le.ConsumeLogs(ctx, plog.NewLogs()))
		require.NoError(t, te.ConsumeTraces(ctx, ptrace.NewTraces()))
		starts, stops, metrics, logs := inst.counts()
		assert.Equal(t, []int{1, 0, 1, 1, 1}, []int{starts, stops, metrics, logs, inst.tracesConsumed()})

		require.NoError(t, me.Shutdown(ctx))
		require.NoError(t, te.Shutdown(ctx))
		_, stops, _, _ = inst.counts()
		assert.Equal(t, 0, stops, "the logs exporter still uses the instance")
		require.NoError(t, le.Shutdown(ctx))
		_, stops, _, _ = inst.counts()
		assert.Equal(t, 1, stops, "the last Shutdown shuts the instance down")
	}
	assert.Equal(t, []string{"start#1", "shutdown#1", "start#2", "shutdown#2"}, fs.events.list())
}

func TestSharedSeparateIDs(t *testing.T) {
	fs := &fakes{}
	f := newFactory(newRegistry(fs.newInstance))
	cfg := validConfig(t)
	ctx := context.Background()
	a, err := f.CreateMetrics(ctx, settingsFor("a"), cfg)
	require.NoError(t, err)
	b, err := f.CreateMetrics(ctx, settingsFor("b"), cfg)
	require.NoError(t, err)
	require.Len(t, fs.instances(), 2)
	require.NoError(t, a.Start(ctx, componenttest.NewNopHost()))
	require.NoError(t, a.Shutdown(ctx))
	require.NoError(t, b.Shutdown(ctx))
	for i, inst := range fs.instances() {
		_, stops, _, _ := inst.counts()
		assert.Equal(t, 1, stops, "instance %d", i+1)
	}
}

func TestSharedShutdownWithoutStart(t *testing.T) {
	fs := &fakes{}
	reg := newRegistry(fs.newInstance)
	cfg := validConfig(t)
	ctx := context.Background()
	h1, err := reg.acquire(cfg, settingsFor("a"))
	require.NoError(t, err)
	h2, err := reg.acquire(cfg, settingsFor("a"))
	require.NoError(t, err)
	require.NoError(t, h1.Shutdown(ctx))
	require.NoError(t, h1.Shutdown(ctx), "a second Shutdown of a handle is a no-op")
	inst := fs.instances()[0]
	_, stops, _, _ := inst.counts()
	assert.Equal(t, 0, stops, "h1's second Shutdown must not release h2's reference")
	require.NoError(t, h2.Shutdown(ctx))
	starts, stops, _, _ := inst.counts()
	assert.Equal(t, 0, starts)
	assert.Equal(t, 1, stops, "an instance that never started is still shut down once")
	assert.Empty(t, reg.entries)
	assert.Empty(t, reg.closing)
}

func TestSharedStartErrorReachesEveryHandle(t *testing.T) {
	boom := errors.New("slot locked")
	fs := &fakes{prepare: func(f *fakeInstance) { f.startErr = boom }}
	reg := newRegistry(fs.newInstance)
	cfg := validConfig(t)
	ctx := context.Background()
	h1, err := reg.acquire(cfg, settingsFor("a"))
	require.NoError(t, err)
	h2, err := reg.acquire(cfg, settingsFor("a"))
	require.NoError(t, err)
	require.ErrorIs(t, h1.Start(ctx, componenttest.NewNopHost()), boom)
	require.ErrorIs(t, h2.Start(ctx, componenttest.NewNopHost()), boom)
	starts, _, _, _ := fs.instances()[0].counts()
	assert.Equal(t, 1, starts, "Start runs once per instance")
	require.NoError(t, h1.Shutdown(ctx))
	require.NoError(t, h2.Shutdown(ctx))
	_, stops, _, _ := fs.instances()[0].counts()
	assert.Equal(t, 1, stops, "a failed Start is still followed by Shutdown")
}

func TestSharedRefusesSecondConfigForRunningID(t *testing.T) {
	fs := &fakes{}
	reg := newRegistry(fs.newInstance)
	cfg := validConfig(t)
	h, err := reg.acquire(cfg, settingsFor("a"))
	require.NoError(t, err)
	other := validConfig(t)
	other.MaxInFlight = 7
	_, err = reg.acquire(other, settingsFor("a"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "questdb/a")
	assert.Contains(t, err.Error(), "different configuration")

	same := validConfig(t) // equal values in another struct are the same configuration
	h2, err := reg.acquire(same, settingsFor("a"))
	require.NoError(t, err)
	require.NoError(t, h.Shutdown(context.Background()))
	require.NoError(t, h2.Shutdown(context.Background()))
	assert.Len(t, fs.instances(), 1)
}

// TestSharedNewInstanceWaitsForPrevious: an instance for an ID whose previous
// instance is still shutting down starts only after that shutdown ended
// (both would otherwise hold the same slot).
func TestSharedNewInstanceWaitsForPrevious(t *testing.T) {
	release := make(chan struct{})
	fs := &fakes{prepare: func(f *fakeInstance) {
		if f.n == 1 {
			f.blockShutdown = release
		}
	}}
	reg := newRegistry(fs.newInstance)
	cfg := validConfig(t)
	ctx := context.Background()
	host := componenttest.NewNopHost()

	old, err := reg.acquire(cfg, settingsFor("a"))
	require.NoError(t, err)
	require.NoError(t, old.Start(ctx, host))
	oldDone := make(chan error, 1)
	go func() { oldDone <- old.Shutdown(ctx) }()

	// Wait until the old handle has been released from the map (its
	// instance is now blocked in Shutdown).
	require.Eventually(t, func() bool {
		reg.mu.Lock()
		defer reg.mu.Unlock()
		return len(reg.entries) == 0 && len(reg.closing) == 1
	}, testWait, testTick)

	fresh, err := reg.acquire(cfg, settingsFor("a"))
	require.NoError(t, err)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	err = fresh.Start(cancelled, host)
	require.Error(t, err, "Start gives up when its context ends before the old instance is down")
	assert.Contains(t, err.Error(), "still shutting down")
	starts, _, _, _ := fs.instances()[1].counts()
	assert.Equal(t, 0, starts)

	// Its Shutdown, and a third instance's Start, both wait for the first
	// instance to be down.
	freshDone := make(chan error, 1)
	go func() { freshDone <- fresh.Shutdown(ctx) }()
	require.Eventually(t, func() bool { return slices.Contains(fs.events.list(), "shutdown#2") }, testWait, testTick)
	select {
	case err := <-freshDone:
		t.Fatalf("the second instance's Shutdown returned (%v) while the first was still shutting down", err)
	case <-time.After(50 * time.Millisecond): // a wrong early return would come within this
	}
	next, err := reg.acquire(cfg, settingsFor("a"))
	require.NoError(t, err)
	startDone := make(chan error, 1)
	go func() { startDone <- next.Start(ctx, host) }()
	close(release)
	require.NoError(t, <-oldDone)
	require.NoError(t, <-freshDone)
	require.NoError(t, <-startDone)
	require.NoError(t, next.Shutdown(ctx))
	ev := fs.events.list()
	assert.NotContains(t, ev, "start#2")
	assert.Less(t, slices.Index(ev, "shutdown#1"), slices.Index(ev, "start#3"),
		"the first instance is down before the third starts: %v", ev)
	assert.Empty(t, reg.closing)
}

func TestSharedConcurrentUse(t *testing.T) {
	fs := &fakes{}
	reg := newRegistry(fs.newInstance)
	cfg := validConfig(t)
	ctx := context.Background()
	const ids, signals, rounds = 4, 2, 20
	var wg sync.WaitGroup
	for id := range ids {
		for range signals {
			wg.Go(func() {
				for range rounds {
					h, err := reg.acquire(cfg, settingsFor(fmt.Sprintf("c%d", id)))
					if !assert.NoError(t, err) {
						return
					}
					assert.NoError(t, h.Start(ctx, componenttest.NewNopHost()))
					assert.NoError(t, h.consumeMetrics(ctx, pmetric.NewMetrics()))
					assert.NoError(t, h.Shutdown(ctx))
				}
			})
		}
	}
	wg.Wait()
	assert.Empty(t, reg.entries)
	assert.Empty(t, reg.closing)
	total := 0
	for _, inst := range fs.instances() {
		starts, stops, metrics, _ := inst.counts()
		assert.Equal(t, 1, stops, "instance %d shut down exactly once", inst.n)
		assert.LessOrEqual(t, starts, 1, "instance %d started at most once", inst.n)
		total += metrics
	}
	assert.Equal(t, ids*signals*rounds, total, "every consume reached an instance")
}

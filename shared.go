package questdbexporter

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// instance is the exporter behind one component ID: one writer, one
// store-and-forward slot, one connection. The collector builds one exporter
// per signal; every signal's exporter of an ID talks to the same instance
// through the registry below, which calls Start once (on the first
// exporter's Start) and Shutdown once (after the last exporter's Shutdown,
// or when every exporter was created and shut down without a Start).
//
// The seam is deliberately narrow: exporter.go implements newInstance and
// this interface; nothing else in the component knows the writer or the I/O
// loop.
type instance interface {
	// Start opens the queue and starts the background work. It must not
	// wait for the network: connecting is the I/O loop's business.
	Start(ctx context.Context, host component.Host) error
	// Shutdown stops everything Start started, waiting at most
	// close_flush_timeout for acknowledgements (and never past ctx). It is
	// called exactly once, also when Start was never called or failed.
	Shutdown(ctx context.Context) error
	// consumeMetrics, consumeLogs and consumeTraces convert a batch to rows
	// and hand them to the writer; they are called concurrently, only
	// between Start and Shutdown, and must not keep the batch after
	// returning.
	consumeMetrics(ctx context.Context, md pmetric.Metrics) error
	consumeLogs(ctx context.Context, ld plog.Logs) error
	consumeTraces(ctx context.Context, td ptrace.Traces) error
}

// newInstanceFunc builds an instance from a validated config. It must not
// do I/O; Start does.
type newInstanceFunc func(cfg *Config, set exporter.Settings) (instance, error)

// registry shares one instance among the exporters of one component ID.
// It is safe for concurrent use.
type registry struct {
	newInstance newInstanceFunc

	mu      sync.Mutex
	entries map[component.ID]*sharedEntry
	// closing holds, per ID, a channel closed when the instance released
	// last is shut down: a new instance for the ID waits for it in Start, so
	// the two never hold the slot at once.
	closing map[component.ID]chan struct{}
}

func newRegistry(newInstance newInstanceFunc) *registry {
	return &registry{
		newInstance: newInstance,
		entries:     make(map[component.ID]*sharedEntry),
		closing:     make(map[component.ID]chan struct{}),
	}
}

// sharedEntry is one live instance and its bookkeeping. refs counts the
// handles not yet shut down; it is guarded by registry.mu. mu orders Start
// and Shutdown of the instance, which may take a while (queue recovery,
// close_flush_timeout) and so run outside registry.mu.
type sharedEntry struct {
	id   component.ID
	cfg  Config
	inst instance
	refs int
	// prevClosed is the previous instance's closing channel, nil if none.
	prevClosed chan struct{}

	mu       sync.Mutex
	started  bool
	startErr error
}

// handle is one signal's view of a shared instance.
type handle struct {
	reg   *registry
	entry *sharedEntry
	once  sync.Once
}

// acquire returns a handle on the instance for id, building it on first use.
// A second configuration for an ID that is still running is refused: it can
// only come from a bug or two collectors in one process.
func (r *registry) acquire(cfg *Config, set exporter.Settings) (*handle, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[set.ID]
	if ok {
		if !reflect.DeepEqual(e.cfg, *cfg) {
			return nil, fmt.Errorf("questdb exporter %s: already running with a different configuration", set.ID)
		}
	} else {
		inst, err := r.newInstance(cfg, set)
		if err != nil {
			return nil, err
		}
		e = &sharedEntry{id: set.ID, cfg: *cfg, inst: inst, prevClosed: r.closing[set.ID]}
		r.entries[set.ID] = e
	}
	e.refs++
	return &handle{reg: r, entry: e}, nil
}

// Start starts the shared instance if no other handle has; a later Start
// reports the first one's result.
func (h *handle) Start(ctx context.Context, host component.Host) error {
	e := h.entry
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.started {
		e.started = true
		if e.prevClosed != nil {
			select {
			case <-e.prevClosed:
			case <-ctx.Done():
				e.startErr = fmt.Errorf("questdb exporter %s: the previous instance is still shutting down: %w", e.id, ctx.Err())
				return e.startErr
			}
		}
		e.startErr = e.inst.Start(ctx, host)
	}
	return e.startErr
}

// Shutdown releases this handle (a second call does nothing); the last
// release shuts the instance down and forgets it, so a later acquire for the
// same ID builds a fresh instance.
func (h *handle) Shutdown(ctx context.Context) error {
	var err error
	h.once.Do(func() {
		r, e := h.reg, h.entry
		r.mu.Lock()
		e.refs--
		last := e.refs == 0
		var closed chan struct{}
		if last {
			delete(r.entries, e.id)
			closed = make(chan struct{})
			r.closing[e.id] = closed
		}
		r.mu.Unlock()
		if !last {
			return
		}
		e.mu.Lock()
		err = e.inst.Shutdown(ctx)
		e.mu.Unlock()
		if e.prevClosed != nil {
			// "closed" promises that no earlier instance of the ID is still
			// running either, so a chain of instances whose Start gave up
			// cannot let a later one start beside the first.
			<-e.prevClosed
		}
		r.mu.Lock()
		if r.closing[e.id] == closed {
			delete(r.closing, e.id)
		}
		r.mu.Unlock()
		close(closed)
	})
	return err
}

func (h *handle) consumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	return h.entry.inst.consumeMetrics(ctx, md)
}

func (h *handle) consumeLogs(ctx context.Context, ld plog.Logs) error {
	return h.entry.inst.consumeLogs(ctx, ld)
}

func (h *handle) consumeTraces(ctx context.Context, td ptrace.Traces) error {
	return h.entry.inst.consumeTraces(ctx, td)
}

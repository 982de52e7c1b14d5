package questdbexporter

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/questdbexporter/questdbexporter/internal/metadata"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// failingSymbols fails the next append that carries dictionary entries
// once armed, as a full disk fails a .symbol-dict write.
type failingSymbols struct {
	frameQueue
	armed atomic.Bool
}

func (s *failingSymbols) AppendWith(ctx context.Context, b sfqueue.Batch) (uint64, error) {
	if len(b.Symbols) > 0 && s.armed.CompareAndSwap(true, false) {
		return 0, fmt.Errorf("write .symbol-dict: %w", syscall.ENOSPC)
	}
	return s.frameQueue.AppendWith(ctx, b)
}

func TestExporterRestartAfterDictionaryWriteFailureDoesNotWedge(t *testing.T) {
	// The exporter runs through an outage; a .symbol-dict write fails as a
	// generation fills, then the disk recovers and the batch is retried.
	// After a restart on the same slot every row reaches QuestDB: no
	// generation may end on a frame whose OK the server withholds, or the
	// sender would wait for it before recycling, on every restart.
	dir := t.TempDir()
	cfg := testConfig(t, closedPort(t))
	cfg.SFDir = dir
	cfg.SymbolDictMaxEntries = 5
	set := exportertest.NewNopSettings(metadata.Type) // one ID: one slot
	inst, err := newInstance(cfg, set)
	if err != nil {
		t.Fatal(err)
	}
	e := inst.(*questdbExporter)
	if err := e.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	// Set before the first request: the writer reads it only after
	// receiving one.
	fs := &failingSymbols{frameQueue: e.writer.q}
	e.writer.q = fs
	ctx := context.Background()
	if err := e.consumeMetrics(ctx, gaugeBatch(0, 20)); err != nil {
		t.Fatal(err)
	}
	fs.armed.Store(true)
	if err := e.consumeMetrics(ctx, gaugeBatch(100, 20)); err == nil {
		t.Fatal("a batch whose dictionary entries could not be written was accepted")
	}
	if err := e.consumeMetrics(ctx, gaugeBatch(100, 20)); err != nil { // the client's retry
		t.Fatal(err)
	}
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	srv := newServer(t, qwptest.Options{})
	cfg2 := *cfg
	cfg2.Endpoints = []string{srv.Addr()}
	set.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	startExporterWith(t, &cfg2, set) // the same ID: the same slot
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := srv.WaitRows(wctx, "otel_metrics_gauge", 40); err != nil {
		t.Fatal(err)
	}
	ids := serverIDs(t, srv, "otel_metrics_gauge")
	for _, base := range []int{0, 100} {
		for id := base; id < base+20; id++ {
			if ids[id] != 1 {
				t.Fatalf("row %d present %d times", id, ids[id])
			}
		}
	}
}

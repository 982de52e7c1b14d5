package questdbexporter

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/exporter/exportertest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/questdbexporter/questdbexporter/internal/metadata"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
)

// dictionaryFiles maps each dictionary file of the slot to its size.
func dictionaryFiles(t *testing.T, slot string) map[string]int64 {
	t.Helper()
	des, err := os.ReadDir(slot)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, de := range des {
		if strings.HasPrefix(de.Name(), ".symbol-dict") {
			info, err := de.Info()
			if err != nil {
				t.Fatal(err)
			}
			out[de.Name()] = info.Size()
		}
	}
	return out
}

// At the cap under on_full: block, a batch of new series is refused whole:
// its dictionary entries are not written or counted either (they are
// admitted with the frames that need them). Once QuestDB is back, the
// client's retry of the same batch is accepted and every point lands once.
func TestRefusedBatchLeavesTheDictionaryUnchanged(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	cfg := testConfig(t, srv.Addr())
	cfg.SFDir = t.TempDir()
	cfg.SenderID = "admit"
	cfg.MaxBatchBytes = 64 << 10
	cfg.SFMaxSegmentBytes = 128 << 10
	cfg.SFMaxTotalBytes = 512 << 10
	cfg.SFAppendDeadline = 50 * time.Millisecond
	cfg.SFDurability = "periodic"
	e := startExporterWith(t, cfg, exportertest.NewNopSettings(metadata.Type))
	slot := filepath.Join(cfg.SFDir, cfg.SenderID)
	ctx := context.Background()
	if err := e.consumeMetrics(ctx, gaugeBatch(0, 10)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "warm-up acknowledged", func() bool { return e.queue.AckedFSN() == e.queue.PublishedFSN() })
	srv.Outage(24 * time.Hour)

	accepted := [][2]int{{0, 10}}
	var refused [2]int
	for base := 1000; refused[1] == 0; base += 300 {
		if base > 1_000_000 {
			t.Fatal("the queue never filled")
		}
		before, files := e.queue.Stats(), dictionaryFiles(t, slot)
		err := e.consumeMetrics(ctx, gaugeBatch(base, 300))
		if err == nil {
			accepted = append(accepted, [2]int{base, 300})
			continue
		}
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "queue full") {
			t.Fatalf("filling the queue: %v, want a full queue", err)
		}
		after := e.queue.Stats()
		if after.UsedBytes != before.UsedBytes || after.DictBytes != before.DictBytes || after.PublishedFSN != before.PublishedFSN {
			t.Fatalf("a refused batch changed the queue: used %d -> %d, dictionary %d -> %d, frames %d -> %d",
				before.UsedBytes, after.UsedBytes, before.DictBytes, after.DictBytes, before.PublishedFSN, after.PublishedFSN)
		}
		if got := dictionaryFiles(t, slot); !maps.Equal(got, files) {
			t.Fatalf("a refused batch changed the dictionary files: %v -> %v", files, got)
		}
		if after.DictBytes == 0 || after.UsedBytes > after.CapacityBytes {
			t.Fatalf("at the refusal: %d dictionary bytes, %d of %d used", after.DictBytes, after.UsedBytes, after.CapacityBytes)
		}
		refused = [2]int{base, 300}
	}

	srv.Outage(0)
	waitUntil(t, time.Minute, "the backlog acknowledged", func() bool { return e.queue.AckedFSN() == e.queue.PublishedFSN() })
	if err := e.consumeMetrics(ctx, gaugeBatch(refused[0], refused[1])); err != nil {
		t.Fatalf("the refused batch, retried once there is room: %v", err)
	}
	accepted = append(accepted, refused)
	want := 0
	for _, a := range accepted {
		want += a[1]
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := srv.WaitRows(wctx, "otel_metrics_gauge", int64(want)); err != nil {
		t.Fatal(err)
	}
	ids := serverIDs(t, srv, "otel_metrics_gauge")
	for _, a := range accepted {
		for id := a[0]; id < a[0]+a[1]; id++ {
			if ids[id] != 1 {
				t.Fatalf("point %d landed %d times, want once", id, ids[id])
			}
		}
	}
	if len(ids) != want {
		t.Fatalf("%d points on the server, want the %d accepted", len(ids), want)
	}
}

package questdbexporter

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"

	"github.com/questdbexporter/questdbexporter/internal/metadatatest"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
)

// heapSampler records the peak HeapInuse while it runs.
type heapSampler struct {
	stop chan struct{}
	done chan struct{}
	peak atomic.Uint64
}

func startHeapSampler(every time.Duration) *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > h.peak.Load() {
				h.peak.Store(ms.HeapInuse)
			}
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

// end stops the sampler and returns the peak.
func (h *heapSampler) end() uint64 {
	close(h.stop)
	<-h.done
	return h.peak.Load()
}

// liveHeap is the heap that survives a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// procStatus returns the named /proc/self/status fields ("VmHWM", ...) as
// written there, "n/a" where there is none (not Linux).
func procStatus(fields ...string) map[string]string {
	out := map[string]string{}
	for _, f := range fields {
		out[f] = "n/a"
	}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if _, want := out[k]; ok && want {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// resetPeakRSS restarts VmHWM from the current RSS (Linux >= 4.0), so that
// it measures this test and not the ones before it; false if it cannot.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// rowPacer holds callers to rate rows per second from its start.
type rowPacer struct {
	mu     sync.Mutex
	start  time.Time
	rate   float64
	issued int
}

func (p *rowPacer) pace(ctx context.Context, n int) bool {
	p.mu.Lock()
	due := p.start.Add(time.Duration(float64(p.issued) / p.rate * float64(time.Second)))
	p.issued += n
	p.mu.Unlock()
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Until(due)):
		return true
	}
}

const mib = 1 << 20

// TestOutageUnderLoad keeps consume calls coming through a QuestDB outage:
// every call must succeed while the server is down (the backlog goes to
// the queue), and after recovery every row must arrive and the queue
// drain. It measures where the backlog lives: with sf_dir the process's
// live heap must not grow with it (the backlog is on disk); the memory-only
// case, whose backlog is in RAM by design, shows that the measurement does
// see a backlog held in memory. In short mode the outage lasts until the
// backlog reaches 12 MiB (a few seconds); with QDB_LONG=1 the SF case's
// outage lasts 2 minutes at a steady rate (the memory-only case keeps its
// short size).
func TestOutageUnderLoad(t *testing.T) {
	const logPad = 16 << 10 // body bytes per log record: the backlog's weight
	type size struct {
		outage time.Duration // how long the producers run at most
		rate   float64       // rows per second, a third each gauge points, logs and spans; 0: as fast as they can
		target int64         // backlog bytes that end the outage early; 0: none
	}
	short := size{outage: 60 * time.Second, target: 12 * mib}
	sized := short
	if os.Getenv("QDB_LONG") == "1" {
		sized = size{outage: 2 * time.Minute, rate: 250} // about 240 MiB of backlog, a quarter of the cap
	}
	cases := []struct {
		name string
		sf   bool
		size size
		// newSeries: gauge points only, each a new series, so that
		// every row brings a new SYMBOL (its attributes JSON); the
		// dictionary is held in RAM, so the memory figure is reported,
		// not asserted.
		newSeries bool
	}{
		{"sf", true, sized, false},
		{"memory", false, short, false},
		{"sf/new_series_per_point", true, size{outage: 60 * time.Second, target: 4 * mib}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, qwptest.Options{})
			cfg := testConfig(t, srv.Addr())
			if tc.sf {
				cfg.SFDir = t.TempDir()
			}
			cfg.SFMaxTotalBytes = 1 << 30
			cfg.SFMaxSegmentBytes = 1 * mib
			cfg.MaxBatchBytes = 256 << 10
			cfg.CloseFlushTimeout = 0
			tt := componenttest.NewTelemetry()
			defer tt.Shutdown(context.Background())
			e := startExporterWith(t, cfg, metadatatest.NewSettings(tt))
			l := newProofLedger()
			var next atomic.Int64
			c := instanceConsumer{e: e, logPad: logPad, timeout: 10 * time.Second}

			// Warm up: connected, tables created, everything acknowledged.
			for _, table := range proofTables {
				base := int(next.Add(10)) - 10
				l.add(table, base, 10, c.consume(context.Background(), table, base, 10) == nil)
			}
			waitUntil(t, 30*time.Second, "warm-up rows acknowledged", func() bool {
				return e.queue.PublishedFSN() > 0 && e.queue.AckedFSN() == e.queue.PublishedFSN()
			})
			rowsBefore := proofRowCount(srv)
			liveBefore := liveHeap()
			rssReset := resetPeakRSS()

			// The outage lasts until it is measured; the producers run for
			// its planned length.
			srv.Outage(time.Hour)
			ctx, cancel := context.WithTimeout(context.Background(), tc.size.outage)
			defer cancel()
			sampler := startHeapSampler(50 * time.Millisecond)
			var pace func(context.Context, int) bool
			if tc.size.rate > 0 {
				pace = (&rowPacer{start: time.Now(), rate: tc.size.rate}).pace
			}
			if tc.size.target > 0 {
				go func() {
					for ctx.Err() == nil && e.queue.Stats().UsedBytes < tc.size.target {
						time.Sleep(10 * time.Millisecond)
					}
					cancel()
				}()
			}
			outageStart := time.Now()
			var errs errorTally
			tables, points := proofTables[:], 20
			if tc.newSeries {
				tables, points = proofTables[:1], 200
			}
			proofLoad(ctx, 4, points, tables, &next, l, c, pace, errs.result)
			outageTook := time.Since(outageStart)
			peakOutage := sampler.end()
			backlog := e.queue.Stats()
			rowsDuring := proofRowCount(srv) - rowsBefore
			liveAfter := liveHeap()
			rssOutage := procStatus("VmHWM", "RssAnon")
			errs.check(t, "consume during the outage")
			if rowsDuring != 0 {
				t.Errorf("%d rows reached the server during the outage", rowsDuring)
			}

			// Recovery.
			srv.Outage(0)
			sampler = startHeapSampler(50 * time.Millisecond)
			drainStart := time.Now()
			waitUntil(t, proofDuration(60*time.Second, 60*time.Second, 5*time.Minute), "the backlog drained", func() bool {
				return e.queue.AckedFSN() == e.queue.PublishedFSN()
			})
			drainTook := time.Since(drainStart)
			peakDrain := sampler.end()
			// Trim follows the acks; give the queue a moment to unlink.
			waitUntil(t, 10*time.Second, "sealed segments deleted", func() bool {
				return e.queue.Stats().Segments <= 1
			})
			after := e.queue.Stats()
			// What stays is the segment taking appends, the dictionary of
			// the generation being written and (memory-only) the writer's
			// index of it.
			if segs := after.UsedBytes - after.DictBytes - after.IndexBytes; segs > int64(cfg.SFMaxSegmentBytes) {
				t.Errorf("queue holds %d bytes of segments after the drain, want at most one segment (%d)", segs, cfg.SFMaxSegmentBytes)
			}
			if after.DictGenerations > 1 {
				t.Errorf("%d dictionary generations held after the drain, want only the one being written", after.DictGenerations)
			}
			// The own telemetry follows (sampled every monitorInterval).
			waitUntil(t, 10*time.Second, "queue_bytes telemetry back to at most one segment", func() bool {
				v, ok := metricTotal(t, tt, "otelcol_exporter_questdb_queue_bytes")
				return ok && v <= float64(cfg.SFMaxSegmentBytes)
			})
			appended, _ := metricTotal(t, tt, "otelcol_exporter_questdb_frames_appended")
			acked, _ := metricTotal(t, tt, "otelcol_exporter_questdb_frames_acked")
			if appended == 0 || acked != appended {
				t.Errorf("telemetry: %v frames appended, %v acked; want all acked", appended, acked)
			}
			res := l.check(t, srv)
			if res.Duplicates != 0 {
				t.Errorf("%d duplicate rows; an outage alone replays nothing that was acknowledged, and the tables have dedup keys", res.Duplicates)
			}
			// The test's own bookkeeping, to tell it from the exporter's.
			withLedger := liveHeap()
			l.mu.Lock()
			l.tried, l.acked = nil, nil
			l.mu.Unlock()
			ledgerBytes := int64(withLedger) - int64(liveHeap())
			rss := procStatus("VmHWM", "RssAnon")
			if !rssReset {
				rss["VmHWM"] += " (since process start)"
				rssOutage["VmHWM"] += " (since process start)"
			}
			growth := int64(liveAfter) - int64(liveBefore)
			t.Logf("%s: outage %v, %d rows acked in all, %d of them spans (ledger %.1f MiB of the live heap); backlog %.1f MiB in %d segments (cap sf_max_total_bytes %d MiB); "+
				"live heap %+.1f MiB across the outage, peak HeapInuse %.1f MiB during it and %.1f MiB during the %v drain (with the in-process server's copy of every row); "+
				"VmHWM %s and RssAnon %s at the outage's end, VmHWM %s and RssAnon %s after the drain; queue after drain %d bytes",
				tc.name, outageTook.Round(time.Millisecond), res.Acked, res.AckedSpans, float64(ledgerBytes)/mib, float64(backlog.UsedBytes)/mib, backlog.Segments, cfg.SFMaxTotalBytes/mib,
				float64(growth)/mib, float64(peakOutage)/mib, float64(peakDrain)/mib, drainTook.Round(time.Millisecond),
				rssOutage["VmHWM"], rssOutage["RssAnon"], rss["VmHWM"], rss["RssAnon"], after.UsedBytes)
			if tc.newSeries {
				return
			}
			if res.AckedSpans == 0 {
				t.Fatal("no span was acknowledged: the traces pipeline was not exercised")
			}
			// Fixed costs (the writer's reused group buffer, encoder buffers,
			// the ledger) are allowed on top of a quarter of the backlog.
			const allowance = 2 * mib
			if backlog.UsedBytes < 4*allowance {
				t.Fatalf("backlog of %d bytes is too small to tell disk from RAM", backlog.UsedBytes)
			}
			if tc.sf && growth > backlog.UsedBytes/4+allowance {
				t.Errorf("live heap grew %d bytes over a %d-byte backlog: the SF backlog is held in RAM", growth, backlog.UsedBytes)
			}
			if !tc.sf && growth < backlog.UsedBytes/2 {
				t.Errorf("memory-only: live heap grew %d bytes over a %d-byte backlog in RAM; the measurement cannot see a RAM backlog (%s)",
					growth, backlog.UsedBytes, fmt.Sprint(tc.size))
			}
		})
	}
}

package questdbexporter

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter"

	"github.com/questdbexporter/questdbexporter/internal/metadatatest"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// The corruption campaign: for each durability mode, each file of a slot
// and each class of damage, a fresh exporter recovers the damaged slot and
// every accepted frame is delivered to QuestDB, or inside the mode's counted
// tail cut, or in a set-aside slot reported as DATA_LOSS whose unreadable
// range the slot scan (sfqueue.ScanSlot, what questdb-slot inspect prints)
// lists, or reported as vanished — never none of these. Short: each damage
// class in one mode; QDB_LONG=1 (or without -short): every mode.

const (
	campaignBatches = 12  // consume calls, one frame each
	campaignPoints  = 300 // data points per call; ids batch*1000+point
)

// campaignDamage damages the slot of scan; it returns false when the slot
// has no target for it (then the case is not counted).
type campaignDamage struct {
	name   string
	damage func(t *testing.T, slot string, scan *sfqueue.SlotScan) bool
}

func flipAt(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x10
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func truncateAt(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

// frameOff is the offset of a byte inside the payload of frame i of seg.
func frameOff(seg sfqueue.SegmentScan, i int) int64 { return int64(seg.Frames[i]) + 40 }

var campaignDamages = []campaignDamage{
	{"bit flip in the oldest header", func(t *testing.T, slot string, s *sfqueue.SlotScan) bool {
		flipAt(t, filepath.Join(slot, s.Segments[0].Name), 9)
		return true
	}},
	{"bit flip in frame 0 of the oldest segment", func(t *testing.T, slot string, s *sfqueue.SlotScan) bool {
		flipAt(t, filepath.Join(slot, s.Segments[0].Name), frameOff(s.Segments[0], 0))
		return true
	}},
	{"bit flip mid-segment", func(t *testing.T, slot string, s *sfqueue.SlotScan) bool {
		seg := s.Segments[len(s.Segments)/2]
		flipAt(t, filepath.Join(slot, seg.Name), frameOff(seg, len(seg.Frames)/2))
		return true
	}},
	{"bit flip in the last frame of an older segment", func(t *testing.T, slot string, s *sfqueue.SlotScan) bool {
		seg := s.Segments[0]
		flipAt(t, filepath.Join(slot, seg.Name), frameOff(seg, len(seg.Frames)-1))
		return true
	}},
	{"bit flip in the newest tail", func(t *testing.T, slot string, s *sfqueue.SlotScan) bool {
		seg := s.Segments[len(s.Segments)-1]
		flipAt(t, filepath.Join(slot, seg.Name), frameOff(seg, len(seg.Frames)-1))
		return true
	}},
	{"newest segment truncated mid-frame", func(t *testing.T, slot string, s *sfqueue.SlotScan) bool {
		seg := s.Segments[len(s.Segments)-1]
		truncateAt(t, filepath.Join(slot, seg.Name), frameOff(seg, len(seg.Frames)-1))
		return true
	}},
	{"older segment truncated mid-frame", func(t *testing.T, slot string, s *sfqueue.SlotScan) bool {
		truncateAt(t, filepath.Join(slot, s.Segments[0].Name), frameOff(s.Segments[0], 1))
		return true
	}},
	{"deleted middle segment", func(t *testing.T, slot string, s *sfqueue.SlotScan) bool {
		if err := os.Remove(filepath.Join(slot, s.Segments[1].Name)); err != nil {
			t.Fatal(err)
		}
		return true
	}},
	{"zeroed watermark", func(t *testing.T, slot string, s *sfqueue.SlotScan) bool {
		p := filepath.Join(slot, ".ack-watermark")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return os.WriteFile(p, make([]byte, len(b)), 0o600) == nil
	}},
	{"torn dictionary", func(t *testing.T, slot string, s *sfqueue.SlotScan) bool {
		dicts, _ := filepath.Glob(filepath.Join(slot, ".symbol-dict*"))
		if len(dicts) == 0 {
			t.Fatal("no dictionary file in the slot")
		}
		st, err := os.Stat(dicts[0])
		if err != nil {
			t.Fatal(err)
		}
		truncateAt(t, dicts[0], st.Size()/2+3)
		return true
	}},
}

func TestCorruptionCampaign(t *testing.T) {
	modes := []string{"memory", "periodic", "flush"}
	long := !testing.Short() || os.Getenv("QDB_LONG") == "1"
	cases, outcomes := 0, map[string]int{}
	for di, d := range campaignDamages {
		for mi, mode := range modes {
			if !long && mi != di%len(modes) {
				continue
			}
			t.Run(mode+"/"+d.name, func(t *testing.T) {
				if outcome := runCampaignCase(t, mode, d); outcome != "" {
					cases++
					outcomes[outcome]++
				}
			})
		}
	}
	t.Logf("corruption campaign: %d cases run; outcomes %v", cases, outcomes)
	if cases == 0 {
		t.Fatal("no case ran")
	}
}

// runCampaignCase writes a slot, damages it, recovers it with a fresh
// exporter and accounts for every accepted frame. It returns the case's
// outcome: "delivered", "tail cut", "set aside" or "vanished".
func runCampaignCase(t *testing.T, mode string, d campaignDamage) string {
	dir := t.TempDir()
	slot := filepath.Join(dir, "c")
	config := func(endpoint string) *Config {
		cfg := testConfig(t, endpoint)
		cfg.SFDir, cfg.SenderID, cfg.SFDurability = dir, "c", mode
		cfg.MaxBatchBytes = 64 << 10
		cfg.SFMaxSegmentBytes = 80 << 10
		cfg.CloseFlushTimeout = 0
		return cfg
	}
	// Write: nothing listens, every frame stays unacknowledged.
	w := startExporterWith(t, config(closedPort(t)), componenttestSettings(t))
	for b := range campaignBatches {
		if err := w.consumeMetrics(context.Background(), gaugeBatch(b*1000, campaignPoints)); err != nil {
			t.Fatalf("batch %d not accepted: %v", b, err)
		}
	}
	if got := w.queue.PublishedFSN(); got != campaignBatches {
		t.Fatalf("%d frames for %d batches: the campaign maps batch i to FSN i+1", got, campaignBatches)
	}
	if err := w.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	before, err := sfqueue.ScanSlot(slot)
	if err != nil {
		t.Fatal(err)
	}
	if len(before.Segments) < 3 {
		t.Fatalf("%d segments, the campaign needs 3", len(before.Segments))
	}
	if !d.damage(t, slot, before) {
		return ""
	}

	// Recover with a fresh exporter against a server.
	srv := newServer(t, qwptest.Options{})
	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(context.Background())
	r := startExporterWith(t, config(srv.Addr()), metadatatest.NewSettings(tt))
	rep := r.queue.Recovery()
	deadline := time.Now().Add(20 * time.Second)
	for r.queue.AckedFSN() != r.queue.PublishedFSN() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	delivered := serverIDs(t, srv, "otel_metrics_gauge")
	lossMetric, _ := metricTotal(t, tt, "otelcol_exporter_questdb_data_loss_frames")
	tornMetric, _ := metricTotal(t, tt, "otelcol_exporter_questdb_torn_frames")

	var aside *sfqueue.SlotScan
	var asideReadable map[uint64]bool
	if dl := rep.Unreplayable; dl != nil {
		if aside, err = sfqueue.ScanSlot(dl.Path); err != nil {
			t.Fatal(err)
		}
		asideReadable = map[uint64]bool{}
		if err := aside.EachFrame(func(fsn uint64, _ string, _ int64, _ []byte) error {
			asideReadable[fsn] = true
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		listed := false
		for _, rg := range aside.Ranges() {
			listed = listed || !rg.Readable && (rg.File != "" || strings.Contains(rg.Cause, "missing"))
		}
		if !listed || lossMetric == 0 {
			t.Fatalf("set aside as %s, but the scan lists no unreadable range (%v) or data_loss_frames is %v", dl.Path, aside.Ranges(), lossMetric)
		}
	}
	inUnreadable := func(fsn uint64) bool {
		if aside == nil {
			return false
		}
		for _, rg := range aside.Ranges() {
			if !rg.Readable && fsn >= rg.First && (rg.Last == 0 || fsn <= rg.Last) {
				return true
			}
		}
		return false
	}
	outcome := "delivered"
	for b := range campaignBatches {
		fsn := uint64(b + 1)
		n := 0
		for p := range campaignPoints {
			n += min(delivered[b*1000+p], 1)
		}
		switch {
		case n == campaignPoints:
			continue
		case n != 0:
			t.Fatalf("batch %d (FSN %d): %d of %d points delivered: a frame is all or nothing", b, fsn, n, campaignPoints)
		case rep.TornFrames > 0 && fsn >= rep.TornFirstFSN && fsn < rep.TornFirstFSN+rep.TornFrames && tornMetric > 0:
			outcome = "tail cut"
		case aside != nil && (asideReadable[fsn] || inUnreadable(fsn)):
			outcome = "set aside"
		case lostIn(rep.Lost, fsn) && lossMetric > 0:
			outcome = "vanished"
		default:
			t.Fatalf("FSN %d (batch %d) was accepted and is neither delivered, nor in a counted tail cut, nor in a set-aside slot, nor reported lost; recovery %+v", fsn, b, rep)
		}
	}
	return outcome
}

func lostIn(lost []sfqueue.FSNRange, fsn uint64) bool {
	for _, r := range lost {
		if fsn >= r.First && fsn <= r.Last {
			return true
		}
	}
	return false
}

func componenttestSettings(t *testing.T) exporter.Settings {
	t.Helper()
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { tt.Shutdown(context.Background()) })
	return metadatatest.NewSettings(tt)
}

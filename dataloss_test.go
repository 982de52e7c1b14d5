package questdbexporter

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/questdbexporter/questdbexporter/internal/metadatatest"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// TestDataLossStatusGaugeAndCounter: a slot recovery cannot replay is
// counted in data_loss_frames, shown by the set_aside_slots gauge and a
// recoverable DATA_LOSS status while it is present, and both clear once an
// operator removed it.
func TestDataLossStatusGaugeAndCounter(t *testing.T) {
	dir := t.TempDir()
	// Three frames in three segments; the middle segment goes missing.
	q, err := sfqueue.Open(sfqueue.Options{Dir: dir, SenderID: "lossy", MaxSegmentBytes: 256})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := q.Append(context.Background(), make([]byte, 150)); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "lossy", "*.sfseg"))
	if len(segs) != 3 {
		t.Fatalf("%d segments, want 3", len(segs))
	}
	os.Remove(segs[1])

	srv := newServer(t, qwptest.Options{})
	cfg := testConfig(t, srv.Addr())
	cfg.SFDir, cfg.SenderID = dir, "lossy"
	inst, tt, logs, host := startObserved(t, cfg)
	defer inst.Shutdown(context.Background())

	if n, _ := metricTotal(t, tt, "otelcol_exporter_questdb_data_loss_frames", attribute.String("cause", "unreplayable")); n != 3 {
		t.Fatalf("data_loss_frames{cause=unreplayable} = %v, want 3 (2 readable frames left in the slot, 1 missing)", n)
	}
	loss := logs.FilterMessageSnippet("DATA_LOSS").FilterLevelExact(zapcore.ErrorLevel).All()
	found := false
	for _, l := range loss {
		if ranges, ok := l.ContextMap()["unreadable"].([]any); ok && len(ranges) == 1 && strings.Contains(ranges[0].(string), "FSN 2..2") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no DATA_LOSS error log names the unreadable FSN range 2..2: %v", loss)
	}
	// One event, one line (issue 26 item 4: the queue, the drainer and
	// the exporter each logged it).
	if all := logs.FilterMessageSnippet("DATA_LOSS").All(); len(all) != 1 {
		msgs := make([]string, len(all))
		for i, l := range all {
			msgs[i] = l.Message
		}
		t.Fatalf("%d DATA_LOSS lines for one set-aside slot, want 1: %q", len(all), msgs)
	}
	dataLoss := func() bool {
		ev := host.last()
		return ev != nil && ev.Status() == componentstatus.StatusRecoverableError && strings.Contains(ev.Err().Error(), "DATA_LOSS: 1 set-aside slot(s)")
	}
	waitFor(t, dataLoss)
	if n, _ := metricTotal(t, tt, "otelcol_exporter_questdb_set_aside_slots"); n != 1 {
		t.Fatalf("set_aside_slots = %v, want 1", n)
	}
	if err := os.RemoveAll(filepath.Join(dir, "lossy.unreplayable-1")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { ev := host.last(); return ev != nil && ev.Status() == componentstatus.StatusOK })
	if n, _ := metricTotal(t, tt, "otelcol_exporter_questdb_set_aside_slots"); n != 0 {
		t.Fatalf("set_aside_slots = %v after the slot was removed, want 0", n)
	}
}

// TestRecoveryLossesAreCountedPerMode: a torn tail is counted in
// torn_frames (cause torn_tail) in every mode and logged at Error where it is the mode's loss
// window (periodic, memory); frames that vanished are DATA_LOSS.
func TestRecoveryLossesAreCountedPerMode(t *testing.T) {
	for _, tc := range []struct {
		durability string
		cut        func(b []byte, last int) []byte
		torn       float64
		vanished   float64
		errorLog   bool
	}{
		{"flush", func(b []byte, last int) []byte { b[last+6] ^= 1; return b }, 1, 0, false},
		{"periodic", func(b []byte, last int) []byte { b[last+6] ^= 1; return b }, 1, 0, true},
		{"memory", func(b []byte, last int) []byte { b[last+6] ^= 1; return b }, 1, 0, true},
		{"flush", func(b []byte, last int) []byte { return b[:last] }, 0, 1, true},
	} {
		t.Run(tc.durability, func(t *testing.T) {
			dir := t.TempDir()
			d, err := sfqueue.ParseDurability(tc.durability)
			if err != nil {
				t.Fatal(err)
			}
			q, err := sfqueue.Open(sfqueue.Options{Dir: dir, SenderID: "s", Durability: d})
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if _, err := q.Append(context.Background(), make([]byte, 50)); err != nil {
					t.Fatal(err)
				}
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			if tc.vanished == 0 {
				// A crash before any .ack-watermark save: nothing recorded
				// as fsynced, so the bit flip is a torn tail.
				os.Remove(filepath.Join(dir, "s", ".ack-watermark"))
			}
			segs, _ := filepath.Glob(filepath.Join(dir, "s", "*.sfseg"))
			b, _ := os.ReadFile(segs[0])
			last := 24 + 2*62 // header, then two frames of 4+4+50+4 bytes (segment format 2: length, items, payload, CRC)
			os.WriteFile(segs[0], tc.cut(b, last), 0o600)

			cfg := testConfig(t, closedPort(t))
			cfg.SFDir, cfg.SenderID, cfg.SFDurability = dir, "s", tc.durability
			tt := componenttest.NewTelemetry()
			defer tt.Shutdown(context.Background())
			set := metadatatest.NewSettings(tt)
			core, logs := observer.New(zapcore.InfoLevel)
			set.Logger = zap.New(core)
			startExporterWith(t, cfg, set)
			// A frame cut inside: the torn tail.
			torn, _ := metricTotal(t, tt, "otelcol_exporter_questdb_torn_frames", attribute.String("cause", "torn_tail"))
			vanished, _ := metricTotal(t, tt, "otelcol_exporter_questdb_data_loss_frames", attribute.String("cause", "vanished"))
			errs := logs.FilterLevelExact(zapcore.ErrorLevel).FilterField(zap.Uint64("first_fsn", 3)).Len()
			if torn != tc.torn || vanished != tc.vanished || (errs > 0) != tc.errorLog {
				t.Fatalf("torn_frames %v, vanished %v, %d error logs naming FSN 3; want %v, %v, error log %v",
					torn, vanished, errs, tc.torn, tc.vanished, tc.errorLog)
			}
		})
	}
}

// TestTornLogSaysWhatEachCauseLost: the Error line of a torn range says
// what its frames were: after_cut frames reached the disk intact (a later
// segment written back before an earlier one) and were deleted only
// because the FSNs before them were lost; the others never reached it.
func TestTornLogSaysWhatEachCauseLost(t *testing.T) {
	cfg := testConfig(t, closedPort(t))
	e, tt, logs, _ := startObserved(t, cfg)
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	e.reportRecovery(sfqueue.RecoveryReport{
		TornDurability: sfqueue.DurabilityMemory,
		Torn: []sfqueue.FSNRange{
			{First: 10, Last: 14, Torn: true, TornCause: sfqueue.TornUnwrittenSegment},
			{First: 15, Last: 17, Torn: true, TornCause: sfqueue.TornAfterCut},
		},
	}, nil)
	for _, tc := range []struct {
		first  uint64
		cause  string
		says   string
		frames float64
	}{
		{10, "unwritten_segment", "had not reached the disk", 5},
		{15, "after_cut", "reached the disk intact after a cut", 3},
	} {
		lines := logs.FilterLevelExact(zapcore.ErrorLevel).FilterField(zap.Uint64("first_fsn", tc.first)).All()
		if len(lines) != 1 || !strings.Contains(lines[0].Message, tc.says) {
			t.Errorf("%s: %d Error lines %v; want one saying %q", tc.cause, len(lines), lines, tc.says)
		}
		if n, _ := metricTotal(t, tt, "otelcol_exporter_questdb_torn_frames", attribute.String("cause", tc.cause)); n != tc.frames {
			t.Errorf("torn_frames{cause=%s} = %v, want %v", tc.cause, n, tc.frames)
		}
	}
}

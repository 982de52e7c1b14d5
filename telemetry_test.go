package questdbexporter

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/questdbexporter/questdbexporter/internal/metadatatest"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// metricTotal sums the data points of an own-telemetry metric whose
// attributes include attrs; ok is false while the metric has no data.
func metricTotal(t *testing.T, tt *componenttest.Telemetry, name string, attrs ...attribute.KeyValue) (float64, bool) {
	t.Helper()
	m, err := tt.GetMetric(name)
	if err != nil {
		return 0, false
	}
	match := func(set attribute.Set) bool {
		for _, kv := range attrs {
			if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
				return false
			}
		}
		return true
	}
	var total float64
	found := false
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			if match(dp.Attributes) {
				total += float64(dp.Value)
				found = true
			}
		}
	case metricdata.Gauge[int64]:
		for _, dp := range d.DataPoints {
			if match(dp.Attributes) {
				total += float64(dp.Value)
				found = true
			}
		}
	case metricdata.Gauge[float64]:
		for _, dp := range d.DataPoints {
			if match(dp.Attributes) {
				total += dp.Value
				found = true
			}
		}
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			if match(dp.Attributes) {
				total += float64(dp.Count)
				found = true
			}
		}
	default:
		t.Fatalf("%s: unexpected data %T", name, m.Data)
	}
	return total, found
}

func TestTelemetryOfTheWritePath(t *testing.T) {
	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(context.Background())
	srv := newServer(t, qwptest.Options{})
	cfg := testConfig(t, srv.Addr())
	cfg.SFDir = t.TempDir()
	cfg.SFDurability = "flush"
	cfg.WaitForAck = true
	inst, err := newInstance(cfg, metadatatest.NewSettings(tt))
	if err != nil {
		t.Fatal(err)
	}
	e := inst.(*questdbExporter)
	if err := e.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())

	md := gaugeBatch(0, 10)
	unnamed := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().AppendEmpty()
	unnamed.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(1)
	if err := e.consumeMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	if err := e.consumeLogs(context.Background(), logBatch(0, 4)); err != nil {
		t.Fatal(err)
	}
	td := spanBatch(0, 2)
	huge := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1)
	huge.Attributes().PutStr("payload", strings.Repeat("x", int(cfg.MaxBatchBytes))) // larger than any frame
	if err := e.consumeTraces(context.Background(), td); err != nil {
		t.Fatal(err)
	}
	exact := []struct {
		name  string
		attrs []attribute.KeyValue
		want  float64
	}{
		{"otelcol_exporter_questdb_rows_appended", nil, 15},
		{"otelcol_exporter_questdb_skipped_data_points", []attribute.KeyValue{attribute.String("reason", "empty_metric_name"), attribute.String("signal", "metrics")}, 1},
		{"otelcol_exporter_questdb_skipped_data_points", []attribute.KeyValue{attribute.String("reason", "row_too_large"), attribute.String("signal", "traces")}, 1},
		{"otelcol_exporter_questdb_skipped_data_points", []attribute.KeyValue{attribute.String("signal", "logs")}, 0},
		{"otelcol_exporter_questdb_queue_capacity", nil, float64(cfg.effectiveMaxTotalBytes())},
	}
	atLeast := []string{
		"otelcol_exporter_questdb_frames_appended",
		"otelcol_exporter_questdb_frames_acked",
		"otelcol_exporter_questdb_ack_latency",
		"otelcol_exporter_questdb_dictionary_size",
		"otelcol_exporter_questdb_fsync_latency", // sampled by the monitor every second
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		missing := ""
		for _, c := range exact {
			if got, _ := metricTotal(t, tt, c.name, c.attrs...); got != c.want {
				missing = c.name
			}
		}
		for _, name := range atLeast {
			if got, ok := metricTotal(t, tt, name); !ok || got < 1 {
				missing = name
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			got, _ := metricTotal(t, tt, missing)
			t.Fatalf("%s is %v after 10 s", missing, got)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A dropped connection: the next call (wait_for_ack) needs a reconnect.
	srv.DropConnections()
	if err := e.consumeLogs(context.Background(), logBatch(10, 1)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"otelcol_exporter_questdb_reconnect_attempts", "otelcol_exporter_questdb_reconnect_successes"} {
		if got, _ := metricTotal(t, tt, name); got < 1 {
			t.Fatalf("%s is %v after a dropped connection was re-established", name, got)
		}
	}
}

// TestEvictOldestIsCountedAndAlerted: under evict_oldest with QuestDB
// down, the rows evicted (rows_evicted, the full alert's
// evicted_rows_total) and the rows still in the slot account for every
// accepted point, exactly; the README's rows_evicted alert rule fires.
func TestEvictOldestIsCountedAndAlerted(t *testing.T) {
	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(context.Background())
	cfg := testConfig(t, closedPort(t))
	cfg.SFDir = t.TempDir()
	cfg.OnFull = "evict_oldest"
	cfg.MaxBatchBytes = minMaxBatchBytes
	cfg.SFMaxSegmentBytes = minMaxBatchBytes + segmentOverheadBytes
	cfg.SFMaxTotalBytes = 2 * cfg.SFMaxSegmentBytes
	core, logs := observer.New(zapcore.InfoLevel)
	set := metadatatest.NewSettings(tt)
	set.Logger = zap.New(core)
	inst, err := newInstance(cfg, set)
	if err != nil {
		t.Fatal(err)
	}
	e := inst.(*questdbExporter)
	host := newStatusHost()
	if err := e.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	shut := false
	defer func() {
		if !shut {
			e.Shutdown(context.Background())
		}
	}()
	const calls, points = 10, 500
	for i := range calls {
		if err := e.consumeMetrics(context.Background(), gaugeBatch(i*1000, points)); err != nil {
			t.Fatalf("evict_oldest refused a call: %v", err)
		}
	}
	st := e.queue.Stats() // nothing is appended or acknowledged any more
	waitFor(t, func() bool {
		frames, _ := metricTotal(t, tt, "otelcol_exporter_questdb_frames_evicted")
		rows, _ := metricTotal(t, tt, "otelcol_exporter_questdb_rows_evicted")
		return frames == float64(st.FramesEvicted) && rows == float64(st.ItemsEvicted)
	})
	if st.FramesEvicted == 0 || st.ItemsEvicted == 0 || st.FramesEvictedItemsUnknown != 0 {
		t.Fatalf("evicted %d frames, %d rows, %d frames of unknown rows; want frames and rows, none unknown",
			st.FramesEvicted, st.ItemsEvicted, st.FramesEvictedItemsUnknown)
	}
	// The counter started at 0 with the exporter: its increase is its value.
	if rule := readmeAlertRules(t)["QuestDBExporterRowsEvicted"]; rule != rowsEvictedRule {
		t.Errorf("README rule QuestDBExporterRowsEvicted: expr %q, want %q", rule, rowsEvictedRule)
	} else if rows, _ := metricTotal(t, tt, "otelcol_exporter_questdb_rows_evicted"); rows <= 0 {
		t.Errorf("QuestDBExporterRowsEvicted does not fire: rows_evicted rose by %v", rows)
	}
	waitFor(t, func() bool { return logs.FilterMessageSnippet("evicting the oldest records").Len() > 0 })
	full := logs.FilterMessageSnippet("evicting the oldest records").All()[0].ContextMap()
	if full["evicted_rows_total"] == nil || full["evicted_frames_total"] == nil {
		t.Fatalf("the full alert %v lacks evicted_rows_total or evicted_frames_total", full)
	}
	if got, _ := metricTotal(t, tt, "otelcol_exporter_questdb_backpressure_stalls"); got != 0 {
		t.Fatalf("evict_oldest counted %v backpressure stalls; evicting is not stalling", got)
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	shut = true
	// What was not evicted waits in the slot, each frame with its rows.
	slots, _ := filepath.Glob(filepath.Join(cfg.SFDir, "*"))
	if len(slots) != 1 {
		t.Fatalf("slots under sf_dir: %v, want one", slots)
	}
	scan, err := sfqueue.ScanSlot(slots[0])
	if err != nil {
		t.Fatal(err)
	}
	var kept uint64
	if err := scan.EachFrame(func(fsn uint64, _ string, _ int64, _ []byte) error {
		if n, ok := scan.FrameItems(fsn); ok && fsn > scan.Watermark.Acked {
			kept += uint64(n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if kept+st.ItemsEvicted != calls*points {
		t.Fatalf("%d rows kept in the slot + %d evicted = %d; want every accepted point, %d", kept, st.ItemsEvicted, kept+st.ItemsEvicted, calls*points)
	}
	// The log's last word, at shutdown, carries the same totals.
	var lastTotal any
	for _, e := range logs.All() {
		if v, ok := e.ContextMap()["evicted_rows_total"]; ok {
			lastTotal = v
		}
	}
	if lastTotal != st.ItemsEvicted {
		t.Fatalf("the last evicted_rows_total logged is %v, want %d", lastTotal, st.ItemsEvicted)
	}
}

// startWithTelemetry builds and starts an instance with the component ID
// id whose own metrics go to tt; it is shut down at the end of the test.
func startWithTelemetry(t *testing.T, tt *componenttest.Telemetry, id string, cfg *Config) *questdbExporter {
	t.Helper()
	set := metadatatest.NewSettings(tt)
	if err := set.ID.UnmarshalText([]byte(id)); err != nil {
		t.Fatal(err)
	}
	inst, err := newInstance(cfg, set)
	if err != nil {
		t.Fatal(err)
	}
	e := inst.(*questdbExporter)
	if err := e.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	return e
}

// TestTwoExportersAreTwoSeries: questdb/a and questdb/b in one collector
// report their own queue: b filling during an outage shows on b's series,
// a's stays empty, and each capacity is its own.
func TestTwoExportersAreTwoSeries(t *testing.T) {
	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(context.Background())
	dead := closedPort(t)
	cfgA, cfgB := testConfig(t, dead), testConfig(t, dead)
	cfgA.SFMaxTotalBytes, cfgB.SFMaxTotalBytes = 4<<20, 10<<20
	startWithTelemetry(t, tt, "questdb/a", cfgA)
	b := startWithTelemetry(t, tt, "questdb/b", cfgB)
	if err := b.consumeMetrics(context.Background(), gaugeBatch(0, 200)); err != nil {
		t.Fatal(err)
	}
	a, bb := attribute.String("exporter", "questdb/a"), attribute.String("exporter", "questdb/b")
	for _, c := range []struct {
		name string
		attr attribute.KeyValue
		want func(float64) bool
		what string
	}{
		// Memory-only mode: half the cap less two segments, at least a
		// quarter of it; the rest is GC headroom and the queue's buffers.
		{"otelcol_exporter_questdb_queue_capacity", a, func(v float64) bool { return v == 1<<20 }, "1 MiB"},
		{"otelcol_exporter_questdb_queue_capacity", bb, func(v float64) bool { return v == 10<<20/4 }, "2.5 MiB"},
		{"otelcol_exporter_questdb_queue_bytes", a, func(v float64) bool { return v == 0 }, "0"},
		{"otelcol_exporter_questdb_queue_bytes", bb, func(v float64) bool { return v > 0 }, "> 0"},
		{"otelcol_exporter_questdb_rows_appended", a, func(v float64) bool { return v == 0 }, "0"},
		{"otelcol_exporter_questdb_rows_appended", bb, func(v float64) bool { return v == 200 }, "200"},
	} {
		got, ok := metricTotal(t, tt, c.name, c.attr)
		if !ok || !c.want(got) {
			t.Errorf("%s{%s}: %v (present %v), want %s", c.name, c.attr.Value.AsString(), got, ok, c.what)
		}
	}
}

// TestCountersStartAtZero: every counter has a series from the start, at 0,
// server errors for every category, skipped points for every reason and
// lost frames for every cause.
func TestCountersStartAtZero(t *testing.T) {
	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(context.Background())
	startWithTelemetry(t, tt, "questdb", testConfig(t, closedPort(t)))
	id := attribute.String("exporter", "questdb")
	for _, name := range []string{
		"backpressure_stalls", "drainers_active", "drainers_failed", "drainers_succeeded", "frames_acked",
		"frames_appended", "frames_evicted", "frames_replayed", "reconnect_successes", "rows_appended", "rows_evicted",
	} {
		if got, ok := metricTotal(t, tt, "otelcol_exporter_questdb_"+name, id); !ok || got != 0 {
			t.Errorf("%s: %v (present %v), want a series at 0 before any data", name, got, ok)
		}
	}
	for _, cat := range []string{"schema_mismatch", "parse_error", "internal_error", "security_error", "write_error",
		"dictionary_gap", "not_writable", "unknown", "protocol_violation", "data_loss"} {
		if got, ok := metricTotal(t, tt, "otelcol_exporter_questdb_server_errors", id, attribute.String("category", cat)); !ok || got != 0 {
			t.Errorf("server_errors{category=%s}: %v (present %v), want 0", cat, got, ok)
		}
	}
	if got, ok := metricTotal(t, tt, "otelcol_exporter_questdb_skipped_data_points", id, attribute.String("reason", "empty_metric_name")); !ok || got != 0 {
		t.Errorf("skipped_data_points{reason=empty_metric_name}: %v (present %v), want 0", got, ok)
	}
	// The loss counters by cause: a series per cause at 0, and none without
	// the label the README's table and alert annotations read.
	var torn []string
	for _, c := range sfqueue.TornCauses() {
		torn = append(torn, string(c))
	}
	for name, causes := range map[string][]string{
		"data_loss_frames": {"unreplayable", "vanished"},
		"torn_frames":      torn,
	} {
		for _, cause := range causes {
			if got, ok := metricTotal(t, tt, "otelcol_exporter_questdb_"+name, id, attribute.String("cause", cause)); !ok || got != 0 {
				t.Errorf("%s{cause=%s}: %v (present %v), want 0", name, cause, got, ok)
			}
		}
		m, err := tt.GetMetric("otelcol_exporter_questdb_" + name)
		if err != nil {
			t.Fatal(err)
		}
		for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
			if _, ok := dp.Attributes.Value("cause"); !ok {
				t.Errorf("%s has a series without a cause: %v", name, dp.Attributes.ToSlice())
			}
		}
	}
}

// TestFillRatioIsOneAtTheFirstRefusal: when the first call is refused
// (ResourceExhausted, HTTP 429), fill_ratio reads 1 at once, though the
// unacknowledged bytes are short of the cap; queue_bytes drops to 0 once
// QuestDB acknowledged everything, though the live segment keeps the bytes.
func TestFillRatioIsOneAtTheFirstRefusal(t *testing.T) {
	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(context.Background())
	srv := newServer(t, qwptest.Options{})
	srv.Outage(time.Hour)
	cfg := testConfig(t, srv.Addr())
	cfg.SFDir = t.TempDir()
	cfg.MaxBatchBytes = minMaxBatchBytes
	cfg.SFMaxSegmentBytes = 256 << 10
	cfg.SFMaxTotalBytes = 1 << 20
	cfg.SFAppendDeadline = 10 * time.Millisecond
	e := startWithTelemetry(t, tt, "questdb", cfg)
	ratio := func() float64 {
		v, _ := metricTotal(t, tt, "otelcol_exporter_questdb_queue_fill_ratio")
		return v
	}
	var refused error
	for i := 0; i < 500 && refused == nil; i++ {
		if r := ratio(); r >= 1 {
			t.Fatalf("fill_ratio %v before any refusal", r)
		}
		refused = e.consumeMetrics(context.Background(), gaugeBatch(i*1000, 300))
	}
	if status.Code(refused) != codes.ResourceExhausted {
		t.Fatalf("filling the queue ended with %v, want ResourceExhausted", refused)
	}
	used, _ := metricTotal(t, tt, "otelcol_exporter_questdb_queue_bytes")
	if r := ratio(); r != 1 || used >= float64(cfg.SFMaxTotalBytes) {
		t.Fatalf("at the first refusal: fill_ratio %v, queue_bytes %v; want 1 with the bytes short of the %d cap", r, used, cfg.SFMaxTotalBytes)
	}
	srv.Outage(0)
	waitFor(t, func() bool {
		v, _ := metricTotal(t, tt, "otelcol_exporter_questdb_queue_bytes")
		return v == 0 && ratio() == 0
	})
	if st := e.queue.Stats(); st.UsedBytes == 0 {
		t.Fatalf("the live segment holds no bytes (%+v): the test does not show acknowledged bytes are left out", st)
	}
}

// collectGauges is one collection of the own metrics' gauges: each
// name's total over its series.
func collectGauges(t *testing.T, tt *componenttest.Telemetry) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tt.Reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					out[m.Name] += float64(dp.Value)
				}
			case metricdata.Gauge[float64]:
				for _, dp := range d.DataPoints {
					out[m.Name] += dp.Value
				}
			}
		}
	}
	return out
}

// TestDictionaryLimitBeforeStart: built but not started, the exporter
// reports the limit a generation will start at, not a limit of 0 bytes,
// and an empty generation.
func TestDictionaryLimitBeforeStart(t *testing.T) {
	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(context.Background())
	cfg := testConfig(t, closedPort(t))
	cfg.SymbolDictMaxBytes = 1 << 20 // below the 4 MiB start: the start is this
	inst, err := newInstance(cfg, metadatatest.NewSettings(tt))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = inst.Shutdown(context.Background()) }()
	g := collectGauges(t, tt)
	if limit, fill := g["otelcol_exporter_questdb_dictionary_limit_bytes"], g["otelcol_exporter_questdb_dictionary_fill_ratio"]; limit != 1<<20 || fill != 0 {
		t.Errorf("before Start: dictionary_limit_bytes %v, dictionary_fill_ratio %v; want 1 MiB and 0", limit, fill)
	}
}

// TestDictionaryGauges: the dictionary's bytes on disk and in RAM and its
// generations are gauges of their own, in each mode.
func TestDictionaryGauges(t *testing.T) {
	for _, sf := range []bool{true, false} {
		t.Run(fmt.Sprintf("sf=%v", sf), func(t *testing.T) {
			tt := componenttest.NewTelemetry()
			defer tt.Shutdown(context.Background())
			cfg := testConfig(t, closedPort(t)) // an outage: nothing is acknowledged
			if sf {
				cfg.SFDir = t.TempDir()
			}
			cfg.SymbolDictMaxEntries = 16
			e := startWithTelemetry(t, tt, "questdb", cfg)
			for b := range 4 { // unique attributes: new symbols, several generations
				if err := e.consumeMetrics(context.Background(), gaugeBatch(b*20, 20)); err != nil {
					t.Fatal(err)
				}
			}
			// A few points more leave the generation being written short of full.
			if err := e.consumeMetrics(context.Background(), gaugeBatch(100, 2)); err != nil {
				t.Fatal(err)
			}
			gauge := func(name string) float64 {
				v, ok := metricTotal(t, tt, "otelcol_exporter_questdb_"+name)
				if !ok {
					t.Fatalf("no %s series", name)
				}
				return v
			}
			// The first collection shows the peaks since the exporter
			// started: generations ended at symbol_dict_max_entries, so
			// at a fill of 1, at the starting limit (they never grew).
			d := e.writer.dict
			peaks := collectGauges(t, tt)
			if fill := peaks["otelcol_exporter_questdb_dictionary_fill_ratio"]; fill < 1 {
				t.Errorf("dictionary_fill_ratio %v after generations ended; want the peak, 1 or more", fill)
			}
			if limit := peaks["otelcol_exporter_questdb_dictionary_limit_bytes"]; limit != float64(cfg.symbolDictStartBytes()) {
				t.Errorf("dictionary_limit_bytes peak %v, want the starting limit %d", limit, cfg.symbolDictStartBytes())
			}
			if got, ok := metricTotal(t, tt, "otelcol_exporter_questdb_dictionary_generations_ended", attribute.String("cause", "entries")); !ok || got < 2 || got != float64(d.Gen()) {
				t.Errorf("dictionary_generations_ended{cause=entries} %v (present %v), want the %d generations before the current one", got, ok, d.Gen())
			}
			if growths, ended := gauge("dictionary_limit_growths"), gauge("dictionary_generations_ended"); growths != 0 || ended != float64(d.Gen()) {
				t.Errorf("dictionary_limit_growths %v, dictionary_generations_ended %v in all; want none, and only ends by entries", growths, ended)
			}
			st := e.queue.Stats()
			if got := gauge("dictionary_generations"); got < 2 || got != float64(st.DictGenerations) {
				t.Errorf("dictionary_generations %v, queue holds %d; want several, all unacknowledged", got, st.DictGenerations)
			}
			disk, ram := gauge("dictionary_disk_bytes"), gauge("dictionary_ram_bytes")
			index := float64(e.writer.dict.IndexBytes())
			switch {
			case index <= float64(e.writer.dict.TextBytes()) || e.writer.dict.TextBytes() <= 0:
				t.Errorf("the writer's generation holds %d bytes of text in an index of %v", e.writer.dict.TextBytes(), index)
			case sf && (disk != float64(st.DictBytes) || ram != index):
				t.Errorf("SF mode: disk %v ram %v, want the files' %d and the writer's index %v", disk, ram, st.DictBytes, index)
			case !sf && (disk != 0 || ram != index+float64(st.DictBytes)):
				t.Errorf("memory-only mode: disk %v ram %v, want 0 and %v", disk, ram, index+float64(st.DictBytes))
			}
			// Collected again with nothing written: the generation's working
			// limit and how full it is, 2 of symbol_dict_max_entries 16
			// entries at least.
			limit, fill := gauge("dictionary_limit_bytes"), gauge("dictionary_fill_ratio")
			if limit != float64(d.Limit()) || limit != float64(cfg.symbolDictStartBytes()) {
				t.Errorf("dictionary_limit_bytes %v, the generation's limit %d, the starting limit %d", limit, d.Limit(), cfg.symbolDictStartBytes())
			}
			if fill != d.Fill() || fill < 2.0/16 || fill >= 1 {
				t.Errorf("dictionary_fill_ratio %v, the generation's fill %v (%d of 16 entries); want them equal, in [2/16, 1)", fill, d.Fill(), d.Len())
			}
		})
	}
}

// TestLabelValuesAreTheDocumentedOnes: every label value the exporter
// records from the start (category, cause, reason, signal) is one the
// generated reference (documentation.md, from metadata.yaml) lists for that
// metric, and every value listed has its series at 0 from the start; only
// the exporter's ID and the table names are free text.
func TestLabelValuesAreTheDocumentedOnes(t *testing.T) {
	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(context.Background())
	startWithTelemetry(t, tt, "questdb", testConfig(t, closedPort(t)))
	var rm metricdata.ResourceMetrics
	if err := tt.Reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	seen := map[string]map[string][]string{} // metric -> label -> values
	note := func(name string, set attribute.Set) {
		for _, kv := range set.ToSlice() {
			if kv.Key == "exporter" || kv.Key == "table" {
				continue
			}
			if seen[name] == nil {
				seen[name] = map[string][]string{}
			}
			if v := kv.Value.AsString(); !slices.Contains(seen[name][string(kv.Key)], v) {
				seen[name][string(kv.Key)] = append(seen[name][string(kv.Key)], v)
			}
		}
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range d.DataPoints {
					note(m.Name, dp.Attributes)
				}
			}
		}
	}
	generated := generatedMetrics(t)
	for name, m := range generated {
		for _, a := range m.attributes {
			if a == "exporter" || a == "table" {
				continue
			}
			want, got := slices.Sorted(slices.Values(m.values[a])), slices.Sorted(slices.Values(seen[name][a]))
			if len(want) == 0 || !slices.Equal(want, got) {
				t.Errorf("%s{%s}: documented values %v, recorded from the start %v", name, a, want, got)
			}
		}
	}
	for name, labels := range seen {
		for a := range labels {
			if !slices.Contains(generated[name].attributes, a) {
				t.Errorf("%s records label %s, which metadata.yaml does not declare", name, a)
			}
		}
	}
}

package questdbexporter

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// scrape is one collection of the own metrics as a Prometheus scrape shows
// them: series by name and labels. The names are the metric names as they
// are: this build's Prometheus endpoint adds no _total suffix (checked on a
// scrape of _build/otelcol-questdb).
type scrape map[string]float64

// seriesKey is name{label="value",...} with the labels in the order given.
func seriesKey(name string, labels ...string) string {
	if len(labels) == 0 {
		return name
	}
	var b strings.Builder
	b.WriteString(name + "{")
	for i := 0; i+1 < len(labels); i += 2 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(labels[i] + `="` + labels[i+1] + `"`)
	}
	return b.String() + "}"
}

// takeScrape collects every otelcol_exporter_questdb_* series of the
// exporter id, keyed by name and its other label (category, reason).
func takeScrape(t *testing.T, tt *componenttest.Telemetry, id string) scrape {
	t.Helper()
	s := scrape{}
	add := func(name string, set attribute.Set, v float64) {
		if ex, _ := set.Value("exporter"); ex.AsString() != id {
			return
		}
		var labels []string
		for _, kv := range set.ToSlice() {
			if kv.Key != "exporter" {
				labels = append(labels, string(kv.Key), kv.Value.Emit())
			}
		}
		s[seriesKey(name, labels...)] = v
	}
	var rm metricdata.ResourceMetrics
	if err := tt.Reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if !strings.HasPrefix(m.Name, "otelcol_exporter_questdb_") {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					add(m.Name, dp.Attributes, float64(dp.Value))
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					add(m.Name, dp.Attributes, float64(dp.Value))
				}
			case metricdata.Gauge[float64]:
				for _, dp := range d.DataPoints {
					add(m.Name, dp.Attributes, dp.Value)
				}
			}
		}
	}
	return s
}

// readmeAlertRules returns the README's example alert rules: expression by
// alert name.
func readmeAlertRules(t *testing.T) map[string]string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)- alert: (\w+)\n\s+expr: (.+)$`).FindAllStringSubmatch(string(readme), -1) {
		rules[m[1]] = m[2]
	}
	return rules
}

// rowsEvictedRule is the README's alert on rows_evicted, which
// TestEvictOldestIsCountedAndAlerted sees fire.
const rowsEvictedRule = "increase(otelcol_exporter_questdb_rows_evicted[10m]) > 0"

// dataLossRule and tornFramesRule are the README's alerts on losses, which
// recovery may count before the first scrape (TestAlertRulesAcrossRestarts).
const (
	dataLossRule = "increase(otelcol_exporter_questdb_frames_evicted[10m]) > 0 or increase(otelcol_exporter_questdb_data_loss_frames[10m]) > 0 or " +
		`increase(otelcol_exporter_questdb_server_errors{category="data_loss"}[10m]) > 0 or ` +
		"(otelcol_exporter_questdb_data_loss_frames > 0 unless otelcol_exporter_questdb_data_loss_frames <= otelcol_exporter_questdb_data_loss_frames offset 10m)"
	tornFramesRule = "increase(otelcol_exporter_questdb_torn_frames[10m]) > 0 or " +
		"(otelcol_exporter_questdb_torn_frames > 0 unless otelcol_exporter_questdb_torn_frames <= otelcol_exporter_questdb_torn_frames offset 10m)"
)

// TestAlertRulesAgainstOutageScrape evaluates the README's example alert
// rules on two scrapes of an exporter whose QuestDB is down and whose queue
// filled until calls were refused: every metric and label the rules use
// exists for the exporter, and the rules that must fire during such an
// outage (queue filling, queue full, disconnected) do, and the others (data
// loss, torn frames, set-aside slots, stopped sender, refused credentials,
// lag past 15 minutes) do not. Each rule's expression must be the README's
// word for word.
func TestAlertRulesAgainstOutageScrape(t *testing.T) {
	rules := readmeAlertRules(t)

	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(context.Background())
	srv := newServer(t, qwptest.Options{})
	cfg := testConfig(t, srv.Addr())
	cfg.SFDir = t.TempDir()
	cfg.MaxBatchBytes = minMaxBatchBytes
	cfg.SFMaxSegmentBytes = 256 << 10
	cfg.SFMaxTotalBytes = 1 << 20
	cfg.SFAppendDeadline = 10 * time.Millisecond
	e := startWithTelemetry(t, tt, "questdb/audit", cfg)
	if err := e.consumeMetrics(context.Background(), gaugeBatch(0, 10)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return takeScrape(t, tt, "questdb/audit")["otelcol_exporter_questdb_frames_acked"] > 0 })
	srv.Outage(time.Hour)
	before := takeScrape(t, tt, "questdb/audit")
	var refused error
	for i := 1; i < 500 && refused == nil; i++ {
		refused = e.consumeMetrics(context.Background(), gaugeBatch(i*1000, 300))
	}
	if status.Code(refused) != codes.ResourceExhausted {
		t.Fatalf("filling the queue ended with %v, want ResourceExhausted", refused)
	}
	waitFor(t, func() bool {
		return takeScrape(t, tt, "questdb/audit")["otelcol_exporter_questdb_reconnect_attempts"] > before["otelcol_exporter_questdb_reconnect_attempts"]
	})
	now := takeScrape(t, tt, "questdb/audit")

	get := func(s scrape, key string) float64 {
		v, ok := s[key]
		if !ok {
			t.Fatalf("the scrape has no series %s{exporter=\"questdb/audit\"}; it has %v", key, s)
		}
		return v
	}
	increase := func(key string) float64 { return get(now, key) - get(before, key) }
	const (
		fill     = "otelcol_exporter_questdb_queue_fill_ratio"
		stopped  = "otelcol_exporter_questdb_sender_stopped"
		evicted  = "otelcol_exporter_questdb_frames_evicted"
		rows     = "otelcol_exporter_questdb_rows_evicted"
		lost     = "otelcol_exporter_questdb_data_loss_frames"
		torn     = "otelcol_exporter_questdb_torn_frames"
		aside    = "otelcol_exporter_questdb_set_aside_slots"
		conn     = "otelcol_exporter_questdb_connected"
		age      = "otelcol_exporter_questdb_oldest_unacked_age"
		security = `otelcol_exporter_questdb_server_errors{category="security_error"}`
	)
	dataLoss := seriesKey("otelcol_exporter_questdb_server_errors", "category", "data_loss")
	// newOrHigher is the rules' guard for counts taken at start; these two
	// scrapes are minutes apart, not ten, so "10 minutes ago" is before.
	newOrHigher := func(key string) bool { return get(now, key) > 0 && get(now, key) > get(before, key) }
	for _, r := range []struct {
		name, expr string
		fires      bool
		eval       func() bool
	}{
		{"QuestDBExporterQueueFilling", fill + " >= 0.8", true, func() bool { return get(now, fill) >= 0.8 }},
		{"QuestDBExporterQueueFull", fill + " >= 1", true, func() bool { return get(now, fill) >= 1 }},
		{"QuestDBExporterDataLoss", dataLossRule, false, func() bool {
			return increase(evicted) > 0 || increase(seriesKey(lost, "cause", "unreplayable")) > 0 ||
				increase(seriesKey(lost, "cause", "vanished")) > 0 || increase(dataLoss) > 0 ||
				newOrHigher(seriesKey(lost, "cause", "unreplayable")) || newOrHigher(seriesKey(lost, "cause", "vanished"))
		}},
		{"QuestDBExporterRowsEvicted", rowsEvictedRule, false, func() bool { return increase(rows) > 0 }},
		{"QuestDBExporterTornFrames", tornFramesRule, false, func() bool {
			fires := false
			for _, cause := range sfqueue.TornCauses() {
				key := seriesKey(torn, "cause", string(cause))
				fires = fires || increase(key) > 0 || newOrHigher(key)
			}
			return fires
		}},
		{"QuestDBExporterSlotSetAside", aside + " > 0", false, func() bool { return get(now, aside) > 0 }},
		{"QuestDBExporterStopped", stopped + " == 1", false, func() bool { return get(now, stopped) == 1 }},
		{"QuestDBExporterDisconnected", conn + " == 0", true, func() bool { return get(now, conn) == 0 }},
		{"QuestDBExporterCredentialsRefused", "increase(" + security + "[10m]) > 0", false,
			func() bool {
				return increase(seriesKey("otelcol_exporter_questdb_server_errors", "category", "security_error")) > 0
			}},
		{"QuestDBExporterLagging", age + " > 900", false, func() bool { return get(now, age) > 900 }},
	} {
		if got := rules[r.name]; got != r.expr {
			t.Errorf("README rule %s: expr %q, want %q", r.name, got, r.expr)
			continue
		}
		if fired := r.eval(); fired != r.fires {
			t.Errorf("rule %s fired %v during the outage, want %v (before %v, now %v)", r.name, fired, r.fires, before, now)
		}
	}
	if len(rules) != 10 {
		t.Errorf("README has %d alert rules, the test checks 10: %v", len(rules), rules)
	}
}

// TestSenderStoppedGauge: sender_stopped, which QuestDBExporterStopped
// alerts on, is 0 while the sender works or reconnects and 1 once it
// stopped for good (here: a durable-ack tier the server does not confirm).
func TestSenderStoppedGauge(t *testing.T) {
	tt := componenttest.NewTelemetry()
	defer tt.Shutdown(context.Background())
	srv := newServer(t, qwptest.Options{})
	cfg := testConfig(t, srv.Addr())
	cfg.RequestDurableAck = "on"
	startWithTelemetry(t, tt, "questdb", cfg)
	waitFor(t, func() bool { return takeScrape(t, tt, "questdb")["otelcol_exporter_questdb_sender_stopped"] == 1 })

	ok := componenttest.NewTelemetry()
	defer ok.Shutdown(context.Background())
	e := startWithTelemetry(t, ok, "questdb/ok", testConfig(t, newServer(t, qwptest.Options{}).Addr()))
	if err := e.consumeMetrics(context.Background(), gaugeBatch(0, 5)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return takeScrape(t, ok, "questdb/ok")["otelcol_exporter_questdb_frames_acked"] > 0 })
	if v, present := takeScrape(t, ok, "questdb/ok")["otelcol_exporter_questdb_sender_stopped"]; !present || v != 0 {
		t.Fatalf("sender_stopped of a working exporter: %v (present %v), want 0", v, present)
	}
}

// promSeries is one counter series as Prometheus stores it: a sample per
// scrape, in time order.
type promSeries []promSample

type promSample struct {
	at time.Duration // since the start of the scenario
	v  float64
}

// promLookback is Prometheus's default lookback for an instant selector.
const promLookback = 5 * time.Minute

// instant is the selector's value at at (the latest sample within the
// lookback), and whether there is one.
func (s promSeries) instant(at time.Duration) (float64, bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i].at <= at {
			return s[i].v, at-s[i].at <= promLookback
		}
	}
	return 0, false
}

// increase is increase(x[w]) at at as Prometheus computes it, without the
// extrapolation (which scales the result and cannot change its sign): the
// growth between the samples inside the window, a drop counted as a
// counter reset; no result with fewer than two samples.
func (s promSeries) increase(at, w time.Duration) (float64, bool) {
	var in []float64
	for _, p := range s {
		if p.at > at-w && p.at <= at {
			in = append(in, p.v)
		}
	}
	if len(in) < 2 {
		return 0, false
	}
	var inc float64
	for i := 1; i < len(in); i++ {
		if in[i] < in[i-1] {
			inc += in[i]
		} else {
			inc += in[i] - in[i-1]
		}
	}
	return inc, true
}

// lossRuleFires evaluates, at at, the README's guard for a count taken at
// start on the series x:
//
//	increase(x[10m]) > 0 or (x > 0 unless x <= x offset 10m)
//
// and returns it with the first term alone, the rule before the guard.
func lossRuleFires(x promSeries, at time.Duration) (rule, increaseOnly bool) {
	inc, ok := x.increase(at, 10*time.Minute)
	increaseOnly = ok && inc > 0
	now, ok := x.instant(at)
	if !ok || now <= 0 {
		return increaseOnly, increaseOnly
	}
	before, was := x.instant(at - 10*time.Minute)
	return increaseOnly || !was || now > before, increaseOnly
}

// scrapes is a series scraped every 30 s from from to to (exclusive) at
// value v.
func scrapes(from, to time.Duration, v float64) promSeries {
	var s promSeries
	for at := from; at < to; at += 30 * time.Second {
		s = append(s, promSample{at, v})
	}
	return s
}

// TestAlertRulesAcrossRestarts: recovery counts data_loss_frames and
// torn_frames in Start, before the first scrape, so the series of the
// collector that found the loss starts at its final value. Evaluated the way
// Prometheus does, increase() alone misses that (a new pod; a container
// restarted after a gap longer than the window), and the README's guard
// catches it, firing within a minute and for no longer than 10 minutes past
// the last change; a collector that lost nothing, or lost long ago, does not
// fire. (The rule strings themselves are checked against the README by
// TestAlertRulesAgainstOutageScrape.)
func TestAlertRulesAcrossRestarts(t *testing.T) {
	m := time.Minute
	for _, tc := range []struct {
		name     string
		series   promSeries
		at       time.Duration
		fires    bool
		increase bool // what increase() alone says
	}{
		{"new pod, loss counted at start", scrapes(0, 20*m, 131), 1 * m, true, false},
		{"new pod, 9 minutes later", scrapes(0, 20*m, 131), 9 * m, true, false},
		{"new pod, 16 minutes later: resolved", scrapes(0, 20*m, 131), 16 * m, false, false},
		{"restarted container, scraped at 0 before", append(scrapes(0, 30*m, 0), scrapes(31*m, 60*m, 131)...), 32 * m, true, true},
		{"restarted after 12 minutes down", append(scrapes(0, 30*m, 0), scrapes(42*m, 60*m, 131)...), 43 * m, true, false},
		{"restart whose earlier run had counted more", append(scrapes(0, 30*m, 500), scrapes(31*m, 60*m, 131)...), 32 * m, true, true},
		{"loss while running", append(scrapes(0, 30*m, 0), scrapes(30*m, 60*m, 7)...), 31 * m, true, true},
		{"nothing lost", scrapes(0, 60*m, 0), 30 * m, false, false},
		{"lost an hour ago", scrapes(0, 120*m, 131), 90 * m, false, false},
	} {
		fires, inc := lossRuleFires(tc.series, tc.at)
		if fires != tc.fires || inc != tc.increase {
			t.Errorf("%s: the README's rule fires %v (want %v), increase() alone %v (want %v)", tc.name, fires, tc.fires, inc, tc.increase)
		}
	}
}

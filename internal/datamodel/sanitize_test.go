package datamodel

import (
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

func TestUTF8Repair(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"żółw 🐢", "żółw 🐢"},
		{"a\xffb", "a\uFFFDb"},
		{"\xff\xfe", "\uFFFD\uFFFD"},
		{"truncated \xe2\x82", "truncated \uFFFD\uFFFD"},
		{"overlong \xc0\xaf", "overlong \uFFFD\uFFFD"},
		{"surrogate \xed\xa0\x80", "surrogate \uFFFD\uFFFD\uFFFD"},
		{"nul \x00 kept", "nul \x00 kept"},
	}
	for _, tc := range tests {
		got := string(appendValidUTF8([]byte("x"), tc.in))
		if got != "x"+tc.want || !utf8.ValidString(got) {
			t.Errorf("appendValidUTF8(%q) = %q, want %q", tc.in, got, "x"+tc.want)
		}
		if v := validString(tc.in); v != tc.want {
			t.Errorf("validString(%q) = %q, want %q", tc.in, v, tc.want)
		}
	}
	if allocs := testing.AllocsPerRun(10, func() { _ = validString("valid text") }); allocs != 0 {
		t.Errorf("validString allocates %.0f times for valid input", allocs)
	}
}

func TestAttrColumnNameSanitize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"host.name", "host_name"},
		{"k8s.pod-name", "k8s_pod_name"},
		{"a b/c:d(e)", "a_b_c_d_e_"},
		{"zażółć", "zażółć"},
		{"bad\xffutf8", "bad_utf8"},
		{"emoji🐢", "emoji_"},
		{strings.Repeat("é", 100), strings.Repeat("é", 63)}, // 126 bytes: the next é would pass 127
		{strings.Repeat("x", 200), strings.Repeat("x", 127)},
	}
	for _, tc := range tests {
		if got := sanitizeColumnName(tc.in); got != tc.want {
			t.Errorf("sanitizeColumnName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestAttrPromotedColumnsErrors(t *testing.T) {
	tests := []struct {
		keys    []string
		wantErr string
	}{
		{[]string{""}, "empty attribute key"},
		{[]string{"service.name"}, `maps to column "service_name", which is a built-in column`},
		{[]string{"Metric.Name"}, "built-in column"}, // QuestDB names are case-insensitive
		{[]string{"timestamp"}, "built-in column"},
		{[]string{"value"}, "built-in column"},
		{[]string{"body"}, "built-in column"},
		{[]string{"host.name", "host-name"}, `keys "host.name" and "host-name" both map to column "host_name"`},
		{[]string{"a.b", "A_B"}, "both map"},
	}
	for _, tc := range tests {
		_, err := PromotedColumns(tc.keys)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("PromotedColumns(%q) = %v, want an error containing %q", tc.keys, err, tc.wantErr)
		}
	}
	got, err := PromotedColumns([]string{"host.name", "k8s.namespace.name"})
	if err != nil || len(got) != 2 || got[0] != (PromotedColumn{"host.name", "host_name"}) || got[1].Column != "k8s_namespace_name" {
		t.Fatalf("PromotedColumns = %v, %v", got, err)
	}
}

// Invalid UTF-8 in every string a row carries is repaired: the strict
// decoder (which refuses bad UTF-8 like a server) accepts every frame, and
// the values carry U+FFFD.
func TestUTF8RepairedInEveryColumn(t *testing.T) {
	const bad = "x\xff"
	const fixed = "x\uFFFD"
	promoted, err := PromotedColumns([]string{"p"})
	if err != nil {
		t.Fatal(err)
	}

	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", bad)
	rm.Resource().Attributes().PutStr(bad, bad)
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(bad)
	sm.Scope().SetVersion(bad)
	sm.Scope().Attributes().PutStr("s", bad)
	m := sm.Metrics().AppendEmpty()
	m.SetName(bad)
	m.SetUnit(bad)
	m.SetDescription(bad)
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(1)
	dp.Attributes().PutStr("p", bad)
	dp.Attributes().PutEmptySlice("l").AppendEmpty().SetStr(bad)
	dp.Exemplars().AppendEmpty().FilteredAttributes().PutStr(bad, bad)

	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rm.Resource().CopyTo(rl.Resource())
	sl := rl.ScopeLogs().AppendEmpty()
	sm.Scope().CopyTo(sl.Scope())
	lr := sl.LogRecords().AppendEmpty()
	lr.SetSeverityText(bad)
	lr.SetEventName(bad)
	lr.Body().SetStr(bad)
	lr.Attributes().PutStr("p", bad)
	lr2 := sl.LogRecords().AppendEmpty()
	lr2.Body().SetEmptyMap().PutStr(bad, bad)

	h := newHarness(t, 0, EncoderConfig{Promoted: promoted})
	h.metrics(md)
	h.logs(ld)
	g := h.oneRow("otel_metrics_gauge")
	resJSON := `{"service.name":"` + fixed + `","` + fixed + `":"` + fixed + `"}`
	for col, want := range map[string]any{
		"service_name": fixed, "metric_name": fixed, "metric_unit": fixed, "metric_description": fixed,
		"scope_name": fixed, "scope_version": fixed, "resource_attributes": resJSON,
		"scope_attributes": `{"s":"` + fixed + `"}`, "attributes": `{"l":["` + fixed + `"],"p":"` + fixed + `"}`,
		"exemplars": `[{"time_unix_nano":0,"value":null,"filtered_attributes":{"` + fixed + `":"` + fixed + `"}}]`,
		"p":         fixed,
	} {
		if g[col] != want {
			t.Errorf("gauge %s = %q, want %q", col, g[col], want)
		}
	}
	logs := h.table("otel_logs").rows
	for col, want := range map[string]any{
		"service_name": fixed, "severity_text": fixed, "event_name": fixed, "body": fixed,
		"scope_name": fixed, "resource_attributes": resJSON, "attributes": `{"p":"` + fixed + `"}`, "p": fixed,
	} {
		if logs[0][col] != want {
			t.Errorf("log %s = %q, want %q", col, logs[0][col], want)
		}
	}
	if want := `{"` + fixed + `":"` + fixed + `"}`; logs[1]["body"] != want {
		t.Errorf("map body = %q, want %q", logs[1]["body"], want)
	}
	// Identity hashes the repaired text, so a repaired and an already-valid
	// equal string are one series.
	md2 := pmetric.NewMetrics()
	md.CopyTo(md2)
	md2.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).SetName(fixed)
	h2 := newHarness(t, 0, EncoderConfig{Promoted: promoted})
	h2.metrics(md2)
	if h2.oneRow("otel_metrics_gauge")["series_id"] != g["series_id"] {
		t.Error("series_id differs between a repaired name and the same valid name")
	}
}

// TestValidUTF8IsValidString: the ASCII fast path agrees with
// utf8.ValidString for every length up to a few strides and a valid or
// invalid non-ASCII sequence at every position, the overlapping last
// word included.
func TestValidUTF8IsValidString(t *testing.T) {
	for n := 0; n <= 40; n++ {
		ascii := strings.Repeat("a", n)
		if !validUTF8(ascii) {
			t.Fatalf("%d ASCII bytes reported invalid", n)
		}
		for i := 0; i <= n; i++ {
			for _, ins := range []string{"é", "🐢", "\xff", "\xed\xa0\x80", "\xc3"} {
				s := ascii[:i] + ins + ascii[i:]
				if got, want := validUTF8(s), utf8.ValidString(s); got != want {
					t.Fatalf("validUTF8(%q) = %v, utf8.ValidString says %v", s, got, want)
				}
			}
		}
	}
}

package questdbexporter

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// readmeSection is README.md from the heading start up to the next heading
// of the same or a higher level.
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	raw, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	i := strings.Index(s, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README.md has no %q", heading)
	}
	s = s[i+1:]
	level := strings.Fields(heading)[0] // "##", "###"
	for _, l := range regexp.MustCompile(`(?m)^#+ `).FindAllStringIndex(s, -1)[1:] {
		if l[1]-l[0]-1 <= len(level) {
			return s[:l[0]]
		}
	}
	return s
}

// generatedMetric is one metric of documentation.md, which mdatagen writes
// from metadata.yaml: what the component really registers.
type generatedMetric struct {
	unit, kind string
	attributes []string
}

func generatedMetrics(t *testing.T) map[string]generatedMetric {
	t.Helper()
	raw, err := os.ReadFile("documentation.md")
	if err != nil {
		t.Fatal(err)
	}
	metrics := map[string]generatedMetric{}
	for _, part := range strings.Split(string(raw), "\n### ")[1:] {
		name, body, _ := strings.Cut(part, "\n")
		kind := regexp.MustCompile(`(?m)^\| (\S+) \| (\w+) \|`).FindStringSubmatch(body)
		if kind == nil {
			t.Fatalf("documentation.md: %s has no unit row", name)
		}
		m := generatedMetric{unit: kind[1], kind: kind[2]}
		if _, attrs, ok := strings.Cut(body, "#### Attributes"); ok {
			for _, a := range regexp.MustCompile(`(?m)^\| (\w+) \| `).FindAllStringSubmatch(attrs, -1) {
				if a[1] != "Name" {
					m.attributes = append(m.attributes, a[1])
				}
			}
		}
		metrics[name] = m
	}
	if len(metrics) < 20 {
		t.Fatalf("documentation.md: read %d metrics; the parser missed them", len(metrics))
	}
	return metrics
}

// readmeUnit is how the README's telemetry table writes a metadata.yaml
// unit: By is bytes, s seconds, {x} x; a ratio or flag of unit 1 is 0..1
// or 0/1.
func readmeUnit(unit string) []string {
	switch unit {
	case "By":
		return []string{"bytes"}
	case "s":
		return []string{"seconds"}
	case "1":
		return []string{"0..1", "0/1"}
	}
	return []string{strings.Trim(unit, "{}")}
}

// TestReadmeTelemetryTableIsWhatTheExporterRegisters: the README's "Own
// telemetry" table lists exactly the metrics the component registers
// (documentation.md, generated from metadata.yaml), each with its unit,
// histograms said to be histograms, and every label besides exporter named
// in its row. A metric added to metadata.yaml without a row, a row for a
// metric that is gone, or a unit that drifted fails here.
func TestReadmeTelemetryTableIsWhatTheExporterRegisters(t *testing.T) {
	generated := generatedMetrics(t)
	section := readmeSection(t, "## Own telemetry")
	rows := regexp.MustCompile("(?m)^\\| `(otelcol_exporter_questdb_\\w+)` \\| ([^|]+) \\| (.+) \\|$").FindAllStringSubmatch(section, -1)
	seen := map[string]bool{}
	for _, r := range rows {
		name, unit, meaning := r[1], strings.TrimSpace(r[2]), r[3]
		seen[name] = true
		m, ok := generated[name]
		if !ok {
			t.Errorf("README lists %s, which the exporter does not register", name)
			continue
		}
		if want := readmeUnit(m.unit); !slices.Contains(want, unit) {
			t.Errorf("README: %s in %q, metadata.yaml's unit is %s (write %q)", name, unit, m.unit, want[0])
		}
		if (m.kind == "Histogram") != strings.Contains(meaning, "(histogram)") {
			t.Errorf("README: %s is a %s; its row must say (histogram) exactly when it is one", name, m.kind)
		}
		for _, a := range m.attributes {
			if a != exporterAttributeKey && !strings.Contains(meaning, "`"+a+"`") {
				t.Errorf("README: %s's row does not name its label `%s`", name, a)
			}
		}
	}
	for name := range generated {
		if !seen[name] {
			t.Errorf("the exporter registers %s; the README's telemetry table does not list it", name)
		}
	}
}

package questdbexporter

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/confmap"
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
	// values holds each enum attribute's values; an attribute of any
	// value has none.
	values map[string][]string
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
		m := generatedMetric{unit: kind[1], kind: kind[2], values: map[string][]string{}}
		if _, attrs, ok := strings.Cut(body, "#### Attributes"); ok {
			for _, a := range regexp.MustCompile(`(?m)^\| (\w+) \| .* \| (.+) \| .+ \|$`).FindAllStringSubmatch(attrs, -1) {
				if a[1] == "Name" {
					continue
				}
				m.attributes = append(m.attributes, a[1])
				for _, v := range regexp.MustCompile("``(\\w+)``").FindAllStringSubmatch(a[2], -1) {
					m.values[a[1]] = append(m.values[a[1]], v[1])
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

// readmeValue turns a default as the README's configuration table writes
// it into the raw value a YAML file would hold: a list, a boolean, a whole
// number, or text ("" for `""` and empty). A default that is no value
// (absent, from the component ID) is not set: ok is false.
func readmeValue(cell string) (_ any, ok bool) {
	m := regexp.MustCompile("`([^`]*)`").FindStringSubmatch(cell)
	switch {
	case m == nil && cell == "empty":
		return "", true
	case m == nil:
		return nil, false
	}
	return readmeScalar(m[1]), true
}

// readmeScalar is one backticked default as YAML would read it.
func readmeScalar(v string) any {
	switch {
	case v == `""`:
		return ""
	case strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]"):
		items := []any{}
		for _, s := range strings.Split(strings.Trim(v, "[]"), ",") {
			if s = strings.TrimSpace(s); s != "" {
				items = append(items, s)
			}
		}
		return items
	case v == "true" || v == "false":
		return v == "true"
	case regexp.MustCompile(`^[0-9]+$`).MatchString(v):
		n, _ := strconv.Atoi(v)
		return n
	}
	return v
}

// TestReadmeConfigurationDefaultsAreTheDefaults: the README's configuration
// table, decoded as a collector configuration that writes every key at the
// default the table gives, is exactly the exporter's default configuration.
// A key missing from the table (its field stays unset), a key the exporter
// does not take (the decoder refuses it) and a default that drifted each
// fail here.
func TestReadmeConfigurationDefaultsAreTheDefaults(t *testing.T) {
	section := readmeSection(t, "## Configuration")
	raw := map[string]any{}
	for _, r := range regexp.MustCompile("(?m)^\\| (`[a-z_:]+`(?:, `[a-z_:]+`)*) \\| ([^|]+) \\| .+\\|$").FindAllStringSubmatch(section, -1) {
		for _, key := range regexp.MustCompile("`([a-z_:]+)`").FindAllStringSubmatch(r[1], -1) {
			if v, ok := readmeValue(strings.TrimSpace(r[2])); ok {
				raw[key[1]] = v
			}
		}
	}
	if len(raw) < 30 || raw["tls"] != nil || raw["sender_id"] != nil {
		t.Fatalf("read %d keys from the README's configuration table; the parser missed them", len(raw))
	}
	var got Config
	if err := got.Unmarshal(confmap.NewFromStringMap(raw)); err != nil {
		t.Fatalf("the README's defaults do not decode: %v", err)
	}
	want := *createDefaultConfig().(*Config)
	got.TLS = want.TLS // absent in both: compared by HasValue below
	if got.TLS.HasValue() {
		t.Error("README: tls is absent by default, but the default configuration has the section")
	}
	if len(got.AttributesAsSymbols) == 0 && len(want.AttributesAsSymbols) == 0 {
		got.AttributesAsSymbols = want.AttributesAsSymbols // [] and nil are the same empty list
	}
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range gv.NumField() {
		f := gv.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		if g, w := gv.Field(i).Interface(), wv.Field(i).Interface(); !reflect.DeepEqual(g, w) {
			t.Errorf("README: %s defaults to %v; the exporter's default is %v", f.Tag.Get("mapstructure"), g, w)
		}
	}
}

// TestReadmeExporterExamplesDecode: every YAML example in the README that
// configures a questdb exporter decodes and passes the value rules, as
// TestExamplesDecode holds the files under examples/ to them.
func TestReadmeExporterExamplesDecode(t *testing.T) {
	raw, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(raw), -1) {
		if !strings.Contains(m[1], "exporters:") {
			continue
		}
		r, err := confmap.NewRetrievedFromYAML([]byte(m[1]))
		if err != nil {
			t.Fatalf("README example does not parse: %v\n%s", err, m[1])
		}
		conf, err := r.AsConf()
		if err != nil {
			t.Fatal(err)
		}
		found += checkQuestDBExporters(t, conf, "README example:\n"+m[1])
	}
	if found < 3 {
		t.Fatalf("found %d questdb exporters in the README's YAML examples, want the quick start's, the minimal and the fuller one", found)
	}
}

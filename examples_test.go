package questdbexporter

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
)

// TestExamplesDecode: every questdb exporter of the shipped example
// configurations decodes and passes the value rules (files such as sf_dir
// and ca_file belong to the machine that runs them), with the variables
// they reference set; and the health_check the probes use has no
// component_health, so it answers 200 through a QuestDB outage.
func TestExamplesDecode(t *testing.T) {
	env := map[string]string{
		"QDB_USER": "ingest", "QDB_PASSWORD": "secret", "DEMO_OTLP_HTTP_PORT": "4318",
		"DEMO_QUESTDB_ENDPOINT": "127.0.0.1:9000", "DEMO_SF_DIR": t.TempDir(), "DEMO_TTL": "", "DEMO_METRICS_PORT": "8888",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	paths, err := filepath.Glob(filepath.Join("examples", "*.yaml"))
	if err != nil || len(paths) < 2 {
		t.Fatalf("examples: %v, %v", paths, err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			resolver, err := confmap.NewResolver(confmap.ResolverSettings{
				URIs:              []string{"file:" + path},
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory()},
				DefaultScheme:     "env",
			})
			if err != nil {
				t.Fatal(err)
			}
			conf, err := resolver.Resolve(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if err := resolver.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if checkQuestDBExporters(t, conf, path) == 0 {
				t.Fatal("no questdb exporter")
			}
			if conf.IsSet("extensions::health_check") && conf.IsSet("extensions::health_check::component_health") {
				t.Error("the probes' health_check follows component status: it would answer 500 during an outage")
			}
		})
	}
}

// checkQuestDBExporters decodes every questdb exporter of a collector
// configuration and applies the value rules (files such as sf_dir and
// ca_file belong to the machine that runs it), reporting each failure with
// where the configuration came from; it returns how many it found.
func checkQuestDBExporters(t *testing.T, conf *confmap.Conf, where string) int {
	t.Helper()
	exporters, err := conf.Sub("exporters")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for id := range exporters.ToStringMap() {
		if id != "questdb" && !strings.HasPrefix(id, "questdb/") {
			continue
		}
		found++
		section, err := exporters.Sub(id)
		if err != nil {
			t.Fatal(err)
		}
		cfg := createDefaultConfig().(*Config)
		if err := section.Unmarshal(cfg); err != nil {
			t.Errorf("%s, exporter %s: %v", where, id, err)
			continue
		}
		if err := cfg.validateValues(); err != nil {
			t.Errorf("%s, exporter %s: %v", where, id, err)
		}
	}
	return found
}

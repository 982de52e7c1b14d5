package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.uber.org/zap"

	questdbexporter "github.com/questdbexporter/questdbexporter"
)

// loadConfig reads the collector configuration at path and returns the
// settings of its questdb exporter: the one named id ("questdb" or
// "questdb/<name>"), or the only one when id is "". The section is
// unmarshalled onto the exporter's defaults and validated by the exporter's
// own code. ${VAR} and ${env:VAR} references are expanded from the
// environment by the collector's own resolver, so the file the collector
// runs with (credentials kept in its environment) means the same here; an
// unset variable expands to "" with a warning on logger, as in the
// collector.
func loadConfig(ctx context.Context, path, id, senderID string, logger *zap.Logger) (questdbexporter.SlotToolSettings, error) {
	var none questdbexporter.SlotToolSettings
	if _, err := os.Stat(path); err != nil {
		return none, err
	}
	resolver, err := confmap.NewResolver(confmap.ResolverSettings{
		URIs:              []string{"file:" + path},
		ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory()},
		DefaultScheme:     "env",
		ProviderSettings:  confmap.ProviderSettings{Logger: logger},
	})
	if err != nil {
		return none, err
	}
	conf, err := resolver.Resolve(ctx)
	if err != nil {
		return none, fmt.Errorf("%s: %w", path, err)
	}
	if err := resolver.Shutdown(ctx); err != nil {
		return none, err
	}
	exporters, err := conf.Sub("exporters")
	if err != nil {
		return none, fmt.Errorf("%s: exporters: %w", path, err)
	}
	var ids []string
	for k := range exporters.ToStringMap() {
		if k == "questdb" || strings.HasPrefix(k, "questdb/") {
			ids = append(ids, k)
		}
	}
	slices.Sort(ids)
	switch {
	case id != "" && !slices.Contains(ids, id):
		return none, fmt.Errorf("%s: no exporter %q under exporters (questdb exporters: %s)", path, id, strings.Join(ids, ", "))
	case id == "" && len(ids) == 0:
		return none, fmt.Errorf("%s: no questdb exporter under exporters", path)
	case id == "" && len(ids) > 1:
		return none, fmt.Errorf("%s: several questdb exporters (%s): choose one with --exporter", path, strings.Join(ids, ", "))
	case id == "":
		id = ids[0]
	}
	section, err := exporters.Sub(id)
	if err != nil {
		return none, fmt.Errorf("%s: exporters::%s: %w", path, id, err)
	}
	cfg := questdbexporter.NewFactory().CreateDefaultConfig().(*questdbexporter.Config)
	if err := section.Unmarshal(cfg); err != nil {
		return none, fmt.Errorf("%s: exporters::%s: %w", path, id, err)
	}
	s, err := cfg.SlotToolSettings(ctx, senderID)
	if err != nil {
		return none, fmt.Errorf("%s: exporters::%s: %w", path, id, err)
	}
	return s, nil
}

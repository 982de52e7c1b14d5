package main

import (
	"fmt"
	"strings"
)

// sinkKind says where an exporter configuration sends its data.
type sinkKind int

const (
	sinkNone sinkKind = iota // nop: nothing to drain or count
	sinkQWP                  // the qwpsink binary, count-only
	sinkOTLP                 // the in-process OTLP/HTTP sink
)

// exporterConfig is one configuration of the comparison.
type exporterConfig struct {
	name string
	sink sinkKind
	// yaml renders the exporters: entry (component ID "bench") for a sink
	// address and a store-and-forward directory.
	yaml func(sinkAddr, sfDir, durability string) string
}

var exporterConfigs = []exporterConfig{
	{"nop", sinkNone, func(string, string, string) string {
		return "  nop/bench:\n"
	}},
	{"questdb", sinkQWP, func(sink, sfDir, durability string) string {
		return fmt.Sprintf("  questdb/bench:\n    endpoints: [ %q ]\n    sf_dir: %q\n    sf_durability: %s\n", sink, sfDir, durability)
	}},
	{"questdb-memonly", sinkQWP, func(sink, _, _ string) string {
		return fmt.Sprintf("  questdb/bench:\n    endpoints: [ %q ]\n    sf_dir: \"\"\n", sink)
	}},
	{"otlp_http", sinkOTLP, func(sink, _, _ string) string {
		return fmt.Sprintf("  otlp_http/bench:\n    endpoint: %q\n", "http://"+sink)
	}},
	{"otlp_http-none", sinkOTLP, func(sink, _, _ string) string {
		return fmt.Sprintf("  otlp_http/bench:\n    endpoint: %q\n    compression: none\n", "http://"+sink)
	}},
}

// questdbSettings adds the run's questdb-only settings to a questdb
// configuration's exporters: entry.
func questdbSettings(ec exporterConfig, entry string, o runOptions) string {
	if ec.sink == sinkQWP && o.dictBytes != "" {
		entry += fmt.Sprintf("    symbol_dict_max_bytes: %s\n", o.dictBytes)
	}
	if ec.sink == sinkQWP && o.batchBytes != "" {
		entry += fmt.Sprintf("    max_batch_bytes: %s\n", o.batchBytes)
	}
	return entry
}

// collectorYAML is the whole collector configuration of one run: the OTLP
// receiver on otlpPort, no processors (a batch processor would answer the
// client before the exporter stored anything), the exporter under test in a
// metrics, a logs and a traces pipeline, and the collector's own metrics for
// Prometheus on telemetryPort (the questdb exporter's frame counter).
func collectorYAML(exporterEntry string, otlpPort, telemetryPort int) string {
	id := strings.TrimSuffix(strings.TrimSpace(strings.SplitN(exporterEntry, "\n", 2)[0]), ":")
	return fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
exporters:
%sservice:
  telemetry:
    logs:
      level: warn
    metrics:
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: %d
  pipelines:
    metrics:
      receivers: [ otlp ]
      exporters: [ %s ]
    logs:
      receivers: [ otlp ]
      exporters: [ %s ]
    traces:
      receivers: [ otlp ]
      exporters: [ %s ]
`, otlpPort, exporterEntry, telemetryPort, id, id, id)
}

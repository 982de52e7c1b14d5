package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run parses the flags, runs every round and prints the report; the exit
// code is 2 for bad flags, 1 when a run failed or lost an accepted item.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("benchcollector", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o runOptions
	fs.StringVar(&o.collector, "collector", "_build/bench/otelcol-bench", "the ocb-built benchmark collector (bench/builder-config.yaml)")
	fs.StringVar(&o.sink, "sink", "_build/qwpsink", "the qwpsink binary (make sink)")
	fs.StringVar(&o.workDir, "workdir", "", "directory for configurations, logs and queues (default: a new temporary directory, removed at the end)")
	fs.Int64Var(&o.requests, "requests", 2000, "requests per run (each carries 1,000 items)")
	fs.IntVar(&o.concurrency, "concurrency", 4, "concurrent OTLP/HTTP clients")
	fs.StringVar(&o.durability, "durability", "memory", "sf_durability of the questdb configuration (memory, periodic, flush)")
	fs.StringVar(&o.dictBytes, "symbol-dict-max-bytes", "", "symbol_dict_max_bytes of the questdb configurations, e.g. 4MiB (default: the exporter's)")
	fs.StringVar(&o.batchBytes, "max-batch-bytes", "", "max_batch_bytes of the questdb configurations, e.g. 1MiB (default: the exporter's)")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 5*time.Minute, "how long a sink may take to receive every accepted item")
	rounds := fs.Int("rounds", 5, "rounds; each runs every shape through every exporter configuration")
	shapeList := fs.String("shapes", "metrics,logs,traces,churn", "shapes, comma-separated (metrics, logs, traces, churn, steady)")
	exporterList := fs.String("exporters", "nop,questdb,otlp_http", "exporter configurations, comma-separated (nop, questdb, questdb-memonly, otlp_http, otlp_http-none)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	shapeNames, exporterNames := split(*shapeList), split(*exporterList)
	runShapes, err := lookup(shapes, func(s shape) string { return s.name }, "shape", shapeNames)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	runExporters, err := lookup(exporterConfigs, func(e exporterConfig) string { return e.name }, "exporter configuration", exporterNames)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if *rounds < 1 || o.requests < 1 || o.concurrency < 1 {
		fmt.Fprintln(stderr, "-rounds, -requests and -concurrency must be at least 1")
		return 2
	}
	if runtime.GOOS != "linux" {
		fmt.Fprintln(stderr, "benchcollector reads /proc: Linux only")
		return 2
	}
	if o.workDir == "" {
		dir, err := os.MkdirTemp("", "benchcollector-")
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		o.workDir = dir
	}
	for _, s := range runShapes {
		fmt.Fprintf(stdout, "shape %s: %s\n", s.name, s.description)
	}

	var results []runResult
	failed := false
	for round := 1; round <= *rounds; round++ {
		for _, sh := range runShapes {
			// Interleaved: every configuration once per round and shape, the
			// order rotated each round so that none always runs first.
			for k := range runExporters {
				ec := runExporters[(k+round-1)%len(runExporters)]
				r, err := runOne(ctx, o, round, sh, ec)
				if err != nil {
					fmt.Fprintf(stderr, "round %d %s %s: %v (logs in %s)\n", round, sh.name, ec.name, err, o.workDir)
					failed = true
					if ctx.Err() != nil {
						return 1
					}
					continue
				}
				if r.lost() > 0 || r.load.rejected > 0 {
					failed = true
				}
				results = append(results, r)
				fmt.Fprintf(stderr, "round %d %-7s %-15s cpu %6.2f µs/item  rss %4d MB  wall %5.1f s  accepted %d arrived %d rejected %d retries %d frames %d  %s\n",
					round, sh.name, ec.name, r.cpuPerItem(), r.peakRSS>>20, r.wall.Seconds(),
					r.load.accepted, r.arrived, r.load.rejected*itemsPerRequest, r.load.retries, r.frames, loadAverage())
			}
		}
	}
	report(stdout, results, shapeNames, exporterNames, *rounds, o)
	fmt.Fprintf(stdout, "\nload average at the end: %s (%d CPUs)\n", loadAverage(), runtime.NumCPU())
	if failed {
		fmt.Fprintln(stderr, "FAILED: a run failed, or the collector refused or lost accepted items (see above)")
		return 1
	}
	return 0
}

// lookup returns the entries of list named by names, in that order; the
// error for an unknown name lists the names there are.
func lookup[T any](list []T, nameOf func(T) string, kind string, names []string) ([]T, error) {
	out := make([]T, 0, len(names))
	for _, name := range names {
		i := slices.IndexFunc(list, func(e T) bool { return nameOf(e) == name })
		if i < 0 {
			var have []string
			for _, e := range list {
				have = append(have, nameOf(e))
			}
			return nil, fmt.Errorf("unknown %s %q (have %s)", kind, name, strings.Join(have, ", "))
		}
		out = append(out, list[i])
	}
	return out, nil
}

func split(list string) []string {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// loadAverage is the first three fields of /proc/loadavg, for the record:
// the machine is shared.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return "load " + strings.Join(f[:3], " ")
}

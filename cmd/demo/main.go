package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

type options struct {
	mode      string
	collector string
	sink      string
	config    string
	workDir   string
	duration  time.Duration
	outageAt  time.Duration
	outageFor time.Duration
	killAt    time.Duration
	rate      int    // points per tick (10 ticks a second)
	ttl       string // the exporter's ttl (DEMO_TTL); the e2e check sets it

	// The fleet mode's binaries and configurations.
	agent, slotTool            string
	agentConfig, gatewayConfig string
	gateways                   int

	// The image mode's container engine command, extra `run` flags and image.
	engine, runFlags, image string
}

func main() {
	var o options
	flag.StringVar(&o.mode, "mode", "demo", "demo (the walk-through), e2e (the end-to-end check), fleet (agent, gateways, restarts and a scale-down) or image (the container image run against the sink)")
	flag.StringVar(&o.collector, "collector", "_build/otelcol-questdb", "the ocb-built collector binary")
	flag.StringVar(&o.sink, "sink", "_build/qwpsink", "the qwpsink binary")
	flag.StringVar(&o.config, "config", "examples/demo.yaml", "collector configuration")
	flag.StringVar(&o.workDir, "workdir", "_build/demo", "directory for the queue and the logs")
	flag.DurationVar(&o.duration, "duration", 60*time.Second, "how long to send")
	flag.DurationVar(&o.outageAt, "outage-at", 15*time.Second, "when the sink's outage starts")
	flag.DurationVar(&o.outageFor, "outage-for", 15*time.Second, "how long the outage lasts")
	flag.DurationVar(&o.killAt, "kill-at", 40*time.Second, "when the collector is killed with SIGKILL and restarted")
	flag.IntVar(&o.rate, "points-per-tick", 50, "gauge points per 100 ms tick (logs: a fifth of it)")
	flag.StringVar(&o.agent, "agent", "_build/agent/otelcol-agent", "fleet: the agent collector with the loadbalancing exporter")
	flag.StringVar(&o.slotTool, "slot-tool", "_build/questdb-slot", "fleet: the questdb-slot binary")
	flag.StringVar(&o.agentConfig, "agent-config", "deploy/fleet/agent.yaml", "fleet: the agent's configuration")
	flag.StringVar(&o.gatewayConfig, "gateway-config", "deploy/fleet/gateway.yaml", "fleet: the gateways' configuration")
	flag.IntVar(&o.gateways, "gateways", 3, "fleet: gateways before the scale-down (at least 2)")
	flag.StringVar(&o.engine, "engine", "podman", "image: the container engine command, with any global flags (\"podman --runtime runc\")")
	flag.StringVar(&o.runFlags, "run-flags", "", "image: extra flags for the engine's run (\"--ulimit nofile=20000:20000\")")
	flag.StringVar(&o.image, "image", "otelcol-questdb:dev", "image: the image to check (make image or make image-local)")
	flag.Parse()

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var err error
	switch o.mode {
	case "demo":
		err = runDemo(ctx, o)
	case "e2e":
		o.ttl = e2eTTL
		err = runE2E(ctx, o)
	case "fleet":
		if o.gateways < 2 {
			err = fmt.Errorf("-gateways %d: the scale-down needs at least 2", o.gateways)
			break
		}
		err = runFleet(ctx, o)
	case "image":
		err = runImage(ctx, o)
	default:
		err = fmt.Errorf("-mode %q: want demo, e2e, fleet or image", o.mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// stack is the sink and the collector, started from scratch in workDir.
type stack struct {
	o         options
	ps        procs
	sink      *sinkClient
	sinkAddr  string
	otlpPort  int
	env       []string
	col       *proc
	sfDir     string
	telemetry string // the collector's Prometheus endpoint
}

func startStack(o options) (*stack, error) {
	s := &stack{o: o, sfDir: filepath.Join(o.workDir, "sf")}
	var ports []int
	var err error
	s.sink, s.sinkAddr, ports, err = startSink(&s.ps, o, 2)
	if err != nil {
		return nil, err
	}
	s.otlpPort = ports[0]
	s.telemetry = fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[1])
	s.env = []string{
		"DEMO_OTLP_HTTP_PORT=" + itoa(s.otlpPort),
		"DEMO_QUESTDB_ENDPOINT=" + s.sinkAddr,
		"DEMO_SF_DIR=" + s.sfDir,
		"DEMO_METRICS_PORT=" + itoa(ports[1]),
		"DEMO_TTL=" + o.ttl,
	}
	if err := s.startCollector(); err != nil {
		s.ps.stopAll(5 * time.Second)
		return nil, err
	}
	return s, nil
}

// startSink empties o.workDir, starts qwpsink there and waits for it; it
// returns the sink, its address and n more free ports for the caller.
func startSink(ps *procs, o options, n int) (*sinkClient, string, []int, error) {
	if err := os.RemoveAll(o.workDir); err != nil {
		return nil, "", nil, err
	}
	if err := os.MkdirAll(o.workDir, 0o755); err != nil {
		return nil, "", nil, err
	}
	ports, err := freePorts(1 + n)
	if err != nil {
		return nil, "", nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	p, err := ps.start("qwpsink", filepath.Join(o.workDir, "qwpsink.log"), nil, o.sink, "-addr", addr)
	if err != nil {
		return nil, "", nil, err
	}
	if err := waitTCP(addr, 20*time.Second, p); err != nil {
		ps.stopAll(5 * time.Second)
		return nil, "", nil, err
	}
	return &sinkClient{base: "http://" + addr, hc: &http.Client{Timeout: 10 * time.Second}}, addr, ports[1:], nil
}

func (s *stack) startCollector() error {
	p, err := s.ps.start("collector", filepath.Join(s.o.workDir, "collector.log"), s.env, s.o.collector, "--config", s.o.config)
	if err != nil {
		return err
	}
	s.col = p
	if err := waitTCP(fmt.Sprintf("127.0.0.1:%d", s.otlpPort), 60*time.Second, p); err != nil {
		return fmt.Errorf("%w\n%s", err, tail(p.log.Name(), 20))
	}
	return nil
}

func (s *stack) stop() { s.ps.stopAll(10 * time.Second) }

func runDemo(ctx context.Context, o options) error {
	s, err := startStack(o)
	if err != nil {
		return err
	}
	defer s.stop()
	fmt.Printf("sink on %s, collector OTLP/HTTP on 127.0.0.1:%d, queue in %s\n", s.sinkAddr, s.otlpPort, s.sfDir)
	fmt.Printf("plan: send for %s; sink outage at %s for %s; SIGKILL and restart of the collector at %s\n",
		o.duration, o.outageAt, o.outageFor, o.killAt)

	gen := &generator{
		endpoint: fmt.Sprintf("http://127.0.0.1:%d", s.otlpPort),
		hc:       &http.Client{Timeout: 15 * time.Second},
		hosts:    []string{"web-1", "web-2", "db-1"},
	}
	size, err := gen.bulk(ctx)
	if err != nil {
		return fmt.Errorf("bulk load: %w", err)
	}
	fmt.Printf("bulk load: %d log records in one %.1f MiB OTLP request (QWP messages over 64 KiB)\n", bulkLogs, float64(size)/(1<<20))
	start := time.Now()
	sendCtx, stopSending := context.WithTimeout(ctx, o.duration)
	defer stopSending()
	genErr := gen.run(sendCtx, o.rate)

	outageDone, killDone := false, false
	report := time.NewTicker(3 * time.Second)
	defer report.Stop()
	for sending := true; sending; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-genErr:
			if err != nil {
				return fmt.Errorf("load generator: %w", err)
			}
			sending = false
		case <-report.C:
			s.progress(ctx, gen, time.Since(start))
		case <-time.After(200 * time.Millisecond):
		}
		el := time.Since(start)
		if !outageDone && el >= o.outageAt {
			outageDone = true
			fmt.Printf("[%5.1fs] >>> QuestDB outage for %s (tables kept)\n", el.Seconds(), o.outageFor)
			if err := s.sink.outage(ctx, o.outageFor); err != nil {
				return err
			}
		}
		if !killDone && el >= o.killAt {
			killDone = true
			fmt.Printf("[%5.1fs] >>> SIGKILL to the collector; restarting it on the same queue\n", el.Seconds())
			s.col.kill()
			time.Sleep(time.Second)
			if err := s.startCollector(); err != nil {
				return err
			}
		}
	}
	fmt.Printf("[%5.1fs] sending stopped; waiting for the queue to drain\n", time.Since(start).Seconds())
	deadline := time.Now().Add(90 * time.Second)
	var v verdict
	for {
		var err error
		v, err = s.sink.verdict(ctx, gen)
		if err != nil {
			return err
		}
		if v.Lost == 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
			s.progress(ctx, gen, time.Since(start))
		}
	}
	fmt.Printf("retries by the OTLP client: %d (of them 429 backpressure: %d)\n", gen.retries.Load(), gen.backpressure.Load())
	fmt.Println("verdict:", v)
	if v.Lost != 0 {
		return errors.New("data was lost")
	}
	return s.sink.checkBigFrames(ctx)
}

func (s *stack) progress(ctx context.Context, gen *generator, el time.Duration) {
	tables, err := s.sink.tables(ctx)
	var parts []string
	if err != nil {
		parts = append(parts, "sink unreachable")
	}
	names := make([]string, 0, len(tables))
	for n := range tables {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if tables[n] > 0 { // the exporter creates all seven tables up front
			parts = append(parts, fmt.Sprintf("%s=%d", n, tables[n]))
		}
	}
	queue := "collector down"
	if b, err := queueBytes(ctx, s.telemetry); err == nil {
		queue = fmt.Sprintf("%.1f KiB held", float64(b)/1024)
	}
	fmt.Printf("[%5.1fs] sent points=%d logs=%d spans=%d | landed %s | queue %s (%.1f MiB of segment files on disk)\n",
		el.Seconds(), gen.sentPoints.Load(), gen.sentLogs.Load(), gen.sentSpans.Load(), strings.Join(parts, " "),
		queue, float64(dirBytes(s.sfDir))/(1<<20))
}

// verdict compares the points, logs and spans gen had accepted with the rows
// in the sink.
func (c *sinkClient) verdict(ctx context.Context, gen *generator) (verdict, error) {
	gauge, err := c.rows(ctx, "otel_metrics_gauge", 10_000_000)
	if err != nil {
		return verdict{}, err
	}
	vm, err := countSeq(gauge, gen.sentPoints.Load())
	if err != nil {
		return verdict{}, fmt.Errorf("otel_metrics_gauge: %w", err)
	}
	logs, err := c.rows(ctx, "otel_logs", 10_000_000)
	if err != nil {
		return verdict{}, err
	}
	vl, err := countLogs(logs, gen.sentLogs.Load())
	if err != nil {
		return verdict{}, fmt.Errorf("otel_logs: %w", err)
	}
	spans, err := c.rows(ctx, "otel_traces", 10_000_000)
	if err != nil {
		return verdict{}, err
	}
	vs, err := countSeq(spans, gen.sentSpans.Load())
	if err != nil {
		return verdict{}, fmt.Errorf("otel_traces: %w", err)
	}
	return combine([]string{"points", "logs", "spans"}, vm, vl, vs), nil
}

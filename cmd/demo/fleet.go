package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// fleetGracePeriod stands in for the StatefulSet's
// terminationGracePeriodSeconds: longer than the gateways'
// close_flush_timeout (deploy/fleet/gateway.yaml), so a SIGTERMed gateway
// exits on its own.
const fleetGracePeriod = 15 * time.Second

// gateway is one gateway collector of the fleet: its own ports and its own
// sf_dir (the PersistentVolumeClaim of deploy/kubernetes/gateway.yaml).
type gateway struct {
	id                          string // sender_id, as the pod name gives it
	grpcPort, health, telemetry int
	sfDir                       string
	p                           *proc
}

// fleet is the sink, the gateways and the agent with the loadbalancing
// exporter in front of them.
type fleet struct {
	o        options
	ps       procs
	sink     *sinkClient
	sinkAddr string
	httpPort int // the agent's OTLP/HTTP port
	agent    *proc
	gws      []*gateway
}

// runFleet drives the fleet through a rolling restart, a SIGKILL and a
// scale-down from three gateways to two during a QuestDB outage, then drains
// the stranded slot with questdb-slot as the README's "Running a fleet" says,
// and checks that every record the agent accepted landed exactly once.
func runFleet(ctx context.Context, o options) error {
	f, err := startFleet(o)
	if err != nil {
		return err
	}
	defer f.ps.stopAll(10 * time.Second)
	fmt.Printf("fleet: sink %s, agent OTLP/HTTP 127.0.0.1:%d, gateways %s\n", f.sinkAddr, f.httpPort, f.gatewayList(len(f.gws)))
	gen := &generator{
		endpoint: fmt.Sprintf("http://127.0.0.1:%d", f.httpPort),
		hc:       &http.Client{Timeout: 15 * time.Second},
		hosts:    []string{"web-1", "web-2", "db-1"},
	}
	start := time.Now()
	step := func(format string, args ...any) {
		fmt.Printf("[%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	sendCtx, stopSending := context.WithCancel(ctx)
	defer stopSending()
	genErr := gen.run(sendCtx, o.rate)
	pause := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-genErr:
			return fmt.Errorf("load generator stopped: %v", err)
		case <-time.After(d):
			return nil
		}
	}
	if err := pause(o.duration / 6); err != nil {
		return err
	}

	for _, g := range f.gws {
		step("rolling restart: SIGTERM %s", g.id)
		if err := stopWithin(g.p, fleetGracePeriod); err != nil {
			return err
		}
		// QuestDB is up: the stop waited for its acknowledgements, so the
		// slot holds nothing the next pod would have to send.
		slot := filepath.Join(g.sfDir, g.id)
		out, err := exec.CommandContext(ctx, o.slotTool, "inspect", slot).CombinedOutput()
		if err != nil {
			return fmt.Errorf("questdb-slot inspect %s: %w\n%s", slot, err, out)
		}
		left, err := slotToolCount(inspectUnacked, string(out), "inspect")
		if err != nil {
			return err
		}
		if left != 0 {
			return fmt.Errorf("%s exited on SIGTERM with QuestDB up but left %d unacknowledged rows in its slot:\n%s", g.id, left, indent(string(out)))
		}
		step("%s exited within the grace period, its slot drained (questdb-slot inspect: 0 unacked rows)", g.id)
		if err := f.startGateway(g); err != nil {
			return err
		}
		if err := pause(o.duration / 6); err != nil {
			return err
		}
	}

	victim := f.gws[1]
	step("SIGKILL %s; restarting it on its slot", victim.id)
	victim.p.kill()
	if err := f.startGateway(victim); err != nil {
		return err
	}
	if err := pause(o.duration / 6); err != nil {
		return err
	}

	gone := f.gws[len(f.gws)-1]
	step("QuestDB outage for %s", o.outageFor)
	if err := f.sink.outage(ctx, o.outageFor); err != nil {
		return err
	}
	outageEnds := time.Now().Add(o.outageFor)
	if err := pause(o.outageFor / 3); err != nil {
		return err
	}
	// The manifests' liveness probe: it must stay 200 while QuestDB is
	// down, or the kubelet would restart every gateway of the fleet.
	for _, g := range f.gws {
		if err := probe(ctx, g.health); err != nil {
			return fmt.Errorf("%s's liveness endpoint during the outage: %w", g.id, err)
		}
	}
	step("liveness (health_check /) of every gateway: 200 during the outage")
	step("scale-down 3 -> 2 during the outage: agent re-resolved to %s, then SIGTERM %s", f.gatewayList(len(f.gws)-1), gone.id)
	if err := stopWithin(f.agent, fleetGracePeriod); err != nil {
		return err
	}
	if err := f.startAgent(len(f.gws) - 1); err != nil {
		return err
	}
	if err := stopWithin(gone.p, fleetGracePeriod); err != nil {
		return err
	}
	if err := pause(time.Until(outageEnds) + o.duration/6); err != nil {
		return err
	}
	stopSending()
	if err := <-genErr; err != nil {
		return fmt.Errorf("load generator: %w", err)
	}
	step("sending stopped: points=%d logs=%d spans=%d accepted by the agent", gen.sentPoints.Load(), gen.sentLogs.Load(), gen.sentSpans.Load())

	before, err := f.settle(ctx, gen)
	if err != nil {
		return err
	}
	slot := filepath.Join(gone.sfDir, gone.id)
	step("before the drain: %s; slot left by the scale-down: %s", before, slot)
	if before.Lost == 0 {
		return errors.New("the scale-down stranded nothing: the outage did not reach the removed gateway's slot, so the drain went untested")
	}
	stranded, err := runSlotTool(ctx, o.slotTool, inspectUnacked, "inspect", slot)
	if err != nil {
		return err
	}
	drained, err := runSlotTool(ctx, o.slotTool, salvageSent, "salvage", slot, "--endpoint", "ws://"+f.sinkAddr, "--delete")
	if err != nil {
		return err
	}
	if _, err := os.Stat(slot); !os.IsNotExist(err) {
		return fmt.Errorf("slot %s still there after a complete salvage --delete (%v)", slot, err)
	}
	// Rows the other gateways still had in flight when the sink looked
	// settled land meanwhile; a loss is a loss only once that had time.
	var after verdict
	for deadline := time.Now().Add(30 * time.Second); ; {
		if after, err = f.sink.verdict(ctx, gen); err != nil {
			return err
		}
		if after.Lost == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	fmt.Printf("fleet verdict: accepted %d, landed %d, duplicates %d, stranded %d, drained %d, lost %d (%s)\n",
		after.Sent, after.Landed, after.Duplicates, stranded, drained, after.Lost, after.Detail)
	if after.Lost != 0 || after.Duplicates != 0 {
		return fmt.Errorf("not exactly once: lost %d, duplicates %d", after.Lost, after.Duplicates)
	}
	if drained != stranded {
		return fmt.Errorf("questdb-slot salvage sent %d rows of the %d inspect counted in the slot", drained, stranded)
	}
	return nil
}

// The questdb-slot lines that count the rows of a slot (inspect) and the
// rows it delivered (salvage).
var (
	inspectUnacked = regexp.MustCompile(`(?m)^unacked: +\d+ readable frames \((\d+) rows`)
	salvageSent    = regexp.MustCompile(`(?m)^sent: +\d+ frames, (\d+) rows`)
)

// runSlotTool runs questdb-slot, shows its report and returns the row
// count re captures from it.
func runSlotTool(ctx context.Context, bin string, re *regexp.Regexp, args ...string) (int64, error) {
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	fmt.Printf("questdb-slot %s:\n%s", strings.Join(args, " "), indent(string(out)))
	if err != nil {
		return 0, fmt.Errorf("questdb-slot %s: %w", args[0], err)
	}
	return slotToolCount(re, string(out), args[0])
}

// slotToolCount returns the count re captures from a questdb-slot report.
func slotToolCount(re *regexp.Regexp, out, command string) (int64, error) {
	m := re.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("questdb-slot %s printed no line matching %s", command, re)
	}
	return strconv.ParseInt(m[1], 10, 64)
}

// settle waits until the remaining gateways have delivered what they hold:
// the verdict no longer changes for three polls in a row.
func (f *fleet) settle(ctx context.Context, gen *generator) (verdict, error) {
	var last verdict
	same := 0
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); {
		v, err := f.sink.verdict(ctx, gen)
		if err != nil {
			return v, err
		}
		if v == last {
			if same++; same == 3 {
				return v, nil
			}
		} else {
			last, same = v, 0
		}
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return last, errors.New("the sink's rows kept changing for 90s after sending stopped")
}

func startFleet(o options) (*fleet, error) {
	f := &fleet{o: o}
	var ports []int
	var err error
	f.sink, f.sinkAddr, ports, err = startSink(&f.ps, o, 1+3*o.gateways)
	if err != nil {
		return nil, err
	}
	f.httpPort = ports[0]
	ok := false
	defer func() {
		if !ok {
			f.ps.stopAll(5 * time.Second)
		}
	}()
	for i := 0; i < o.gateways; i++ {
		g := &gateway{
			id:       fmt.Sprintf("gateway-%d", i),
			grpcPort: ports[1+3*i], health: ports[2+3*i], telemetry: ports[3+3*i],
		}
		// The gateway's volume: the slot is <sfDir>/<id>.
		g.sfDir = filepath.Join(o.workDir, "volume-"+g.id)
		if err := os.MkdirAll(g.sfDir, 0o755); err != nil {
			return nil, err
		}
		if err := f.startGateway(g); err != nil {
			return nil, err
		}
		f.gws = append(f.gws, g)
	}
	if err := f.startAgent(o.gateways); err != nil {
		return nil, err
	}
	ok = true
	return f, nil
}

func (f *fleet) startGateway(g *gateway) error {
	env := []string{
		"FLEET_OTLP_GRPC_PORT=" + itoa(g.grpcPort),
		"FLEET_HEALTH_PORT=" + itoa(g.health),
		"FLEET_METRICS_PORT=" + itoa(g.telemetry),
		"FLEET_QUESTDB_ENDPOINT=" + f.sinkAddr,
		"FLEET_SF_DIR=" + g.sfDir,
		"FLEET_SENDER_ID=" + g.id,
	}
	p, err := f.startCollector(g.id, env, f.o.collector, f.o.gatewayConfig, g.grpcPort)
	g.p = p
	return err
}

// startAgent starts the agent routing to the first n gateways: a static
// resolver's list changes only with a restart (the k8s resolver follows the
// Service's endpoints instead).
func (f *fleet) startAgent(n int) error {
	env := []string{
		"FLEET_OTLP_HTTP_PORT=" + itoa(f.httpPort),
		"FLEET_GATEWAYS=" + f.gatewayList(n),
	}
	p, err := f.startCollector("agent", env, f.o.agent, f.o.agentConfig, f.httpPort)
	f.agent = p
	return err
}

// startCollector starts a collector logging to <name>.log and waits until it
// listens on port.
func (f *fleet) startCollector(name string, env []string, bin, config string, port int) (*proc, error) {
	p, err := f.ps.start(name, filepath.Join(f.o.workDir, name+".log"), env, bin, "--config", config)
	if err != nil {
		return nil, err
	}
	if err := waitTCP(fmt.Sprintf("127.0.0.1:%d", port), 60*time.Second, p); err != nil {
		return p, fmt.Errorf("%w\n%s", err, tail(p.log.Name(), 20))
	}
	return p, nil
}

// gatewayList is the first n gateways' OTLP/gRPC addresses as a YAML list.
func (f *fleet) gatewayList(n int) string {
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", f.gws[i].grpcPort)
	}
	return "[" + strings.Join(addrs, ", ") + "]"
}

// stopWithin sends SIGTERM and fails when the process needs longer than
// grace to exit: on Kubernetes the kubelet would SIGKILL it then.
func stopWithin(p *proc, grace time.Duration) error {
	began := time.Now()
	p.stop(grace)
	if d := time.Since(began); d >= grace {
		return fmt.Errorf("%s did not exit within %s of SIGTERM (see %s)", p.name, grace, p.log.Name())
	}
	return nil
}

// probe is the kubelet's httpGet probe of the health_check extension.
func probe(ctx context.Context, port int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", port), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /: %s", resp.Status)
	}
	return nil
}

func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	return ports, nil
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}

package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The image's contract (deploy/image/Containerfile): where its
// configuration and its slot volume are, and the questdb-slot binary.
const (
	imageConfig   = "/etc/otelcol/config.yaml"
	imageSlotDir  = "/var/lib/otelcol/questdb"
	imageSlotTool = "/usr/local/bin/questdb-slot"
	imageUser     = "10001:10001"
	imageSenderID = "image-check-0"
)

// container runs the image through a container engine (podman or docker,
// with any global flags, e.g. "podman --runtime runc").
type container struct {
	engine   []string
	runFlags []string // extra `run` flags, e.g. --ulimit
	image    string
	name     string // of the long-running collector container
	volume   string // named volume mounted at imageSlotDir
}

// cmd is the engine with args.
func (c *container) cmd(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, c.engine[0], append(c.engine[1:], args...)...)
}

// runArgs is a `run --rm` of the image on the slot volume, on the host's
// network, with env and then the image's arguments (entrypoint overridden
// when entrypoint is set).
func (c *container) runArgs(name, entrypoint string, env []string, args ...string) []string {
	a := []string{"run", "--rm", "--network=host", "-v", c.volume + ":" + imageSlotDir}
	if name != "" {
		a = append(a, "--name", name)
	}
	if entrypoint != "" {
		a = append(a, "--entrypoint", entrypoint)
	}
	for _, e := range env {
		a = append(a, "-e", e)
	}
	a = append(a, c.runFlags...)
	a = append(a, c.image)
	return append(a, args...)
}

// output runs one short-lived container and returns what it printed.
func (c *container) output(ctx context.Context, entrypoint string, env []string, args ...string) (string, error) {
	out, err := c.cmd(ctx, c.runArgs("", entrypoint, env, args...)...).CombinedOutput()
	return string(out), err
}

// runImage checks the container image the way the gateways run it: its
// configuration validates (and refuses a missing POD_NAME), it takes OTLP
// and delivers it to qwpsink, and its slot lives on the volume: stranded
// there by a stop during a QuestDB outage and counted by the image's own
// questdb-slot inspect, then delivered exactly once by the drain Job's
// salvage from the image, and a second time by a restart on the volume.
func runImage(ctx context.Context, o options) error {
	c := &container{
		engine:   strings.Fields(o.engine),
		runFlags: strings.Fields(o.runFlags),
		image:    o.image,
		name:     fmt.Sprintf("image-check-%d", os.Getpid()),
		volume:   fmt.Sprintf("image-check-%d", os.Getpid()),
	}
	if len(c.engine) == 0 {
		return errors.New("-engine: empty (podman or docker)")
	}
	if err := checkImageConfig(ctx, c); err != nil {
		return err
	}
	// Before any run: a run naming a volume that does not exist creates it.
	if out, err := c.cmd(ctx, "volume", "create", c.volume).CombinedOutput(); err != nil {
		return fmt.Errorf("volume create: %w: %s", err, out)
	}
	defer func() {
		// Fresh contexts: cleanup runs after Ctrl-C too.
		_ = c.cmd(context.Background(), "rm", "-f", c.name).Run()
		_ = c.cmd(context.Background(), "volume", "rm", "-f", c.volume).Run()
	}()
	env := []string{"POD_NAME=" + imageSenderID}
	out, err := c.output(ctx, "", env, "validate", "--config", imageConfig)
	if err != nil {
		return fmt.Errorf("validate of the image's %s: %w\n%s", imageConfig, err, indent(out))
	}
	fmt.Printf("image: validate --config %s passed (POD_NAME set)\n", imageConfig)
	if out, err := c.output(ctx, "", nil, "validate", "--config", imageConfig); err == nil || !strings.Contains(out, "sender_id") {
		return fmt.Errorf("validate without POD_NAME: want a failure naming sender_id, got err %v:\n%s", err, indent(out))
	}
	fmt.Println("image: validate without POD_NAME fails on sender_id, as the gateways' manifests rely on")

	var ps procs
	defer ps.stopAll(30 * time.Second)
	sink, sinkAddr, ports, err := startSink(&ps, o, 4)
	if err != nil {
		return err
	}
	httpPort := ports[0]
	env = append(env, "QUESTDB_ENDPOINT="+sinkAddr)
	// The image's configuration, its listening ports moved to free ones
	// (host networking on a shared machine) and close_flush_timeout
	// shortened so the stop during the outage takes seconds, not 30.
	args := []string{"--config", imageConfig,
		fmt.Sprintf("--config=yaml:receivers::otlp::protocols::http::endpoint: 127.0.0.1:%d", httpPort),
		fmt.Sprintf("--config=yaml:receivers::otlp::protocols::grpc::endpoint: 127.0.0.1:%d", ports[1]),
		fmt.Sprintf("--config=yaml:extensions::health_check::endpoint: 127.0.0.1:%d", ports[2]),
		fmt.Sprintf("--config=yaml:service::telemetry::metrics::readers: [{pull: {exporter: {prometheus: {host: 127.0.0.1, port: %d}}}}]", ports[3]),
		"--config=yaml:exporters::questdb::close_flush_timeout: 3s",
	}
	start := func() (*proc, error) {
		p, err := ps.start("container", filepath.Join(o.workDir, "container.log"), nil,
			c.engine[0], append(c.engine[1:], c.runArgs(c.name, "", env, args...)...)...)
		if err != nil {
			return nil, err
		}
		if err := waitTCP(fmt.Sprintf("127.0.0.1:%d", httpPort), 90*time.Second, p); err != nil {
			return p, fmt.Errorf("%w\n%s", err, tail(p.log.Name(), 20))
		}
		return p, nil
	}
	p, err := start()
	if err != nil {
		return err
	}
	fmt.Printf("image: running as %s on volume %s, OTLP/HTTP 127.0.0.1:%d, QuestDB (qwpsink) %s\n", c.name, c.volume, httpPort, sinkAddr)
	telemetry := fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[3])

	gen := &generator{endpoint: fmt.Sprintf("http://127.0.0.1:%d", httpPort), hc: &http.Client{Timeout: 15 * time.Second}, hosts: []string{"img-1"}}
	ticks := func(n int) error {
		for i := 0; i < n; i++ {
			if err := gen.tick(ctx, 30, 6, 6); err != nil {
				return err
			}
		}
		return nil
	}
	if err := ticks(5); err != nil {
		return err
	}
	v, err := waitLanded(ctx, sink, gen, 60*time.Second)
	if err != nil {
		return fmt.Errorf("%w\ncontainer log tail:\n%s", err, tail(p.log.Name(), 30))
	}
	fmt.Println("image: delivered:", v)

	// Strand the slot twice, and drain it each way the README's "Scale-down
	// that strands nothing" gives: the drain Job's questdb-slot salvage
	// (from the image, with the image's configuration as the Job uses the
	// gateways'), then a collector restarted on the volume.
	slot := imageSlotDir + "/" + imageSenderID
	strand := func() (int64, error) {
		const outage = 12 * time.Second
		if err := sink.outage(ctx, outage); err != nil {
			return 0, err
		}
		outageEnds := time.Now().Add(outage)
		before := gen.sentPoints.Load() + gen.sentLogs.Load() + gen.sentSpans.Load()
		if err := ticks(5); err != nil {
			return 0, err
		}
		held := gen.sentPoints.Load() + gen.sentLogs.Load() + gen.sentSpans.Load() - before
		b, err := queueBytes(ctx, telemetry)
		if err != nil {
			return 0, fmt.Errorf("the exporter's queue_bytes from the image's telemetry: %w", err)
		}
		fmt.Printf("image: QuestDB outage; %d records accepted, otelcol_exporter_questdb_queue_bytes %d\n", held, b)
		if err := stopWithin(p, 20*time.Second); err != nil {
			return 0, err
		}
		stranded, err := imageInspect(ctx, c, slot)
		if err != nil {
			return 0, err
		}
		if stranded != held {
			return 0, fmt.Errorf("questdb-slot inspect counts %d rows in the stranded slot, %d were accepted during the outage", stranded, held)
		}
		fmt.Printf("image: stopped during the outage; its slot on the volume holds those %d rows\n", stranded)
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Until(outageEnds) + time.Second):
		}
		return stranded, nil
	}

	stranded, err := strand()
	if err != nil {
		return err
	}
	out, err = c.output(ctx, imageSlotTool, env, "salvage", slot, "--config", imageConfig, "--delete")
	fmt.Printf("questdb-slot salvage %s --config %s --delete (in the image, as the drain Job runs it):\n%s", slot, imageConfig, indent(out))
	if err != nil {
		return fmt.Errorf("questdb-slot salvage in the image: %w", err)
	}
	drained, err := slotToolCount(salvageSent, out, "salvage")
	if err != nil {
		return err
	}
	if drained != stranded {
		return fmt.Errorf("salvage sent %d rows of the %d inspect counted", drained, stranded)
	}
	v, err = waitLanded(ctx, sink, gen, 30*time.Second)
	if err != nil {
		return err
	}
	fmt.Println("image: drained by salvage:", v)

	if p, err = start(); err != nil {
		return err
	}
	if stranded, err = strand(); err != nil {
		return err
	}
	if p, err = start(); err != nil {
		return err
	}
	v, err = waitLanded(ctx, sink, gen, 60*time.Second)
	if err != nil {
		return fmt.Errorf("%w\ncontainer log tail:\n%s", err, tail(p.log.Name(), 30))
	}
	if err := stopWithin(p, 20*time.Second); err != nil {
		return err
	}
	left, err := imageInspect(ctx, c, slot)
	if err != nil {
		return err
	}
	if left != 0 {
		return fmt.Errorf("questdb-slot inspect counts %d unacknowledged rows after the restart drained the slot", left)
	}
	fmt.Printf("image verdict: %s; stranded twice (%d rows drained by salvage, %d by a restart on the volume), unacked at the end: %d\n",
		v, drained, stranded, left)
	return nil
}

// checkImageConfig compares the built image's user and volume with the
// contract the manifests mount and run it by.
func checkImageConfig(ctx context.Context, c *container) error {
	out, err := c.cmd(ctx, "image", "inspect", "--format", "{{.Config.User}} {{range $k, $v := .Config.Volumes}}{{$k}} {{end}}", c.image).CombinedOutput()
	if err != nil {
		return fmt.Errorf("image inspect %s: %w: %s", c.image, err, out)
	}
	got := strings.Fields(string(out))
	if len(got) != 2 || got[0] != imageUser || got[1] != imageSlotDir {
		return fmt.Errorf("image %s: user and volumes %q, want %s and the one volume %s", c.image, got, imageUser, imageSlotDir)
	}
	fmt.Printf("image: %s runs as %s with the volume %s\n", c.image, imageUser, imageSlotDir)
	return nil
}

// imageInspect runs the image's questdb-slot inspect on the slot volume and
// returns the unacknowledged rows it counts.
func imageInspect(ctx context.Context, c *container, slot string) (int64, error) {
	out, err := c.output(ctx, imageSlotTool, nil, "inspect", slot)
	fmt.Printf("questdb-slot inspect %s (in the image):\n%s", slot, indent(out))
	if err != nil {
		return 0, fmt.Errorf("questdb-slot inspect in the image: %w", err)
	}
	return slotToolCount(inspectUnacked, out, "inspect")
}

// waitLanded waits until every record gen had accepted landed once.
func waitLanded(ctx context.Context, sink *sinkClient, gen *generator, timeout time.Duration) (verdict, error) {
	deadline := time.Now().Add(timeout)
	for {
		v, err := sink.verdict(ctx, gen)
		if err != nil {
			return v, err
		}
		if v.Lost == 0 && v.Duplicates == 0 {
			return v, nil
		}
		if time.Now().After(deadline) {
			return v, fmt.Errorf("not exactly once after %s: %s", timeout, v)
		}
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// runResult is one run: one shape through one exporter configuration.
type runResult struct {
	round    int
	shape    string
	exporter string
	load     loadResult
	arrived  int64 // items the sink counted; -1 for nop (no sink)
	cpu      time.Duration
	peakRSS  int64
	wall     time.Duration // first request to drained
	frames   int64         // QWP frames the questdb exporter appended; -1 for others
	toSink   int64         // bytes the qwpsink read; -1 for others
}

// cpuPerItem is the collector's CPU time per accepted item in µs.
func (r runResult) cpuPerItem() float64 {
	if r.load.accepted == 0 {
		return 0
	}
	return float64(r.cpu.Nanoseconds()) / 1e3 / float64(r.load.accepted)
}

// lost is how many accepted items the sink did not receive (never negative:
// a retried request may arrive twice).
func (r runResult) lost() int64 {
	if r.arrived < 0 {
		return 0
	}
	return max(r.load.accepted-r.arrived, 0)
}

// runOptions are the command's settings that every run shares.
type runOptions struct {
	collector    string // otelcol-bench binary
	sink         string // qwpsink binary
	workDir      string
	requests     int64
	concurrency  int
	durability   string // the questdb configuration's sf_durability
	dictBytes    string // the questdb configurations' symbol_dict_max_bytes; "" leaves the default
	batchBytes   string // the questdb configurations' max_batch_bytes; "" leaves the default
	drainTimeout time.Duration
}

// child is a process a run started; its output goes to a log file.
type child struct {
	cmd  *exec.Cmd
	done chan error
}

func startChild(logPath, bin string, args ...string) (*child, error) {
	out, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C reaches the harness only
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	c := &child{cmd: cmd, done: make(chan error, 1)}
	go func() {
		err := cmd.Wait()
		out.Close()
		c.done <- err
		close(c.done)
	}()
	return c, nil
}

// stop sends SIGTERM and SIGKILL after 10 s; it waits for the exit.
func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// listening waits until addr accepts connections, failing early if the
// child exits.
func (c *child) listening(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return conn.Close()
		}
		select {
		case err := <-c.done:
			return fmt.Errorf("%s exited before listening on %s: %v", c.cmd.Path, addr, err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: nothing listens on %s after %s", c.cmd.Path, addr, timeout)
		}
	}
}

// freePorts asks the kernel for n unused loopback ports.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// runOne starts a fresh sink and collector, sends the load, waits for the
// drain and measures.
func runOne(ctx context.Context, o runOptions, round int, sh shape, ec exporterConfig) (res runResult, err error) {
	res = runResult{round: round, shape: sh.name, exporter: ec.name, arrived: -1, frames: -1, toSink: -1}
	dir := filepath.Join(o.workDir, fmt.Sprintf("round%d-%s-%s", round, sh.name, ec.name))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return res, err
	}
	defer os.RemoveAll(filepath.Join(dir, "sf")) // the queue's files; the logs stay
	ports, err := freePorts(3)
	if err != nil {
		return res, err
	}
	otlpPort, telemetryPort, sinkPort := ports[0], ports[1], ports[2]
	hc := &http.Client{Timeout: 30 * time.Second}

	var received func() (int64, error)
	sinkAddr, sinkPid := "", 0
	switch ec.sink {
	case sinkQWP:
		sinkAddr = fmt.Sprintf("127.0.0.1:%d", sinkPort)
		sink, err := startChild(filepath.Join(dir, "qwpsink.log"), o.sink, "-addr", sinkAddr, "-count-only", "-summary-every", "0")
		if err != nil {
			return res, err
		}
		defer sink.stop()
		if err := sink.listening(sinkAddr, 20*time.Second); err != nil {
			return res, err
		}
		sinkPid = sink.cmd.Process.Pid
		received = func() (int64, error) { return qwpRows(ctx, hc, "http://"+sinkAddr) }
	case sinkOTLP:
		sink, err := newOTLPSink()
		if err != nil {
			return res, err
		}
		defer sink.close()
		sinkAddr = sink.addr
		received = func() (int64, error) {
			if n := sink.errors.Load(); n > 0 {
				return 0, fmt.Errorf("the OTLP sink could not decode %d requests", n)
			}
			return sink.received(), nil
		}
	}

	cfgPath := filepath.Join(dir, "collector.yaml")
	cfg := collectorYAML(questdbSettings(ec, ec.yaml(sinkAddr, filepath.Join(dir, "sf"), o.durability), o), otlpPort, telemetryPort)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return res, err
	}
	col, err := startChild(filepath.Join(dir, "collector.log"), o.collector, "--config", cfgPath)
	if err != nil {
		return res, err
	}
	defer col.stop()
	otlpAddr := fmt.Sprintf("127.0.0.1:%d", otlpPort)
	if err := col.listening(otlpAddr, 60*time.Second); err != nil {
		return res, err
	}
	pid := col.cmd.Process.Pid

	cpu0, err := cpuTime(pid)
	if err != nil {
		return res, err
	}
	start := time.Now()
	gen := &generator{
		endpoint:    "http://" + otlpAddr,
		hc:          &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: o.concurrency}},
		requests:    o.requests,
		concurrency: o.concurrency,
		newPayload:  sh.newPayload,
	}
	res.load, err = gen.run(ctx)
	if err != nil {
		return res, err
	}
	if received != nil {
		if res.arrived, err = drain(ctx, received, res.load.accepted, o.drainTimeout); err != nil {
			return res, err
		}
	}
	if res.cpu, err = cpuTime(pid); err != nil {
		return res, err
	}
	res.wall = time.Since(start)
	res.cpu -= cpu0
	if res.peakRSS, err = peakRSS(pid); err != nil {
		return res, err
	}
	if ec.sink == sinkQWP {
		text, err := httpGet(ctx, hc, fmt.Sprintf("http://127.0.0.1:%d/metrics", telemetryPort))
		if err != nil {
			return res, err
		}
		f, err := promSum(text, "otelcol_exporter_questdb_frames_appended")
		if err != nil {
			return res, err
		}
		res.frames = int64(f)
		if res.toSink, err = readBytes(sinkPid); err != nil {
			return res, err
		}
	}
	return res, nil
}

// drain polls received until it reaches want or timeout passes; it returns
// the last count.
func drain(ctx context.Context, received func() (int64, error), want int64, timeout time.Duration) (int64, error) {
	deadline := time.Now().Add(timeout)
	for {
		n, err := received()
		if err != nil {
			return n, err
		}
		if n >= want {
			return n, nil
		}
		if time.Now().After(deadline) {
			return n, fmt.Errorf("the sink holds %d of %d accepted items after %s", n, want, timeout)
		}
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func httpGet(ctx context.Context, hc *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), nil
}

// qwpRows sums the row counts of every table of a qwpsink.
func qwpRows(ctx context.Context, hc *http.Client, base string) (int64, error) {
	text, err := httpGet(ctx, hc, base+"/tables")
	if err != nil {
		return 0, err
	}
	var tables map[string]int64
	if err := json.Unmarshal([]byte(text), &tables); err != nil {
		return 0, fmt.Errorf("qwpsink /tables: %w", err)
	}
	var n int64
	for _, rows := range tables {
		n += rows
	}
	return n, nil
}

// promSum adds up every sample of a counter in Prometheus text exposition
// format; the sample name may carry the _total suffix. A counter with no
// sample is an error: the figure would silently read 0.
func promSum(text, name string) (float64, error) {
	var sum float64
	found := false
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		metric, rest, ok := strings.Cut(line, " ")
		if i := strings.IndexByte(line, '{'); i >= 0 && i < len(metric) {
			metric = line[:i]
			if j := strings.LastIndexByte(line, '}'); j > i {
				rest = strings.TrimSpace(line[j+1:])
			}
		}
		if !ok || (metric != name && metric != name+"_total") {
			continue
		}
		value, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return 0, fmt.Errorf("metric %s: sample %q: %w", name, value, err)
		}
		sum += v
		found = true
	}
	if !found {
		return 0, errors.New("metric " + name + " has no sample")
	}
	return sum, nil
}

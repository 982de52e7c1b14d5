package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}

// run serves until ctx ends and returns the exit code: 0 after a clean stop,
// 2 for bad flags, 1 when the server cannot start.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("qwpsink", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o qwptest.Options
	fs.StringVar(&o.Addr, "addr", "127.0.0.1:9000", "listen address (host:port; port 0 picks a free one)")
	fs.IntVar(&o.RecvBufferSize, "recv-buffer", qwptest.DefaultRecvBufferSize, "http.recv.buffer.size: largest WebSocket frame accepted")
	fs.BoolVar(&o.DurableAck, "durable-ack", false, `grant "X-QWP-Request-Durable-Ack: true"`)
	fs.BoolVar(&o.DurableTiers, "durable-tiers", false, "grant the durable-ack tiers local, replicated, local,replicated")
	fs.BoolVar(&o.AutoDurable, "auto-durable", true, "send a durable ack after every OK on connections that negotiated one")
	fs.BoolVar(&o.CountOnly, "count-only", false, "keep row counts only, not rows")
	fs.StringVar(&o.Role, "role", "", "X-QuestDB-Role to send on upgrade")
	fs.StringVar(&o.Username, "username", "", "require HTTP basic auth with this user (and -password)")
	fs.StringVar(&o.Password, "password", "", "password for -username")
	fs.StringVar(&o.Token, "token", "", "require this bearer token")
	every := fs.Duration("summary-every", 10*time.Second, "interval of the per-table summary log line (0 disables)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := log.New(stderr, "qwpsink: ", log.LstdFlags)
	o.Logf = logger.Printf
	s, err := qwptest.NewServer(o)
	if err != nil {
		logger.Print(err)
		return 1
	}
	logger.Printf("listening on %s (QWP at ws://%s/write/v4 and /api/v4/write, SQL at http://%s/exec, tables at http://%s/tables)", s.Addr(), s.Addr(), s.Addr(), s.Addr())
	var tick <-chan time.Time
	if *every > 0 {
		t := time.NewTicker(*every)
		defer t.Stop()
		tick = t.C
	}
	last := ""
	for {
		select {
		case <-ctx.Done():
			logger.Printf("stopping: %s; largest frame %d bytes", summary(s.Tables()), s.MaxFrameBytes())
			if err := s.Close(); err != nil {
				logger.Print(err)
				return 1
			}
			return 0
		case <-tick:
			if line := fmt.Sprintf("%s; largest frame %d bytes", summary(s.Tables()), s.MaxFrameBytes()); line != last {
				logger.Print(line)
				last = line
			}
		}
	}
}

// summary renders row counts per table, sorted by name.
func summary(tables map[string]int64) string {
	if len(tables) == 0 {
		return "no tables"
	}
	parts := make([]string, 0, len(tables))
	for _, name := range slices.Sorted(maps.Keys(tables)) {
		parts = append(parts, fmt.Sprintf("%s=%d", name, tables[name]))
	}
	return "rows: " + strings.Join(parts, " ")
}

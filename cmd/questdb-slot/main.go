// Command questdb-slot reads and salvages a store-and-forward slot of the
// QuestDB exporter without the collector, in the spirit of etcd-dump-logs
// and kafka-dump-log. It reads the slot with the queue's own code
// (sfqueue.ScanSlot and SlotScan.EachFrame), decodes frames with qwptest's
// decoder (which implements the QWP ingress specification), and sends with
// the exporter's I/O loop (package sender).
//
//	questdb-slot inspect <slot>
//	questdb-slot salvage <slot> --endpoint ws://host:9000 [--config collector.yaml] [--all] [--delete]
//
// Both commands read segment formats 2 and 1 (sfqueue/doc.go) and refuse a
// slot of a newer format, naming both versions. inspect is read-only and
// never takes or tries the slot's lock, so it is safe on a slot a running
// collector holds. salvage takes the lock, creates
// the tables with the exporter's DDL (dedup keys, so a repeat adds no row)
// and sends every readable frame above the watermark; see salvage.go.
//
// Exit codes: 0 done (salvage: every frame delivered), 1 an error or, for
// salvage, frames that could not be delivered, 2 bad usage.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  questdb-slot inspect <slot>
  questdb-slot salvage <slot> --endpoint ws://host:9000 [--config collector.yaml] [--all] [--delete]

<slot> is a slot directory: <sf_dir>/<sender_id>, or a set-aside
<sf_dir>/<sender_id>.unreplayable-<n>. Run "questdb-slot salvage -h" for its flags.
`

// run executes one command and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "inspect":
		if len(args) != 2 {
			fmt.Fprint(stderr, usage)
			return 2
		}
		if err := inspect(args[1], stdout); err != nil {
			fmt.Fprintf(stderr, "questdb-slot: %v\n", err)
			return 1
		}
		return 0
	case "salvage":
		return salvageCmd(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "questdb-slot: unknown command %q\n%s", args[0], usage)
	return 2
}

package questdbexporter

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/questdbexporter/questdbexporter/internal/metadata"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
	"github.com/questdbexporter/questdbexporter/sfqueue/sfqueuetest"
)

// TestFileFaultsAreLoud injects file faults under a running exporter: a
// full disk refuses new data with a retryable error until space returns; an
// I/O error or a failed fsync latches the queue (Error log, permanent
// status, later calls refused with a retryable error) while the I/O loop
// keeps sending the frames already queued. Every accepted batch reaches
// QuestDB in every case.
func TestFileFaultsAreLoud(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   sfqueuetest.Fault
		latches bool       // the queue stops accepting for good
		refused codes.Code // what the call during the fault gets (OK: accepted)
		logged  string     // an Error log containing this
		// flush: sf_durability flush, where the flusher writes the frames
		// appends built (the full disk refuses a group whose dictionary
		// entries are stored already); else periodic.
		flush bool
	}{
		{"ENOSPC on segment writes", sfqueuetest.Fault{Op: sfqueuetest.Write, Pattern: "*.sfseg", Err: syscall.ENOSPC}, false, codes.ResourceExhausted, "file system full", false},
		{"ENOSPC on segment writes, flush", sfqueuetest.Fault{Op: sfqueuetest.Write, Pattern: "*.sfseg", Err: syscall.ENOSPC}, false, codes.ResourceExhausted, "file system full", true},
		{"EIO on segment writes", sfqueuetest.Fault{Op: sfqueuetest.Write, Pattern: "*.sfseg", Err: syscall.EIO}, true, codes.Unavailable, "fatal I/O error", false},
		{"ENOSPC on the dictionary", sfqueuetest.Fault{Op: sfqueuetest.Write, Pattern: ".symbol-dict*", Err: syscall.ENOSPC}, false, codes.ResourceExhausted, "", false},
		{"EIO on the dictionary", sfqueuetest.Fault{Op: sfqueuetest.Write, Pattern: ".symbol-dict*", Err: syscall.EIO}, true, codes.Unavailable, "fatal I/O error", false},
		{"EIO on .ack-watermark", sfqueuetest.Fault{Op: sfqueuetest.Write, Pattern: ".ack-watermark*", Err: syscall.EIO}, false, codes.OK, "cannot write .ack-watermark", false},
		{"failed fsync", sfqueuetest.Fault{Op: sfqueuetest.Sync, Pattern: "*.sfseg", Err: syscall.EIO}, true, codes.Unavailable, "fatal I/O error", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, qwptest.Options{})
			cfg := testConfig(t, srv.Addr())
			cfg.SFDir, cfg.SenderID = t.TempDir(), "f"
			cfg.SFDurability = "periodic"
			cfg.SFSyncInterval = minInterval
			if tc.flush {
				cfg.SFDurability = "flush"
			}
			cfg.SFAppendDeadline = minInterval
			cfg.CloseFlushTimeout = 10 * time.Second
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			set := exportertest.NewNopSettings(metadata.Type)
			core, logs := observer.New(zapcore.InfoLevel)
			set.Logger = zap.New(core)
			inst, err := newInstance(cfg, set)
			if err != nil {
				t.Fatal(err)
			}
			e := inst.(*questdbExporter)
			ffs := sfqueuetest.NewFaultFS()
			e.queueFS = ffs
			host := newStatusHost()
			if err := e.Start(context.Background(), host); err != nil {
				t.Fatal(err)
			}
			defer e.Shutdown(context.Background())
			accepted := map[int]bool{}
			consume := func(base int) error {
				err := e.consumeMetrics(context.Background(), gaugeBatch(base, 20))
				if err == nil {
					accepted[base] = true
				}
				return err
			}
			if err := consume(0); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return e.queue.AckedFSN() == e.queue.PublishedFSN() })

			ffs.Inject(tc.fault)
			err = consume(1000)
			if tc.fault.Op == sfqueuetest.Sync {
				// The fsync fails in the background: wait for the latch.
				waitFor(t, func() bool { return e.queue.Stats().Fatal != nil })
				err = consume(2000)
			}
			if got := status.Code(err); got != tc.refused || consumererror.IsPermanent(err) {
				t.Fatalf("call during the fault: %v (code %v); want code %v, never permanent", err, got, tc.refused)
			}
			if tc.logged != "" {
				waitFor(t, func() bool {
					for _, l := range logs.FilterMessageSnippet(tc.logged).All() {
						if l.Level >= zapcore.WarnLevel {
							return true
						}
					}
					return false
				})
			}
			if ffs.Hits(tc.fault.Op) == 0 {
				t.Fatalf("the fault was never hit")
			}
			ffs.Clear()
			err = consume(3000)
			if tc.latches {
				if err == nil || consumererror.IsPermanent(err) {
					t.Fatalf("after a latched fault, a call got %v; want a retryable refusal", err)
				}
				waitFor(t, func() bool {
					ev := host.last()
					return ev != nil && ev.Status() == componentstatus.StatusPermanentError
				})
			} else if err != nil {
				t.Fatalf("after the fault cleared: %v", err)
			}
			waitFor(t, func() bool { return e.queue.AckedFSN() == e.queue.PublishedFSN() })
			got := serverIDs(t, srv, "otel_metrics_gauge")
			for base := range accepted {
				for i := range 20 {
					if got[base+i] == 0 {
						t.Fatalf("point %d of an accepted batch never reached QuestDB (accepted %v)", base+i, accepted)
					}
				}
			}
		})
	}
}

// TestDictionaryReadErrorRefusesStart: a read error on the current
// dictionary generation after recovery read it intact makes Start fail with
// an error naming the slot, the generation and the cause, and leaves the
// slot as it was; the next start delivers the frames queued before it and
// new data, every row with its own symbols (no id handed out twice).
func TestDictionaryReadErrorRefusesStart(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, closedPort(t))
	cfg.SFDir, cfg.SenderID = dir, "s" // slotListing reads <dir>/s
	newExporter := func(cfg *Config, fsys sfqueue.FS) *questdbExporter {
		t.Helper()
		inst, err := newInstance(cfg, exportertest.NewNopSettings(metadata.Type))
		if err != nil {
			t.Fatal(err)
		}
		e := inst.(*questdbExporter)
		e.queueFS = fsys
		return e
	}
	// QuestDB unreachable: the batch waits in the slot, its symbols in
	// generation 0.
	e := newExporter(cfg, nil)
	if err := e.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	if err := e.consumeMetrics(context.Background(), gaugeBatch(0, 20)); err != nil {
		t.Fatal(err)
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	dict := filepath.Join(dir, "s", ".symbol-dict.0000000000")
	before := slotListing(t, dir, dict)

	// Recovery reads the file (the first read passes); the writer's load
	// fails.
	ffs := sfqueuetest.NewFaultFS()
	ffs.Inject(sfqueuetest.Fault{Op: sfqueuetest.Read, Pattern: ".symbol-dict.*", Err: syscall.EIO, Skip: 1})
	e = newExporter(cfg, ffs)
	err := e.Start(context.Background(), componenttest.NewNopHost())
	if err == nil {
		e.Shutdown(context.Background())
		t.Fatal("Start accepted a dictionary it could not read")
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown after the refused Start: %v", err)
	}
	if !errors.Is(err, syscall.EIO) || ffs.Hits(sfqueuetest.Read) != 1 {
		t.Fatalf("Start: %v (%d read faults hit); want EIO from the one failed read", err, ffs.Hits(sfqueuetest.Read))
	}
	for _, want := range []string{`sf_dir "` + dir, `sender_id "s"`, "symbol dictionary generation 0", dict, "nothing in the slot was changed or dropped"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start error %q lacks %q", err, want)
		}
	}
	if after := slotListing(t, dir, dict); after != before {
		t.Errorf("the refused start changed the slot:\nbefore %q\nafter  %q", before, after)
	}

	srv := newServer(t, qwptest.Options{})
	cfg.Endpoints = []string{srv.Addr()}
	cfg.CloseFlushTimeout = 10 * time.Second
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	e = newExporter(cfg, nil)
	if err := e.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	if err := e.consumeMetrics(context.Background(), gaugeBatch(1000, 20)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return e.queue.AckedFSN() == e.queue.PublishedFSN() })
	got := serverIDs(t, srv, "otel_metrics_gauge")
	for _, base := range []int{0, 1000} {
		for i := range 20 {
			if got[base+i] != 1 {
				t.Fatalf("point %d landed %d times, want once (rows by id: %v)", base+i, got[base+i], got)
			}
		}
	}
	if len(got) != 40 {
		t.Fatalf("%d distinct ids landed, want 40: %v", len(got), got)
	}
}

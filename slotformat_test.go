package questdbexporter

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/questdbexporter/questdbexporter/internal/metadata"
	"github.com/questdbexporter/questdbexporter/sfqueue"
	"github.com/questdbexporter/questdbexporter/sfqueue/sfqueuetest"
)

// TestNewerSlotFormatRefusedAtStart: a slot a newer release wrote (its
// segment says format 3) makes Start fail with an error naming the slot and
// both format versions, and the slot is left byte for byte as it was: an
// older exporter must neither replay, set aside nor lock a newer one's data.
func TestNewerSlotFormatRefusedAtStart(t *testing.T) {
	dir := t.TempDir()
	q, err := sfqueue.Open(sfqueue.Options{Dir: dir, SenderID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.AppendBatchItems(context.Background(), [][]byte{make([]byte, 50)}, []uint32{7}); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "s", "*.sfseg"))
	if len(segs) != 1 {
		t.Fatalf("segments %v, want one", segs)
	}
	sfqueuetest.SetSegmentVersion(t, segs[0], sfqueue.FormatVersion+1)
	before := slotListing(t, dir, segs[0])

	cfg := testConfig(t, closedPort(t))
	cfg.SFDir, cfg.SenderID = dir, "s"
	inst, err := newInstance(cfg, exportertest.NewNopSettings(metadata.Type))
	if err != nil {
		t.Fatal(err)
	}
	e := inst.(*questdbExporter)
	err = e.Start(context.Background(), componenttest.NewNopHost())
	if err == nil {
		e.Shutdown(context.Background())
		t.Fatal("Start accepted a slot of a newer format")
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown after the refused Start: %v", err)
	}
	for _, want := range []string{`sf_dir "` + dir, `sender_id "s"`, "format version 3", "newer than version 2", "left unchanged"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start error %q lacks %q", err, want)
		}
	}
	if after := slotListing(t, dir, segs[0]); after != before {
		t.Errorf("the refused start changed sf_dir:\nbefore %q\nafter  %q", before, after)
	}
}

// slotListing names every file under dir with its size and mode, and
// holds the segment's bytes: what a refused start must leave as it was.
func slotListing(t *testing.T, dir, segment string) string {
	t.Helper()
	var sb strings.Builder
	for _, d := range []string{dir, filepath.Join(dir, "s")} {
		ents, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&sb, "%s %d %v\n", e.Name(), fi.Size(), fi.Mode())
		}
	}
	b, err := os.ReadFile(segment)
	if err != nil {
		t.Fatal(err)
	}
	return sb.String() + string(b)
}

package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component/componentstatus"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

func newServer(t *testing.T) *qwptest.Server {
	t.Helper()
	srv, err := qwptest.NewServer(qwptest.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// TestSalvageDeliversEveryFrameOnce salvages a healthy slot of two
// dictionary generations twice: the first run delivers every frame above
// the watermark into a table created with dedup keys, the second sends
// them again and adds no row. The slot is left as it was.
func TestSalvageDeliversEveryFrameOnce(t *testing.T) {
	srv := newServer(t)
	const ack = 5
	b := buildSlot(t, t.TempDir(), "questdb-primary", slotSpec{gens: 2, perGen: 150, ack: ack})
	before := slotState(t, b.dir, ".lock", ".lock.pid") // salvage takes the lock
	// Ack deleted the segments wholly at or below the watermark; the
	// oldest one left holds acknowledged frames and newer ones.
	oldest := scanOf(t, b.dir).Segments[0].Base
	if oldest > ack {
		t.Fatalf("the oldest segment starts at FSN %d: no acknowledged frame is left for --all", oldest)
	}
	want := b.rowsAbove(ack, nil)
	for run := 1; run <= 2; run++ {
		code, out, errOut := runTool(t, "salvage", b.dir, "--endpoint", srv.URL())
		if code != 0 {
			t.Fatalf("run %d: exit %d\n%s\n%s", run, code, out, errOut)
		}
		mustContain(t, out,
			fmt.Sprintf("sent:        %d frames, %d rows, acknowledged (FSN %d..%d)", b.frames-ack, want, ack+1, b.frames),
			fmt.Sprintf("skipped:     %d readable frames at or below acked FSN %d", ack-oldest+1, ack),
			"otel_metrics_gauge: a gauge table, from the frames' columns",
			"result:      complete")
		td, ok := srv.Rows("otel_metrics_gauge")
		if !ok || td.RowCount != want {
			t.Fatalf("run %d: the server holds %d rows, want %d", run, td.RowCount, want)
		}
		if !slices.Equal(td.DedupKeys, []string{"timestamp", "series_id"}) {
			t.Errorf("dedup keys %v, want the exporter's [timestamp series_id]", td.DedupKeys)
		}
	}
	// --all sends the acknowledged frames left in the slot too.
	all := b.rowsAbove(oldest-1, nil)
	code, out, _ := runTool(t, "salvage", b.dir, "--endpoint", srv.URL(), "--all")
	if code != 0 || strings.Contains(out, "skipped:") {
		t.Errorf("--all: exit %d\n%s", code, out)
	}
	mustContain(t, out, fmt.Sprintf("sent:        %d frames, %d rows, acknowledged (FSN %d..%d)", uint64(b.frames)-oldest+1, all, oldest, b.frames))
	if n := srv.RowCount("otel_metrics_gauge"); n != all {
		t.Errorf("after --all the server holds %d rows, want %d", n, all)
	}
	if before != slotState(t, b.dir, ".lock", ".lock.pid") {
		t.Error("salvage changed the slot's files")
	}
}

// TestSalvageSetAsideSlot follows the README's runbook for a set-aside
// slot once, end to end, on the case (issue 26 items 3 and 4): a
// byte flipped in the oldest of 4 segments. The exporter sets the slot
// aside; its DATA_LOSS line, data_loss_frames, inspect and salvage split
// the unacknowledged frames alike (readable + unreadable = all of them);
// salvage sends every intact frame, those after the damaged one included
// (the next segment's base places them), and says INCOMPLETE with the one
// damaged frame; only --accept-loss naming exactly that count deletes the
// slot; the running exporter's status returns to OK with set_aside_slots
// 0, and so does a collector started afresh on the same sf_dir.
func TestSalvageSetAsideSlot(t *testing.T) {
	srv := newServer(t)
	parent := t.TempDir()
	const ack = 3
	b := buildSlot(t, parent, "questdb-primary", slotSpec{gens: 2, perGen: 150, ack: ack})
	s := scanOf(t, b.dir)
	bad := s.Segments[0]
	if len(s.Segments) != 4 || bad.Base != ack+1 || len(bad.Frames) < 3 {
		t.Fatalf("the slot holds %d segments, the oldest FSN %d..%d; the test wants 4, the oldest unacknowledged with 3 frames or more",
			len(s.Segments), bad.Base, bad.End()-1)
	}
	flip(t, filepath.Join(b.dir, bad.Name), int64(bad.Frames[1])+30)
	damaged := bad.Base + 1 // FSN; the frames after it in its segment are intact
	unacked := uint64(b.frames) - ack

	// The collector starts: recovery sets the slot aside.
	col := startCollector(t, parent, srv.Addr())
	aside := filepath.Join(parent, "questdb-primary.unreplayable-1")
	lines := col.logs.FilterMessageSnippet("DATA_LOSS").All()
	if len(lines) != 1 {
		t.Fatalf("%d DATA_LOSS lines, want 1", len(lines))
	}
	fields := lines[0].ContextMap()
	readable, unreadable := fields["readable_unacked_frames"].(int64), fields["unreadable_frames"].(uint64)
	if uint64(readable) != unacked-1 || unreadable != 1 || fields["set_aside_as"] != aside {
		t.Fatalf("DATA_LOSS line: %d readable + %d unreadable frames, set aside as %v; want %d + 1 (of %d unacknowledged), %s",
			readable, unreadable, fields["set_aside_as"], unacked-1, unacked, aside)
	}
	if n := col.metric(t, "otelcol_exporter_questdb_data_loss_frames"); n != int64(unacked) {
		t.Errorf("data_loss_frames = %d, want %d (the set-aside slot's unacknowledged frames)", n, unacked)
	}
	col.waitStatus(t, componentstatus.StatusRecoverableError, 1)

	// 1. inspect
	_, insp, _ := runTool(t, "inspect", aside)
	mustContain(t, insp, fmt.Sprintf("unacked:     %d readable frames", readable),
		fmt.Sprintf("unreadable:  %d unacknowledged frames", unreadable),
		fmt.Sprintf("FSN %d..%d unreadable in %s at offset %d: CRC32C mismatch (1 damaged frames", damaged, damaged, bad.Name, bad.Frames[1]),
		fmt.Sprintf("FSN %d..%d readable in %s from offset %d: the valid frames after the damage", damaged+1, bad.End()-1, bad.Name, bad.Frames[2]))

	// 2. salvage: every intact frame, in FSN order.
	want := b.rowsAbove(ack, func(fsn uint64) bool { return fsn == damaged })
	code, out, _ := runTool(t, "salvage", aside, "--endpoint", srv.URL(), "--delete")
	if code != 1 {
		t.Errorf("exit %d, want 1 for an incomplete salvage", code)
	}
	mustContain(t, out,
		fmt.Sprintf("sent:        %d frames, %d rows, acknowledged (FSN %d, %d..%d)", readable, want, ack+1, damaged+1, b.frames),
		fmt.Sprintf("unreadable:  FSN %d..%d unreadable in %s at offset %d: CRC32C mismatch", damaged, damaged, bad.Name, bad.Frames[1]),
		"unsendable:  1 damaged frames",
		"result:      INCOMPLETE: 1 frames cannot be sent (unsendable, above), every other frame in scope was delivered; the slot is kept (--delete --accept-loss=1 deletes it",
		"delete:      not deleted: the salvage is incomplete")
	if strings.Contains(out, "valid frames after a damage whose FSNs nothing fixes") || strings.Contains(out, "not sent:") {
		t.Errorf("intact frames left unsent:\n%s", out)
	}
	if n := srv.RowCount("otel_metrics_gauge"); n != want {
		t.Errorf("the server holds %d rows, want %d", n, want)
	}
	if _, err := os.Stat(aside); err != nil {
		t.Errorf("the incomplete slot is gone: %v", err)
	}

	// 3. accept the loss: only its exact count deletes the slot.
	for _, wrong := range []int{2, 0} {
		code, out, _ = runTool(t, "salvage", aside, "--endpoint", srv.URL(), "--delete", fmt.Sprintf("--accept-loss=%d", wrong))
		if code != 1 {
			t.Errorf("--accept-loss=%d for 1 damaged frame: exit %d, want 1", wrong, code)
		}
		mustContain(t, out, fmt.Sprintf("not deleted: --accept-loss=%d does not name what the salvage left: 1 frames that cannot be sent (--accept-loss=1 accepts exactly them)", wrong))
		if _, err := os.Stat(aside); err != nil {
			t.Fatalf("--accept-loss=%d deleted the slot: %v", wrong, err)
		}
	}
	code, out, _ = runTool(t, "salvage", aside, "--endpoint", srv.URL(), "--delete", "--accept-loss=1")
	if code != 0 {
		t.Errorf("--accept-loss=1: exit %d, want 0\n%s", code, out)
	}
	mustContain(t, out, "result:      loss accepted: every other frame in scope was delivered; the 1 frames that cannot be sent (above) are lost (--accept-loss=1)",
		"delete:      the slot was deleted")
	if _, err := os.Stat(aside); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the slot whose loss was accepted is still there: %v", err)
	}
	if n := srv.RowCount("otel_metrics_gauge"); n != want {
		t.Errorf("after the salvages the server holds %d rows, want %d (dedup)", n, want)
	}

	// 4. status OK, set_aside_slots 0: in the running collector, and in
	// one started afresh on the same sf_dir.
	col.waitStatus(t, componentstatus.StatusOK, 0)
	col.shutdown(t)
	col = startCollector(t, parent, srv.Addr())
	col.waitStatus(t, componentstatus.StatusOK, 0)
	if n := col.logs.FilterMessageSnippet("DATA_LOSS").Len(); n != 0 {
		t.Errorf("the collector started after the runbook logged %d DATA_LOSS lines", n)
	}
}

// TestSalvageUnknownSymbolIDs loses the dictionary of generation 1 and the
// frame that defined its first symbols: the later frames of that generation
// (the intact ones after the damaged frame in its segment included, which
// the next segment's base places) use ids nobody can define, so each is
// reported and none is sent (one would poison the connection), while
// generation 0 is delivered. The report puts them under the dictionary's
// cause, names the missing file, and --accept-loss takes them with the
// damaged frame.
func TestSalvageUnknownSymbolIDs(t *testing.T) {
	srv := newServer(t)
	b := buildSlot(t, t.TempDir(), "s", slotSpec{gens: 2, perGen: 150})
	s := scanOf(t, b.dir)
	gen1 := s.Dict.Files()[len(s.Dict.Files())-1]
	if gen1.Generation != 1 || gen1.Legacy {
		t.Fatalf("the newest dictionary file is %+v, want generation 1's", gen1)
	}
	if err := os.Remove(filepath.Join(b.dir, gen1.Name)); err != nil {
		t.Fatal(err)
	}
	first1 := uint64(1)
	for b.gen[first1] == 0 {
		first1++
	}
	var seg sfqueue.SegmentScan
	var idx int
	for _, sg := range s.Segments {
		if first1 >= sg.Base && first1 < sg.End() {
			seg, idx = sg, int(first1-sg.Base)
		}
	}
	if idx+1 >= len(seg.Frames) || seg.End() == uint64(b.frames)+1 {
		t.Fatal("the test needs a frame of generation 1 after the damaged one in its segment, which is not the newest")
	}
	flip(t, filepath.Join(b.dir, seg.Name), int64(seg.Frames[idx])+30)

	code, out, _ := runTool(t, "salvage", b.dir, "--endpoint", srv.URL())
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	want := b.rowsAbove(0, func(f uint64) bool { return b.gen[f] == 1 })
	mustContain(t, out, fmt.Sprintf("sent:        %d frames, %d rows, acknowledged (FSN 1..%d)", first1-1, want, first1-1))
	refused := strings.Count(out, "a server would refuse it, poisoning the connection")
	if wantRefused := b.frames - int(first1); refused != wantRefused {
		t.Errorf("%d frames reported as refused, want %d (FSN %d..%d):\n%s", refused, wantRefused, first1+1, b.frames, out)
	}
	if !strings.Contains(out, "delta_start") && !strings.Contains(out, "symbol index out of range") {
		t.Errorf("the refusal does not name the unknown symbol ids:\n%s", out)
	}
	lost := b.frames - int(first1) + 1
	mustContain(t, out, "unsendable:  1 damaged frames",
		fmt.Sprintf("unsendable:  %d readable frames whose dictionary lacks the symbols they use (FSN %d..%d): generation 1: its dictionary file is missing",
			b.frames-int(first1), first1+1, b.frames),
		fmt.Sprintf("result:      INCOMPLETE: %d frames cannot be sent", lost))
	if n := srv.RowCount("otel_metrics_gauge"); n != want {
		t.Errorf("the server holds %d rows, want %d (generation 0 only)", n, want)
	}
	code, out, _ = runTool(t, "salvage", b.dir, "--endpoint", srv.URL(), "--delete", fmt.Sprintf("--accept-loss=%d", lost))
	if _, err := os.Stat(b.dir); code != 0 || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--accept-loss=%d: exit %d, the slot: %v\n%s", lost, code, err, out)
	}
}

// TestSalvageUnplaceableStrays: valid frames after a damage whose FSNs
// nothing fixes are not sent and are reported as such, apart from the
// damaged frames: with more damage between them (their count known, so the
// loss can be accepted), and in the newest segment, whose end is not
// recorded (a run of unknown end, which no --accept-loss accepts).
func TestSalvageUnplaceableStrays(t *testing.T) {
	t.Run("damage between them", func(t *testing.T) {
		srv := newServer(t)
		b := buildSlot(t, t.TempDir(), "s", slotSpec{gens: 2, perGen: 150, ack: 3})
		sg := scanOf(t, b.dir).Segments[0]
		if len(sg.Frames) != 4 {
			t.Fatalf("the oldest segment holds %d frames, the test wants 4", len(sg.Frames))
		}
		flip(t, filepath.Join(b.dir, sg.Name), int64(sg.Frames[0])+30)
		flip(t, filepath.Join(b.dir, sg.Name), int64(sg.Frames[2])+30)
		code, out, _ := runTool(t, "salvage", b.dir, "--endpoint", srv.URL(), "--delete")
		want := b.rowsAbove(sg.End()-1, nil)
		mustContain(t, out,
			fmt.Sprintf("sent:        %d frames, %d rows, acknowledged (FSN %d..%d)", uint64(b.frames)-sg.End()+1, want, sg.End(), b.frames),
			fmt.Sprintf("FSN %d..%d unreadable in %s at offset %d: CRC32C mismatch (2 valid frames follow it, first at offset %d, of unknown FSN: more damage lies between them)",
				sg.Base, sg.End()-1, sg.Name, sg.Frames[0], sg.Frames[1]),
			"unsendable:  2 damaged frames",
			"unsendable:  2 valid frames after a damage whose FSNs nothing fixes",
			"result:      INCOMPLETE: 4 frames cannot be sent",
			"not deleted: the salvage is incomplete")
		if code != 1 || srv.RowCount("otel_metrics_gauge") != want {
			t.Errorf("exit %d, %d rows on the server; want 1, %d", code, srv.RowCount("otel_metrics_gauge"), want)
		}
		code, out, _ = runTool(t, "salvage", b.dir, "--endpoint", srv.URL(), "--delete", "--accept-loss=4")
		if _, err := os.Stat(b.dir); code != 0 || !errors.Is(err, os.ErrNotExist) {
			t.Errorf("--accept-loss=4: exit %d, the slot: %v\n%s", code, err, out)
		}
	})
	t.Run("newest segment", func(t *testing.T) {
		srv := newServer(t)
		b := buildSlot(t, t.TempDir(), "s", slotSpec{gens: 2, perGen: 210})
		s := scanOf(t, b.dir)
		sg := s.Segments[len(s.Segments)-1]
		if len(sg.Frames) < 3 {
			t.Fatalf("the newest segment holds %d frames, the test wants 3 or more", len(sg.Frames))
		}
		flip(t, filepath.Join(b.dir, sg.Name), int64(sg.Frames[0])+30)
		code, out, _ := runTool(t, "salvage", b.dir, "--endpoint", srv.URL(), "--delete", fmt.Sprintf("--accept-loss=%d", len(sg.Frames)))
		want := b.rowsAbove(0, func(f uint64) bool { return f >= sg.Base })
		mustContain(t, out,
			fmt.Sprintf("sent:        %d frames, %d rows, acknowledged (FSN 1..%d)", sg.Base-1, want, sg.Base-1),
			fmt.Sprintf("FSN %d..? unreadable in %s at offset %d: CRC32C mismatch (%d valid frames follow it, first at offset %d, of unknown FSN: the newest segment's end is not recorded)",
				sg.Base, sg.Name, sg.Frames[0], len(sg.Frames)-1, sg.Frames[1]),
			fmt.Sprintf("unsendable:  %d valid frames after a damage whose FSNs nothing fixes", len(sg.Frames)-1),
			"and a damaged run of unknown end",
			"no --accept-loss applies",
			"not deleted: --accept-loss")
		if _, err := os.Stat(b.dir); code != 1 || err != nil || srv.RowCount("otel_metrics_gauge") != want {
			t.Errorf("exit %d, the slot %v, %d rows on the server; want 1, kept, %d", code, err, srv.RowCount("otel_metrics_gauge"), want)
		}
	})
}

// TestSalvageDamageToAckedFrames: only an acked frame is damaged, and the
// valid frames after it in its segment, placed by the next segment's base,
// run past the watermark. Recovery sets such a slot aside (the queue cannot
// replay past a damage); salvage delivers every unacked frame, so it is
// complete and --delete needs no --accept-loss.
func TestSalvageDamageToAckedFrames(t *testing.T) {
	const ack = 5
	srv := newServer(t)
	parent := t.TempDir()
	b := buildSlot(t, parent, "s", slotSpec{gens: 2, perGen: 150, ack: ack})
	sg := scanOf(t, b.dir).Segments[0]
	if sg.Base > ack || sg.End() <= ack+1 {
		t.Fatalf("the oldest segment holds FSN %d..%d, the test wants it to start at or below the ack %d and end past it", sg.Base, sg.End()-1, ack)
	}
	flip(t, filepath.Join(b.dir, sg.Name), int64(sg.Frames[0])+30)
	q, err := sfqueue.Open(sfqueue.Options{Dir: parent, SenderID: "s", MaxSegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	dl := q.Recovery().Unreplayable
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if dl == nil || dl.Frames != b.frames-ack || dl.UnreadableFrames != 0 {
		t.Fatalf("recovery: %v; want the slot set aside with %d readable, 0 unreadable unacked frames", dl, b.frames-ack)
	}
	aside := filepath.Join(parent, "s.unreplayable-1")
	code, out, _ := runTool(t, "salvage", aside, "--endpoint", srv.URL(), "--delete")
	want := b.rowsAbove(ack, nil)
	mustContain(t, out,
		fmt.Sprintf("sent:        %d frames, %d rows, acknowledged (FSN %d..%d)", b.frames-ack, want, ack+1, b.frames),
		"result:      complete", "delete:      the slot was deleted")
	if code != 0 || srv.RowCount("otel_metrics_gauge") != want {
		t.Errorf("exit %d, %d rows on the server; want 0, %d\n%s", code, srv.RowCount("otel_metrics_gauge"), want, out)
	}
}

func TestSalvageRefusesALockedSlot(t *testing.T) {
	srv := newServer(t)
	parent := t.TempDir()
	b := buildSlot(t, parent, "busy", slotSpec{gens: 1, perGen: 200})
	q, err := sfqueue.Open(sfqueue.Options{Dir: parent, SenderID: "busy", MaxSegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	code, out, errOut := runTool(t, "salvage", b.dir, "--endpoint", srv.URL())
	if code != 1 || out != "" {
		t.Errorf("exit %d, stdout %q; want 1 and nothing", code, out)
	}
	mustContain(t, errOut, "is in use", fmt.Sprintf("PID %d", os.Getpid()), "stop the collector that holds it")
	if len(srv.TableNames()) != 0 {
		t.Errorf("rows or tables reached the server: %v", srv.TableNames())
	}
}

func TestSalvageDeleteAfterCompleteSalvage(t *testing.T) {
	srv := newServer(t)
	b := buildSlot(t, t.TempDir(), "done", slotSpec{gens: 1, perGen: 200})
	code, out, errOut := runTool(t, "salvage", b.dir, "--endpoint", srv.URL(), "--delete")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	mustContain(t, out, "result:      complete", "delete:      the slot was deleted")
	if _, err := os.Stat(b.dir); !os.IsNotExist(err) {
		t.Errorf("the slot is still there: %v", err)
	}
	if n := srv.RowCount("otel_metrics_gauge"); n != b.rowsAbove(0, nil) {
		t.Errorf("the server holds %d rows, want %d", n, b.rowsAbove(0, nil))
	}
}

// TestSalvageTableDDL creates a renamed table with a promoted attribute
// twice: from the frames' columns alone, and from --config, which also
// gives the ttl and the endpoint.
func TestSalvageTableDDL(t *testing.T) {
	colType := func(td qwptest.TableData, name string) qwp.ColumnType {
		for _, c := range td.Columns {
			if c.Name == name {
				return c.Type
			}
		}
		return 0
	}
	spec := slotSpec{gens: 1, perGen: 200, table: "my_gauge", promoted: []string{"host.name"}}

	t.Run("from the frames", func(t *testing.T) {
		srv := newServer(t)
		b := buildSlot(t, t.TempDir(), "s", spec)
		code, out, errOut := runTool(t, "salvage", b.dir, "--endpoint", srv.URL())
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
		mustContain(t, out, "my_gauge: a gauge table, from the frames' columns, promoted attributes host_name")
		td, _ := srv.Rows("my_gauge")
		if td.RowCount != b.rowsAbove(0, nil) || !slices.Equal(td.DedupKeys, []string{"timestamp", "series_id"}) || colType(td, "host_name") != qwp.TypeSymbol {
			t.Errorf("my_gauge: %d rows, dedup %v, host_name %v", td.RowCount, td.DedupKeys, colType(td, "host_name"))
		}
	})
	t.Run("from --config", func(t *testing.T) {
		srv := newServer(t)
		dir := t.TempDir()
		b := buildSlot(t, dir, "s", spec)
		cfg := filepath.Join(dir, "collector.yaml")
		yaml := fmt.Sprintf(`receivers:
  otlp:
exporters:
  debug:
  questdb/main:
    endpoints: [%s]
    sf_dir: %s
    tables:
      gauge: my_gauge
    attributes_as_symbols: [host.name]
    metric_attributes_type: varchar
    ttl: 30d
`, srv.URL(), dir)
		if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runTool(t, "salvage", b.dir, "--config", cfg)
		// The frames wrote attributes as SYMBOL, the configuration says
		// VARCHAR: the table follows the configuration, QuestDB converts.
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
		mustContain(t, out, "my_gauge: as the configuration defines it", "endpoint:    "+srv.URL())
		td, _ := srv.Rows("my_gauge")
		if td.TTL != "30 DAYS" || colType(td, "attributes") != qwp.TypeVarchar || colType(td, "host_name") != qwp.TypeSymbol || td.RowCount != b.rowsAbove(0, nil) {
			t.Errorf("my_gauge: ttl %q, attributes %v, host_name %v, %d rows", td.TTL, colType(td, "attributes"), colType(td, "host_name"), td.RowCount)
		}
	})
	t.Run("config errors", func(t *testing.T) {
		b := buildSlot(t, t.TempDir(), "s", spec)
		cfg := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(cfg, []byte("exporters:\n  questdb/a:\n  questdb/b:\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, errOut := runTool(t, "salvage", b.dir, "--config", cfg)
		mustContain(t, errOut, "several questdb exporters (questdb/a, questdb/b): choose one with --exporter")
		_, _, errOut = runTool(t, "salvage", b.dir, "--config", cfg, "--exporter", "questdb/c")
		mustContain(t, errOut, `no exporter "questdb/c"`)
	})
}

// TestSalvageServerRefusal: QuestDB refuses a frame for its content, which
// stops the exporter's sender (SCHEMA_MISMATCH is terminal by default); the
// report names the frame and counts the ones left undelivered.
func TestSalvageServerRefusal(t *testing.T) {
	srv := newServer(t)
	b := buildSlot(t, t.TempDir(), "s", slotSpec{gens: 1, perGen: 200})
	// No catch-up precedes FSN 1 (its delta section starts at id 0, so the
	// connection needs no earlier ids): binary frame 4 carries FSN 4.
	if err := srv.RejectFrame(4, qwp.StatusSchemaMismatch, "column value: cannot convert"); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runTool(t, "salvage", b.dir, "--endpoint", srv.URL(), "--delete")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	want := b.rows[1] + b.rows[2] + b.rows[3]
	mustContain(t, out,
		fmt.Sprintf("sent:        3 frames, %d rows, acknowledged (FSN 1..3)", want),
		fmt.Sprintf("undelivered: %d frames (FSN 4..%d): the sender stopped at FSN 4: SCHEMA_MISMATCH", b.frames-3, b.frames),
		"cannot convert",
		"delete:      not deleted")
	if n := srv.RowCount("otel_metrics_gauge"); n != int64(want) {
		t.Errorf("the server holds %d rows, want %d", n, want)
	}
}

// TestSalvageUnreachable: QuestDB cannot be asked to create the tables, so
// nothing is sent (a table QWP auto-creates would lack dedup keys).
func TestSalvageUnreachable(t *testing.T) {
	b := buildSlot(t, t.TempDir(), "s", slotSpec{gens: 1, perGen: 200})
	code, out, errOut := runTool(t, "salvage", b.dir, "--endpoint", "ws://127.0.0.1:1", "--timeout", "2s")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	mustContain(t, errOut, "creating the tables before any frame is sent", "could not be asked")
	mustContain(t, out, "sent:        0 frames")
}

// TestSalvageSetAsideCampaign damages a slot in each class of the
// campaign, lets the queue's recovery open it, and salvages every slot it
// set aside, twice: the first run delivers every readable frame above the
// set-aside slot's watermark, the second adds no row. The classes recovery
// replays (its rule, sfqueue/doc.go) leave nothing to salvage. Short mode
// recovers in flush durability only; the set-aside rule is the same in all.
func TestSalvageSetAsideCampaign(t *testing.T) {
	modes := []sfqueue.Durability{sfqueue.DurabilityFlush}
	if !testing.Short() {
		modes = append(modes, sfqueue.DurabilityPeriodic, sfqueue.DurabilityMemory)
	}
	replayed := map[string]bool{"newest tail": true, "newest header torn at its creation": true, "zeroed watermark": true, "torn dictionary": true}
	salvaged := 0
	for _, mode := range modes {
		for _, c := range damageClasses {
			t.Run(fmt.Sprintf("%v/%s", mode, c.name), func(t *testing.T) {
				srv := newServer(t)
				parent := t.TempDir()
				b := buildSlot(t, parent, "s", slotSpec{gens: 2, perGen: 150, ack: 3})
				c.apply(t, b.dir, scanOf(t, b.dir))
				q, err := sfqueue.Open(sfqueue.Options{Dir: parent, SenderID: "s", MaxSegmentBytes: 4096, Durability: mode})
				if err != nil {
					t.Fatal(err)
				}
				setAside := q.Recovery().Unreplayable != nil
				if err := q.Close(); err != nil {
					t.Fatal(err)
				}
				if setAside == replayed[c.name] {
					t.Fatalf("set aside: %v; the recovery rule says %v", setAside, !replayed[c.name])
				}
				if !setAside {
					return
				}
				aside := filepath.Join(parent, "s.unreplayable-1")
				s := scanOf(t, aside)
				var want int64
				frames := 0
				if err := s.EachFrame(func(fsn uint64, _ string, _ int64, _ []byte) error {
					if fsn > s.Watermark.Acked {
						want += int64(b.rows[fsn])
						frames++
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if frames == 0 {
					t.Fatal("the set-aside slot holds no readable unacknowledged frame: nothing to prove")
				}
				for run := 1; run <= 2; run++ {
					code, out, errOut := runTool(t, "salvage", aside, "--endpoint", srv.URL())
					if code != 1 || !strings.Contains(out, fmt.Sprintf("sent:        %d frames, %d rows", frames, want)) {
						t.Fatalf("run %d: exit %d, want 1 (unreadable frames) and %d frames, %d rows sent\n%s\n%s", run, code, frames, want, out, errOut)
					}
					if n := srv.RowCount("otel_metrics_gauge"); n != want {
						t.Fatalf("run %d: the server holds %d rows, want %d", run, n, want)
					}
				}
				salvaged++
			})
		}
	}
	if want := len(modes) * (len(damageClasses) - len(replayed)); salvaged != want {
		t.Errorf("%d set-aside slots salvaged, want %d", salvaged, want)
	}
}

// toFormat1 rewrites every segment of the slot dir in segment format 1,
// as a release before frames carried their row count wrote them: version 1
// in the header, frames of length, payload and CRC32C only.
func toFormat1(t *testing.T, dir string) {
	t.Helper()
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	s := scanOf(t, dir)
	files := map[string][]byte{}
	for _, seg := range s.Segments {
		h := make([]byte, 24)
		binary.LittleEndian.PutUint32(h, 0x31465153) // "SQF1"
		binary.LittleEndian.PutUint32(h[4:], 1)
		binary.LittleEndian.PutUint64(h[8:], seg.Base)
		binary.LittleEndian.PutUint32(h[20:], crc32.Checksum(h[:20], castagnoli))
		files[seg.Name] = h
	}
	if err := s.EachFrame(func(_ uint64, file string, _ int64, payload []byte) error {
		start := len(files[file])
		b := binary.LittleEndian.AppendUint32(files[file], uint32(len(payload)))
		b = append(b, payload...)
		files[file] = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFormat1SlotInspectedAndSalvaged: a slot an earlier release wrote
// (segment format 1, frames without a row count) is inspected, saying that
// its frames do not record their rows, and salvaged completely.
func TestFormat1SlotInspectedAndSalvaged(t *testing.T) {
	srv := newServer(t)
	b := buildSlot(t, t.TempDir(), "questdb-primary", slotSpec{gens: 2, perGen: 150, ack: 3})
	toFormat1(t, b.dir)
	s := scanOf(t, b.dir)
	for _, seg := range s.Segments {
		if seg.Version != 1 || seg.Items != nil || seg.Damage != nil || seg.HeaderErr != nil {
			t.Fatalf("%s after the rewrite: version %d, items %v, damage %v, header %v", seg.Name, seg.Version, seg.Items, seg.Damage, seg.HeaderErr)
		}
	}
	code, out, errOut := runTool(t, "inspect", b.dir)
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, errOut)
	}
	mustContain(t, out, "format:      segment format 1 (an older release's",
		fmt.Sprintf("%s  FSN %d..%d (%d frames, format 1: rows per frame not recorded)", s.Segments[0].Name, s.Segments[0].Base, s.Segments[0].End()-1, len(s.Segments[0].Frames)),
		fmt.Sprintf("unacked:     %d readable frames (0 rows and %d frames of format 1 whose rows are not recorded)", b.frames-3, b.frames-3))
	want := b.rowsAbove(3, nil)
	code, out, errOut = runTool(t, "salvage", b.dir, "--endpoint", srv.URL())
	if code != 0 {
		t.Fatalf("salvage: exit %d\n%s\n%s", code, out, errOut)
	}
	mustContain(t, out, fmt.Sprintf("sent:        %d frames, %d rows, acknowledged (FSN 4..%d)", b.frames-3, want, b.frames), "result:      complete")
	if n := srv.RowCount("otel_metrics_gauge"); n != want {
		t.Errorf("the server holds %d rows, want %d", n, want)
	}
}

// TestSalvageCredentials salvages into a server that requires a password:
// from --password-file, and from a --config whose ${env:...} and ${...}
// references the collector's resolver expands; a wrong password delivers
// nothing, and --password with --password-file is refused.
func TestSalvageCredentials(t *testing.T) {
	srv, err := qwptest.NewServer(qwptest.Options{Addr: "127.0.0.1:0", Username: "admin", Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	// Each run writes its own table, so that rows found are its own.
	spec := func(table string) slotSpec { return slotSpec{gens: 1, perGen: 200, table: table} }
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	delivered := func(b *builtSlot) {
		t.Helper()
		td, _ := srv.Rows(b.table)
		if td.RowCount != b.rowsAbove(0, nil) {
			t.Errorf("%s: %d rows, want %d", b.table, td.RowCount, b.rowsAbove(0, nil))
		}
	}

	t.Run("wrong password", func(t *testing.T) {
		b := buildSlot(t, t.TempDir(), "s", spec("g_wrong"))
		code, out, errOut := runTool(t, "salvage", b.dir, "--endpoint", srv.URL(), "--username", "admin",
			"--password-file", write("wrong", "nope\n"), "--timeout", "5s")
		if code != 1 {
			t.Errorf("exit %d, want 1\n%s\n%s", code, out, errOut)
		}
		mustContain(t, out, "sent:        0 frames")
		if _, ok := srv.Rows(b.table); ok {
			t.Errorf("%s exists after a salvage with a wrong password", b.table)
		}
	})
	t.Run("password file", func(t *testing.T) {
		b := buildSlot(t, t.TempDir(), "s", spec("g_file"))
		code, out, errOut := runTool(t, "salvage", b.dir, "--endpoint", srv.URL(), "--username", "admin",
			"--password-file", write("pw", "s3cret\r\nignored\n"))
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
		delivered(b)
	})
	t.Run("config expands the environment", func(t *testing.T) {
		t.Setenv("SLOT_TEST_USER", "admin")
		t.Setenv("SLOT_TEST_PASSWORD", "s3cret")
		b := buildSlot(t, t.TempDir(), "s", spec("g_env"))
		cfg := write("collector.yaml", fmt.Sprintf(`exporters:
  questdb:
    endpoints: [%s]
    username: ${SLOT_TEST_USER}
    password: ${env:SLOT_TEST_PASSWORD}
`, srv.URL()))
		code, out, errOut := runTool(t, "salvage", b.dir, "--config", cfg)
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
		delivered(b)
	})
	t.Run("bad usage", func(t *testing.T) {
		b := buildSlot(t, t.TempDir(), "s", spec("g_usage"))
		_, _, errOut := runTool(t, "salvage", b.dir, "--endpoint", srv.URL(), "--password", "x", "--password-file", write("pw2", "y"))
		mustContain(t, errOut, "give --password or --password-file, not both")
		_, _, errOut = runTool(t, "salvage", b.dir, "--endpoint", srv.URL(), "--token-file", filepath.Join(dir, "missing"))
		mustContain(t, errOut, "--token-file: open ")
		_, _, errOut = runTool(t, "salvage", b.dir, "--endpoint", srv.URL(), "--token-file", write("empty", "\n"))
		mustContain(t, errOut, "the first line is empty")
	})
}

// TestSalvageTornTail: the newest segment's last frame torn by a crash, or
// the whole newest segment when a crash tore its header before its first
// fsync (a torn creation), is lost accepted data, unless the exporter ran
// with sf_durability: flush, where no caller was told it was stored: then
// the salvage is complete (and --delete may remove the slot); without
// --config it is counted, with a hint. A newest header damaged after the
// watermark recorded its frames as on disk is damage, not a torn tail.
func TestSalvageTornTail(t *testing.T) {
	classes := map[string]damage{}
	for _, d := range damageClasses {
		classes[d.name] = d
	}
	srv := newServer(t)
	damaged := func(t *testing.T, class string) *builtSlot {
		b := buildSlot(t, t.TempDir(), "s", slotSpec{gens: 1, perGen: 200})
		classes[class].apply(t, b.dir, scanOf(t, b.dir))
		return b
	}
	config := func(t *testing.T, durability string) string {
		cfg := filepath.Join(t.TempDir(), "collector.yaml")
		yaml := fmt.Sprintf("exporters:\n  questdb:\n    endpoints: [%s]\n    sf_dir: %s\n    sf_durability: %s\n", srv.URL(), t.TempDir(), durability)
		if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	// The slots are written in memory durability, which .ack-watermark
	// records: a torn newest tail is that mode's loss window whatever the
	// configuration says, and the salvage is complete without it.
	for _, cfg := range []string{"", "periodic", "flush"} {
		t.Run("newest tail/config "+cfg, func(t *testing.T) {
			b := damaged(t, "newest tail")
			args := []string{"salvage", b.dir, "--endpoint", srv.URL(), "--delete"}
			if cfg != "" {
				args = []string{"salvage", b.dir, "--config", config(t, cfg), "--delete"}
			}
			code, out, errOut := runTool(t, args...)
			if code != 0 || strings.Contains(out, "unreadable:") || strings.Contains(out, "torn tail:") {
				t.Fatalf("exit %d, want 0 with the tail reported lost in the window\n%s\n%s", code, out, errOut)
			}
			mustContain(t, out, "lost:        FSN", "inside the loss window of sf_durability: memory", "complete: every frame in scope was delivered",
				"the slot was deleted")
		})
	}
	// Without .ack-watermark the mode is what --config says, and unknown
	// without it.
	tear := "newest header torn at its creation"
	t.Run(tear+"/no config", func(t *testing.T) {
		b := damaged(t, tear)
		code, out, errOut := runTool(t, "salvage", b.dir, "--endpoint", srv.URL(), "--delete")
		if code != 1 {
			t.Errorf("exit %d, want 1\n%s\n%s", code, out, errOut)
		}
		mustContain(t, out, "unreadable:  FSN", "(a torn tail: accepted data the crash lost, unless the exporter ran with sf_durability: flush",
			"INCOMPLETE", "not deleted")
	})
	t.Run(tear+"/periodic", func(t *testing.T) {
		b := damaged(t, tear)
		code, out, errOut := runTool(t, "salvage", b.dir, "--config", config(t, "periodic"), "--delete")
		if code != 0 || strings.Contains(out, "torn tail:   FSN") || strings.Contains(out, "unreadable:") {
			t.Errorf("exit %d, want 0 with the tail reported lost in the window\n%s\n%s", code, out, errOut)
		}
		mustContain(t, out, "lost:        FSN", "inside the loss window of sf_durability: periodic", "the slot was deleted")
	})
	t.Run(tear+"/flush", func(t *testing.T) {
		b := damaged(t, tear)
		code, out, errOut := runTool(t, "salvage", b.dir, "--config", config(t, "flush"), "--delete")
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
		mustContain(t, out, "torn tail:   FSN", "nothing accepted is lost", "complete: every frame in scope was delivered")
		if strings.Contains(out, "unreadable:") || strings.Contains(out, "lost:") {
			t.Errorf("a flush-mode torn tail counted unreadable or lost:\n%s", out)
		}
		if _, err := os.Stat(b.dir); !os.IsNotExist(err) {
			t.Errorf("slot not deleted after a complete salvage: %v", err)
		}
	})
	t.Run("newest header damaged after it was on disk", func(t *testing.T) {
		b := damaged(t, "newest header bit flip")
		code, out, errOut := runTool(t, "salvage", b.dir, "--config", config(t, "flush"), "--delete")
		if code != 1 {
			t.Errorf("exit %d, want 1\n%s\n%s", code, out, errOut)
		}
		mustContain(t, out, "unreadable:  FSN", "unusable segment header", "INCOMPLETE", "not deleted")
		if strings.Contains(out, "torn tail") {
			t.Errorf("a damaged header the watermark recorded frames of is called a torn tail:\n%s", out)
		}
	})
}

// TestDictionaryRefusalFollowsQuestDB: a symbol id beyond the dictionary
// (qwptest's UnknownSymbol, QuestDB's "symbol index out of range") and a
// delta past the dictionary are dictionary refusals; other errors are not,
// whatever their text.
func TestDictionaryRefusalFollowsQuestDB(t *testing.T) {
	for _, tc := range []struct {
		status  qwp.Status
		msg     string
		unknown bool
		want    bool
	}{
		{qwp.StatusParseError, "symbol index out of range: 7", true, true},
		{qwp.StatusDictionaryGap, "delta_start 5 is past the dictionary size 3", false, true},
		{qwp.StatusParseError, "symbol column data truncated: expected null bitmap", false, false},
		{qwp.StatusParseError, `table block 0: table "symbol index out of range: " column "s" (SYMBOL): symbol column data truncated`, false, false},
	} {
		err := fmt.Errorf("decoding: %w", &qwptest.StatusError{Status: tc.status, Msg: tc.msg, UnknownSymbol: tc.unknown})
		if got := dictionaryRefusal(&qwptest.Decoder{}, nil, err); got != tc.want {
			t.Errorf("%s %q: dictionary refusal %v, want %v", tc.status, tc.msg, got, tc.want)
		}
	}
}

// TestDictionaryRefusalFromTheDecoder: the refusal of a symbol id past the
// dictionary, as qwptest's decoder (the only decoder salvage runs) words
// it, is a dictionary refusal; the message's delta section alone says
// nothing wrong, so only the text can tell.
func TestDictionaryRefusalFromTheDecoder(t *testing.T) {
	for id, text := range map[uint64]string{
		5:       "symbol index out of range: 5 ",
		1 << 31: "symbol index out of int range: 2147483648 ",
	} {
		e := qwp.NewEncoder(qwp.NewMemDict(), qwp.EncoderOptions{DeltaSymbolDict: true})
		tb, err := e.Table("t")
		if err != nil {
			t.Fatal(err)
		}
		c, err := tb.Column("s", qwp.TypeSymbol)
		if err != nil {
			t.Fatal(err)
		}
		tb.SymbolString(c, "a")
		if err := tb.EndRow(); err != nil {
			t.Fatal(err)
		}
		msg := e.Finish(nil)
		// The message ends with the row's symbol id, 0 ("a", the delta
		// section's one entry): put id in its place.
		if msg[len(msg)-1] != 0 {
			t.Fatalf("the message % x does not end with symbol id 0", msg)
		}
		msg = binary.AppendUvarint(msg[:len(msg)-1], id)
		binary.LittleEndian.PutUint32(msg[8:qwp.HeaderSize], uint32(len(msg)-qwp.HeaderSize))
		dec := &qwptest.Decoder{}
		_, err = dec.Decode(msg)
		if err == nil || !strings.Contains(err.Error(), text) {
			t.Fatalf("symbol id %d: %v, want an error with %q", id, err, text)
		}
		if !dictionaryRefusal(dec, msg, err) {
			t.Errorf("symbol id %d: %v is not a dictionary refusal", id, err)
		}
	}
}

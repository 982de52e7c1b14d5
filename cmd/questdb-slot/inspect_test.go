package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

func TestInspectHealthySlot(t *testing.T) {
	parent := t.TempDir()
	b := buildSlot(t, parent, "questdb-primary", slotSpec{gens: 2, perGen: 150, ack: 3})
	before := slotState(t, b.dir)
	scan := scanOf(t, b.dir)
	var frames, bytes, rows int
	if err := scan.EachFrame(func(fsn uint64, _ string, _ int64, p []byte) error {
		if fsn > 3 {
			frames, bytes, rows = frames+1, bytes+len(p), rows+b.rows[fsn]
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runTool(t, "inspect", b.dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	last := uint64(b.frames)
	want := []string{
		"format:      segment format 2",
		fmt.Sprintf("lock:        free (.lock.pid names process %d, which holds no lock: /proc/locks lists no lock on .lock)", os.Getpid()),
		"watermark:   acked FSN 3,",
		fmt.Sprintf("generation 0: %d entries", len(scan.Dict.Entries(0))),
		fmt.Sprintf("generation 1: %d entries", len(scan.Dict.Entries(1))),
		fmt.Sprintf("segments:    %d", len(scan.Segments)),
		fmt.Sprintf("unacked:     %d readable frames (%d rows), %d payload bytes, above acked FSN 3", frames, rows, bytes),
		fmt.Sprintf("first:       FSN 4 (dictionary generation %d): %d rows in otel_metrics_gauge; row timestamps %s .. %s",
			b.gen[4], b.rows[4], nanosUTC(b.minTS[4]), nanosUTC(b.maxTS[4])),
		fmt.Sprintf("last:        FSN %d (dictionary generation 1): %d rows in otel_metrics_gauge; row timestamps %s .. %s",
			last, b.rows[last], nanosUTC(b.minTS[last]), nanosUTC(b.maxTS[last])),
	}
	for _, seg := range scan.Segments {
		segRows := 0
		for f := seg.Base; f < seg.End(); f++ {
			segRows += b.rows[f]
		}
		want = append(want, fmt.Sprintf("%s  FSN %d..%d (%d frames, %d rows), %d bytes", seg.Name, seg.Base, seg.End()-1, len(seg.Frames), segRows, seg.Size))
	}
	mustContain(t, out, want...)
	if strings.Contains(out, "unreadable") {
		t.Errorf("a healthy slot has no unreadable range:\n%s", out)
	}
	if len(scan.Segments) < 3 {
		t.Errorf("the slot spans %d segments; the damage tests need at least 3", len(scan.Segments))
	}
	if before != slotState(t, b.dir) {
		t.Error("inspect changed the slot's files")
	}
}

// flip inverts one byte of file at off.
func flip(t *testing.T, file string, off int64) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// zero overwrites the first n bytes of file with zeros.
func zero(t *testing.T, file string, n int) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, n), 0); err != nil {
		t.Fatal(err)
	}
}

// damage is one way to damage a slot of several segments.
type damage struct {
	name string
	// apply damages the slot and returns what inspect's output must hold.
	apply func(t *testing.T, dir string, s *sfqueue.SlotScan) []string
}

func segPath(dir string, s *sfqueue.SlotScan, i int) string {
	return filepath.Join(dir, s.Segments[i].Name)
}

// frameRange is the start of inspect's line for a damaged run that begins
// at frame f of segment i.
func frameRange(s *sfqueue.SlotScan, i, f int, tail string) string {
	sg := s.Segments[i]
	return fmt.Sprintf("FSN %d..%s unreadable in %s at offset %d: ", sg.Base+uint64(f), tail, sg.Name, sg.Frames[f])
}

// placedRange is the readable range inspect lists for segment i's valid
// frames from frame f on, after damage before f, placed by the next
// segment's base.
func placedRange(s *sfqueue.SlotScan, i, f int) string {
	sg := s.Segments[i]
	return fmt.Sprintf("FSN %d..%d readable in %s from offset %d: the valid frames after the damage, placed by the next segment's base FSN %d",
		sg.Base+uint64(f), s.Segments[i+1].Base-1, sg.Name, sg.Frames[f], s.Segments[i+1].Base)
}

// markFsynced rewrites .ack-watermark as a periodic or flush writer's
// Close leaves it, recording every published frame as fsynced: the test
// slots are written in memory durability, whose Close records the active
// segment as published, not fsynced.
func markFsynced(t *testing.T, dir string) {
	t.Helper()
	p := filepath.Join(dir, ".ack-watermark")
	b, err := os.ReadFile(p)
	if err != nil || len(b) != 36 {
		t.Fatalf("read %s: %d bytes, %v", p, len(b), err)
	}
	copy(b[16:24], b[24:32]) // synced = published
	binary.LittleEndian.PutUint32(b[32:], crc32.Checksum(b[:32], crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// damageClasses are the campaign's classes of damage: bit flips in a
// header, in frame 0, mid-segment, in the last frame of an older segment
// and in the newest tail; a truncation; a deleted middle segment; a zeroed
// watermark; a torn dictionary.
var damageClasses = []damage{
	{"header bit flip", func(t *testing.T, dir string, s *sfqueue.SlotScan) []string {
		flip(t, segPath(dir, s, 1), 9)
		return []string{fmt.Sprintf("FSN %d..%d unreadable in %s at offset 0: unusable segment header: header CRC mismatch",
			s.Segments[1].Base, s.Segments[2].Base-1, s.Segments[1].Name), "header unusable"}
	}},
	{"frame 0 of the oldest segment", func(t *testing.T, dir string, s *sfqueue.SlotScan) []string {
		flip(t, segPath(dir, s, 0), int64(s.Segments[0].Frames[0])+20)
		// The frames after it are placed by the next segment's base.
		return []string{frameRange(s, 0, 0, fmt.Sprint(s.Segments[0].Base)) + "CRC32C mismatch (1 damaged frames; ", placedRange(s, 0, 1)}
	}},
	{"mid-segment", func(t *testing.T, dir string, s *sfqueue.SlotScan) []string {
		flip(t, segPath(dir, s, 1), int64(s.Segments[1].Frames[1])+30)
		return []string{frameRange(s, 1, 1, fmt.Sprint(s.Segments[1].Base+1)) + "CRC32C mismatch (1 damaged frames; ", placedRange(s, 1, 2)}
	}},
	{"last frame of an older segment", func(t *testing.T, dir string, s *sfqueue.SlotScan) []string {
		n := len(s.Segments[1].Frames) - 1
		flip(t, segPath(dir, s, 1), int64(s.Segments[1].Frames[n])+30)
		return []string{frameRange(s, 1, n, fmt.Sprint(s.Segments[2].Base-1)) + "CRC32C mismatch"}
	}},
	{"newest header torn at its creation", func(t *testing.T, dir string, s *sfqueue.SlotScan) []string {
		// The header's write lost, the frames' kept, and no .ack-watermark
		// recorded a frame of the segment as on disk: no fsync of it ran.
		i := len(s.Segments) - 1
		sg := s.Segments[i]
		zero(t, segPath(dir, s, i), 24)
		if err := os.Remove(filepath.Join(dir, ".ack-watermark")); err != nil {
			t.Fatal(err)
		}
		return []string{
			fmt.Sprintf("%s  base FSN %d, header unusable: header CRC mismatch; a torn creation (no frame of it was recorded on disk), which recovery deletes: its %d frames are a torn tail",
				sg.Name, sg.Base, len(sg.Frames)),
			fmt.Sprintf("FSN %d..%d unreadable in %s at offset 0: torn creation: ", sg.Base, sg.End()-1, sg.Name),
			"[the durability mode's loss window: accepted, never fsynced, lost to the crash; recovery counts them as torn]",
			fmt.Sprintf("unreadable:  %d unacknowledged frames", len(sg.Frames)),
		}
	}},
	{"newest header bit flip", func(t *testing.T, dir string, s *sfqueue.SlotScan) []string {
		// .ack-watermark recorded its frames as fsynced: damage, not a
		// torn creation.
		i := len(s.Segments) - 1
		flip(t, segPath(dir, s, i), 9)
		markFsynced(t, dir)
		return []string{fmt.Sprintf("FSN %d..? unreadable in %s at offset 0: unusable segment header: header CRC mismatch\n",
			s.Segments[i].Base, s.Segments[i].Name)}
	}},
	{"newest tail", func(t *testing.T, dir string, s *sfqueue.SlotScan) []string {
		i := len(s.Segments) - 1
		n := len(s.Segments[i].Frames) - 1
		flip(t, segPath(dir, s, i), int64(s.Segments[i].Frames[n])+30)
		fsn := s.Segments[i].Base + uint64(n)
		return []string{frameRange(s, i, n, fmt.Sprint(fsn)) + "CRC32C mismatch", "unreadable:  1 unacknowledged frames"}
	}},
	{"truncation", func(t *testing.T, dir string, s *sfqueue.SlotScan) []string {
		if err := os.Truncate(segPath(dir, s, 1), int64(s.Segments[1].Frames[1])+14); err != nil {
			t.Fatal(err)
		}
		return []string{frameRange(s, 1, 1, fmt.Sprint(s.Segments[2].Base-1)) + "frame length"}
	}},
	{"deleted middle segment", func(t *testing.T, dir string, s *sfqueue.SlotScan) []string {
		if err := os.Remove(segPath(dir, s, 1)); err != nil {
			t.Fatal(err)
		}
		return []string{fmt.Sprintf("FSN %d..%d unreadable: missing: %s ends at FSN %d", s.Segments[1].Base, s.Segments[2].Base-1,
			s.Segments[0].Name, s.Segments[1].Base-1)}
	}},
	{"zeroed watermark", func(t *testing.T, dir string, s *sfqueue.SlotScan) []string {
		if err := os.WriteFile(filepath.Join(dir, ".ack-watermark"), make([]byte, 24), 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{"watermark:   unusable (", "above acked FSN 0"}
	}},
	{"torn dictionary", func(t *testing.T, dir string, s *sfqueue.SlotScan) []string {
		f := s.Dict.Files()[len(s.Dict.Files())-1] // generation 1, the newest
		if err := os.Truncate(filepath.Join(dir, f.Name), f.Size-3); err != nil {
			t.Fatal(err)
		}
		es := s.Dict.Entries(1)
		intact := f.Size - int64(12+len(es[len(es)-1])+4) // the last record is cut
		return []string{fmt.Sprintf("%s: %d bytes, %d intact, generation 1", f.Name, f.Size-3, intact),
			fmt.Sprintf("damage: %s: record at offset %d", f.Name, intact),
			fmt.Sprintf("generation 1: %d entries (1 of them rebuilt from the frames' own delta sections)", len(es))}
	}},
}

// TestInspectDamage damages a healthy slot one way at a time and checks
// that inspect names the unreadable FSN range with the file and the offset
// of the damage, and that it changes no file.
func TestInspectDamage(t *testing.T) {
	for _, c := range damageClasses {
		t.Run(c.name, func(t *testing.T) {
			b := buildSlot(t, t.TempDir(), "questdb-primary", slotSpec{gens: 2, perGen: 150})
			want := c.apply(t, b.dir, scanOf(t, b.dir))
			before := slotState(t, b.dir)
			code, out, errOut := runTool(t, "inspect", b.dir)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			mustContain(t, out, want...)
			if before != slotState(t, b.dir) {
				t.Error("inspect changed the slot's files")
			}
		})
	}
}

// TestInspectLiveSlot inspects a slot an open queue holds, with a frame
// half-written at its tail: inspect names the live holder, takes no lock
// (the queue keeps working), and does not call the tail corruption.
func TestInspectLiveSlot(t *testing.T) {
	b, q := openLiveSlot(t)
	defer q.Close()
	payload := append([]byte{0, 0, 0, 0}, make([]byte, 40)...)
	fsn, err := q.Append(context.Background(), payload)
	if err != nil {
		t.Fatal(err)
	}
	s := scanOf(t, b.dir)
	newest := s.Segments[len(s.Segments)-1]
	// The next frame's length and half its payload: a write in progress.
	f, err := os.OpenFile(filepath.Join(b.dir, newest.Name), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{100, 0, 0, 0, 1, 2, 3, 4, 5}, newest.ValidEnd); err != nil {
		t.Fatal(err)
	}
	f.Close()

	code, out, errOut := runTool(t, "inspect", b.dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	mustContain(t, out,
		fmt.Sprintf("lock:        held by live process %d (/proc/locks)", os.Getpid()),
		fmt.Sprintf("FSN %d..%d unreadable in %s at offset %d", fsn+1, fsn+1, newest.Name, newest.ValidEnd),
		"[being written by the live holder: not corruption]")
	if strings.Contains(out, "unreadable:  ") {
		t.Errorf("the live tail is counted as unreadable:\n%s", out)
	}
	// The queue still holds its lock and works.
	if _, err := sfqueue.LockSlot(b.dir); err == nil {
		t.Error("the slot's lock was free while the queue held it")
	}
	if _, err := q.Append(context.Background(), payload); err != nil {
		t.Errorf("the live queue failed after inspect: %v", err)
	}
}

// TestInspectDrainedSlot: a slot whose frames were all acknowledged has no
// segment left, which inspect reports as such, not as damage.
func TestInspectDrainedSlot(t *testing.T) {
	parent := t.TempDir()
	q, err := sfqueue.Open(sfqueue.Options{Dir: parent, SenderID: "s", Durability: sfqueue.DurabilityMemory})
	if err != nil {
		t.Fatal(err)
	}
	fsn, err := q.Append(context.Background(), []byte("frame"))
	if err != nil {
		t.Fatal(err)
	}
	q.Ack(fsn)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runTool(t, "inspect", filepath.Join(parent, "s"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	mustContain(t, out, "format:      no segments: every frame was acknowledged and deleted", "segments:    0",
		"unacked:     0 readable frames")
	if strings.Contains(out, "no intact segment header") {
		t.Errorf("a drained slot reported as damaged:\n%s", out)
	}
}

// TestInspectLegacySlot reads the slot fixture written before dictionary
// generations had files of their own (sender/testdata/slot-v1).
func TestInspectLegacySlot(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "slot-v1")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "sender", "testdata", "slot-v1"))); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runTool(t, "inspect", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	mustContain(t, out,
		".symbol-dict: 294 bytes, 294 intact, every generation (the layout before per-generation files",
		"generation 0: 7 entries", "generation 1: 7 entries",
		"format:      segment format 1 (an older release's: read, but its frames do not record their rows)",
		"00000000000000000001.sfseg  FSN 1..10 (10 frames, format 1: rows per frame not recorded)",
		"unacked:     10 readable frames (0 rows and 10 frames of format 1 whose rows are not recorded)",
		"FSN 1..10 readable in 00000000000000000001.sfseg from offset 24",
		"first:       FSN 1 (dictionary generation 0): 10 rows in t; row timestamps 2023-11-14T22:13:20Z .. 2023-11-14T22:13:20.000000009Z",
		"last:        FSN 10 (dictionary generation 1): no table (dictionary entries or a bare commit)")
}

// TestInspectLiveSlotUnderLoad runs inspect again and again while the
// queue holding the slot appends frames and acknowledges them, so segments
// fill, appear and are deleted while inspect reads: none of that may be
// reported as corruption.
func TestInspectLiveSlotUnderLoad(t *testing.T) {
	parent := t.TempDir()
	buildSlot(t, parent, "busy", slotSpec{gens: 1, perGen: 200})
	q, err := sfqueue.Open(sfqueue.Options{Dir: parent, SenderID: "busy", MaxSegmentBytes: 4096, Durability: sfqueue.DurabilityMemory})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		// Stored payloads: generation 0, then a rowless QWP message.
		payload := append([]byte{0, 0, 0, 0}, qwp.AppendCommit(nil)...)
		payload = append(payload, make([]byte, 300)...)
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			fsn, err := q.Append(context.Background(), payload)
			if err != nil {
				done <- err
				return
			}
			if fsn > 20 {
				q.Ack(fsn - 20) // deletes the segments wholly acknowledged
			}
		}
	}()
	// At least 30 inspections, and on until the queue has appended 200
	// frames (about 15 segments of 4 KiB, most deleted by the acks).
	start := q.PublishedFSN()
	for i := 0; i < 30 || q.PublishedFSN() < start+200; i++ {
		code, out, errOut := runTool(t, "inspect", filepath.Join(parent, "busy"))
		if code != 0 {
			t.Fatalf("inspection %d: exit %d: %s", i, code, errOut)
		}
		if strings.Contains(out, "unreadable:  ") || !strings.Contains(out, "held by live process") {
			t.Fatalf("inspection %d of a live slot:\n%s", i, out)
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestInspectLiveSlotHole: on a live slot a segment missing between two
// present ones is damage all the same (acknowledgements delete the oldest
// segments first, so they cannot leave such a hole).
func TestInspectLiveSlotHole(t *testing.T) {
	b, q := openLiveSlot(t)
	defer q.Close()
	s := scanOf(t, b.dir)
	if err := os.Remove(segPath(b.dir, s, 1)); err != nil {
		t.Fatal(err)
	}
	_, out, _ := runTool(t, "inspect", b.dir)
	hole := fmt.Sprintf("FSN %d..%d unreadable: missing: ", s.Segments[1].Base, s.Segments[2].Base-1)
	mustContain(t, out, "held by live process", hole, fmt.Sprintf("unreadable:  %d unacknowledged frames", s.Segments[2].Base-s.Segments[1].Base))
	if strings.Contains(out, "not corruption") {
		t.Errorf("the hole is excused as the live holder's work:\n%s", out)
	}
}

// openLiveSlot builds a slot "live" and opens it with a queue, which holds
// its lock while the test inspects it.
func openLiveSlot(t *testing.T) (*builtSlot, *sfqueue.Queue) {
	t.Helper()
	parent := t.TempDir()
	b := buildSlot(t, parent, "live", slotSpec{gens: 1, perGen: 200})
	q, err := sfqueue.Open(sfqueue.Options{Dir: parent, SenderID: "live", MaxSegmentBytes: 4096, Durability: sfqueue.DurabilityMemory})
	if err != nil {
		t.Fatal(err)
	}
	return b, q
}

package questdbexporter

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestUnackedAge: the age follows the oldest unacknowledged frame as acks
// move, is 0 with nothing waiting, is never understated by the per-second
// marks, and stays bounded in memory through a long backlog.
func TestUnackedAge(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	var a unackedAge
	if got := a.age(0, 0, t0); got != 0 {
		t.Fatalf("empty queue: age %v", got)
	}
	a.appended(10, t0)
	a.appended(20, t0.Add(500*time.Millisecond)) // same second: joins the first mark
	a.appended(30, t0.Add(2*time.Second))
	now := t0.Add(10 * time.Second)
	for _, tc := range []struct {
		acked uint64
		want  time.Duration
	}{
		{0, 10 * time.Second},
		{15, 10 * time.Second}, // frame 16 was appended at t0+0.5s: 9.5 s, reported no less
		{20, 8 * time.Second},
		{29, 8 * time.Second},
		{30, 0},
	} {
		if got := a.age(tc.acked, 30, now); got != tc.want {
			t.Errorf("acked %d: age %v, want %v", tc.acked, got, tc.want)
		}
	}
	// A backlog of many seconds: the marks stay bounded and the oldest
	// frame keeps its time.
	var b unackedAge
	for i := range 3 * maxAppendMarks {
		b.appended(uint64(i+1), t0.Add(time.Duration(i)*time.Second))
	}
	if len(b.marks) > maxAppendMarks {
		t.Fatalf("%d marks kept, want at most %d", len(b.marks), maxAppendMarks)
	}
	end := t0.Add(time.Duration(3*maxAppendMarks) * time.Second)
	if got, want := b.age(0, 3*maxAppendMarks, end), time.Duration(3*maxAppendMarks)*time.Second; got != want {
		t.Fatalf("age of the oldest frame after coarsening %v, want %v", got, want)
	}
	// Coarsened marks may overstate a later frame's age, never understate it.
	for acked := uint64(1); acked < 3*maxAppendMarks; acked += 997 {
		truth := end.Sub(t0.Add(time.Duration(acked) * time.Second)) // frame acked+1 was appended at t0+acked s
		if got := b.age(acked, 3*maxAppendMarks, end); got < truth {
			t.Fatalf("acked %d: age %v understates the truth %v", acked, got, truth)
		}
	}
}

// TestUnackedAgeAcrossRestart: frames recovered from a slot count from the
// time the segment holding the oldest of them was last written, not from the
// restart.
func TestUnackedAgeAcrossRestart(t *testing.T) {
	slot := t.TempDir()
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	for _, seg := range []struct {
		name string
		at   time.Time
	}{
		{"00000000000000000001.sfseg", t0},
		{"00000000000000000101.sfseg", t0.Add(30 * time.Minute)},
		{".ack-watermark", t0.Add(-time.Hour)},
	} {
		p := filepath.Join(slot, seg.name)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, seg.at, seg.at); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	for _, tc := range []struct {
		acked uint64
		want  time.Time
	}{
		{50, t0},                        // frame 51 is in the first segment
		{100, t0.Add(30 * time.Minute)}, // frame 101 starts the second
	} {
		var a unackedAge
		a.recovered(tc.acked, 150, slot, now)
		a.appended(160, now)
		if got, want := a.age(tc.acked, 160, now), now.Sub(tc.want); got != want {
			t.Errorf("acked %d: age %v, want %v (from the segment's mtime)", tc.acked, got, want)
		}
	}
	var none unackedAge
	none.recovered(0, 5, filepath.Join(slot, "missing"), now)
	if got := none.age(0, 5, now.Add(time.Second)); got != time.Second {
		t.Errorf("without a segment to read, recovered frames count from the start: %v", got)
	}
}

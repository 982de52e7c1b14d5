package sfqueue

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestListOrphansMarkFailedRemoveSlot(t *testing.T) {
	dir := t.TempDir()
	slot := func(id string, frames int, ack uint64) {
		t.Helper()
		q := mustOpen(t, Options{Dir: dir, SenderID: id})
		for i := range frames {
			mustAppend(t, q, testPayload(uint64(i+1), 40))
		}
		q.Ack(ack)
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}
	slot("self", 3, 0)      // the caller's own slot: excluded
	slot("orphan-a", 3, 1)  // unacked frames: listed
	slot("orphan-b", 5, 0)  // listed
	slot("drained", 4, 4)   // everything acked: not an orphan
	slot("empty", 0, 0)     // never used
	slot("failed", 2, 0)    // marked failed below
	slot("busy", 2, 0)      // locked below
	slot("set-aside", 2, 0) // renamed below like recovery sets a slot aside
	if err := os.Rename(filepath.Join(dir, "set-aside"), filepath.Join(dir, "x.unreplayable-1")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "stray-file"), []byte("not a slot"), 0o644)
	if err := MarkFailed(dir, "failed", "server rejects every frame: SCHEMA_MISMATCH"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "failed", failedFile)); err != nil || !strings.Contains(string(b), "SCHEMA_MISMATCH") {
		t.Fatalf(".failed holds %q, %v", b, err)
	}
	busy := mustOpen(t, Options{Dir: dir, SenderID: "busy"})
	defer busy.Close()

	got, err := ListOrphans(dir, []string{"self"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"orphan-a", "orphan-b"}; !slices.Equal(got, want) {
		t.Fatalf("ListOrphans = %v, want %v", got, want)
	}

	// Draining an orphan: open it with its SenderID, ack, close, remove.
	if err := RemoveSlot(dir, "orphan-a"); err == nil || !strings.Contains(err.Error(), "unacked") {
		t.Fatalf("RemoveSlot of a slot with unacked frames: %v", err)
	}
	q := mustOpen(t, Options{Dir: dir, SenderID: "orphan-a"})
	if n := len(drain(t, q.NewCursor())); n != 2 {
		t.Fatalf("orphan-a replays %d frames, want 2", n)
	}
	if err := RemoveSlot(dir, "orphan-a"); err == nil {
		t.Fatal("RemoveSlot of an open slot succeeded")
	}
	q.Ack(q.PublishedFSN())
	q.Close()
	if err := RemoveSlot(dir, "orphan-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "orphan-a")); !os.IsNotExist(err) {
		t.Fatalf("slot still exists after RemoveSlot: %v", err)
	}
	if got, _ := ListOrphans(dir, []string{"self"}); !slices.Equal(got, []string{"orphan-b"}) {
		t.Fatalf("after draining orphan-a: %v", got)
	}
	if got, err := ListOrphans(filepath.Join(dir, "missing"), nil); err != nil || got != nil {
		t.Fatalf("ListOrphans of a missing dir = %v, %v", got, err)
	}
	for _, bad := range []string{"", "../x", "a/b"} {
		if MarkFailed(dir, bad, "r") == nil || RemoveSlot(dir, bad) == nil {
			t.Fatalf("sender id %q accepted", bad)
		}
	}
}

func TestSetAsideSlots(t *testing.T) {
	dir := t.TempDir()
	if got, err := SetAsideSlots(filepath.Join(dir, "missing")); err != nil || len(got) != 0 {
		t.Fatalf("missing sf_dir: %v, %v", got, err)
	}
	for _, d := range []string{"a", "a.unreplayable-2", "b", "c", "d.unreplayable-x"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "b", failedFile), []byte("sfqueue: DATA_LOSS: unreplayable slot kept as b\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "c", failedFile), []byte("authentication refused\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "e.unreplayable-1"), nil, 0o600) // a file, not a slot
	got, err := SetAsideSlots(dir)
	if err != nil || !slices.Equal(got, []string{"a.unreplayable-2", "b", "c"}) {
		t.Fatalf("SetAsideSlots = %v, %v; want the renamed slot and both .failed orphans", got, err)
	}
}

// TestRemoveLeftovers: a crash between RemoveSlot's rename and its deletion
// leaves <id>.removing behind; RemoveLeftovers deletes it unless its lock
// is held (a deletion in progress), RemoveSlot refuses to delete a held
// one, and no slot may be named like one.
func TestRemoveLeftovers(t *testing.T) {
	dir := t.TempDir()
	leftover := func(id string) string {
		t.Helper()
		q := mustOpen(t, Options{Dir: dir, SenderID: id})
		mustAppend(t, q, testPayload(1, 40))
		q.Ack(q.PublishedFSN())
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		gone := filepath.Join(dir, id+removingSuffix)
		if err := os.Rename(filepath.Join(dir, id), gone); err != nil {
			t.Fatal(err)
		}
		return gone
	}
	crashed := leftover("crashed")
	busy := leftover("busy")
	l, err := OSFS().Lock(filepath.Join(busy, lockFileName))
	if err != nil {
		t.Fatal(err)
	}
	live := mustOpen(t, Options{Dir: dir, SenderID: "live"})
	defer live.Close()
	// salvage --delete may take a .failed marker along: not set aside.
	if err := os.WriteFile(filepath.Join(busy, failedFile), []byte("r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := SetAsideSlots(dir); err != nil || len(got) != 0 {
		t.Fatalf("SetAsideSlots = %v, %v; a leftover is not set aside", got, err)
	}

	got, err := RemoveLeftovers(dir)
	if err != nil || !slices.Equal(got, []string{"crashed" + removingSuffix}) {
		t.Fatalf("RemoveLeftovers = %v, %v; want [crashed.removing]", got, err)
	}
	if _, err := os.Stat(crashed); !os.IsNotExist(err) {
		t.Fatalf("leftover still there: %v", err)
	}
	if _, err := os.Stat(busy); err != nil {
		t.Fatalf("a leftover whose lock is held was deleted: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "live")); err != nil {
		t.Fatalf("a live slot was touched: %v", err)
	}

	// A new slot "busy", drained: its removal meets the held leftover.
	q := mustOpen(t, Options{Dir: dir, SenderID: "busy"})
	q.Close()
	if err := RemoveSlot(dir, "busy"); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("RemoveSlot over a held leftover: %v", err)
	}
	l.Close()
	if err := RemoveSlot(dir, "busy"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(busy); !os.IsNotExist(err) {
		t.Fatalf("leftover still there after RemoveSlot: %v", err)
	}
	if _, err := Open(Options{Dir: dir, SenderID: "x" + removingSuffix}); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("a slot named like a leftover: %v", err)
	}
}

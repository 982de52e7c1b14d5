package sfqueue

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestSlotToolHelpers(t *testing.T) {
	dir := t.TempDir()
	q, err := Open(Options{Dir: dir, SenderID: "s", Durability: DurabilityMemory})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Append(context.Background(), []byte("frame")); err != nil {
		t.Fatal(err)
	}
	slot := filepath.Join(dir, "s")
	seg := filepath.Join(slot, segmentName(1))

	if ok, err := IsSlotDir(slot); !ok || err != nil {
		t.Errorf("IsSlotDir(slot) = %v, %v", ok, err)
	}
	if ok, err := IsSlotDir(dir); ok || err != nil {
		t.Errorf("IsSlotDir(sf_dir) = %v, %v; sf_dir holds slots, it is none", ok, err)
	}
	var le *LockedError
	if _, err := LockSlot(slot); !errors.As(err, &le) || le.PID != os.Getpid() {
		t.Errorf("LockSlot on an open slot = %v, want a *LockedError naming PID %d", err, os.Getpid())
	}
	if v, ok, err := SegmentFormat(seg); v != FormatVersion || !ok || err != nil {
		t.Errorf("SegmentFormat = %d, %v, %v", v, ok, err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := LockSlot(slot)
	if err != nil {
		t.Fatalf("LockSlot on a closed slot: %v", err)
	}
	l.Close()
	if _, err := LockSlot(seg); err == nil {
		t.Error("LockSlot on a file succeeded")
	}

	// A flipped version bit fails the header CRC: damage, not a newer format.
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[4] ^= 2
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := SegmentFormat(seg); ok || err != nil {
		t.Errorf("SegmentFormat of a damaged header: ok %v, %v", ok, err)
	}
	if _, ok, err := SegmentFormat(filepath.Join(slot, "nope.sfseg")); ok || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("SegmentFormat of a missing file: ok %v, %v", ok, err)
	}
}

//go:build linux || darwin

package sfqueue

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A slot renamed away (RemoveSlot, salvage --delete) between an opener's
// open of .lock and its flock: the opener must not keep a lock on the
// renamed directory's .lock, which excludes nobody from the slot's path,
// but start on a fresh slot at the path and hold that one's lock.
func TestOpenLocksSlotRenamedBetweenOpenAndFlock(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir, SenderID: "s"}
	mustOpen(t, o).Close()
	slot := filepath.Join(dir, "s")
	gone := slot + removingSuffix
	renamed := false
	lockOpened = func(string) {
		if !renamed {
			renamed = true
			if err := os.Rename(slot, gone); err != nil {
				t.Error(err)
			}
		}
	}
	defer func() { lockOpened = nil }()
	q := mustOpen(t, o)
	defer q.Close()
	if !renamed {
		t.Fatal("the hook did not run")
	}
	if slotLockFree(OSFS(), slot) {
		t.Fatalf("Open succeeded but %s is not locked: it locked the renamed directory's .lock", slot)
	}
	if !slotLockFree(OSFS(), gone) {
		t.Fatalf("Open still holds the lock of the renamed directory %s", gone)
	}
}

// The same with a new .lock created at the path meanwhile (another opener
// recreated the slot and released it): the lock must be on the new file.
func TestLockRetriesWhenLockFileReplaced(t *testing.T) {
	dir := t.TempDir()
	slot := filepath.Join(dir, "s")
	if err := os.MkdirAll(slot, 0o700); err != nil {
		t.Fatal(err)
	}
	calls := 0
	lockOpened = func(name string) {
		calls++
		if calls == 1 {
			if err := os.Remove(name); err != nil {
				t.Error(err)
			}
			if err := os.WriteFile(name, nil, 0o600); err != nil {
				t.Error(err)
			}
		}
	}
	defer func() { lockOpened = nil }()
	l, err := lockSlot(OSFS(), slot)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if calls != 2 {
		t.Fatalf("lockFile opened .lock %d times; want a retry after the replacement (2)", calls)
	}
	if slotLockFree(OSFS(), slot) {
		t.Fatal("the lock is on the unlinked .lock, not on the file the path names")
	}
}

// vanishFS renames the slot away right after Open's first MkdirAll, as
// RemoveSlot can between Open's MkdirAll and its lock.
type vanishFS struct {
	FS
	done bool
}

func (v *vanishFS) MkdirAll(dir string) error {
	if err := v.FS.MkdirAll(dir); err != nil {
		return err
	}
	if !v.done {
		v.done = true
		return os.Rename(dir, dir+removingSuffix)
	}
	return nil
}

func TestOpenRecreatesSlotRemovedBeforeLock(t *testing.T) {
	dir := t.TempDir()
	mustOpen(t, Options{Dir: dir, SenderID: "s"}).Close()
	v := &vanishFS{FS: OSFS()}
	q := mustOpen(t, Options{Dir: dir, SenderID: "s", FS: v})
	defer q.Close()
	if !v.done {
		t.Fatal("the slot was not renamed away")
	}
	if slotLockFree(OSFS(), filepath.Join(dir, "s")) {
		t.Fatal("Open returned without holding the recreated slot's lock")
	}
}

// failRemoveAllFS fails every RemoveAll, as an I/O error mid-deletion would.
type failRemoveAllFS struct{ FS }

func (failRemoveAllFS) RemoveAll(string) error { return errors.New("injected RemoveAll failure") }

// A deletion that fails after the rename leaves a slot that is gone from
// its path with every frame delivered: ErrSlotLeftover tells the drainer
// so (a success, not a failure), and RemoveLeftovers finishes it.
func TestDeleteLockedSlotLeftoverAfterRename(t *testing.T) {
	dir := t.TempDir()
	mustOpen(t, Options{Dir: dir, SenderID: "s"}).Close()
	slot := filepath.Join(dir, "s")
	l, err := LockSlot(slot)
	if err != nil {
		t.Fatal(err)
	}
	err = deleteLockedSlot(failRemoveAllFS{OSFS()}, slot)
	l.Close()
	if !errors.Is(err, ErrSlotLeftover) {
		t.Fatalf("deleteLockedSlot = %v; want ErrSlotLeftover", err)
	}
	if _, serr := os.Stat(slot); !errors.Is(serr, fs.ErrNotExist) {
		t.Fatalf("the slot is still at its path: %v", serr)
	}
	removed, err := RemoveLeftovers(dir)
	if err != nil || len(removed) != 1 || removed[0] != "s"+removingSuffix {
		t.Fatalf("RemoveLeftovers = %v, %v; want [s%s]", removed, err, removingSuffix)
	}
}

// salvage --delete's helper: the slot is gone, nothing left behind, and an
// opener gets a fresh slot.
func TestDeleteLockedSlot(t *testing.T) {
	dir := t.TempDir()
	q := mustOpen(t, Options{Dir: dir, SenderID: "s"})
	mustAppend(t, q, []byte("frame"))
	q.Close()
	slot := filepath.Join(dir, "s")
	l, err := LockSlot(slot + "/")
	if err != nil {
		t.Fatal(err)
	}
	err = DeleteLockedSlot(slot + "/")
	l.Close()
	if err != nil {
		t.Fatal(err)
	}
	if names, _ := OSFS().ReadDir(dir); len(names) != 0 {
		t.Fatalf("left behind: %v", names)
	}
	q = mustOpen(t, Options{Dir: dir, SenderID: "s"})
	defer q.Close()
	if q.PublishedFSN() != 0 {
		t.Fatalf("reopened slot has frames up to FSN %d; want a fresh slot", q.PublishedFSN())
	}
}

// A .failed an orphan drainer left in a slot (its own credentials failed)
// is removed when the slot's owner opens it, so the owner's healthy slot
// is not counted as set aside for good; a drainer's Open keeps it.
func TestOwnerOpenClearsDrainersFailedMarker(t *testing.T) {
	dir := t.TempDir()
	mustOpen(t, Options{Dir: dir, SenderID: "s"}).Close()
	if err := MarkFailed(dir, "s", "drainer: auth refused"); err != nil {
		t.Fatal(err)
	}
	mustOpen(t, Options{Dir: dir, SenderID: "s"}).Close()
	if got, _ := SetAsideSlots(dir); len(got) != 1 {
		t.Fatalf("SetAsideSlots after a non-owner Open = %v; want the marker kept", got)
	}
	core, logs := observer.New(zap.InfoLevel)
	q := mustOpen(t, Options{Dir: dir, SenderID: "s", ClearFailed: true, Logger: zap.New(core)})
	q.Close()
	if got, err := SetAsideSlots(dir); err != nil || len(got) != 0 {
		t.Fatalf("SetAsideSlots after the owner's Open = %v, %v; want none", got, err)
	}
	if e := logs.FilterField(zap.String("old_reason", "drainer: auth refused")).All(); len(e) != 1 || e[0].Level != zap.InfoLevel {
		t.Fatalf("want one Info log naming the old reason; got %v", logs.All())
	}
}

// The reviewer's race, for real: an owner opening its slot while a drainer
// removes it (RemoveSlot renames it away under its lock). Every Open either
// finds the lock held or holds the lock of the slot at its path; before,
// some failed with ENOENT or locked the renamed directory.
func TestOpenRacingRemoveSlot(t *testing.T) {
	rounds := 300
	if testing.Short() {
		rounds = 100
	}
	dir := t.TempDir()
	slot := filepath.Join(dir, "s")
	for range rounds {
		mustOpen(t, Options{Dir: dir, SenderID: "s"}).Close()
		removed := make(chan error, 1)
		go func() { removed <- RemoveSlot(dir, "s") }()
		q, err := Open(Options{Dir: dir, SenderID: "s"})
		var le *LockedError
		switch {
		case errors.As(err, &le):
		case err != nil:
			t.Fatalf("Open racing RemoveSlot: %v", err)
		default:
			if slotLockFree(OSFS(), slot) {
				t.Fatal("Open returned without holding the lock of the slot at its path")
			}
			q.Close()
		}
		if err := <-removed; err != nil && !errors.As(err, &le) {
			t.Fatalf("RemoveSlot: %v", err)
		}
	}
}

// The owner's Open clears a drainer's .failed only once recovery succeeds:
// a slot recovery sets aside keeps its marker (it moves with the slot),
// where clearing it first would lose the record if recovery failed.
func TestOwnerOpenKeepsFailedMarkerOfAnUnreplayableSlot(t *testing.T) {
	o, _ := writeSlot(t, 40, nil)
	if err := os.Remove(segmentPaths(t, o)[1]); err != nil {
		t.Fatal(err)
	}
	if err := MarkFailed(o.Dir, o.SenderID, "DATA_LOSS: drainer"); err != nil {
		t.Fatal(err)
	}
	o.ClearFailed = true
	q := mustOpen(t, o)
	defer q.Close()
	rep := q.Recovery().Unreplayable
	if rep == nil {
		t.Fatal("the slot with a gap was not set aside")
	}
	if _, err := os.Stat(filepath.Join(rep.Path, failedFile)); err != nil {
		t.Fatalf("the set-aside slot lost its .failed marker: %v", err)
	}
}

// vanishParentFS renames sf_dir itself away right after Open's first
// MkdirAll, as an unmount could.
type vanishParentFS struct {
	FS
	done bool
}

func (v *vanishParentFS) MkdirAll(dir string) error {
	if err := v.FS.MkdirAll(dir); err != nil {
		return err
	}
	if !v.done {
		v.done = true
		return os.Rename(filepath.Dir(dir), filepath.Dir(dir)+".gone")
	}
	return nil
}

// A retry of the lock creates the slot again, never a vanished sf_dir.
func TestOpenDoesNotRecreateAVanishedParent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sf")
	mustOpen(t, Options{Dir: dir, SenderID: "s"}).Close()
	v := &vanishParentFS{FS: OSFS()}
	if q, err := Open(Options{Dir: dir, SenderID: "s", FS: v}); err == nil || !errors.Is(err, fs.ErrNotExist) {
		if q != nil {
			q.Close()
		}
		t.Fatalf("Open after sf_dir vanished: %v; want a not-exist error", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the vanished sf_dir was created again: %v", err)
	}
}

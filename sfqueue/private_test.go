//go:build linux || darwin

package sfqueue

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// modes returns the permission bits of every entry under root (root
// included), by path relative to root.
func modes(t *testing.T, root string) map[string]fs.FileMode {
	t.Helper()
	out := map[string]fs.FileMode{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = info.Mode().Perm()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkPrivate fails unless every directory under root is 0700 and every
// file 0600, and the slot has its side files.
func checkPrivate(t *testing.T, root string, want ...string) {
	t.Helper()
	got := modes(t, root)
	for _, w := range want {
		if _, ok := got[w]; !ok {
			t.Errorf("%s missing under %s", w, root)
		}
	}
	for p, m := range got {
		info, err := os.Stat(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		want := fs.FileMode(0o600)
		if info.IsDir() {
			want = 0o700
		}
		if m != want {
			t.Errorf("%s has mode %v, want %v", p, m, want)
		}
	}
}

// fillSlot gives a slot every kind of file: segments, a dictionary file,
// .ack-watermark, the lock files.
func fillSlot(t *testing.T, o Options) {
	t.Helper()
	q := mustOpen(t, o)
	if err := q.AddSymbols(0, 0, [][]byte{[]byte("a")}); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		mustAppend(t, q, testPayload(uint64(i+1), 100))
	}
	q.Ack(2)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestSlotIsPrivateRegardlessOfUmask(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "sf") // created by Open
	o := Options{Dir: dir, SenderID: "s", MaxSegmentBytes: 512, Durability: DurabilityPeriodic}
	fillSlot(t, o)
	if err := MarkFailed(dir, "s", "test"); err != nil {
		t.Fatal(err)
	}
	checkPrivate(t, dir, "s", "s/.lock", "s/.lock.pid", "s/.ack-watermark", "s/"+genDictName(0), "s/.failed", "s/"+segmentName(1))
	// A set-aside slot stays private too.
	segs, _ := filepath.Glob(filepath.Join(dir, "s", "*"+segmentSuffix))
	os.Remove(segs[1])
	q := mustOpen(t, o)
	defer q.Close()
	if q.Recovery().Unreplayable == nil {
		t.Fatal("a deleted middle segment did not set the slot aside")
	}
	checkPrivate(t, dir, "s.unreplayable-1", "s.unreplayable-1/"+genDictName(0), "s/.lock")
}

func TestOldSlotIsMadePrivateOnOpen(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir, SenderID: "s", MaxSegmentBytes: 512}
	fillSlot(t, o)
	// As an earlier version left them: 0755 directories, 0644 files, and
	// a set-aside slot of this sender.
	aside := filepath.Join(dir, "s.unreplayable-1")
	if err := os.MkdirAll(aside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(aside, segmentName(1)), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(dir, "s"), aside} {
		os.Chmod(d, 0o755)
		names, _ := filepath.Glob(filepath.Join(d, "*"))
		hidden, _ := filepath.Glob(filepath.Join(d, ".*"))
		for _, n := range append(names, hidden...) {
			if err := os.Chmod(n, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Another sender's slot is not this queue's to change.
	other := filepath.Join(dir, "other")
	os.Mkdir(other, 0o755)
	q := mustOpen(t, o)
	defer q.Close()
	if st, _ := os.Stat(other); st.Mode().Perm() != 0o755 {
		t.Fatalf("another sender's slot changed to %v", st.Mode().Perm())
	}
	os.Remove(other)
	os.Chmod(dir, 0o700) // sf_dir itself is the operator's: only what the queue creates is checked
	checkPrivate(t, dir, "s/.ack-watermark", "s/"+genDictName(0), "s/"+segmentName(1), "s.unreplayable-1/"+segmentName(1))
}

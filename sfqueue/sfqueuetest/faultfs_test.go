package sfqueuetest

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFaultFS(t *testing.T) {
	dir := t.TempDir()
	fs := NewFaultFS()
	fs.Inject(Fault{Op: Write, Pattern: "*.seg", Err: syscall.EIO}, Fault{Op: Create, Pattern: "no*", Err: syscall.ENOSPC})
	f, err := fs.OpenFile(filepath.Join(dir, "a.seg"), os.O_RDWR|os.O_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("x"), 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("write to a.seg: %v, want EIO", err)
	}
	if _, err := fs.OpenFile(filepath.Join(dir, "nope"), os.O_RDWR|os.O_CREATE); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("create nope: %v, want ENOSPC", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("sync without a fault: %v", err)
	}
	if fs.Hits(Write) != 1 || fs.Hits(Create) != 1 {
		t.Fatalf("hits write %d create %d, want 1 and 1", fs.Hits(Write), fs.Hits(Create))
	}
	fs.Clear()
	if _, err := f.WriteAt([]byte("x"), 0); err != nil {
		t.Fatalf("write after Clear: %v", err)
	}

	// Skip lets the first matching reads pass.
	fs.Inject(Fault{Op: Read, Pattern: "a.seg", Err: syscall.EIO, Skip: 2})
	b := make([]byte, 1)
	for i := range 2 {
		if _, err := f.ReadAt(b, 0); err != nil {
			t.Fatalf("read %d of 2 skipped: %v", i, err)
		}
	}
	if _, err := f.ReadAt(b, 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("third read: %v, want EIO", err)
	}
	if _, err := f.ReadAt(b, 0); !errors.Is(err, syscall.EIO) || fs.Hits(Read) != 2 {
		t.Fatalf("fourth read: %v, %d read faults hit; want EIO and 2", err, fs.Hits(Read))
	}
}

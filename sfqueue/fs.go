package sfqueue

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"syscall"
)

// FS is every file-system operation the queue performs, so that tests can
// inject failures (ENOSPC, fsync errors) and simulate power loss.
type FS interface {
	// MkdirAll creates dir and its parents, private to the owner (0700).
	MkdirAll(dir string) error
	// OpenFile opens name with os.O_* flags; new files get mode 0600.
	OpenFile(name string, flag int) (File, error)
	// Chmod sets the permission bits of name (recovery makes slots that
	// earlier versions created 0755/0644 private).
	Chmod(name string, mode os.FileMode) error
	// ReadDir lists the entry names of dir, sorted. A missing dir is an
	// error satisfying errors.Is(err, fs.ErrNotExist).
	ReadDir(dir string) ([]string, error)
	// IsDir reports whether name exists and is a directory.
	IsDir(name string) bool
	Remove(name string) error
	RemoveAll(name string) error
	Rename(oldname, newname string) error
	// SyncDir makes the entries of dir (creates, renames) durable.
	SyncDir(dir string) error
	// Lock takes an exclusive, non-blocking lock on the file name (created
	// if missing). A lock held elsewhere returns ErrLockHeld. Closing the
	// returned Closer releases it.
	Lock(name string) (io.Closer, error)
}

// File is an open file of an FS.
type File interface {
	io.ReaderAt
	io.WriterAt
	Truncate(size int64) error
	// Allocate reserves size bytes of disk space (the file's size becomes at
	// least size) so that later writes within it cannot fail with ENOSPC.
	Allocate(size int64) error
	Size() (int64, error)
	Sync() error
	Close() error
}

// ErrLockHeld is returned by FS.Lock when another holder has the lock.
var ErrLockHeld = errors.New("sfqueue: lock held by another holder")

// isNoSpace reports whether err means the file system is out of space.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

type osFS struct{}

// OSFS returns the operating system's file system. Locking and directory
// fsync are supported on Linux and macOS; elsewhere Lock fails, so Open in SF
// mode refuses to start.
func OSFS() FS { return osFS{} }

// Slot directories and files are private: they hold log bodies and
// attribute values. The modes are within any umask's reach (a umask can only
// remove bits), so they hold regardless of it.
const (
	privateDirMode  os.FileMode = 0o700
	privateFileMode os.FileMode = 0o600
)

func (osFS) MkdirAll(dir string) error { return os.MkdirAll(dir, privateDirMode) }

func (osFS) Chmod(name string, mode os.FileMode) error { return os.Chmod(name, mode) }

func (osFS) OpenFile(name string, flag int) (File, error) {
	f, err := os.OpenFile(name, flag, privateFileMode)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) ReadDir(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	sort.Strings(names)
	return names, err
}

func (osFS) IsDir(name string) bool {
	st, err := os.Stat(name)
	return err == nil && st.IsDir()
}

func (osFS) Remove(name string) error             { return os.Remove(name) }
func (osFS) RemoveAll(name string) error          { return os.RemoveAll(name) }
func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (osFS) Lock(name string) (io.Closer, error) { return lockFile(name) }

type osFile struct{ f *os.File }

func (o osFile) ReadAt(p []byte, off int64) (int, error)  { return o.f.ReadAt(p, off) }
func (o osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }
func (o osFile) Truncate(size int64) error                { return o.f.Truncate(size) }
func (o osFile) Allocate(size int64) error                { return allocate(o.f, size) }
func (o osFile) ZeroRange(off, size int64) error          { return zeroRange(o.f, off, size) }
func (o osFile) Sync() error                              { return o.f.Sync() }
func (o osFile) Close() error                             { return o.f.Close() }

func (o osFile) Size() (int64, error) {
	st, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

//go:build linux || darwin

package sfqueue

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// errLockReplaced: the lock file kept being replaced while we locked it.
var errLockReplaced = errors.New("the lock file was replaced while it was being locked")

// lockOpened, when set (tests only), runs between lockFile's open and its
// flock: the window in which another process can replace the file.
var lockOpened func(name string)

// lockFile takes flock(LOCK_EX|LOCK_NB) on name. flock locks belong to the
// open file description, so a second open in the same process conflicts too,
// and the kernel drops the lock when the holder dies.
//
// A lock is only worth having on the file that name still names: another
// process may have unlinked or renamed it (a slot deleted or renamed away
// under its lock) between our open and our flock, and a lock on that inode
// excludes nobody who opens name afterwards. So after the flock the fd's
// inode is compared with name's; a mismatch retries (bounded), and a name
// that is gone returns an error satisfying errors.Is(err, fs.ErrNotExist).
func lockFile(name string) (io.Closer, error) {
	for range lockStaleRetries {
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, privateFileMode)
		if err != nil {
			return nil, err
		}
		if lockOpened != nil {
			lockOpened(name)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, ErrLockHeld
			}
			return nil, &os.PathError{Op: "flock", Path: name, Err: err}
		}
		held, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		now, err := os.Stat(name)
		if err != nil {
			f.Close()
			return nil, err
		}
		if os.SameFile(held, now) {
			return f, nil
		}
		f.Close()
	}
	return nil, &os.PathError{Op: "flock", Path: name, Err: errLockReplaced}
}

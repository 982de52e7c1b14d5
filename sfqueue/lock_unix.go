//go:build linux || darwin

package sfqueue

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// lockFile takes flock(LOCK_EX|LOCK_NB) on name. flock locks belong to the
// open file description, so a second open in the same process conflicts too,
// and the kernel drops the lock when the holder dies.
func lockFile(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, privateFileMode)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrLockHeld
		}
		return nil, &os.PathError{Op: "flock", Path: name, Err: err}
	}
	return f, nil
}

//go:build linux

package sfqueue

import (
	"errors"
	"os"
	"syscall"
)

// allocate reserves real blocks with fallocate(2), so ENOSPC surfaces here,
// on the rotation path, and not in the middle of a frame write. File systems
// without fallocate fall back to extending the size.
func allocate(f *os.File, size int64) error {
	for {
		err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EOPNOTSUPP):
			return f.Truncate(size)
		}
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
}

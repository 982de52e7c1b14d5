//go:build linux

package sfqueue

import (
	"errors"
	"os"
	"syscall"
)

// Linux fallocate(2) modes (not in package syscall).
const (
	fallocKeepSize  = 0x01 // FALLOC_FL_KEEP_SIZE
	fallocZeroRange = 0x10 // FALLOC_FL_ZERO_RANGE
)

// fallocate is fallocate(2), retried when a signal interrupts it.
func fallocate(f *os.File, mode uint32, off, size int64) error {
	for {
		if err := syscall.Fallocate(int(f.Fd()), mode, off, size); !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// allocate reserves real blocks with fallocate(2), so ENOSPC surfaces here,
// on the rotation path, and not in the middle of a frame write. File systems
// without fallocate fall back to extending the size.
func allocate(f *os.File, size int64) error {
	err := fallocate(f, 0, 0, size)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.EOPNOTSUPP):
		return f.Truncate(size)
	}
	return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
}

// zeroRange zeroes size bytes at off and keeps the file's space allocated.
// ext4 marks the extents unwritten (no data written, no block freed); XFS
// frees and reallocates the range, which a discard mount turns into
// discards, so there recycling saves less. A file system without it
// returns errNoZeroRange.
func zeroRange(f *os.File, off, size int64) error {
	err := fallocate(f, fallocZeroRange|fallocKeepSize, off, size)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.EOPNOTSUPP):
		return errNoZeroRange
	}
	return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
}

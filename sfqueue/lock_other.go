//go:build !linux && !darwin

package sfqueue

import (
	"fmt"
	"io"
	"os"
	"runtime"
)

// lockFile refuses: SF mode relies on flock and directory fsync, which this
// package supports on Linux and macOS only.
func lockFile(name string) (io.Closer, error) {
	return nil, fmt.Errorf("sfqueue: store-and-forward mode (sf_dir) is supported on linux and darwin only, not %s; use memory-only mode (empty sf_dir)", runtime.GOOS)
}

func allocate(f *os.File, size int64) error { return f.Truncate(size) }

// zeroRange: not offered here, so acked segments are deleted, not recycled.
func zeroRange(*os.File, int64, int64) error { return errNoZeroRange }

//go:build darwin

package sfqueue

import "os"

// allocate extends the file; macOS's F_PREALLOCATE is not exposed by the
// syscall package, so a full disk surfaces on the first write instead.
func allocate(f *os.File, size int64) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() >= size {
		return nil
	}
	return f.Truncate(size)
}

// zeroRange: macOS has no way to zero a range keeping its blocks, so acked
// segments are deleted rather than recycled.
func zeroRange(*os.File, int64, int64) error { return errNoZeroRange }

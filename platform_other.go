//go:build !linux && !darwin

package questdbexporter

import (
	"fmt"
	"runtime"
	"syscall"
)

// checkPlatform refuses every platform but Linux and macOS: the
// store-and-forward queue relies on flock and on fsync of directories.
func checkPlatform() error {
	return fmt.Errorf("questdb exporter: %s is not supported; it runs on linux and darwin (the store-and-forward queue needs flock and directory fsync)", runtime.GOOS)
}

// errNotDir is the error a path lookup through a file gives.
var errNotDir = syscall.ENOTDIR

// writable: the exporter does not run here (checkPlatform), so the check
// is left to the start.
func writable(string) bool { return true }

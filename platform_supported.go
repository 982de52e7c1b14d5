//go:build linux || darwin

package questdbexporter

import "syscall"

// checkPlatform accepts Linux and macOS, where the store-and-forward queue
// has flock and directory fsync.
func checkPlatform() error { return nil }

// errNotDir is the error a path lookup through a file gives.
const errNotDir = syscall.ENOTDIR

// writable reports whether this process may create entries in dir.
func writable(dir string) bool {
	return syscall.Access(dir, 0x2 /* W_OK */) == nil
}

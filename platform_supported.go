//go:build linux || darwin

package questdbexporter

// checkPlatform accepts Linux and macOS, where the store-and-forward queue
// has flock and directory fsync.
func checkPlatform() error { return nil }

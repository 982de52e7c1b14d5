//go:build !linux && !darwin

package questdbexporter

import (
	"fmt"
	"runtime"
)

// checkPlatform refuses every platform but Linux and macOS: the
// store-and-forward queue relies on flock and on fsync of directories.
func checkPlatform() error {
	return fmt.Errorf("questdb exporter: %s is not supported; it runs on linux and darwin (the store-and-forward queue needs flock and directory fsync)", runtime.GOOS)
}

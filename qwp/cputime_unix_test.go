//go:build unix

package qwp

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used. Benchmarks report it
// beside wall time because the benchmark machine is shared: wall time
// includes time spent waiting for a core.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

//go:build unix

package questdbexporter

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used, GC and background
// goroutines included: steadier than wall time on a shared machine.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

//go:build unix

// Package cputime reads the process's CPU time, for benchmarks that report
// it beside wall time: on a shared machine wall time includes the time
// spent waiting for a core.
package cputime

import (
	"syscall"
	"time"
)

// Process is the CPU time the process has used (user and system, every
// thread: the GC and background goroutines included).
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

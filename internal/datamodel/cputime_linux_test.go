//go:build linux

package datamodel

import (
	"syscall"
	"time"
)

// threadCPUTime is the CPU time the calling OS thread has used. Benchmarks
// lock their goroutine to a thread and report it beside wall time, because
// on a shared, oversubscribed machine wall time mostly measures waiting for
// a CPU.
func threadCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

//go:build !linux

package datamodel

import "time"

// threadCPUTime is not measured outside Linux (no RUSAGE_THREAD); benchmarks
// then report wall time only.
func threadCPUTime() time.Duration { return 0 }

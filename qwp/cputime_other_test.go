//go:build !unix

package qwp

import "time"

// processCPU is unavailable here; benchmarks then report 0 cpu-ns/row.
func processCPU() time.Duration { return 0 }

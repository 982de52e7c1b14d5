package sfqueue

import "os"

// Preallocate is allocate for the external benchmarks: their baselines
// prepare files the way the queue prepares a segment.
func Preallocate(f *os.File, size int64) error { return allocate(f, size) }

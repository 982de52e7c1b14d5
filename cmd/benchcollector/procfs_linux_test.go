package main

import (
	"os"
	"testing"
	"time"
)

// The parsers read what this kernel writes: the test process's own files.
func TestProcOfThisProcess(t *testing.T) {
	before, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Burn CPU until the tick counter moves (10 ms ticks).
	deadline := time.Now().Add(5 * time.Second)
	x := 0
	for after := before; after == before && time.Now().Before(deadline); after, _ = cpuTime(os.Getpid()) {
		for i := range 1_000_000 {
			x += i
		}
	}
	after, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Fatalf("CPU time did not advance: %v -> %v (x=%d)", before, after, x)
	}
	rss, err := peakRSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if rss < 1<<20 {
		t.Fatalf("peak RSS %d bytes: implausibly small", rss)
	}
}

//go:build unix

package cputime

import "testing"

// TestProcessAdvances: CPU time spent shows in Process.
func TestProcessAdvances(t *testing.T) {
	before := Process()
	x := 0
	for i := range 50_000_000 {
		x += i % 7
	}
	if after := Process(); after <= before || x == 0 {
		t.Fatalf("Process went from %v to %v over a busy loop", before, after)
	}
}

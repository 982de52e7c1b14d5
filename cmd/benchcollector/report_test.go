package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
	xs := []float64{3, 1, 2}
	median(xs)
	if xs[0] != 3 {
		t.Error("median sorted its argument in place")
	}
}

func result(round int, shape, exporter string, cpuMs int64, accepted, arrived int64) runResult {
	return runResult{round: round, shape: shape, exporter: exporter,
		load:    loadResult{requests: accepted / itemsPerRequest, accepted: accepted},
		arrived: arrived, cpu: time.Duration(cpuMs) * time.Millisecond, peakRSS: 50 << 20, frames: -1}
}

func TestReportRatiosAndAccounting(t *testing.T) {
	const n = 10 * itemsPerRequest
	results := []runResult{
		result(1, "metrics", "nop", 20, n, -1), result(1, "metrics", "questdb", 30, n, n), result(1, "metrics", "otlp_http", 60, n, n),
		result(2, "metrics", "nop", 20, n, -1), result(2, "metrics", "questdb", 24, n, n), result(2, "metrics", "otlp_http", 40, n, n+1000),
		result(3, "metrics", "nop", 10, n, -1), result(3, "metrics", "questdb", 20, n, n-3), result(3, "metrics", "otlp_http", 20, n, n),
	}
	results[1].frames, results[1].toSink = 5, 10<<10 // round 1 questdb: 5 frames and 10 KiB for 10 requests
	results[4].frames, results[4].toSink = 15, 20<<10
	results[7].frames, results[7].toSink = 10, 30<<10
	var out bytes.Buffer
	report(&out, results, []string{"metrics"}, []string{"nop", "questdb", "otlp_http"}, 3, runOptions{requests: 10, concurrency: 4, durability: "memory"})
	got := out.String()
	for _, want := range []string{
		"| metrics | questdb / nop | 1.50, 1.20, 2.00 | **1.50** |",
		"| metrics | questdb / otlp_http | 0.50, 0.60, 1.00 | **0.60** |",
		"| metrics | nop | 2.00 (1.00-2.00) |",
		"| 1.00 | 2.0 | NO: 3 items missing or refused |",                          // frames/request (5+15+10)/30, KB/request 60/30, then round 3's loss
		"| metrics | otlp_http | 4.00 (2.00-6.00) | 50 (50) | 0.0 | – | – | yes |", // a duplicate is not a loss
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}

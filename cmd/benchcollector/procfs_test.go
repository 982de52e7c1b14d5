package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and parentheses: the fields count from
	// the last ')'. utime 250 + stime 50 ticks = 3 s.
	stat := "4242 (otel (col) x) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 12 0 100 1000 200\n"
	got, err := parseStatCPU([]byte(stat))
	if err != nil {
		t.Fatal(err)
	}
	if got != 3*time.Second {
		t.Fatalf("cpu = %v, want 3s", got)
	}
	for name, bad := range map[string]string{
		"no command name": "4242 otel S 1",
		"too few fields":  "4242 (otel) S 1 2 3",
		"not a number":    "4242 (otel) S 1 4242 4242 0 -1 4194560 900 0 0 0 x 50 0",
		"negative":        "4242 (otel) S 1 4242 4242 0 -1 4194560 900 0 0 0 -5 50 0",
	} {
		if _, err := parseStatCPU([]byte(bad)); err == nil {
			t.Errorf("%s: %q parsed without error", name, bad)
		}
	}
}

func TestParseStatusKB(t *testing.T) {
	status := "Name:\totelcol-bench\nVmPeak:\t  900000 kB\nVmHWM:\t   45312 kB\nVmRSS:\t   40000 kB\n"
	got, err := parseStatusKB([]byte(status), "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	if got != 45312<<10 {
		t.Fatalf("VmHWM = %d, want %d", got, 45312<<10)
	}
	if _, err := parseStatusKB([]byte(status), "VmSwap"); err == nil || !strings.Contains(err.Error(), "no VmSwap") {
		t.Errorf("missing key: err = %v", err)
	}
	if _, err := parseStatusKB([]byte("VmHWM:\t 12 MB\n"), "VmHWM"); err == nil {
		t.Error("a size in MB parsed as kB")
	}
}

func TestParseIORchar(t *testing.T) {
	got, err := parseIORchar([]byte("rchar: 123456\nwchar: 99\nsyscr: 7\n"))
	if err != nil || got != 123456 {
		t.Fatalf("parseIORchar = %d, %v; want 123456", got, err)
	}
	for _, bad := range []string{"wchar: 1\n", "rchar: -3\n", "rchar: lots\n"} {
		if _, err := parseIORchar([]byte(bad)); err == nil {
			t.Errorf("parseIORchar(%q) succeeded", bad)
		}
	}
}

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat. It
// is 100 on every Linux architecture Go supports (the kernel fixes it for
// user space whatever its internal HZ).
const clockTicks = 100

// cpuTime reads a process's CPU time so far (user + system, all threads) from
// /proc/<pid>/stat.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

// parseStatCPU returns utime+stime from the contents of /proc/<pid>/stat.
// The command name (field 2) is in parentheses and may itself hold spaces
// and parentheses, so the fields are counted from the last ')'.
func parseStatCPU(stat []byte) (time.Duration, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc stat: no ')' closing the command name in %q", stat)
	}
	// After ") ": field 3 (state) is index 0, so utime (field 14) is index
	// 11 and stime (field 15) index 12.
	fields := strings.Fields(string(stat[end+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields after the command name, want at least 13", len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("/proc stat: utime/stime %q is not a tick count", f)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// peakRSS reads a process's peak resident set size (VmHWM) in bytes.
func peakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseStatusKB(b, "VmHWM")
}

// parseStatusKB returns the value of a "Key:   N kB" line of
// /proc/<pid>/status, in bytes.
func parseStatusKB(status []byte, key string) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != key {
			continue
		}
		num, unit, _ := strings.Cut(strings.TrimSpace(rest), " ")
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || unit != "kB" {
			return 0, fmt.Errorf("/proc status: %s %q is not a size in kB", key, strings.TrimSpace(rest))
		}
		return n << 10, nil
	}
	return 0, fmt.Errorf("/proc status: no %s line", key)
}

// readBytes reads how many bytes a process has read so far (rchar of
// /proc/<pid>/io: every read, sockets included). For the count-only
// qwpsink that is the QWP bytes it received, and its few /tables requests.
func readBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, err
	}
	return parseIORchar(b)
}

// parseIORchar returns the rchar line of /proc/<pid>/io.
func parseIORchar(io []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(io))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != "rchar" {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("/proc io: rchar %q is not a byte count", strings.TrimSpace(rest))
		}
		return n, nil
	}
	return 0, fmt.Errorf("/proc io: no rchar line")
}

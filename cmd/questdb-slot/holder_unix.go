//go:build linux || darwin

package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockHolder says whether a live process holds the slot's lock, without
// taking or trying it: a collector starting at that moment must not find
// the lock busy because of us. On Linux /proc/locks lists every flock with
// the holder's PID and the locked file's inode; elsewhere (or when it cannot
// be read) the PID in .lock.pid is probed with kill(pid, 0), which may be
// fooled by a PID reused since the holder died.
func lockHolder(dir string, recordedPID int) holder {
	if h, ok := procLocksHolder(filepath.Join(dir, ".lock")); ok {
		if !h.live {
			h.pid = recordedPID // stale
		}
		return h
	}
	if recordedPID <= 0 {
		return holder{how: "no .lock.pid"}
	}
	err := syscall.Kill(recordedPID, 0)
	// EPERM: the process exists but belongs to another user.
	alive := err == nil || errors.Is(err, syscall.EPERM)
	how := "kill(pid, 0) finds no such process"
	if alive {
		how = "kill(pid, 0) on the PID in .lock.pid"
	}
	return holder{live: alive, pid: recordedPID, how: how}
}

// procLocksHolder looks the lock file's inode up in /proc/locks.
func procLocksHolder(lockFile string) (holder, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(lockFile, &st); err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return holder{how: "no .lock file"}, true
		}
		return holder{}, false
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return holder{}, false
	}
	defer f.Close()
	// "1: FLOCK  ADVISORY  WRITE 1234 08:01:131090 0 EOF"; the device is
	// major:minor in hex.
	want := fmt.Sprintf(":%d", st.Ino)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] == "->" || fields[1] != "FLOCK" {
			continue
		}
		if !strings.HasSuffix(fields[5], want) || !sameDevice(fields[5], uint64(st.Dev)) {
			continue
		}
		pid, _ := strconv.Atoi(fields[4])
		return holder{live: true, pid: pid, how: "/proc/locks"}, true
	}
	return holder{how: "/proc/locks lists no lock on .lock"}, sc.Err() == nil
}

// sameDevice compares /proc/locks' "major:minor:inode" with a stat device
// number (Linux encoding: minor's low 8 bits, major, minor's high bits).
func sameDevice(field string, dev uint64) bool {
	parts := strings.Split(field, ":")
	if len(parts) != 3 {
		return false
	}
	maj, err1 := strconv.ParseUint(parts[0], 16, 32)
	minr, err2 := strconv.ParseUint(parts[1], 16, 32)
	if err1 != nil || err2 != nil {
		return false
	}
	devMaj := (dev>>8)&0xfff | (dev>>32)&^0xfff
	devMin := dev&0xff | (dev>>12)&^0xff
	return maj == devMaj && minr == devMin
}

package sfqueue

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The slot lock: flock on <slot>/.lock, and the holder's PID in
// <slot>/.lock.pid so that a second opener can name it.
const (
	lockFileName = ".lock"
	pidFileName  = ".lock.pid"
)

// lockStaleRetries bounds how often lockFile retries when the file it
// locked was replaced under it; each retry means another process deleted
// or renamed the slot again, so a handful is plenty.
const lockStaleRetries = 8

// mkdirLockSlot creates the slot directory and locks it, as Open does. A
// slot that RemoveSlot or salvage --delete renamed away between the MkdirAll
// and the lock is created again: for its owner it is a fresh, empty slot.
func mkdirLockSlot(fsys FS, slot string) (io.Closer, error) {
	var err error
	for i := range lockStaleRetries {
		// A retry must not create a parent that vanished meanwhile (an
		// unmounted sf_dir): only the slot itself was renamed away.
		if i > 0 && !fsys.IsDir(filepath.Dir(slot)) {
			return nil, fmt.Errorf("sfqueue: create slot %s: %w", slot, err)
		}
		if err = fsys.MkdirAll(slot); err != nil {
			return nil, fmt.Errorf("sfqueue: create slot %s: %w", slot, err)
		}
		var l io.Closer
		if l, err = lockSlot(fsys, slot); !errors.Is(err, fs.ErrNotExist) {
			return l, err
		}
	}
	return nil, err
}

// lockSlot takes the slot lock and records our PID.
func lockSlot(fsys FS, slot string) (io.Closer, error) {
	l, err := fsys.Lock(filepath.Join(slot, lockFileName))
	if errors.Is(err, ErrLockHeld) {
		return nil, &LockedError{Path: slot, PID: readLockPID(fsys, slot)}
	}
	if err != nil {
		return nil, err
	}
	f, err := fsys.OpenFile(filepath.Join(slot, pidFileName), os.O_RDWR|os.O_CREATE|os.O_TRUNC)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// readLockPID returns the PID recorded by the lock holder, 0 if unknown.
func readLockPID(fsys FS, slot string) int {
	b, err := readSmallFile(fsys, filepath.Join(slot, pidFileName), 32)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// slotLockFree reports whether nobody holds the slot's lock right now.
func slotLockFree(fsys FS, slot string) bool {
	l, err := fsys.Lock(filepath.Join(slot, lockFileName))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

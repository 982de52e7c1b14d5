// Package sfqueuetest is test support for code built on sfqueue: a file
// system that fails chosen operations on chosen files, so that tests of the
// exporter can show what a full disk, an I/O error or a failed fsync does
// end to end. It is for tests only.
package sfqueuetest

import (
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// Op is a file operation a Fault can fail.
type Op string

const (
	Write    Op = "write"    // File.WriteAt
	Sync     Op = "sync"     // File.Sync
	Allocate Op = "allocate" // File.Allocate
	Create   Op = "create"   // FS.OpenFile with os.O_CREATE
	Read     Op = "read"     // File.ReadAt
)

// Fault fails every Op on files whose base name matches Pattern
// (filepath.Match) with Err, but for the first Skip of them: so that a test
// can let the queue's recovery read a file and fail a later reader of it.
type Fault struct {
	Op      Op
	Pattern string
	Err     error
	Skip    int
}

// FaultFS is the operating system's file system with faults injected. Safe
// for concurrent use; faults can be set and cleared while a queue runs.
type FaultFS struct {
	sfqueue.FS
	mu     sync.Mutex
	faults []Fault // Skip counts down as matching operations pass
	hits   map[Op]int
}

// NewFaultFS returns a FaultFS over sfqueue.OSFS with no fault.
func NewFaultFS() *FaultFS { return &FaultFS{FS: sfqueue.OSFS(), hits: map[Op]int{}} }

// Inject adds faults.
func (f *FaultFS) Inject(faults ...Fault) {
	f.mu.Lock()
	f.faults = append(f.faults, faults...)
	f.mu.Unlock()
}

// Clear removes every fault.
func (f *FaultFS) Clear() {
	f.mu.Lock()
	f.faults = nil
	f.mu.Unlock()
}

// Hits is how many operations of op failed so far.
func (f *FaultFS) Hits(op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits[op]
}

func (f *FaultFS) fault(op Op, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.faults {
		ft := &f.faults[i]
		if ok, _ := filepath.Match(ft.Pattern, filepath.Base(name)); ok && ft.Op == op {
			if ft.Skip > 0 {
				ft.Skip--
				continue
			}
			f.hits[op]++
			return &os.PathError{Op: string(op), Path: name, Err: ft.Err}
		}
	}
	return nil
}

// OpenFile opens name, failing a create when a Create fault matches.
func (f *FaultFS) OpenFile(name string, flag int) (sfqueue.File, error) {
	if flag&os.O_CREATE != 0 {
		if err := f.fault(Create, name); err != nil {
			return nil, err
		}
	}
	file, err := f.FS.OpenFile(name, flag)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, name: name}, nil
}

// Lock takes the real lock.
func (f *FaultFS) Lock(name string) (io.Closer, error) { return f.FS.Lock(name) }

type faultFile struct {
	sfqueue.File
	fs   *FaultFS
	name string
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.fault(Write, f.name); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.fault(Read, f.name); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *faultFile) Sync() error {
	if err := f.fs.fault(Sync, f.name); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *faultFile) Allocate(size int64) error {
	if err := f.fs.fault(Allocate, f.name); err != nil {
		return err
	}
	return f.File.Allocate(size)
}

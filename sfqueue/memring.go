package sfqueue

import (
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
)

// memRing is the storage of memory-only mode: the same segments as SF mode,
// held in process RAM. A segment's buffer grows as frames are written (a
// mostly empty queue costs little) and is released when the segment is
// trimmed by Ack or evicted, so the retained segments form a ring bounded by
// MaxTotalBytes. It implements FS so that the queue has one code path for
// both modes; only the operations memory-only mode uses are meaningful.
type memRing struct {
	mu    sync.Mutex
	files map[string]*memSegment
}

func newMemRing() *memRing { return &memRing{files: map[string]*memSegment{}} }

type memSegment struct {
	mu    sync.Mutex
	data  []byte
	limit int64 // the segment size from Allocate: growth never reserves more
}

func (m *memRing) MkdirAll(string) error { return nil }

func (m *memRing) Chmod(string, os.FileMode) error { return nil }

func (m *memRing) OpenFile(name string, flag int) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.files[name]
	switch {
	case ok && flag&os.O_EXCL != 0 && flag&os.O_CREATE != 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case !ok && flag&os.O_CREATE == 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case !ok:
		f = &memSegment{}
		m.files[name] = f
	}
	return f, nil
}

func (m *memRing) ReadDir(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var names []string
	for n := range m.files {
		if path.Dir(n) == dir {
			names = append(names, strings.TrimPrefix(n, dir+"/"))
		}
	}
	sort.Strings(names)
	return names, nil
}

func (m *memRing) IsDir(string) bool { return false }

func (m *memRing) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.files[name]; !ok {
		return &os.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(m.files, name)
	return nil
}

func (m *memRing) RemoveAll(string) error { return nil }

func (m *memRing) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.files[oldname]
	if !ok {
		return &os.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	delete(m.files, oldname)
	m.files[newname] = f
	return nil
}

func (m *memRing) SyncDir(string) error { return nil }

func (m *memRing) Lock(string) (io.Closer, error) { return io.NopCloser(nil), nil }

func (f *memSegment) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if off >= int64(len(f.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memSegment) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if end := off + int64(len(p)); end > int64(len(f.data)) {
		if end > int64(cap(f.data)) {
			// Double as append would, but never past the segment size, so
			// a full segment holds at most MaxSegmentBytes of RAM.
			c := min(max(end, 2*int64(cap(f.data))), max(end, f.limit))
			grown := make([]byte, len(f.data), c)
			copy(grown, f.data)
			f.data = grown
		}
		f.data = f.data[:end]
	}
	return copy(f.data[off:], p), nil
}

func (f *memSegment) Truncate(size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if size <= int64(len(f.data)) {
		f.data = f.data[:size]
		return nil
	}
	f.data = append(f.data, make([]byte, size-int64(len(f.data)))...)
	return nil
}

// Allocate records the segment size; RAM is taken as frames arrive.
func (f *memSegment) Allocate(size int64) error {
	f.mu.Lock()
	f.limit = size
	f.mu.Unlock()
	return nil
}

func (f *memSegment) Size() (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int64(len(f.data)), nil
}

func (f *memSegment) Sync() error { return nil }

// Close is a no-op; Remove releases the buffer once no handle refers to it.
func (f *memSegment) Close() error { return nil }

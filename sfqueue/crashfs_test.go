package sfqueue

import (
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// crashFS is an in-memory FS that models what survives a power loss. Every
// file keeps the content its last completed fsync made durable plus a log of
// the writes and truncates since; every directory entry (create, rename,
// remove) is certain to be durable only after an fsync of its directory.
// PowerLoss returns a new FS holding what a disk would hold after the power
// failed at that instant: the durable state, optionally with a random prefix
// of the pending writes of each file (the last one torn at a random byte)
// and garbage after it, and (keepNames) a random prefix of the directory
// operations no fsync of their directory has covered yet.
//
// keepNames is what ext4 and xfs do: a journal commits metadata in the
// order it was changed, on its own timer (5 s on ext4), whether or not
// anyone fsynced the directory, and independently of the data of the files
// it names. So a rename or an unlink can reach the disk while the renamed
// file's unsynced data does not, and a later unsynced write to one file can
// survive while an earlier one to another file is lost: only an fsync
// orders them.
type crashFS struct {
	mu      sync.Mutex
	names   map[string]*inode // current namespace
	durable map[string]*inode // namespace as of the last directory fsyncs
	dirs    map[string]bool
	locks   map[string]bool

	// Fault injection, consulted under mu. Each returns nil or the error
	// the operation fails with.
	failSync  func(name string) error
	failAlloc func(name string, size int64) error
	failWrite func(name string) error
	// shortWrite, when it returns an error, makes a write store only the
	// first keep bytes of its data and return that error (a write cut
	// short by a full disk).
	shortWrite func(name string, size int) (keep int, err error)
	failZero   func(name string) error
	failTrunc  func(name string) error
	failRead   func(name string) error
	syncHook   func(name string) // runs (unlocked) at the start of File.Sync
	// removeHook runs (unlocked) before Remove changes anything.
	removeHook func(name string)
	// skipSync makes File.Sync of a file succeed without making anything
	// durable: an fsync the code under test does not make.
	skipSync  func(name string) bool
	openFiles int // handles opened and not yet closed
	// nameLog holds the directory operations since the last fsync of their
	// directory, in order (PowerLoss with keepNames keeps a prefix).
	nameLog []nameOp
}

// nameOp is one directory operation not yet made durable by an fsync of
// its directory.
type nameOp struct {
	kind      byte // 'c' create, 'r' rename, 'd' remove
	name, to  string
	ino       *inode
	dir, dir2 string // the directories it changes
}

func (c *crashFS) logName(op nameOp) {
	op.dir = path.Dir(op.name)
	op.dir2 = op.dir
	if op.kind == 'r' {
		op.dir2 = path.Dir(op.to)
	}
	c.nameLog = append(c.nameLog, op)
}

type inode struct {
	data    []byte // current content
	synced  []byte // content as of the start of the last completed fsync
	pending []fileOp
	logged  int // ops ever logged; pending holds the last len(pending)
}

// log records a write or truncate that is not durable yet.
func (ino *inode) log(op fileOp) {
	ino.pending = append(ino.pending, op)
	ino.logged++
}

type fileOp struct {
	off   int64
	data  []byte // nil: truncate to off
	trunc bool
}

func newCrashFS() *crashFS {
	return &crashFS{names: map[string]*inode{}, durable: map[string]*inode{}, dirs: map[string]bool{"/": true}, locks: map[string]bool{}}
}

// crashMode says how much of the unsynced data a power loss keeps.
type crashMode int

const (
	dropUnsynced   crashMode = iota // keep exactly the fsynced state
	keepSomeWrites                  // plus a random prefix of pending writes, torn
	keepAndGarbage                  // plus random garbage after the kept prefix
	// keepNames is keepAndGarbage plus a random prefix of the directory
	// operations not yet covered by an fsync of their directory.
	keepNames
)

// PowerLoss snapshots what survives a power loss now.
func (c *crashFS) PowerLoss(mode crashMode, r *rand.Rand) *crashFS {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := newCrashFS()
	for d := range c.dirs {
		n.dirs[d] = true
	}
	copied := map[*inode]*inode{}
	survivor := func(ino *inode) *inode {
		if cp, ok := copied[ino]; ok {
			return cp
		}
		data := append([]byte(nil), ino.synced...)
		if mode != dropUnsynced && len(ino.pending) > 0 {
			keep := r.IntN(len(ino.pending) + 1)
			tail := int64(-1) // end of the last write kept
			for i, op := range ino.pending[:keep] {
				if op.trunc {
					data = resize(data, op.off)
					continue
				}
				w := op.data
				if i == keep-1 {
					w = w[:r.IntN(len(w)+1)] // torn at a random byte
				}
				data = writeAt(data, w, op.off)
				tail = op.off + int64(len(w))
			}
			if mode >= keepAndGarbage && tail >= 0 && r.IntN(2) == 0 {
				g := make([]byte, 1+r.IntN(64))
				for i := range g {
					g[i] = byte(r.Uint32())
				}
				data = writeAt(data, g, tail)
			}
		}
		cp := &inode{data: data, synced: append([]byte(nil), data...)}
		copied[ino] = cp
		return cp
	}
	for name, ino := range c.durable {
		cp := survivor(ino)
		n.names[name], n.durable[name] = cp, cp
	}
	if mode == keepNames {
		k := len(c.nameLog) // every one (half the time): data lost, names kept
		if r.IntN(2) == 0 {
			k = r.IntN(len(c.nameLog) + 1)
		}
		for _, op := range c.nameLog[:k] {
			cp := survivor(op.ino)
			switch op.kind {
			case 'c':
				n.names[op.name], n.durable[op.name] = cp, cp
			case 'r':
				if n.names[op.name] == cp {
					delete(n.names, op.name)
					delete(n.durable, op.name)
				}
				n.names[op.to], n.durable[op.to] = cp, cp
			case 'd':
				if n.names[op.name] == cp {
					delete(n.names, op.name)
					delete(n.durable, op.name)
				}
			}
		}
	}
	return n
}

func resize(b []byte, size int64) []byte {
	if size <= int64(len(b)) {
		return b[:size]
	}
	return append(b, make([]byte, size-int64(len(b)))...)
}

func writeAt(b, p []byte, off int64) []byte {
	if end := off + int64(len(p)); end > int64(len(b)) {
		b = resize(b, end)
	}
	copy(b[off:], p)
	return b
}

func clean(name string) string { return path.Clean("/" + name) }

func (c *crashFS) MkdirAll(dir string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for d := clean(dir); ; d = path.Dir(d) {
		c.dirs[d] = true
		if d == "/" {
			return nil
		}
	}
}

// Chmod: the crash model keeps no permissions.
func (c *crashFS) Chmod(string, os.FileMode) error { return nil }

func (c *crashFS) OpenFile(name string, flag int) (File, error) {
	name = clean(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirs[path.Dir(name)] {
		return nil, &os.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	ino, ok := c.names[name]
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case !ok && flag&os.O_CREATE == 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case !ok:
		ino = &inode{}
		c.names[name] = ino
		c.logName(nameOp{kind: 'c', name: name, ino: ino})
	case flag&os.O_TRUNC != 0:
		ino.data = ino.data[:0]
		ino.log(fileOp{off: 0, trunc: true})
	}
	c.openFiles++
	return &crashFile{fs: c, name: name, ino: ino}, nil
}

func (c *crashFS) ReadDir(dir string) ([]string, error) {
	dir = clean(dir)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirs[dir] {
		return nil, &os.PathError{Op: "readdir", Path: dir, Err: fs.ErrNotExist}
	}
	seen := map[string]bool{}
	for n := range c.names {
		if path.Dir(n) == dir {
			seen[path.Base(n)] = true
		}
	}
	for d := range c.dirs {
		if d != dir && path.Dir(d) == dir {
			seen[path.Base(d)] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

func (c *crashFS) IsDir(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dirs[clean(name)]
}

func (c *crashFS) Remove(name string) error {
	name = clean(name)
	c.mu.Lock()
	if h := c.removeHook; h != nil {
		c.mu.Unlock()
		h(name)
		c.mu.Lock()
	}
	defer c.mu.Unlock()
	ino, ok := c.names[name]
	if !ok {
		return &os.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(c.names, name)
	c.logName(nameOp{kind: 'd', name: name, ino: ino})
	return nil
}

func (c *crashFS) RemoveAll(name string) error {
	name = clean(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	for n := range c.names {
		if n == name || strings.HasPrefix(n, name+"/") {
			delete(c.names, n)
			delete(c.durable, n)
		}
	}
	for d := range c.dirs {
		if d == name || strings.HasPrefix(d, name+"/") {
			delete(c.dirs, d)
		}
	}
	c.nameLog = slices.DeleteFunc(c.nameLog, func(op nameOp) bool {
		return strings.HasPrefix(op.name, name+"/") || strings.HasPrefix(op.to, name+"/")
	})
	return nil
}

// Rename of a file is durable after its directory's fsync; a directory
// rename (only used to set a slot aside) is applied at once.
func (c *crashFS) Rename(oldname, newname string) error {
	oldname, newname = clean(oldname), clean(newname)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirs[oldname] {
		move := func(m map[string]*inode) {
			for n, ino := range m {
				if strings.HasPrefix(n, oldname+"/") {
					delete(m, n)
					m[newname+n[len(oldname):]] = ino
				}
			}
		}
		move(c.names)
		move(c.durable)
		for d := range c.dirs {
			if d == oldname || strings.HasPrefix(d, oldname+"/") {
				delete(c.dirs, d)
				c.dirs[newname+d[len(oldname):]] = true
			}
		}
		moved := func(p string) string {
			if strings.HasPrefix(p, oldname+"/") {
				return newname + p[len(oldname):]
			}
			return p
		}
		for i := range c.nameLog {
			op := &c.nameLog[i]
			op.name, op.to, op.dir, op.dir2 = moved(op.name), moved(op.to), moved(op.dir), moved(op.dir2)
		}
		return nil
	}
	ino, ok := c.names[oldname]
	if !ok {
		return &os.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	delete(c.names, oldname)
	c.names[newname] = ino
	c.logName(nameOp{kind: 'r', name: oldname, to: newname, ino: ino})
	return nil
}

// SyncDir makes every entry of dir durable as it is now.
func (c *crashFS) SyncDir(dir string) error {
	dir = clean(dir)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failSync != nil {
		if err := c.failSync(dir); err != nil {
			return err
		}
	}
	for n := range c.durable {
		if path.Dir(n) == dir {
			delete(c.durable, n)
		}
	}
	for n, ino := range c.names {
		if path.Dir(n) == dir {
			c.durable[n] = ino
		}
	}
	c.nameLog = slices.DeleteFunc(c.nameLog, func(op nameOp) bool { return op.dir == dir || op.dir2 == dir })
	return nil
}

type crashLock struct {
	c    *crashFS
	name string
	once sync.Once
}

func (l *crashLock) Close() error {
	l.once.Do(func() {
		l.c.mu.Lock()
		delete(l.c.locks, l.name)
		l.c.mu.Unlock()
	})
	return nil
}

func (c *crashFS) Lock(name string) (io.Closer, error) {
	name = clean(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.locks[name] {
		return nil, ErrLockHeld
	}
	if _, ok := c.names[name]; !ok {
		ino := &inode{}
		c.names[name] = ino
		c.logName(nameOp{kind: 'c', name: name, ino: ino})
	}
	c.locks[name] = true
	return &crashLock{c: c, name: name}, nil
}

// fileSize is the length of the file at path (clean), 0 if there is none.
func (c *crashFS) fileSize(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ino := c.names[path]; ino != nil {
		return len(ino.data)
	}
	return 0
}

// fileNames lists current file paths (for tests that inspect the slot).
func (c *crashFS) fileNames() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for n := range c.names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

type crashFile struct {
	fs     *crashFS
	name   string
	ino    *inode
	closed bool
}

func (f *crashFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.fs.failRead != nil {
		if err := f.fs.failRead(f.name); err != nil {
			return 0, &os.PathError{Op: "read", Path: f.name, Err: err}
		}
	}
	if off >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.ino.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *crashFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.fs.failWrite != nil {
		if err := f.fs.failWrite(f.name); err != nil {
			return 0, &os.PathError{Op: "write", Path: f.name, Err: err}
		}
	}
	if f.fs.shortWrite != nil {
		if keep, err := f.fs.shortWrite(f.name, len(p)); err != nil {
			p = p[:keep]
			f.ino.data = writeAt(f.ino.data, p, off)
			f.ino.log(fileOp{off: off, data: append([]byte(nil), p...)})
			return keep, &os.PathError{Op: "write", Path: f.name, Err: err}
		}
	}
	f.ino.data = writeAt(f.ino.data, p, off)
	f.ino.log(fileOp{off: off, data: append([]byte(nil), p...)})
	return len(p), nil
}

func (f *crashFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.fs.failTrunc != nil {
		if err := f.fs.failTrunc(f.name); err != nil {
			return err
		}
	}
	f.ino.data = resize(f.ino.data, size)
	f.ino.log(fileOp{off: size, trunc: true})
	return nil
}

func (f *crashFile) Allocate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.fs.failAlloc != nil {
		if err := f.fs.failAlloc(f.name, size); err != nil {
			return &os.PathError{Op: "fallocate", Path: f.name, Err: err}
		}
	}
	if size > int64(len(f.ino.data)) {
		f.ino.data = resize(f.ino.data, size)
		f.ino.log(fileOp{off: size, trunc: true})
	}
	return nil
}

// ZeroRange is logged as a write of zeros within the file's size (it keeps
// the size), so a power loss before the next fsync may keep any prefix of
// it, torn.
func (f *crashFile) ZeroRange(off, size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.fs.failZero != nil {
		if err := f.fs.failZero(f.name); err != nil {
			return err
		}
	}
	if end := int64(len(f.ino.data)); off+size > end {
		size = max(0, end-off)
	}
	z := make([]byte, size)
	copy(f.ino.data[off:], z)
	f.ino.log(fileOp{off: off, data: z})
	return nil
}

func (f *crashFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return int64(len(f.ino.data)), nil
}

// Sync makes the content as of its start durable. The hook runs after that
// point and unlocked, so a test can hold an fsync "in flight": what is
// written meanwhile stays pending (fsync(2) promises nothing for it).
func (f *crashFile) Sync() error {
	f.fs.mu.Lock()
	hook := f.fs.syncHook
	snap := append([]byte(nil), f.ino.data...)
	upTo := f.ino.logged
	f.fs.mu.Unlock()
	if hook != nil {
		hook(f.name)
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.fs.failSync != nil {
		if err := f.fs.failSync(f.name); err != nil {
			return &os.PathError{Op: "fsync", Path: f.name, Err: err}
		}
	}
	if f.fs.skipSync != nil && f.fs.skipSync(f.name) {
		return nil
	}
	// A concurrent fsync that started later may have completed first.
	if done := f.ino.logged - len(f.ino.pending); upTo > done {
		f.ino.synced = snap
		f.ino.pending = f.ino.pending[upTo-done:]
	}
	return nil
}

func (f *crashFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return os.ErrClosed
	}
	f.closed = true
	f.fs.openFiles--
	return nil
}

var errNoSpace = syscall.ENOSPC

// fillDiskForSegments makes every segment write and preallocation fail with
// ENOSPC while dictionary files can still be written: a disk that fills
// between a batch's entries and its frames. Call it with c.mu held.
func (c *crashFS) fillDiskForSegments() {
	c.failWrite = func(name string) error {
		if strings.HasSuffix(name, segmentSuffix) {
			return syscall.ENOSPC
		}
		return nil
	}
	c.failAlloc = func(string, int64) error { return syscall.ENOSPC }
}

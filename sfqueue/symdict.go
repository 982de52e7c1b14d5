package sfqueue

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Dictionary files. Each generation lives in its own append-only log,
// .symbol-dict.<generation in 10 digits>, of records
//
//	generation u32 | id u32 | length u32 | bytes | CRC32C u32 (of all before it)
//
// A record's id must be the next id of its generation. On open each log is
// walked and cut at the first record that is short, fails its CRC, breaks
// the id sequence or names another generation (a torn tail). Deleting a
// generation is deleting its file. Slots written before per-generation
// files kept every generation in one log, .symbol-dict, of the same
// records: Open moves its generations into their own files (each written
// to a temporary file, fsynced and renamed) and then deletes it.
const (
	symbolDictFile     = ".symbol-dict"
	symbolRecordHeader = 12
	// maxSymbolBytes bounds one entry so a corrupt length cannot ask for
	// gigabytes.
	maxSymbolBytes = 1 << 24
)

// genDictName is the file of generation gen.
func genDictName(gen uint32) string { return fmt.Sprintf("%s.%010d", symbolDictFile, gen) }

// parseGenDictName reads the generation of a per-generation dictionary
// file name.
func parseGenDictName(name string) (uint32, bool) {
	rest, ok := strings.CutPrefix(name, symbolDictFile+".")
	if !ok || len(rest) != 10 {
		return 0, false
	}
	g, err := strconv.ParseUint(rest, 10, 32)
	return uint32(g), err == nil
}

// symbolRecordBytes is the size of one record holding entry.
func symbolRecordBytes(entry []byte) int64 { return int64(symbolRecordHeader + len(entry) + 4) }

// genFile is the open log of one generation.
type genFile struct {
	f    File
	size int64
	// dirty: written since its last fsync (or opened by recovery, which
	// cannot tell). Only memory durability, which does not fsync entries
	// as it writes them, leaves a file dirty past an append: the seal
	// fsync (and recovery's) makes them durable before the frames that
	// use them count as durable (takeDirty).
	dirty bool
}

// SymbolRun is dictionary entries FirstID, FirstID+1, ... of generation
// Gen; FirstID must be the next id of the generation.
type SymbolRun struct {
	Gen     uint32
	FirstID int
	Entries [][]byte
}

// symbolDict holds the dictionary generations. In SF mode the entries live
// only in their files (counts holds their number), so RAM does not grow
// with the dictionary; in memory-only mode mem holds them.
type symbolDict struct {
	fsys  FS // nil: memory-only, nothing persisted
	dir   string
	files map[uint32]*genFile
	// counts holds the entries of every generation held.
	counts map[uint32]int
	mem    map[uint32]*memGen // memory-only mode
	// bytes is what the cap counts: the files' sizes in SF mode, the
	// chunks' capacity (the RAM held) in memory-only mode.
	bytes int64
	sync  bool // fsync what persist writes (periodic and flush durability)
	// rec is addRun's record buffer in SF mode, kept between appends:
	// under series churn every group writes its frames' worth of new
	// entries, and a buffer of them all each time was the largest garbage
	// the write path made. Records go to the file recBytes at a time.
	rec []byte
}

// recBytes is about how many bytes of records addRun writes at a time (a
// record longer than that is written whole).
const recBytes = 64 << 10

// memGen holds one generation's entries in memory-only mode, each a uvarint
// length and its bytes, back to back in chunks that an entry never spans.
// A generation so costs its text, a byte or two per entry and the free
// tail of its last chunk, with no allocation and no pointer per entry (the
// garbage collector scans nothing). A new chunk is as large as the
// generation so far, between memChunkMin and memChunkMax bytes (so a
// small dictionary stays small and a large one wastes at most one chunk's
// tail), or as the entry that opens it.
type memGen struct{ chunks [][]byte }

const (
	memChunkMin = 256
	memChunkMax = 64 << 10
)

// put walks entries as they would be stored and returns the bytes of the
// chunks that takes; with store set it stores them.
func (g *memGen) put(entries [][]byte, store bool) (grown int64) {
	free, held := 0, g.bytes()
	if n := len(g.chunks); n > 0 {
		free = cap(g.chunks[n-1]) - len(g.chunks[n-1])
	}
	var lenBuf [binary.MaxVarintLen64]byte
	for _, e := range entries {
		size := len(binary.AppendUvarint(lenBuf[:0], uint64(len(e)))) + len(e)
		if size > free {
			c := max(min(max(held, memChunkMin), memChunkMax), int64(size))
			grown += c
			held += c
			if store {
				g.chunks = append(g.chunks, make([]byte, 0, c))
			}
			free = int(c)
		}
		free -= size
		if store {
			last := &g.chunks[len(g.chunks)-1]
			*last = append(binary.AppendUvarint(*last, uint64(len(e))), e...)
		}
	}
	return grown
}

// view returns the chunks as they are now, for a reader: later appends
// write past these lengths, and undo only cuts back what no reader was
// given (entries of a batch that failed, under the queue's lock).
func (g *memGen) view() [][]byte { return slices.Clone(g.chunks) }

// nextEntry returns the first entry of chunks and the chunks after it.
func nextEntry(chunks [][]byte) ([]byte, [][]byte) {
	for len(chunks[0]) == 0 {
		chunks = chunks[1:]
	}
	c := chunks[0]
	l, k := binary.Uvarint(c)
	end := k + int(l)
	chunks[0] = c[end:]
	return c[k:end:end], chunks
}

// bytes is the RAM the generation holds.
func (g *memGen) bytes() int64 {
	var n int64
	for _, c := range g.chunks {
		n += int64(cap(c))
	}
	return n
}

func newMemoryDict() *symbolDict {
	return &symbolDict{counts: map[uint32]int{}, mem: map[uint32]*memGen{}}
}

// openSymbolDict opens the dictionary of the slot dir as scan found it: it
// cuts torn tails, moves a legacy .symbol-dict's generations into their
// own files, and opens every generation's file for appending. Of the
// entries, scan holds only a legacy .symbol-dict's (to move); recovery's
// rebuilt ones are written by persist. None is kept in RAM.
func openSymbolDict(fsys FS, dir string, scan DictScan, sync bool) (*symbolDict, error) {
	d := &symbolDict{fsys: fsys, dir: dir, files: map[uint32]*genFile{}, counts: map[uint32]int{}, sync: sync}
	fail := func(err error) (*symbolDict, error) {
		d.close()
		return nil, err
	}
	migrate := map[uint32]bool{}
	for _, fs := range scan.files {
		if fs.legacy {
			for g := range fs.gens {
				migrate[g] = true
			}
			continue
		}
		if _, kept := scan.onDisk[fs.gen]; !kept {
			continue
		}
		p := filepath.Join(dir, fs.name)
		f, err := fsys.OpenFile(p, os.O_RDWR)
		if err != nil {
			return fail(err)
		}
		if fs.size > fs.intact {
			err := f.Truncate(fs.intact)
			if err == nil && sync {
				err = f.Sync()
			}
			if err != nil {
				f.Close()
				return fail(fmt.Errorf("sfqueue: cut torn tail of %s at %d: %w", p, fs.intact, err))
			}
		}
		// Dirty whatever the mode: nothing says an earlier life fsynced
		// it (a memory-durability one did not), and recovery counts the
		// frames using its entries durable (syncRecovered fsyncs it).
		d.files[fs.gen] = &genFile{f: f, size: fs.intact, dirty: true}
		d.bytes += fs.intact
	}
	for g := range migrate {
		if d.files[g] != nil {
			continue // moved before an interrupted migration ended
		}
		var buf []byte
		for id, e := range scan.gens[g][:scan.onDisk[g]] {
			buf = appendSymbolRecord(buf, g, uint32(id), e)
		}
		if err := replaceFile(fsys, dir, genDictName(g), buf); err != nil {
			return fail(fmt.Errorf("sfqueue: moving generation %d out of %s: %w", g, symbolDictFile, err))
		}
		f, err := fsys.OpenFile(filepath.Join(dir, genDictName(g)), os.O_RDWR)
		if err != nil {
			return fail(err)
		}
		d.files[g] = &genFile{f: f, size: int64(len(buf))} // replaceFile fsynced it
		d.bytes += int64(len(buf))
	}
	if len(migrate) > 0 {
		// Every generation has its own durable file: the legacy log goes.
		if err := fsys.Remove(filepath.Join(dir, symbolDictFile)); err != nil && !os.IsNotExist(err) {
			return fail(err)
		}
		if err := fsys.SyncDir(dir); err != nil {
			return fail(err)
		}
	}
	// Entries recovery rebuilt beyond what the files hold are counted by
	// persist.
	for g, n := range scan.onDisk {
		d.counts[g] = n
	}
	return d, nil
}

// persist writes entries firstID.. of gen (recovery's rebuilt entries) to
// the generation's file and fsyncs them when d.sync.
func (d *symbolDict) persist(gen uint32, firstID int, entries [][]byte) error {
	if _, op, err := d.add([]SymbolRun{{Gen: gen, FirstID: firstID, Entries: entries}}); err != nil {
		return fmt.Errorf("sfqueue: %s (rebuilt entries): %w", op, err)
	}
	if d.sync {
		d.files[gen].dirty = false
		if err := d.files[gen].f.Sync(); err != nil {
			return fmt.Errorf("sfqueue: fsync %s: %w", genDictName(gen), err)
		}
		return d.fsys.SyncDir(d.dir)
	}
	return nil
}

func appendSymbolRecord(dst []byte, gen, id uint32, entry []byte) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, gen)
	dst = binary.LittleEndian.AppendUint32(dst, id)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(entry)))
	dst = append(dst, entry...)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// dictMark is a generation's state before add wrote to it, so that undo
// can take the entries back.
type dictMark struct {
	gen     uint32
	count   int
	known   bool  // the generation was held before
	size    int64 // SF: the file's size
	created bool  // SF: add created the file
	chunks  int   // memory-only: the chunks, and the length of the last
	last    int
}

// need is the bytes add(runs) would add to d.bytes.
func (d *symbolDict) need(runs []SymbolRun) int64 {
	var n int64
	for _, r := range runs {
		if d.fsys == nil {
			g := d.mem[r.Gen]
			if g == nil {
				g = &memGen{}
			}
			n += g.put(r.Entries, false)
			continue
		}
		for _, e := range r.Entries {
			n += symbolRecordBytes(e)
		}
	}
	return n
}

// add appends each run's entries to its generation. It writes them but
// does not fsync (see Queue.writeSymbolsLocked). On error (op names the
// failed I/O, "" for invalid runs) nothing of runs remains, but for an I/O
// error of undo itself (latched by the caller). The marks undo what it
// added.
func (d *symbolDict) add(runs []SymbolRun) (marks []dictMark, op string, err error) {
	for _, r := range runs {
		m, op, err := d.addRun(r)
		if m != nil {
			marks = append(marks, *m)
		}
		if err != nil {
			if uerr := d.undo(marks); uerr != nil {
				return nil, "undo", uerr
			}
			return nil, op, err
		}
	}
	return marks, "", nil
}

// heldTail reports whether those of r's entries below have, the
// generation's count, are its file's last records, byte for byte. Entries are stored before
// their frames, and a flush-mode group write that a full disk refuses
// fails appends whose entries stay (dropGroupLocked): the producer retries
// the same batch, those entries included.
func (d *symbolDict) heldTail(r SymbolRun, have int) bool {
	gf := d.files[r.Gen]
	if gf == nil || r.FirstID >= have || r.FirstID+len(r.Entries) < have {
		return false
	}
	var want []byte
	for i, e := range r.Entries[:have-r.FirstID] {
		want = appendSymbolRecord(want, r.Gen, uint32(r.FirstID+i), e)
	}
	off := gf.size - int64(len(want))
	if off < 0 {
		return false
	}
	got := make([]byte, len(want))
	n, err := gf.f.ReadAt(got, off)
	return n == len(got) && (err == nil || err == io.EOF) && bytes.Equal(got, want)
}

// addRun appends one run; on error its mark (when not nil) undoes what it
// wrote.
func (d *symbolDict) addRun(r SymbolRun) (*dictMark, string, error) {
	gen := r.Gen
	have, known := d.counts[gen]
	if d.heldTail(r, have) {
		r.Entries, r.FirstID = r.Entries[have-r.FirstID:], have
	}
	if r.FirstID != have {
		return nil, "", fmt.Errorf("sfqueue: symbol generation %d gets entries from id %d, but the dictionary holds %d entries: ids must be added in order", gen, r.FirstID, have)
	}
	for i, e := range r.Entries {
		if len(e) > maxSymbolBytes {
			return nil, "", fmt.Errorf("sfqueue: symbol id %d of generation %d is %d bytes, above the %d-byte limit", r.FirstID+i, gen, len(e), maxSymbolBytes)
		}
	}
	if len(r.Entries) == 0 {
		return nil, "", nil
	}
	m := &dictMark{gen: gen, count: have, known: known}
	var n int64
	if d.fsys == nil {
		g := d.mem[gen]
		if g == nil {
			g = &memGen{}
			d.mem[gen] = g
		}
		if m.chunks = len(g.chunks); m.chunks > 0 {
			m.last = len(g.chunks[m.chunks-1])
		}
		n = g.put(r.Entries, true)
	} else {
		gf := d.files[gen]
		if gf == nil {
			f, err := d.fsys.OpenFile(filepath.Join(d.dir, genDictName(gen)), os.O_RDWR|os.O_CREATE|os.O_TRUNC)
			if err != nil {
				return nil, "create " + genDictName(gen), err
			}
			gf, m.created = &genFile{f: f}, true
			d.files[gen] = gf
		}
		m.size = gf.size
		gf.dirty = true
		buf, off := d.rec[:0], gf.size
		for i, e := range r.Entries {
			buf = appendSymbolRecord(buf, gen, uint32(r.FirstID+i), e)
			if len(buf) < recBytes && i < len(r.Entries)-1 {
				continue
			}
			if _, err := gf.f.WriteAt(buf, off); err != nil {
				return m, "write " + genDictName(gen), err
			}
			off += int64(len(buf))
			if cap(buf) <= 2*recBytes {
				d.rec = buf[:0]
			}
			buf = buf[:0]
		}
		n, gf.size = off-gf.size, off
	}
	d.counts[gen] += len(r.Entries)
	d.bytes += n
	return m, "", nil
}

// undo takes back what add wrote, newest first: a file add created is
// deleted, one it appended to is cut back (a torn remainder would be cut
// by recovery, and no frame uses those ids).
func (d *symbolDict) undo(marks []dictMark) error {
	var errs []error
	for i := len(marks) - 1; i >= 0; i-- {
		m := marks[i]
		if m.known {
			d.counts[m.gen] = m.count
		} else {
			delete(d.counts, m.gen)
		}
		if d.fsys == nil {
			g := d.mem[m.gen]
			d.bytes -= g.bytes()
			clear(g.chunks[m.chunks:])
			g.chunks = g.chunks[:m.chunks]
			if m.chunks > 0 {
				g.chunks[m.chunks-1] = g.chunks[m.chunks-1][:m.last]
			}
			d.bytes += g.bytes()
			if !m.known {
				delete(d.mem, m.gen)
			}
			continue
		}
		gf := d.files[m.gen]
		if gf == nil {
			continue
		}
		d.bytes -= gf.size - m.size
		gf.size = m.size
		if m.created {
			gf.f.Close()
			delete(d.files, m.gen)
			if err := d.fsys.Remove(filepath.Join(d.dir, genDictName(m.gen))); err != nil && !os.IsNotExist(err) {
				errs = append(errs, err)
			}
			continue
		}
		errs = append(errs, gf.f.Truncate(m.size))
		// A memory-durability seal may have fsynced the undone entries
		// (takeDirty): the next one fsyncs the cut, or a power loss keeps
		// them.
		gf.dirty = true
	}
	return errors.Join(errs...)
}

// dropBelow forgets every generation below gen and deletes their files.
func (d *symbolDict) dropBelow(gen uint32) error {
	var errs []error
	for g := range d.counts {
		if g >= gen {
			continue
		}
		delete(d.counts, g)
		if d.fsys == nil {
			if mg := d.mem[g]; mg != nil {
				d.bytes -= mg.bytes()
				delete(d.mem, g)
			}
			continue
		}
		if gf := d.files[g]; gf != nil {
			gf.f.Close()
			d.bytes -= gf.size
			delete(d.files, g)
			if err := d.fsys.Remove(filepath.Join(d.dir, genDictName(g))); err != nil && !os.IsNotExist(err) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// takeDirty returns the files written since their last fsync and counts
// them clean: the caller fsyncs them (and latches the queue fatal if that
// fails, so a file is never counted clean in error).
func (d *symbolDict) takeDirty() []*genFile {
	var out []*genFile
	for _, gf := range d.files {
		if gf.dirty {
			gf.dirty = false
			out = append(out, gf)
		}
	}
	return out
}

func (d *symbolDict) close() error {
	var errs []error
	for g, gf := range d.files {
		errs = append(errs, gf.f.Close())
		delete(d.files, g)
	}
	return errors.Join(errs...)
}

// AddSymbols records dictionary entries firstID, firstID+1, ... of
// generation gen, outside the cap: for tools that rebuild a slot. The
// writer admits entries with the frames that need them (AppendWith). In SF
// mode the entries are written to their generation's file first, and in
// periodic and flush durability fsynced before AddSymbols returns, so no
// frame appended later can reach the disk ahead of the ids it needs.
func (q *Queue) AddSymbols(gen uint32, firstID int, entries [][]byte) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.rotating && !q.closed {
		q.syncDone.Wait()
	}
	if err := q.usableLocked(); err != nil {
		return err
	}
	runs := []SymbolRun{{Gen: gen, FirstID: firstID, Entries: entries}}
	if _, err := q.writeSymbolsLocked(runs); err != nil {
		if isNoSpace(err) {
			q.logNoSpaceLocked(err)
			q.st.fullErrors++
			q.st.diskFullErrors++
			return &FullError{Reason: DiskFull, Used: q.usedLocked(), Cap: q.o.MaxTotalBytes, Need: q.dict.need(runs)}
		}
		return err
	}
	q.noteSymbolsLocked(runs)
	return nil
}

// writeSymbolsLocked writes runs to the dictionary and, in periodic and
// flush durability, fsyncs them (and the directory entry of a new file)
// with q.mu released while other appends wait (q.rotating), so no frame
// that uses them can reach the disk first. On error nothing of runs stays:
// ENOSPC is returned as is, other I/O errors latch the queue fatal. The
// marks undo the entries should the frames that need them fail.
func (q *Queue) writeSymbolsLocked(runs []SymbolRun) ([]dictMark, error) {
	marks, op, err := q.dict.add(runs)
	switch {
	case err != nil && op == "":
		return nil, err
	case err != nil && (op == "undo" || !isNoSpace(err)):
		return nil, q.latchLocked(op, err)
	case err != nil:
		return nil, err
	}
	if !q.sf || q.o.Durability == DurabilityMemory || len(marks) == 0 {
		return marks, nil
	}
	created := false
	files := make([]File, 0, len(marks))
	for _, m := range marks {
		gf := q.dict.files[m.gen]
		gf.dirty = false // fsynced here; a failure latches
		files = append(files, gf.f)
		created = created || m.created
	}
	q.dictSyncs++ // keeps generation drops and Close off these files
	q.rotating = true
	q.mu.Unlock()
	start := time.Now()
	for _, f := range files {
		if err == nil {
			err = f.Sync()
		}
	}
	if err == nil && created {
		err = q.fs.SyncDir(q.slot)
	}
	elapsed := time.Since(start)
	q.mu.Lock()
	q.rotating = false
	q.dictSyncs--
	q.syncDone.Broadcast()
	q.st.recordFsync(elapsed)
	if err != nil {
		return nil, q.latchLocked("fsync symbol dictionary", err)
	}
	if q.closed {
		q.undoSymbolsLocked(marks)
		return nil, ErrClosed
	}
	return marks, nil
}

// undoSymbolsLocked takes back entries whose frames were not appended; an
// I/O error doing so latches the queue fatal.
func (q *Queue) undoSymbolsLocked(marks []dictMark) {
	if err := q.dict.undo(marks); err != nil {
		q.latchLocked("undo symbol dictionary entries", err)
	}
}

// noteSymbolsLocked records the generations of runs that are now held.
func (q *Queue) noteSymbolsLocked(runs []SymbolRun) {
	for _, r := range runs {
		q.gens.newest = max(q.gens.newest, r.Gen)
	}
}

// SymbolReader streams the entries of one dictionary generation in id
// order, as many as the generation held committed (with the frames that
// brought them) when OpenSymbols was called. In SF
// mode it reads the generation's file in chunks through its own handle, so
// it holds a chunk, never the generation, and keeps reading if the queue
// deletes the generation meanwhile (the file's bytes stay with the open
// handle); in memory-only mode it returns the entries the queue holds,
// without copying. It is not safe for concurrent use.
type SymbolReader struct {
	gen  uint32
	n    int // entries to return
	next int // id of the next entry

	mem [][]byte // memory-only mode: the generation's chunks still to read

	recs symbolRecords // SF mode: the n entries' records, through a handle of its own
	err  error         // the first error, returned again by every later Next
}

// OpenSymbols returns a reader of generation gen's entries. A generation the
// queue does not hold (never written, or deleted once no unacknowledged
// frame used it) reads as empty. Close the reader when done.
func (q *Queue) OpenSymbols(gen uint32) (*SymbolReader, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	// An append counts its entries before it fsyncs them with the lock
	// released, and takes them back (cutting the file) if its frames then
	// fail: wait for its outcome, so that the reader counts committed
	// entries only.
	for q.rotating && !q.closed {
		q.syncDone.Wait()
	}
	if q.closed {
		return nil, ErrClosed
	}
	d := q.dict
	r := &SymbolReader{gen: gen, n: d.counts[gen]}
	if d.fsys == nil {
		if g := d.mem[gen]; g != nil {
			r.mem = g.view()
		}
		return r, nil
	}
	gf := d.files[gen]
	if gf == nil || r.n == 0 {
		r.n = 0
		return r, nil
	}
	path := filepath.Join(d.dir, genDictName(gen))
	f, err := d.fsys.OpenFile(path, os.O_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("sfqueue: open %s for reading: %w", path, err)
	}
	r.recs = symbolRecords{f: f, path: path, size: gf.size}
	return r, nil
}

// Len is the number of entries the reader returns.
func (r *SymbolReader) Len() int { return r.n }

// Next returns the next entry, or io.EOF after Len entries. The entry is
// valid until the next call and must not be modified. A record that is
// short, fails its CRC32C or is not the expected id of the generation is
// an error naming the file and the record's offset; a failed read, one
// naming the id, generation, file and offset. Every later call returns the
// same error: the generation holds more entries than were returned, and
// must never be taken for one cut short.
func (r *SymbolReader) Next() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.next >= r.n {
		return nil, io.EOF
	}
	if r.mem != nil {
		var e []byte
		e, r.mem = nextEntry(r.mem)
		r.next++
		return e, nil
	}
	gen, id, e, at, err := r.recs.next()
	var fault *recordFault
	switch {
	case err == io.EOF:
		r.err = r.bad(at, fmt.Sprintf("is missing: the file ends at byte %d", r.recs.size))
	case errors.As(err, &fault):
		r.err = r.bad(at, fault.why)
	case err != nil:
		r.err = fmt.Errorf("sfqueue: reading symbol id %d of generation %d: %w", r.next, r.gen, err)
	case gen != r.gen || int(id) != r.next:
		r.err = r.bad(at, fmt.Sprintf("is id %d of generation %d", id, gen))
	}
	if r.err != nil {
		return nil, r.err
	}
	r.next++
	return e, nil
}

func (r *SymbolReader) bad(at int64, why string) error {
	return fmt.Errorf("sfqueue: %s: record at offset %d (symbol id %d of generation %d) %s", r.recs.path, at, r.next, r.gen, why)
}

// Close releases the reader's file handle.
func (r *SymbolReader) Close() error {
	if r.recs.f == nil {
		return nil
	}
	err := r.recs.f.Close()
	r.recs.f = nil
	return err
}

// SymbolGenerations lists the generations held, ascending.
func (q *Queue) SymbolGenerations() []uint32 {
	q.mu.Lock()
	defer q.mu.Unlock()
	gens := make([]uint32, 0, len(q.dict.counts))
	for g := range q.dict.counts {
		gens = append(gens, g)
	}
	slices.Sort(gens)
	return gens
}

// DropSymbolGenerationsBelow deletes the dictionaries of generations below
// gen, once every frame using them is acked: it writes the ack watermark,
// then deletes their files.
func (q *Queue) DropSymbolGenerationsBelow(gen uint32) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropSymbolsBelowLocked(gen)
}

func (q *Queue) dropSymbolsBelowLocked(gen uint32) error {
	if q.closed {
		return ErrClosed
	}
	if q.sf {
		// The frames of the dropped generations are acked, but the watermark
		// on disk may still predate those acks (it is written every few
		// hundred ms). Without it first, a crash after the drop would leave
		// recovery replaying frames whose dictionary is gone, and the slot
		// would be set aside as unreplayable.
		if err := q.saveWatermarkLocked(); err != nil {
			return fmt.Errorf("sfqueue: saving the ack watermark before dropping symbol generations below %d: %w", gen, err)
		}
	}
	// After the save, which releases q.mu: a seal may have started an
	// fsync of a dirty file meanwhile.
	for q.dictSyncs > 0 && !q.closed { // never close a file under its fsync
		q.syncDone.Wait()
	}
	if q.closed {
		return ErrClosed
	}
	return q.dict.dropBelow(gen)
}

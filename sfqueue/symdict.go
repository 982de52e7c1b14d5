package sfqueue

import (
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

	"go.uber.org/zap"
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
}

// symbolDict holds the dictionary generations. In SF mode the entries live
// only in their files (counts holds their number), so RAM does not grow
// with the dictionary; in memory-only mode entries holds them.
type symbolDict struct {
	fsys    FS // nil: memory-only, nothing persisted
	dir     string
	files   map[uint32]*genFile
	counts  map[uint32]int
	entries map[uint32][][]byte // memory-only mode
	bytes   int64               // record bytes held: file sizes in SF mode
	sync    bool                // fsync what persist writes (periodic and flush durability)
}

func newMemoryDict() *symbolDict {
	return &symbolDict{counts: map[uint32]int{}, entries: map[uint32][][]byte{}}
}

// openSymbolDict opens the dictionary of the slot dir as scan found it: it
// cuts torn tails, moves a legacy .symbol-dict's generations into their
// own files, and opens every generation's file for appending. scan.gens
// holds every entry (recovery's rebuilt ones included, which persist
// writes); they are not kept in RAM.
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
		d.files[fs.gen] = &genFile{f: f, size: fs.intact}
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
		d.files[g] = &genFile{f: f, size: int64(len(buf))}
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
	if _, op, err := d.add(gen, firstID, entries); err != nil {
		return fmt.Errorf("sfqueue: %s (rebuilt entries): %w", op, err)
	}
	if d.sync {
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

// add appends entries as ids firstID.. of gen; firstID must be the next id.
// It writes them but does not fsync (see Queue.AddSymbols); created reports
// a new generation file (its directory entry needs an fsync too).
func (d *symbolDict) add(gen uint32, firstID int, entries [][]byte) (created bool, op string, err error) {
	have := d.counts[gen]
	if firstID != have {
		return false, "", fmt.Errorf("sfqueue: AddSymbols generation %d starts at id %d, but the dictionary holds %d entries: ids must be added in order", gen, firstID, have)
	}
	for i, e := range entries {
		if len(e) > maxSymbolBytes {
			return false, "", fmt.Errorf("sfqueue: symbol id %d of generation %d is %d bytes, above the %d-byte limit", firstID+i, gen, len(e), maxSymbolBytes)
		}
	}
	if len(entries) == 0 {
		return false, "", nil
	}
	var n int64
	for _, e := range entries {
		n += symbolRecordBytes(e)
	}
	if d.fsys == nil {
		for _, e := range entries {
			d.entries[gen] = append(d.entries[gen], slices.Clone(e))
		}
	} else {
		gf := d.files[gen]
		if gf == nil {
			f, err := d.fsys.OpenFile(filepath.Join(d.dir, genDictName(gen)), os.O_RDWR|os.O_CREATE|os.O_TRUNC)
			if err != nil {
				return false, "create " + genDictName(gen), err
			}
			gf, created = &genFile{f: f}, true
			d.files[gen] = gf
		}
		buf := make([]byte, 0, n)
		for i, e := range entries {
			buf = appendSymbolRecord(buf, gen, uint32(firstID+i), e)
		}
		if _, err := gf.f.WriteAt(buf, gf.size); err != nil {
			return created, "write " + genDictName(gen), err
		}
		gf.size += n
	}
	d.counts[gen] += len(entries)
	d.bytes += n
	return created, "", nil
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
			for _, e := range d.entries[g] {
				d.bytes -= symbolRecordBytes(e)
			}
			delete(d.entries, g)
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

func (d *symbolDict) close() error {
	var errs []error
	for g, gf := range d.files {
		errs = append(errs, gf.f.Close())
		delete(d.files, g)
	}
	return errors.Join(errs...)
}

// AddSymbols records dictionary entries firstID, firstID+1, ... of
// generation gen. Call it before appending the frames that use them: in SF
// mode the entries are written to .symbol-dict first, and in periodic and
// flush durability fsynced before AddSymbols returns (with the queue's lock
// released), so no frame can reach the disk ahead of the ids it needs.
func (q *Queue) AddSymbols(gen uint32, firstID int, entries [][]byte) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.usableLocked(); err != nil {
		return err
	}
	q.gens.newest = max(q.gens.newest, gen)
	created, op, err := q.dict.add(gen, firstID, entries)
	if err != nil {
		if op == "" {
			return err
		}
		if isNoSpace(err) {
			need := int64(0)
			for _, e := range entries {
				need += int64(symbolRecordHeader + len(e) + 4)
			}
			return &FullError{Reason: DiskFull, Used: q.used, Cap: q.o.MaxTotalBytes, Need: need}
		}
		return q.latchLocked(op, err)
	}
	if !q.sf || q.o.Durability == DurabilityMemory || len(entries) == 0 {
		return nil
	}
	f := q.dict.files[gen].f
	q.dictSyncs++ // keeps DropSymbolGenerationsBelow and Close off this file
	q.mu.Unlock()
	start := time.Now()
	err = f.Sync()
	if err == nil && created {
		err = q.fs.SyncDir(q.slot)
	}
	elapsed := time.Since(start)
	q.mu.Lock()
	q.dictSyncs--
	q.syncDone.Broadcast()
	q.st.recordFsync(elapsed)
	if err != nil {
		return q.latchLocked("fsync "+genDictName(gen), err)
	}
	return nil
}

// Symbols returns the persisted entries of generation gen in id order,
// all in RAM: for loading the generation being written. A catch-up streams
// with OpenSymbols instead.
func (q *Queue) Symbols(gen uint32) [][]byte {
	r, err := q.OpenSymbols(gen)
	if err != nil {
		q.log.Warn("sfqueue: reading a symbol dictionary generation", zap.String("slot", q.slot), zap.Error(err))
		return nil
	}
	defer r.Close()
	out := make([][]byte, 0, r.Len())
	for {
		e, err := r.Next()
		if err != nil {
			if err != io.EOF {
				q.log.Warn("sfqueue: reading a symbol dictionary generation", zap.String("slot", q.slot), zap.Error(err))
			}
			return out
		}
		out = append(out, slices.Clone(e))
	}
}

// SymbolReader streams the entries of one dictionary generation in id
// order, as many as the generation held when OpenSymbols was called. In SF
// mode it reads the generation's file in chunks through its own handle, so
// it holds a chunk, never the generation, and keeps reading if the queue
// deletes the generation meanwhile (the file's bytes stay with the open
// handle); in memory-only mode it returns the entries the queue holds,
// without copying. It is not safe for concurrent use.
type SymbolReader struct {
	gen  uint32
	n    int // entries to return
	next int // id of the next entry

	mem [][]byte // memory-only mode

	recs symbolRecords // SF mode: the n entries' records, through a handle of its own
}

// OpenSymbols returns a reader of generation gen's entries. A generation the
// queue does not hold (never written, or deleted once no unacknowledged
// frame used it) reads as empty. Close the reader when done.
func (q *Queue) OpenSymbols(gen uint32) (*SymbolReader, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, ErrClosed
	}
	d := q.dict
	r := &SymbolReader{gen: gen, n: d.counts[gen]}
	if d.fsys == nil {
		r.mem = d.entries[gen][:r.n:r.n]
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
// an error naming the file and the record's offset.
func (r *SymbolReader) Next() ([]byte, error) {
	if r.next >= r.n {
		return nil, io.EOF
	}
	if r.mem != nil {
		e := r.mem[r.next]
		r.next++
		return e, nil
	}
	gen, id, e, at, err := r.recs.next()
	var fault *recordFault
	switch {
	case err == io.EOF:
		return nil, r.bad(at, fmt.Sprintf("is missing: the file ends at byte %d", r.recs.size))
	case errors.As(err, &fault):
		return nil, r.bad(at, fault.why)
	case err != nil:
		return nil, err
	case gen != r.gen || int(id) != r.next:
		return nil, r.bad(at, fmt.Sprintf("is id %d of generation %d", id, gen))
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
	for q.dictSyncs > 0 && !q.closed { // never close a file under its fsync
		q.syncDone.Wait()
	}
	if q.closed {
		return ErrClosed
	}
	if q.sf {
		// The frames of the dropped generations are acked, but the watermark
		// on disk may still predate those acks (it is written every few
		// hundred ms). Without it first, a crash after the drop would leave
		// recovery replaying frames whose dictionary is gone, and the slot
		// would be set aside as unreplayable.
		if err := q.saveWatermarkLocked(q.durable, true); err != nil {
			return fmt.Errorf("sfqueue: saving the ack watermark before dropping symbol generations below %d: %w", gen, err)
		}
		if q.closed { // closed while the watermark was written
			return ErrClosed
		}
	}
	return q.dict.dropBelow(gen)
}

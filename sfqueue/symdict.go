package sfqueue

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// .symbol-dict: an append-only log of records
//
//	generation u32 | id u32 | length u32 | bytes | CRC32C u32 (of all before it)
//
// A record's id must be the next id of its generation. On open the log is
// walked and cut at the first record that is short, fails its CRC or breaks
// the id sequence (a torn tail).
const (
	symbolDictFile     = ".symbol-dict"
	symbolRecordHeader = 12
	// maxSymbolBytes bounds one entry so a corrupt length cannot ask for
	// gigabytes.
	maxSymbolBytes = 1 << 24
)

type symbolDict struct {
	fsys FS // nil: memory-only, nothing persisted
	dir  string
	f    File
	size int64
	gens map[uint32][][]byte
	sync bool // fsync what persist writes (periodic and flush durability)
	// rewriting: a rewrite of the file runs with q.mu released; tail holds
	// the records add appended to the old file meanwhile.
	rewriting bool
	tail      []byte
}

func newMemoryDict() *symbolDict { return &symbolDict{gens: map[uint32][][]byte{}} }

// openSymbolDict opens dir/.symbol-dict for appending, holding the
// entries of scan (its valid prefix, plus any entries recovery rebuilt,
// which persist writes). A torn tail past the valid prefix is cut (and the
// cut fsynced when sync is set).
func openSymbolDict(fsys FS, dir string, scan DictScan, sync bool) (*symbolDict, error) {
	p := filepath.Join(dir, symbolDictFile)
	f, err := fsys.OpenFile(p, os.O_RDWR|os.O_CREATE)
	if err != nil {
		return nil, err
	}
	if scan.Size > scan.IntactBytes {
		err := f.Truncate(scan.IntactBytes)
		if err == nil && sync {
			err = f.Sync()
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("sfqueue: cut torn tail of %s at %d: %w", p, scan.IntactBytes, err)
		}
	}
	gens := scan.gens
	if gens == nil {
		gens = map[uint32][][]byte{}
	}
	return &symbolDict{fsys: fsys, dir: dir, f: f, size: scan.IntactBytes, gens: gens, sync: sync}, nil
}

// persist writes entries firstID.. of gen, which d.gens already holds, to
// the file (recovery's rebuilt entries) and fsyncs them when d.sync.
func (d *symbolDict) persist(gen uint32, firstID int, entries [][]byte) error {
	var buf []byte
	for i, e := range entries {
		buf = appendSymbolRecord(buf, gen, uint32(firstID+i), e)
	}
	if _, err := d.f.WriteAt(buf, d.size); err != nil {
		return fmt.Errorf("sfqueue: write rebuilt entries to %s: %w", symbolDictFile, err)
	}
	d.size += int64(len(buf))
	if d.sync {
		if err := d.f.Sync(); err != nil {
			return fmt.Errorf("sfqueue: fsync %s: %w", symbolDictFile, err)
		}
	}
	return nil
}

// parseSymbolRecord checks one record at the start of b.
func parseSymbolRecord(b []byte) (gen uint32, entry []byte, n int, ok bool) {
	if len(b) < symbolRecordHeader+4 {
		return 0, nil, 0, false
	}
	l := binary.LittleEndian.Uint32(b[8:])
	if l > maxSymbolBytes || int(l) > len(b)-symbolRecordHeader-4 {
		return 0, nil, 0, false
	}
	end := symbolRecordHeader + int(l)
	if crc32.Checksum(b[:end], castagnoli) != binary.LittleEndian.Uint32(b[end:]) {
		return 0, nil, 0, false
	}
	return binary.LittleEndian.Uint32(b), slices.Clone(b[symbolRecordHeader:end]), end + 4, true
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
// It writes them but does not fsync (see Queue.AddSymbols).
func (d *symbolDict) add(gen uint32, firstID int, entries [][]byte) (op string, err error) {
	have := len(d.gens[gen])
	if firstID != have {
		return "", fmt.Errorf("sfqueue: AddSymbols generation %d starts at id %d, but the dictionary holds %d entries: ids must be added in order", gen, firstID, have)
	}
	for i, e := range entries {
		if len(e) > maxSymbolBytes {
			return "", fmt.Errorf("sfqueue: symbol id %d of generation %d is %d bytes, above the %d-byte limit", firstID+i, gen, len(e), maxSymbolBytes)
		}
	}
	if d.fsys != nil && len(entries) > 0 {
		var buf []byte
		for i, e := range entries {
			buf = appendSymbolRecord(buf, gen, uint32(firstID+i), e)
		}
		if _, err := d.f.WriteAt(buf, d.size); err != nil {
			return "write " + symbolDictFile, err
		}
		d.size += int64(len(buf))
		if d.rewriting {
			d.tail = append(d.tail, buf...)
		}
	}
	for _, e := range entries {
		d.gens[gen] = append(d.gens[gen], slices.Clone(e))
	}
	return "", nil
}

// dropBelow forgets every generation below gen in memory and returns the
// records of the generations kept, for the file's rewrite; nil when nothing
// changed or nothing is persisted.
func (d *symbolDict) dropBelow(gen uint32) []byte {
	changed := false
	for g := range d.gens {
		if g < gen {
			delete(d.gens, g)
			changed = true
		}
	}
	if d.fsys == nil || !changed {
		return nil
	}
	gens := make([]uint32, 0, len(d.gens))
	for g := range d.gens {
		gens = append(gens, g)
	}
	slices.Sort(gens)
	buf := []byte{} // non-nil: an empty file is a rewrite too
	for _, g := range gens {
		for id, e := range d.gens[g] {
			buf = appendSymbolRecord(buf, g, uint32(id), e)
		}
	}
	return buf
}

// rewriteLocked replaces .symbol-dict with records (and whatever AddSymbols
// appends meanwhile) without holding q.mu during the file I/O, so that the
// consumer's reads and acks and the producer's appends go on. While it runs,
// AddSymbols keeps appending to the old file, which stays a superset of the
// new one until the rename, and also hands its records over (d.tail); they
// are appended to the temporary file and fsynced before the rename. So a
// crash at any point leaves a file holding every entry AddSymbols returned
// for. Called with q.mu held; returns with it held.
func (q *Queue) rewriteDictLocked(records []byte) error {
	d := q.dict
	d.rewriting, d.tail = true, nil
	defer func() {
		d.rewriting, d.tail = false, nil
		q.syncDone.Broadcast()
	}()
	tmp := filepath.Join(d.dir, symbolDictFile+".tmp")
	q.mu.Unlock()
	f, err := d.fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC)
	if err == nil {
		if _, err = f.WriteAt(records, 0); err == nil {
			err = f.Sync()
		}
	}
	q.mu.Lock()
	size := int64(len(records))
	// Catch up with AddSymbols until nothing is pending and no fsync of the
	// old file is under way (it must not be closed under one).
	for err == nil && (len(d.tail) > 0 || q.dictSyncs > 0) {
		if len(d.tail) == 0 {
			q.syncDone.Wait()
			continue
		}
		tail := d.tail
		d.tail = nil
		q.mu.Unlock()
		if _, err = f.WriteAt(tail, size); err == nil {
			err = f.Sync()
		}
		q.mu.Lock()
		size += int64(len(tail))
	}
	if err == nil {
		err = d.fsys.Rename(tmp, filepath.Join(d.dir, symbolDictFile))
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		d.fsys.Remove(tmp)
		return fmt.Errorf("sfqueue: rewrite %s: %w", filepath.Join(d.dir, symbolDictFile), err)
	}
	old := d.f
	d.f, d.size = f, size
	old.Close()
	// The rename is durable with the directory; until then a crash leaves
	// the old file, a superset.
	q.mu.Unlock()
	err = d.fsys.SyncDir(d.dir)
	q.mu.Lock()
	if err != nil {
		return fmt.Errorf("sfqueue: fsync %s after replacing %s: %w", d.dir, symbolDictFile, err)
	}
	return nil
}

func (d *symbolDict) close() error {
	if d.f == nil {
		return nil
	}
	err := d.f.Close()
	d.f = nil
	return err
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
	op, err := q.dict.add(gen, firstID, entries)
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
	f := q.dict.f
	q.dictSyncs++ // keeps DropSymbolGenerationsBelow and Close off this file
	q.mu.Unlock()
	start := time.Now()
	err = f.Sync()
	elapsed := time.Since(start)
	q.mu.Lock()
	q.dictSyncs--
	q.syncDone.Broadcast()
	q.st.recordFsync(elapsed)
	if err != nil {
		return q.latchLocked("fsync "+symbolDictFile, err)
	}
	return nil
}

// Symbols returns the persisted entries of generation gen in id order. The
// slices must not be modified.
func (q *Queue) Symbols(gen uint32) [][]byte {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.dict.gens[gen])
}

// SymbolGenerations lists the generations held, ascending.
func (q *Queue) SymbolGenerations() []uint32 {
	q.mu.Lock()
	defer q.mu.Unlock()
	gens := make([]uint32, 0, len(q.dict.gens))
	for g := range q.dict.gens {
		gens = append(gens, g)
	}
	slices.Sort(gens)
	return gens
}

// DropSymbolGenerationsBelow deletes the dictionaries of generations below
// gen, once every frame using them is acked. It writes the ack watermark and
// rewrites .symbol-dict with the queue's lock released during the I/O, but
// it still takes a few fsyncs: call it off any latency-sensitive path.
func (q *Queue) DropSymbolGenerationsBelow(gen uint32) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropSymbolsBelowLocked(gen)
}

func (q *Queue) dropSymbolsBelowLocked(gen uint32) error {
	for q.dict.rewriting && !q.closed {
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
	if records := q.dict.dropBelow(gen); records != nil {
		return q.rewriteDictLocked(records)
	}
	return nil
}

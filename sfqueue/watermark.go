package sfqueue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// .ack-watermark, 24 bytes: magic u32 | acked FSN u64 | durable FSN u64 |
// CRC32C u32 of the first 20 bytes. Replaced atomically. The magic is
// "SQW1" when a completed fsync covered every frame up to the durable FSN,
// "SQWu" when some were only written (a Close in memory durability or
// after a failed fsync).
const (
	watermarkFile          = ".ack-watermark"
	watermarkMagic         = 0x31575153 // "SQW1"
	watermarkMagicUnsynced = 0x75575153 // "SQWu"
	watermarkSize          = 24
)

// watermark is the content of .ack-watermark. durable is the highest FSN the
// writer knew to be on disk (fsynced, or all published frames at a clean
// Close), so recovery can tell when frames it was promised are missing;
// unsynced says that no completed fsync was known to cover all of them.
type watermark struct {
	acked, durable uint64
	unsynced       bool
}

// readWatermark returns the recorded watermark; ok is false when the file is
// missing or unusable (corrupt is reported in err for logging, not fatal).
func readWatermark(fsys FS, dir string) (w watermark, ok bool, err error) {
	b, err := readSmallFile(fsys, filepath.Join(dir, watermarkFile), watermarkSize+1)
	if errors.Is(err, fs.ErrNotExist) {
		return w, false, nil
	}
	if err != nil {
		return w, false, err
	}
	magic := uint32(0)
	if len(b) >= 4 {
		magic = binary.LittleEndian.Uint32(b)
	}
	if len(b) != watermarkSize || magic != watermarkMagic && magic != watermarkMagicUnsynced ||
		binary.LittleEndian.Uint32(b[20:]) != crc32.Checksum(b[:20], castagnoli) {
		return w, false, fmt.Errorf("sfqueue: %s is corrupt (%d bytes, bad magic or CRC); ignoring it", watermarkFile, len(b))
	}
	w.acked = binary.LittleEndian.Uint64(b[4:])
	w.durable = binary.LittleEndian.Uint64(b[12:])
	w.unsynced = magic == watermarkMagicUnsynced
	return w, true, nil
}

func encodeWatermark(w watermark) []byte {
	b := make([]byte, watermarkSize)
	magic := uint32(watermarkMagic)
	if w.unsynced {
		magic = watermarkMagicUnsynced
	}
	binary.LittleEndian.PutUint32(b, magic)
	binary.LittleEndian.PutUint64(b[4:], w.acked)
	binary.LittleEndian.PutUint64(b[12:], w.durable)
	binary.LittleEndian.PutUint32(b[20:], crc32.Checksum(b[:20], castagnoli))
	return b
}

// watermarkFor is what .ack-watermark records now with durable as the
// on-disk FSN: unsynced when durable is past what completed fsyncs covered
// (q.durable), and always in memory durability, which never fsyncs a
// segment (q.durable there is what recovery found).
func (q *Queue) watermarkFor(durable uint64) watermark {
	return watermark{acked: q.acked, durable: durable, unsynced: durable > q.durable || q.o.Durability == DurabilityMemory}
}

// saveWatermarkLocked writes the acked FSN, with durable as the on-disk FSN
// (unsynced when it is past q.durable, what completed fsyncs covered),
// if the acked FSN moved since the last write (or, with force, if anything
// moved). q.mu is released during the I/O. Writers take turns (wmWriting),
// and each reads q.acked only once it has its turn, so the file's acked FSN
// never moves backwards even when the background writer and an explicit
// save (DropSymbolGenerationsBelow, Close) meet.
func (q *Queue) saveWatermarkLocked(durable uint64, force bool) error {
	for q.wmWriting {
		q.syncDone.Wait()
	}
	w := q.watermarkFor(durable)
	// Once per segment, when its first fsync has ended, even without new
	// acks: a watermark that records an FSN of the newest segment as on
	// disk is what tells recovery a header the medium damaged later from a
	// torn creation, which it would delete (doc.go, Recovery).
	newSeg := q.active != nil && durable >= q.active.base && q.wmSaved.durable < q.active.base
	if w.acked == q.wmSaved.acked && !newSeg && (!force || w == q.wmSaved) {
		return nil
	}
	q.wmWriting = true
	q.mu.Unlock()
	err := replaceFile(q.fs, q.slot, watermarkFile, encodeWatermark(w))
	q.mu.Lock()
	q.wmWriting = false
	q.syncDone.Broadcast()
	if err != nil {
		return err
	}
	q.wmSaved = w
	return nil
}

// replaceFile atomically replaces dir/name with data: write a temporary
// file, fsync it, rename it over the old one, fsync the directory. After a
// crash the old or the new content is there, never a mix.
func replaceFile(fsys FS, dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, filepath.Join(dir, name))
	}
	if err == nil {
		err = fsys.SyncDir(dir)
	}
	if err != nil {
		fsys.Remove(tmp)
		return fmt.Errorf("sfqueue: replace %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}

// readSmallFile reads a whole file of at most limit bytes.
func readSmallFile(fsys FS, name string, limit int64) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size > limit {
		size = limit
	}
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return nil, err
	}
	return b[:n], nil
}

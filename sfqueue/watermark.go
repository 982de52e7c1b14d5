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

// .ack-watermark, format 2, 36 bytes: magic u32 "SQW2" | durability u8
// (the mode of the queue that wrote it, plus 1; 0: not recorded) | 3 zero
// bytes | acked FSN
// u64 | synced FSN u64 | published FSN u64 | CRC32C u32 of the bytes before
// it. Replaced atomically. Format 1, 24 bytes, written by releases before
// it: magic "SQW1" or "SQWu" | acked FSN u64 | on-disk FSN u64 | CRC32C;
// "SQW1" said completed fsyncs covered the on-disk FSN (read as synced and
// published), "SQWu" that some of it was only written (read as published,
// nothing synced).
const (
	watermarkFile          = ".ack-watermark"
	watermarkMagic         = 0x32575153 // "SQW2"
	watermarkMagicV1       = 0x31575153 // "SQW1"
	watermarkMagicUnsynced = 0x75575153 // "SQWu"
	watermarkSize          = 36
	watermarkSizeV1        = 24
)

// watermark is the content of .ack-watermark: what recovery judges a slot
// by (rule.go).
type watermark struct {
	acked uint64 // highest FSN the server acknowledged
	// synced is the highest FSN completed fsyncs covered, segment data and
	// directory entries: what is lost at or below it is media damage.
	synced uint64
	// published is the highest FSN appended and published when it was
	// written: frames up to it that recovery cannot find were lost, and
	// are counted, never dropped unsaid.
	published uint64
	mode      Durability
	modeKnown bool // false in format 1
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
	corrupt := fmt.Errorf("sfqueue: %s is corrupt (%d bytes, bad magic or CRC); ignoring it", watermarkFile, len(b))
	magic := uint32(0)
	if len(b) >= 4 {
		magic = binary.LittleEndian.Uint32(b)
	}
	switch {
	case len(b) == watermarkSize && magic == watermarkMagic && b[4] <= byte(DurabilityFlush)+1 &&
		binary.LittleEndian.Uint32(b[32:]) == crc32.Checksum(b[:32], castagnoli):
		if b[4] != 0 {
			w.mode, w.modeKnown = Durability(b[4]-1), true
		}
		w.acked = binary.LittleEndian.Uint64(b[8:])
		w.synced = binary.LittleEndian.Uint64(b[16:])
		w.published = binary.LittleEndian.Uint64(b[24:])
	case len(b) == watermarkSizeV1 && (magic == watermarkMagicV1 || magic == watermarkMagicUnsynced) &&
		binary.LittleEndian.Uint32(b[20:]) == crc32.Checksum(b[:20], castagnoli):
		w.acked = binary.LittleEndian.Uint64(b[4:])
		w.published = binary.LittleEndian.Uint64(b[12:])
		if magic == watermarkMagicV1 {
			w.synced = w.published
		}
	default:
		return w, false, corrupt
	}
	return w, true, nil
}

func encodeWatermark(w watermark) []byte {
	b := make([]byte, watermarkSize)
	binary.LittleEndian.PutUint32(b, watermarkMagic)
	if w.modeKnown {
		b[4] = byte(w.mode) + 1
	}
	binary.LittleEndian.PutUint64(b[8:], w.acked)
	binary.LittleEndian.PutUint64(b[16:], w.synced)
	binary.LittleEndian.PutUint64(b[24:], w.published)
	binary.LittleEndian.PutUint32(b[32:], crc32.Checksum(b[:32], castagnoli))
	return b
}

// watermarkLocked is what .ack-watermark records now: the acked FSN, what
// completed fsyncs covered (q.durable) of every published frame, and the
// durability mode. q.durable runs ahead of q.written while a batch of
// several segments waits for a seal fsync (memory durability): its frames
// an earlier seal made durable are not published yet, and may still be
// undone.
func (q *Queue) watermarkLocked() watermark {
	return watermark{acked: q.acked, synced: min(q.durable, q.written), published: q.written, mode: q.o.Durability, modeKnown: true}
}

// saveWatermarkLocked writes .ack-watermark if what it records moved
// since the last write: the background save (every 250 ms), Close, and a
// dictionary generation's deletion call it. Recording published frames
// even when no ack moves (QuestDB down) is what lets recovery count frames
// that never reached the disk; recording synced ones is what tells
// recovery the mode's loss window from media damage (rule.go). q.mu is
// released during the I/O. Writers take turns (wmWriting), and each reads
// the queue's state only once it has its turn, so the file's FSNs never
// move backwards even when the background writer and an explicit save
// (DropSymbolGenerationsBelow, Close) meet.
func (q *Queue) saveWatermarkLocked() error {
	for q.wmWriting {
		q.syncDone.Wait()
	}
	w := q.watermarkLocked()
	if w == q.wmSaved {
		return nil
	}
	q.wmWriting = true
	q.mu.Unlock()
	err := replaceFile(q.fs, q.slot, watermarkFile, encodeWatermark(w))
	q.mu.Lock()
	q.wmWriting = false
	q.syncDone.Broadcast()
	var dse *dirSyncError
	if errors.As(err, &dse) {
		// The directory holds the segments' names too: after a failed
		// fsync of it, a later one may report clean for entries that never
		// reached the disk. Fatal, like a segment's (doc.go, Durability).
		q.latchLocked("fsync directory "+q.slot, dse.err)
	}
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
		if derr := fsys.SyncDir(dir); derr != nil {
			err = &dirSyncError{derr}
		}
	}
	if err != nil {
		fsys.Remove(tmp)
		return fmt.Errorf("sfqueue: replace %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}

// dirSyncError is replaceFile's failed fsync of the directory, which, unlike
// a failure on the temporary file, concerns every entry of the directory.
type dirSyncError struct{ err error }

func (e *dirSyncError) Error() string { return "fsync directory: " + e.err.Error() }
func (e *dirSyncError) Unwrap() error { return e.err }

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

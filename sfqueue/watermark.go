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

// .ack-watermark: the highest acked FSN, 16 bytes: magic u32 "SQW1", FSN
// u64, CRC32C u32 of the first 12 bytes. Replaced atomically.
const (
	watermarkFile  = ".ack-watermark"
	watermarkMagic = 0x31575153
	watermarkSize  = 16
)

// readWatermark returns the recorded FSN; ok is false when the file is
// missing or unusable (corrupt is reported in err for logging, not fatal).
func readWatermark(fsys FS, dir string) (fsn uint64, ok bool, err error) {
	b, err := readSmallFile(fsys, filepath.Join(dir, watermarkFile), watermarkSize+1)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if len(b) != watermarkSize || binary.LittleEndian.Uint32(b) != watermarkMagic ||
		binary.LittleEndian.Uint32(b[12:]) != crc32.Checksum(b[:12], castagnoli) {
		return 0, false, fmt.Errorf("sfqueue: %s is corrupt (%d bytes, bad magic or CRC); ignoring it", watermarkFile, len(b))
	}
	return binary.LittleEndian.Uint64(b[4:]), true, nil
}

func encodeWatermark(fsn uint64) []byte {
	b := make([]byte, watermarkSize)
	binary.LittleEndian.PutUint32(b, watermarkMagic)
	binary.LittleEndian.PutUint64(b[4:], fsn)
	binary.LittleEndian.PutUint32(b[12:], crc32.Checksum(b[:12], castagnoli))
	return b
}

// saveWatermarkLocked writes the ack watermark if it moved since the last
// write. q.mu is released during the I/O; only the background goroutine and
// Close (after stopping it) call this, so writes never overlap.
func (q *Queue) saveWatermarkLocked() error {
	fsn := q.acked
	if fsn == q.wmSaved {
		return nil
	}
	q.mu.Unlock()
	err := replaceFile(q.fs, q.slot, watermarkFile, encodeWatermark(fsn))
	q.mu.Lock()
	if err != nil {
		return err
	}
	q.wmSaved = fsn
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

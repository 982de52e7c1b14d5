package sfqueue

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Segment file layout (see doc.go): a 24-byte header followed by frames.
const (
	segmentMagic      uint32 = 0x31465153 // "SQF1" little-endian
	segmentVersion    uint32 = 1
	segmentHeaderSize        = 24
	segmentSuffix            = ".sfseg"
	// frameOverhead is the length prefix plus the trailing CRC32C.
	frameOverhead = 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// segmentName is the file name of the segment whose first frame is base:
// zero-padded so lexical order is FSN order.
func segmentName(base uint64) string { return fmt.Sprintf("%020d%s", base, segmentSuffix) }

// parseSegmentName returns the base FSN of a segment file name.
func parseSegmentName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	base, err := strconv.ParseUint(digits, 10, 64)
	return base, err == nil && base > 0
}

func encodeSegmentHeader(base uint64) []byte {
	h := make([]byte, segmentHeaderSize)
	binary.LittleEndian.PutUint32(h[0:], segmentMagic)
	binary.LittleEndian.PutUint32(h[4:], segmentVersion)
	binary.LittleEndian.PutUint64(h[8:], base)
	binary.LittleEndian.PutUint32(h[20:], crc32.Checksum(h[:20], castagnoli))
	return h
}

// checkSegmentHeader validates magic, version, CRC and the base FSN the file
// name promises.
func checkSegmentHeader(h []byte, base uint64) error {
	switch {
	case len(h) < segmentHeaderSize:
		return fmt.Errorf("header is %d bytes, want %d", len(h), segmentHeaderSize)
	case binary.LittleEndian.Uint32(h[20:]) != crc32.Checksum(h[:20], castagnoli):
		return fmt.Errorf("header CRC mismatch")
	case binary.LittleEndian.Uint32(h[0:]) != segmentMagic:
		return fmt.Errorf("magic %#x, want %#x", binary.LittleEndian.Uint32(h[0:]), segmentMagic)
	case binary.LittleEndian.Uint32(h[4:]) != segmentVersion:
		return fmt.Errorf("version %d, want %d", binary.LittleEndian.Uint32(h[4:]), segmentVersion)
	case binary.LittleEndian.Uint64(h[8:]) != base:
		return fmt.Errorf("header base FSN %d, file name says %d", binary.LittleEndian.Uint64(h[8:]), base)
	}
	return nil
}

// frameSize is the bytes a payload takes in a segment.
func frameSize(payloadLen int) int64 { return int64(payloadLen) + frameOverhead }

// appendFrame appends length, payload and CRC32C(length, payload) to dst.
// The CRC covers the length too, so an all-zero region never validates.
// It is the last 4 bytes of the frame: the kernel copies a write in order,
// and a frame whose tail never landed fails the check on recovery.
func appendFrame(dst, payload []byte) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	dst = append(dst, payload...)
	crc := crc32.Checksum(dst[start:], castagnoli)
	return binary.LittleEndian.AppendUint32(dst, crc)
}

// parseFrame checks the frame at the start of b and returns its payload and
// total size. ok is false when b does not start with a whole, valid frame.
func parseFrame(b []byte) (payload []byte, size int, ok bool) {
	if len(b) < frameOverhead {
		return nil, 0, false
	}
	n := binary.LittleEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-frameOverhead) {
		return nil, 0, false
	}
	end := 4 + int(n)
	if crc32.Checksum(b[:end], castagnoli) != binary.LittleEndian.Uint32(b[end:]) {
		return nil, 0, false
	}
	return b[4:end], end + 4, true
}

// segment is one file (or RAM buffer) holding the frames base ..
// base+len(offsets)-1. All fields are guarded by Queue.mu; refs counts fsyncs
// in flight outside the lock, which postpone closing the file. Sealed
// segments keep no file open (a full 10 GiB slot has 2,560 of them); the
// cursor opens the one it reads (see Queue.fileLocked).
type segment struct {
	base    uint64
	path    string
	f       File     // nil while closed
	offsets []uint32 // start of each frame in the file
	size    int64    // bytes written: header + frames
	dirty   bool     // written since the last fsync
	refs    int
	removed bool // unlinked; close when refs drops to 0
}

// end is the FSN after the segment's last frame.
func (s *segment) end() uint64 { return s.base + uint64(len(s.offsets)) }

func (s *segment) frames() int { return len(s.offsets) }

// frameBounds returns where frame i starts and how many bytes it takes.
func (s *segment) frameBounds(i int) (int64, int64) {
	start := int64(s.offsets[i])
	next := s.size
	if i+1 < len(s.offsets) {
		next = int64(s.offsets[i+1])
	}
	return start, next - start
}

// closeFile closes the segment's file unless an fsync outside the lock
// still uses it (that fsync's owner closes it).
func (s *segment) closeFile() {
	if s.f != nil && s.refs == 0 {
		s.f.Close()
		s.f = nil
	}
}

// readFrame reads frame fsn into buf (grown as needed) and returns its
// verified payload, which aliases buf. The file must be open.
func (s *segment) readFrame(fsn uint64, buf []byte) ([]byte, []byte, error) {
	i := int(fsn - s.base)
	off, n := s.frameBounds(i)
	if int64(cap(buf)) < n {
		buf = make([]byte, n, n+n/4)
	}
	buf = buf[:n]
	if _, err := s.f.ReadAt(buf, off); err != nil && err != io.EOF {
		return nil, buf, fmt.Errorf("sfqueue: read frame %d of %s at offset %d: %w", fsn, filepath.Base(s.path), off, err)
	}
	payload, size, ok := parseFrame(buf)
	if !ok || int64(size) != n {
		return nil, buf, fmt.Errorf("sfqueue: frame %d of %s at offset %d fails its CRC32C check on read", fsn, filepath.Base(s.path), off)
	}
	return payload, buf, nil
}

// createSegment creates a new segment file, preallocates alloc bytes (none
// when alloc is 0) and stamps its header. On any error the file is removed
// again.
func createSegment(fsys FS, dir string, base uint64, alloc int64) (*segment, error) {
	p := filepath.Join(dir, segmentName(base))
	f, err := fsys.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*segment, error) {
		f.Close()
		fsys.Remove(p)
		return nil, err
	}
	if alloc > 0 {
		if err := f.Allocate(alloc); err != nil {
			return fail(err)
		}
	}
	if _, err := f.WriteAt(encodeSegmentHeader(base), 0); err != nil {
		return fail(err)
	}
	return &segment{base: base, path: p, f: f, size: segmentHeaderSize, dirty: true}, nil
}

// nonZeroExtent is the length of b up to its last non-zero byte: the
// preallocated, never-written tail of a segment is zeros and is not torn.
func nonZeroExtent(b []byte) int64 {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] != 0 {
			return int64(i + 1)
		}
	}
	return 0
}

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
	segmentMagic uint32 = 0x31465153 // "SQF1" little-endian
	// segmentVersion is the format this package writes: frames carry an
	// item count. segmentVersionItemless (frames without one) is still
	// read, so that a slot written by an older release recovers and drains.
	segmentVersion         uint32 = 2
	segmentVersionItemless uint32 = 1
	segmentHeaderSize             = 24
	segmentSuffix                 = ".sfseg"
	// frameOverhead is the length and item count before the payload plus
	// the trailing CRC32C (format 2); frameOverheadItemless has no item
	// count (format 1).
	frameOverhead         = 12
	frameOverheadItemless = 8
)

// overheadOf is the framing bytes of one frame in a segment of version v.
func overheadOf(v uint32) int {
	if v == segmentVersionItemless {
		return frameOverheadItemless
	}
	return frameOverhead
}

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

// headerVersion returns the version of an intact segment header: one of
// the right size, with the segment magic and a valid CRC (which covers the
// version, so a flipped bit there is damage, not another format).
func headerVersion(h []byte) (uint32, bool) {
	if len(h) < segmentHeaderSize || binary.LittleEndian.Uint32(h[0:]) != segmentMagic ||
		binary.LittleEndian.Uint32(h[20:]) != crc32.Checksum(h[:20], castagnoli) {
		return 0, false
	}
	return binary.LittleEndian.Uint32(h[4:]), true
}

// checkSegmentHeader validates magic, version, CRC and the base FSN the file
// name promises, and returns the segment's format version. An intact header
// of a version newer than segmentVersion is a *FormatError: not damage, a
// slot this code must not read or change.
func checkSegmentHeader(h []byte, base uint64) (uint32, error) {
	switch {
	case len(h) < segmentHeaderSize:
		return 0, fmt.Errorf("header is %d bytes, want %d", len(h), segmentHeaderSize)
	case binary.LittleEndian.Uint32(h[20:]) != crc32.Checksum(h[:20], castagnoli):
		return 0, fmt.Errorf("header CRC mismatch")
	case binary.LittleEndian.Uint32(h[0:]) != segmentMagic:
		return 0, fmt.Errorf("magic %#x, want %#x", binary.LittleEndian.Uint32(h[0:]), segmentMagic)
	}
	v := binary.LittleEndian.Uint32(h[4:])
	switch {
	case v > segmentVersion:
		return v, &FormatError{Version: v, Newest: segmentVersion}
	case v < segmentVersionItemless:
		return v, fmt.Errorf("version %d, want %d..%d", v, segmentVersionItemless, segmentVersion)
	case binary.LittleEndian.Uint64(h[8:]) != base:
		return v, fmt.Errorf("header base FSN %d, file name says %d", binary.LittleEndian.Uint64(h[8:]), base)
	}
	return v, nil
}

// frameSize is the bytes a payload takes in a segment this package writes.
func frameSize(payloadLen int) int64 { return int64(payloadLen) + frameOverhead }

// appendFrame appends length, item count, payload and CRC32C(length,
// items, payload) to dst (format 2). The CRC covers the length too, so an
// all-zero region never validates, and the item count, so a damaged count
// is a damaged frame. It is the last 4 bytes of the frame: the kernel
// copies a write in order, and a frame whose tail never landed fails the
// check on recovery.
func appendFrame(dst, payload []byte, items uint32) []byte {
	start := len(dst)
	dst = appendFrameHead(dst, len(payload), items)
	dst = append(dst, payload...)
	crc := crc32.Checksum(dst[start:], castagnoli)
	return binary.LittleEndian.AppendUint32(dst, crc)
}

// appendFrameHead appends what precedes a payload in a frame of the
// current format: its length and item count. The CRC32C that follows the
// payload covers both.
func appendFrameHead(dst []byte, payloadLen int, items uint32) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(payloadLen))
	return binary.LittleEndian.AppendUint32(dst, items)
}

// parseFrame checks the frame at the start of b, in a segment of format
// version v, and returns its payload, item count (0 in format 1, which has
// none) and total size. ok is false when b does not start with a whole,
// valid frame.
func parseFrame(b []byte, v uint32) (payload []byte, items uint32, size int, ok bool) {
	head := overheadOf(v) - 4 // length (and item count) before the payload
	if len(b) < head+4 {
		return nil, 0, 0, false
	}
	n := binary.LittleEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-head-4) {
		return nil, 0, 0, false
	}
	end := head + int(n)
	if crc32.Checksum(b[:end], castagnoli) != binary.LittleEndian.Uint32(b[end:]) {
		return nil, 0, 0, false
	}
	if head > 4 {
		items = binary.LittleEndian.Uint32(b[4:])
	}
	return b[head:end], items, end + 4, true
}

// segment is one file (or RAM buffer) holding the frames base ..
// base+len(offsets)-1. All fields are guarded by Queue.mu; refs counts fsyncs
// in flight outside the lock, which postpone closing the file. Sealed
// segments keep no file open (a full 10 GiB slot has 2,560 of them); the
// cursor opens the one it reads (see Queue.fileLocked).
type segment struct {
	base    uint64
	path    string
	version uint32   // format: segmentVersion, or an itemless one recovered
	f       File     // nil while closed
	offsets []uint32 // start of each frame in the file
	// items is the sum of the frames' item counts (format 2; 0 in format
	// 1): what evicting the segment whole drops, without reading it.
	items uint64
	size  int64 // bytes written: header + frames
	// slack is the unused tail counted against the cap once the segment
	// was sealed (Queue.sealSlack); 0 while it takes appends.
	slack int64
	dirty bool // written since the last fsync
	// sealing: sealed at a rotation in flush or memory durability and not
	// yet fsynced (Queue.syncSealedLocked); in flush durability no frame
	// of a later segment is written before it is.
	sealing bool
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

// itemWalkBuffer bounds the RAM of a walk over a segment's frame heads:
// one read gathers the heads that lie within it, never a whole segment.
const itemWalkBuffer = 64 << 10

// itemsFrom sums the item counts of frames first.. of a format 2 segment
// from their heads (length | items) in its open file. It reads the heads
// only: one read spans the heads of the frames that start within
// itemWalkBuffer of the first, so small frames cost a read per 64 KiB and
// a large one a read of its 8-byte head; no payload is read beyond such a
// span, and none is CRC-checked (the eviction that asks deletes them
// unread, holding the queue's lock meanwhile). Each head's length is
// checked against the frame's place in the segment.
func (s *segment) itemsFrom(first int) (uint64, error) {
	const head = frameOverhead - 4
	from, _ := s.frameBounds(first)
	buf := make([]byte, min(itemWalkBuffer, s.size-from))
	var items uint64
	for i := first; i < len(s.offsets); {
		start := int64(s.offsets[i])
		j := i + 1 // frames i..j-1 have their heads in this read
		for j < len(s.offsets) && int64(s.offsets[j])+head-start <= itemWalkBuffer {
			j++
		}
		b := buf[:int64(s.offsets[j-1])+head-start]
		if n, err := s.f.ReadAt(b, start); n < len(b) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, fmt.Errorf("frame %d at offset %d: %w", s.base+uint64(i), start, err)
		}
		for ; i < j; i++ {
			off, size := s.frameBounds(i)
			h := b[off-start:]
			if n := int64(binary.LittleEndian.Uint32(h)); n+frameOverhead != size {
				return 0, fmt.Errorf("frame %d at offset %d has length %d, its place in the segment says %d", s.base+uint64(i), off, n, size-frameOverhead)
			}
			items += uint64(binary.LittleEndian.Uint32(h[4:]))
		}
	}
	return items, nil
}

// unsealLocked ends the sealing state (Queue.sealLocked): the segment is
// durable, active again, or gone. It drops the ref that kept its file open.
func (s *segment) unsealLocked() {
	if s.sealing {
		s.sealing = false
		s.refs--
	}
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
	payload, _, size, ok := parseFrame(buf, s.version)
	if !ok || int64(size) != n {
		return nil, buf, fmt.Errorf("sfqueue: frame %d of %s at offset %d fails its CRC32C check on read", fsn, filepath.Base(s.path), off)
	}
	return payload, buf, nil
}

// readChunk reads p at off of frame fsn's bytes; the file must be open.
func (s *segment) readChunk(p []byte, off int64, fsn uint64) error {
	if k, err := s.f.ReadAt(p, off); err != nil && !(err == io.EOF && k == len(p)) {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("sfqueue: read frame %d of %s at offset %d: %w", fsn, filepath.Base(s.path), off, err)
	}
	return nil
}

// verifyFrame reads frame i through buf, a piece at a time, checks it as
// readFrame does (length and CRC32C), and sets st's payload bounds, head,
// stored CRC32C and the CRC32C of the bytes before the payload. The file
// must be open; buf holds at least the frame head and StreamHeadBytes.
func (s *segment) verifyFrame(i int, buf []byte, st *Stream) error {
	off, size := s.frameBounds(i)
	fsn := s.base + uint64(i)
	bad := func() error { // built only on failure: verifyFrame runs for every frame sent
		return fmt.Errorf("sfqueue: frame %d of %s at offset %d fails its CRC32C check on read", fsn, filepath.Base(s.path), off)
	}
	head := int64(overheadOf(s.version) - 4) // length (and item count)
	if size < head+4 {
		return bad()
	}
	body := size - 4 // what the CRC32C covers
	var crc uint32
	var tail [4]byte
	for pos := int64(0); pos < size; {
		p := buf[:min(int64(len(buf)), size-pos)]
		if err := s.readChunk(p, off+pos, fsn); err != nil {
			return err
		}
		if pos == 0 {
			n := int64(binary.LittleEndian.Uint32(p))
			if head+n+4 != size {
				return bad()
			}
			st.off, st.n = off+head, int(n)
			copy(st.head[:], p[head:])
			st.crc = crc32.Checksum(p[:head], castagnoli)
		}
		if pos < body {
			crc = crc32.Update(crc, castagnoli, p[:min(int64(len(p)), body-pos)])
		}
		for j := max(pos, body); j < pos+int64(len(p)); j++ {
			tail[j-body] = p[j-pos]
		}
		pos += int64(len(p))
	}
	st.want = binary.LittleEndian.Uint32(tail[:])
	if crc != st.want {
		return bad()
	}
	return nil
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
	return &segment{base: base, path: p, version: segmentVersion, f: f, size: segmentHeaderSize, dirty: true}, nil
}

// checkSlotFormat refuses, with a *FormatError, a slot holding a segment
// of a format newer than this package reads. It only reads headers, and
// runs before Open takes the lock or changes anything: a slot a newer
// release wrote must be left exactly as it is. A missing slot passes.
func checkSlotFormat(fsys FS, dir string) error {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil // no slot yet; a real listing error surfaces in recovery
	}
	h := make([]byte, segmentHeaderSize)
	for _, name := range names {
		if _, ok := parseSegmentName(name); !ok {
			continue
		}
		p := filepath.Join(dir, name)
		f, err := fsys.OpenFile(p, os.O_RDONLY)
		if err != nil {
			continue // deleted since the listing, or unreadable: recovery decides
		}
		n, _ := f.ReadAt(h, 0)
		f.Close()
		if v, ok := headerVersion(h[:n]); ok && v > segmentVersion {
			return &FormatError{Path: p, Version: v, Newest: segmentVersion}
		}
	}
	return nil
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

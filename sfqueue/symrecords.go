package sfqueue

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
)

// symbolReadChunk is how much of a dictionary file is read at a time; a
// record larger than it is read whole.
const symbolReadChunk = 64 << 10

// symbolRecords walks the records of one dictionary file in chunks of
// symbolReadChunk, so that reading a generation, or the open-time scan of
// every file, holds a chunk and never a whole file.
type symbolRecords struct {
	f    File
	path string // for errors
	size int64  // bytes to walk (the file's end, once it turned out shorter)
	cut  bool   // the file turned out shorter than size
	buf  []byte // file bytes [off, off+len(buf))
	off  int64
	pos  int // the next record's start in buf
}

// recordFault is a record that is short, too long or fails its CRC32C.
type recordFault struct {
	at  int64
	why string
}

func (e *recordFault) Error() string { return fmt.Sprintf("record at offset %d %s", e.at, e.why) }

// next returns the next record, its entry aliasing the buffer (valid until
// the next call), and its offset. At the end of the records (or of the
// file, should it be shorter) it returns io.EOF; a bad record is a
// *recordFault, a failed read any other error.
func (r *symbolRecords) next() (gen, id uint32, entry []byte, at int64, err error) {
	at = r.off + int64(r.pos)
	if at >= r.size {
		return 0, 0, nil, at, io.EOF
	}
	if err := r.fill(symbolRecordHeader); err != nil {
		return 0, 0, nil, at, err
	}
	l := binary.LittleEndian.Uint32(r.buf[r.pos+8:])
	if l > maxSymbolBytes {
		return 0, 0, nil, at, &recordFault{at, fmt.Sprintf("has a length of %d bytes, above the %d-byte limit", l, maxSymbolBytes)}
	}
	if err := r.fill(symbolRecordHeader + int(l) + 4); err != nil {
		return 0, 0, nil, at, err
	}
	gen, id, entry, n, ok := viewSymbolRecord(r.buf[r.pos:])
	if !ok {
		return 0, 0, nil, at, &recordFault{at, "fails its CRC32C check"}
	}
	r.pos += n
	return gen, id, entry, at, nil
}

// fill makes buf hold at least need bytes from pos.
func (r *symbolRecords) fill(need int) error {
	if len(r.buf)-r.pos >= need {
		return nil
	}
	at := r.off + int64(r.pos)
	if at+int64(need) > r.size {
		if r.cut {
			return &recordFault{at, fmt.Sprintf("is cut short: the file ends at byte %d", r.size)}
		}
		return &recordFault{at, fmt.Sprintf("runs past byte %d, the end of the records", r.size)}
	}
	kept := copy(r.buf, r.buf[r.pos:])
	want := int(min(int64(max(need, symbolReadChunk)), r.size-at))
	if cap(r.buf) < want {
		r.buf = append(make([]byte, 0, want), r.buf[:kept]...)
	}
	r.buf = r.buf[:want]
	r.off, r.pos = at, 0
	n, err := r.f.ReadAt(r.buf[kept:], at+int64(kept))
	if n == want-kept {
		return nil
	}
	if err != nil && err != io.EOF {
		return fmt.Errorf("sfqueue: read %s at offset %d: %w", r.path, at+int64(kept), err)
	}
	// The file is shorter than expected: walk up to its end.
	r.buf = r.buf[:kept+n]
	r.size, r.cut = at+int64(kept+n), true
	return r.fill(need)
}

// viewSymbolRecord checks one record at the start of b; entry aliases b.
func viewSymbolRecord(b []byte) (gen, id uint32, entry []byte, n int, ok bool) {
	if len(b) < symbolRecordHeader+4 {
		return 0, 0, nil, 0, false
	}
	l := binary.LittleEndian.Uint32(b[8:])
	if l > maxSymbolBytes || int(l) > len(b)-symbolRecordHeader-4 {
		return 0, 0, nil, 0, false
	}
	end := symbolRecordHeader + int(l)
	if crc32.Checksum(b[:end], castagnoli) != binary.LittleEndian.Uint32(b[end:]) {
		return 0, 0, nil, 0, false
	}
	return binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:]), b[symbolRecordHeader:end], end + 4, true
}

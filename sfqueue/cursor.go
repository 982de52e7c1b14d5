package sfqueue

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// Cursor reads frames in FSN order for the consumer. It is not safe for
// concurrent use; the queue may be appended to and acked concurrently.
type Cursor struct {
	q    *Queue
	next uint64
	buf  []byte
	st   Stream // NextStream's, reused
}

// NewCursor returns a cursor at the first unacked frame.
func (q *Queue) NewCursor() *Cursor {
	q.mu.Lock()
	defer q.mu.Unlock()
	return &Cursor{q: q, next: q.acked + 1}
}

// Seek makes the next Next return fsn (or the oldest retained frame, if fsn
// was trimmed). The consumer rewinds to AckedFSN()+1 on every reconnect.
func (c *Cursor) Seek(fsn uint64) { c.next = fsn }

// Next returns the next frame without blocking; ok is false when the cursor
// is past PublishedFSN (wait on Queue.Published and call again). The payload
// is valid until the next call. A frame whose CRC32C no longer matches is
// an error, never returned. The returned fsn can jump forward when
// evict_oldest deleted frames the cursor had not reached: compare it with the
// expected one.
func (c *Cursor) Next() (fsn uint64, payload []byte, ok bool, err error) {
	fsn, ok, err = c.step(func(s *segment) (err error) {
		payload, c.buf, err = s.readFrame(c.next, c.buf)
		return err
	})
	return fsn, payload, ok, err
}

// step reads the cursor's next frame with read, under the queue's lock,
// and moves the cursor past it; ok is false when the cursor is past
// PublishedFSN or read failed.
func (c *Cursor) step(read func(s *segment) error) (fsn uint64, ok bool, err error) {
	q := c.q
	q.mu.Lock()
	defer q.mu.Unlock()
	s, err := c.segmentLocked()
	if s == nil || err != nil {
		return 0, false, err
	}
	if err := read(s); err != nil {
		return 0, false, err
	}
	fsn = c.next
	c.next++
	return fsn, true, nil
}

// segmentLocked returns the segment holding the cursor's next frame, its
// file open, after moving the cursor past frames no longer retained; nil
// when the cursor is past PublishedFSN.
func (c *Cursor) segmentLocked() (*segment, error) {
	q := c.q
	if q.closed {
		return nil, ErrClosed
	}
	if len(q.segs) == 0 || c.next > q.written {
		return nil, nil
	}
	if first := q.segs[0].base; c.next < first {
		c.next = first
	}
	i := sort.Search(len(q.segs), func(i int) bool { return q.segs[i].end() > c.next })
	s := q.segs[i]
	if err := q.fileLocked(s); err != nil {
		return nil, err
	}
	return s, nil
}

// maxReadOpen bounds the sealed segments kept open for reading: the cursor
// moves forward, so a couple suffice; a few more spare reopening when a
// consumer rewinds by a segment or two.
const maxReadOpen = 4

// fileLocked opens a sealed segment's file for reading if it is closed,
// closing the least recently opened one beyond maxReadOpen.
func (q *Queue) fileLocked(s *segment) error {
	if s.f != nil {
		return nil
	}
	f, err := q.fs.OpenFile(s.path, os.O_RDONLY)
	if err != nil {
		return fmt.Errorf("sfqueue: open segment %s for reading: %w", s.path, err)
	}
	s.f = f
	q.readOpen = append(q.readOpen, s)
	if len(q.readOpen) > maxReadOpen {
		old := q.readOpen[0]
		q.readOpen = q.readOpen[1:]
		if old != q.active && !q.heldByBatchLocked(old) {
			old.closeFile()
		}
	}
	return nil
}

// StreamHeadBytes is how much of a payload Stream.Head holds.
const StreamHeadBytes = 64

// ErrFrameGone is Stream.Read's error when the frame's segment was removed
// (evict_oldest) after NextStream verified it.
var ErrFrameGone = errors.New("sfqueue: the frame was evicted while it was being read")

// Stream is a stored frame read piece by piece (Cursor.NextStream), so that
// no frame-sized buffer is needed to send it. Its CRC32C matched when
// NextStream read it whole; Read checks it again over the very bytes it
// hands out, and keeps the payload's last bytes back, failing instead, if
// they no longer match: a caller that forwards only what Read returned
// never completes a damaged frame. It is valid until the cursor's next call.
type Stream struct {
	c    *Cursor
	s    *segment
	fsn  uint64
	off  int64  // file offset of the payload
	n    int    // payload length
	pos  int    // payload bytes handed out
	crc  uint32 // CRC32C of the frame head and the payload bytes handed out
	want uint32 // the stored CRC32C
	err  error  // what ended the stream, returned by every later Read
	head [StreamHeadBytes]byte
}

// Len is the payload's length.
func (st *Stream) Len() int { return st.n }

// Head is the payload's first min(Len, StreamHeadBytes) bytes, as verified
// by NextStream; valid until the cursor's next call.
func (st *Stream) Head() []byte { return st.head[:min(st.n, StreamHeadBytes)] }

// Read reads the payload's next bytes into p (io.Reader); io.EOF after the
// last. ErrFrameGone, ErrClosed, a read error or a CRC32C mismatch of the
// bytes read end the stream: the call that detects them returns no bytes.
func (st *Stream) Read(p []byte) (int, error) {
	if st.err != nil {
		return 0, st.err
	}
	if st.pos == st.n {
		return 0, io.EOF
	}
	p = p[:min(len(p), st.n-st.pos)]
	if err := st.readAt(p, st.off+int64(st.pos)); err != nil {
		st.err = err
		return 0, err
	}
	st.crc = crc32.Update(st.crc, castagnoli, p)
	st.pos += len(p)
	if st.pos == st.n && st.crc != st.want {
		// Sticky: a later Read must not report a clean end of the frame.
		st.err = fmt.Errorf("sfqueue: frame %d of %s changed after its CRC32C check: its last %d bytes are held back", st.fsn, filepath.Base(st.s.path), len(p))
		return 0, st.err
	}
	return len(p), nil
}

// readAt reads p at off of the stream's segment under the queue's lock: the
// segment may have been evicted, and its file closed, since NextStream.
func (st *Stream) readAt(p []byte, off int64) error {
	q := st.c.q
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.closed:
		return ErrClosed
	case st.s.removed:
		return fmt.Errorf("%w: FSN %d", ErrFrameGone, st.fsn)
	}
	if err := q.fileLocked(st.s); err != nil {
		return err
	}
	return st.s.readChunk(p, off, st.fsn)
}

// NextStream is Next without a frame-sized buffer: it reads the next frame
// whole through buf (at least StreamHeadBytes plus the 12 bytes of a
// frame's head and CRC32C; each read is at most len(buf)), checks its CRC32C and returns it as a Stream to be read
// again piece by piece. A frame whose CRC32C does not match is an error and
// no Stream. ok and fsn are as Next's.
func (c *Cursor) NextStream(buf []byte) (fsn uint64, st *Stream, ok bool, err error) {
	if len(buf) < StreamHeadBytes+frameOverhead {
		return 0, nil, false, fmt.Errorf("sfqueue: NextStream needs a buffer of at least %d bytes", StreamHeadBytes+frameOverhead)
	}
	fsn, ok, err = c.step(func(s *segment) error {
		c.st = Stream{c: c, s: s, fsn: c.next}
		return s.verifyFrame(int(c.next-s.base), buf, &c.st)
	})
	if !ok {
		return 0, nil, false, err
	}
	return fsn, &c.st, true, nil
}

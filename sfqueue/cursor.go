package sfqueue

import (
	"fmt"
	"os"
	"sort"
)

// Cursor reads frames in FSN order for the consumer. It is not safe for
// concurrent use; the queue may be appended to and acked concurrently.
type Cursor struct {
	q    *Queue
	next uint64
	buf  []byte
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
	q := c.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return 0, nil, false, ErrClosed
	}
	if len(q.segs) == 0 || c.next > q.written {
		return 0, nil, false, nil
	}
	if first := q.segs[0].base; c.next < first {
		c.next = first
	}
	i := sort.Search(len(q.segs), func(i int) bool { return q.segs[i].end() > c.next })
	s := q.segs[i]
	if err := q.fileLocked(s); err != nil {
		return 0, nil, false, err
	}
	payload, c.buf, err = s.readFrame(c.next, c.buf)
	if err != nil {
		return 0, nil, false, err
	}
	fsn = c.next
	c.next++
	return fsn, payload, true, nil
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
		if old != q.active {
			old.closeFile()
		}
	}
	return nil
}

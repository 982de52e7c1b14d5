package sfqueue

import "sort"

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
	if len(q.segs) == 0 || c.next >= q.nextFSN {
		return 0, nil, false, nil
	}
	if first := q.segs[0].base; c.next < first {
		c.next = first
	}
	i := sort.Search(len(q.segs), func(i int) bool { return q.segs[i].end() > c.next })
	payload, c.buf, err = q.segs[i].readFrame(c.next, c.buf)
	if err != nil {
		return 0, nil, false, err
	}
	fsn = c.next
	c.next++
	return fsn, payload, true, nil
}

package sfqueue

import (
	"context"
	"testing"
)

func TestMemoryRingFreesSegmentsOnAck(t *testing.T) {
	q := mustOpen(t, Options{MaxSegmentBytes: 1024, MaxTotalBytes: 10 << 10})
	defer q.Close()
	ring := q.fs.(*memRing)
	for i := range 40 {
		mustAppend(t, q, testPayload(uint64(i+1), 200))
	}
	if n := len(ring.files); n != 10 {
		t.Fatalf("40 frames of %d bytes in 1 KiB segments: %d buffers, want 10", frame200, n)
	}
	for name, f := range ring.files {
		if c := cap(f.data); c > 1024 {
			t.Fatalf("RAM segment %s reserves %d bytes, more than the 1 KiB segment size", name, c)
		}
	}
	q.Ack(20)
	if n, used := len(ring.files), q.Stats().UsedBytes; n != 5 || used != 5*(24+4*frame200) {
		t.Fatalf("after acking 20 frames: %d buffers, %d bytes used; want 5 and %d", n, used, 5*(24+4*frame200))
	}
	// The freed space takes new frames without waiting.
	for i := 40; i < 60; i++ {
		if _, err := q.Append(context.Background(), testPayload(uint64(i+1), 200)); err != nil {
			t.Fatalf("append %d after acks freed room: %v", i+1, err)
		}
	}
	q.Ack(60)
	q.Close()
	if n := len(ring.files); n != 0 {
		t.Fatalf("drained close left %d RAM segments", n)
	}
}

package sfqueue

import (
	"fmt"
	"testing"
)

// BenchmarkEvictionWalk is the time an eviction of a partly acknowledged
// segment holds q.mu to count the items of its unacknowledged frames
// (unackedItemsLocked): a full 4 MiB segment (the default) whose first
// frame is acknowledged, the file in the page cache, for frames of several
// sizes. The rest of an eviction under the lock (unlinking the file,
// counters) does not depend on the walk.
//
//	go test -run '^$' -bench BenchmarkEvictionWalk -count 6 ./sfqueue/
func BenchmarkEvictionWalk(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10, 256 << 10} {
		b.Run(fmt.Sprintf("frame=%dKiB", size>>10), func(b *testing.B) {
			q, err := Open(Options{Dir: b.TempDir(), SenderID: "b", MaxSegmentBytes: DefaultMaxSegmentBytes})
			if err != nil {
				b.Fatal(err)
			}
			defer q.Close()
			for k := uint64(1); q.Stats().Segments < 2; k++ {
				if _, err := q.AppendBatchItems(b.Context(), [][]byte{testPayload(k, size)}, []uint32{uint32(k)}); err != nil {
					b.Fatal(err)
				}
			}
			q.Ack(1)
			q.mu.Lock()
			s := q.segs[0]
			frames := uint64(s.frames() - 1)
			q.mu.Unlock()
			b.SetBytes(s.size)
			for b.Loop() {
				q.mu.Lock()
				items, unknown := q.unackedItemsLocked(s, frames)
				q.mu.Unlock()
				if unknown != 0 || items == 0 {
					b.Fatalf("%d items, %d frames of unknown items", items, unknown)
				}
			}
		})
	}
}

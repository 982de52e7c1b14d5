package sfqueue

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestUndoAfterAnAckDeletedTheSealedSegment: a batch that rotates more
// than once waits for a new segment's fsync with q.mu released (periodic:
// the rotation's; flush: the sealed segment's before the next seal), and
// an Ack meanwhile deletes the segment the batch sealed first, all of
// whose frames it acknowledges. When the batch then fails, undoing it must
// not take that segment's room off the count a second time, nor make the
// deleted segment take appends again (its file is closed).
func TestUndoAfterAnAckDeletedTheSealedSegment(t *testing.T) {
	cases := []struct {
		name   string
		d      Durability
		frames int
		fail   string
	}{
		{"periodic, fsync error", DurabilityPeriodic, 3, "sync"},
		{"periodic, disk full", DurabilityPeriodic, 3, "write"},
		{"flush, fsync error", DurabilityFlush, 4, "sync"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfs := newCrashFS()
			o := Options{Dir: "/d", SenderID: "s", FS: cfs, MaxSegmentBytes: 4096, MaxTotalBytes: 1 << 20,
				Durability: tc.d, SyncInterval: time.Hour, AppendDeadline: 50 * time.Millisecond}
			q := mustOpen(t, o)
			mustAppend(t, q, testPayload(1, 2000)) // segment A
			q.mu.Lock()
			a := q.active
			q.mu.Unlock()
			first, second := "/d/s/"+segmentName(2), "/d/s/"+segmentName(3)
			var acked atomic.Bool
			cfs.mu.Lock()
			cfs.syncHook = func(name string) {
				if name != first || acked.Load() {
					return
				}
				go q.Ack(1)
				for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
					q.mu.Lock()
					gone := a.removed
					q.mu.Unlock()
					if gone {
						break
					}
				}
				acked.Store(true)
			}
			if tc.fail == "sync" {
				cfs.failSync = func(name string) error {
					if name == first && acked.Load() {
						return syscall.EIO
					}
					return nil
				}
			} else {
				cfs.failWrite = func(name string) error {
					if name == second && acked.Load() {
						return syscall.ENOSPC
					}
					return nil
				}
			}
			cfs.mu.Unlock()
			batch := make([][]byte, tc.frames) // a segment each
			for i := range batch {
				batch[i] = testPayload(uint64(i+2), 3000)
			}
			if _, err := q.AppendBatch(context.Background(), batch); err == nil {
				t.Fatal("the batch succeeded")
			}
			if !acked.Load() {
				t.Fatal("the Ack never ran during the batch's fsync")
			}
			q.mu.Lock()
			var held int64
			for _, s := range q.segs {
				held += s.size + s.slack
			}
			used, active := q.used, q.active
			q.mu.Unlock()
			if used != held {
				t.Errorf("the count holds %d bytes, the retained segments %d", used, held)
			}
			if active == a {
				t.Errorf("the deleted segment takes appends again")
			}
			q.Close()
		})
	}
}

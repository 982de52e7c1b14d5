package sender

import (
	"testing"

	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// TestEvictionMidConnection: with on_full evict_oldest the queue deletes
// frames the sender has not sent yet; the cursor's FSN jumps, the sender
// recycles the connection (the wire mapping cannot skip FSNs) and delivers
// every frame that survived, without duplicates. The rows the queue counts
// as evicted are exactly the oldest unacknowledged ones: the two that were
// in flight (they reached the server, but no OK said so) and every row
// that never arrived.
func TestEvictionMidConnection(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	srv.StallAcks()
	q, err := sfqueue.Open(sfqueue.Options{MaxTotalBytes: 8 << 10, MaxSegmentBytes: 1 << 10, OnFull: sfqueue.OnFullEvictOldest})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	f := newFeeder(t, q, false)
	o := testOptions(nil, srv.URL())
	o.MaxInFlight = 2
	s := startSender(t, q, o)
	f.frames(2, 1)
	waitFor(t, "two frames in flight", func() bool { return srv.Frames() >= 2 })
	f.frames(200, 1) // far beyond 8 KiB: the oldest segments go
	evicted := q.Stats().FramesEvicted
	if evicted < 10 {
		t.Fatalf("only %d frames evicted; the test needs the unsent ones gone", evicted)
	}
	srv.ReleaseAcks()
	waitAll(t, s, q)

	counts := rowIDs(t, srv)
	for id, c := range counts {
		if c != 1 {
			t.Errorf("row %d arrived %d times", id, c)
		}
	}
	// Rows 0 and 1 were sent before the eviction. The missing rows are one
	// contiguous run of the oldest unsent frames; everything after it
	// arrived.
	if counts[0] != 1 || counts[1] != 1 {
		t.Errorf("the in-flight rows 0 and 1 are missing: %d, %d", counts[0], counts[1])
	}
	lastMissing := int64(-1)
	for id := int64(2); id < 202; id++ {
		if counts[id] == 0 {
			if lastMissing >= 0 && lastMissing != id-1 {
				t.Fatalf("rows %d and %d missing with rows between them delivered: not an eviction of the oldest frames", lastMissing, id)
			}
			lastMissing = id
		}
	}
	if lastMissing < 0 || lastMissing == 201 {
		t.Fatalf("last missing row %d: want some rows evicted and the newest delivered", lastMissing)
	}
	missing := int64(202 - len(counts))
	st := q.Stats()
	if st.FramesEvictedItemsUnknown != 0 || st.ItemsEvicted != st.FramesEvicted || st.ItemsEvicted != uint64(lastMissing)+1 || missing != lastMissing-1 {
		t.Errorf("%d rows evicted in %d frames (%d of unknown rows); want one row a frame, rows 0..%d: the %d that never arrived and the 2 in flight",
			st.ItemsEvicted, st.FramesEvicted, st.FramesEvictedItemsUnknown, lastMissing, missing)
	}
	if srv.Accepted() < 2 {
		t.Errorf("%d connections; the FSN jump must recycle the connection", srv.Accepted())
	}
}

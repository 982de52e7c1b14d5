package sfqueue_test

import (
	"testing"

	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// TestDamageToAckedFramesKeepsTheUnackedAfterIt: a bit flip in an acked
// frame of the oldest segment, whose valid frames after it run past the
// ack watermark. The next segment's base places them, so the damaged range
// itself is acked; but the queue replays a segment only up to its damage,
// so the unacked frames after it must set the slot aside (the slot tool
// sends them), not be dropped as acked (FuzzSegmentCorruption found FSNs
// 11..14 gone with nothing reported).
func TestDamageToAckedFramesKeepsTheUnackedAfterIt(t *testing.T) {
	const n, ack = 39, 10
	s := buildFuzzSlot(t, n, ack, []byte("0"))
	segs := segmentFiles(t, s.slotDir())
	scan, err := sfqueue.ScanSlot(s.slotDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) < 2 || scan.Segments[0].Base != 1 || scan.Segments[0].End() <= ack+1 {
		t.Fatalf("want the oldest segment to hold FSN 1 to past %d, and a next one; got %d segments", ack+1, len(segs))
	}
	end := scan.Segments[0].End()
	corrupt(t, segs[0], corruptFlipBits, 0, []byte{byte(scan.Segments[0].Frames[0]) + 10, 0, 0, 0x30}) // inside FSN 1's payload
	r := reopenAndCheck(t, s)
	dl := r.rep.Unreplayable
	if dl == nil {
		t.Fatalf("recovery replays FSN %d..%d and reports no loss; FSN %d..%d, unacked and intact after the damage, are dropped: %+v",
			r.acked+1, r.pub, ack+1, end-1, r.rep)
	}
	if dl.Frames != n-ack || dl.UnreadableFrames != 0 {
		t.Errorf("set aside with %d readable + %d unreadable unacked frames, want %d + 0: %v", dl.Frames, dl.UnreadableFrames, n-ack, dl)
	}
}

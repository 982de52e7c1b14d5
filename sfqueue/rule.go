package sfqueue

import (
	"fmt"
	"slices"
)

// The recovery rule (doc.go, Recovery), in one place: what a crash may
// lose in each durability mode, which damage is that loss window and which
// is media damage, and which frames were acknowledged. Recovery (plan), the
// slot view (Ranges) and through it the slot tool all judge a slot by
// SlotScan.judge.
//
// What a caller may lose to a power loss:
//   - flush: nothing that was answered. No frame reaches a segment before
//     the one before it is durable, so only the newest segment's tail can
//     be torn, above the last fsync .ack-watermark recorded.
//   - periodic: at most what was appended since the last completed tick,
//     with the same ordering of segments.
//   - memory: at most what was appended since the last segment seal and
//     watermark save: the active segment, and at most one sealed segment
//     still being synced in the background. Their writes reach the disk in
//     any order, so the first damage above what .ack-watermark records as
//     synced is the cut.
//
// Everything inside the window that is lost is counted as torn frames
// (RecoveryReport.Torn, by cause) and logged, with its FSN range: the cut
// itself, and the frames .ack-watermark recorded as published, or segment
// names show were handed out, past it. Everything outside it that is
// unreadable is media damage: DATA_LOSS, and the slot is set aside.
// Frames at or below the acked FSN are QuestDB's: their loss is no loss.

// judgement is what SlotScan.judge decided.
type judgement struct {
	// acked: frames at or below it were acknowledged; ackedKnown when
	// .ack-watermark or the dictionary's generations say so (otherwise
	// recovery takes the oldest segment's base - 1).
	acked      uint64
	ackedKnown bool
	// tail is the index of the last segment that may keep frames (-1:
	// none); the segments after it hold nothing that is replayed.
	tail int
	cut  cutKind // what of the tail segment is cut
	// keptEnd is the FSN after what the kept segments account for (their
	// frames, or media damage reported as unreadable); cutFirst is where
	// the cut starts (a hole may lie between), cutLast the last FSN the
	// cut's own bytes account for.
	keptEnd, cutFirst, cutLast uint64
	cutCause                   string
	cutTorn                    TornCause // the cut's cause, for the torn_frames metric
	cutOffset                  int64     // where in the tail segment the cut's bytes start
	// tornFirst..tornLast (tornLast 0: none) is the window's loss: from
	// keptEnd, above the synced and acked FSNs, up to the highest FSN
	// anything in the slot shows was handed out.
	tornFirst, tornLast uint64
	// lostFirst..lostLast (lostLast 0: none) vanished below the synced
	// FSN: media damage, reported as DATA_LOSS.
	lostFirst, lostLast uint64
}

type cutKind int

const (
	cutNone   cutKind = iota // the tail segment is kept whole
	cutDamage                // its damaged tail is cut (truncated)
	cutWhole                 // it is deleted: a torn creation, or no frame of it survived
)

// AssumeDurability sets the durability the slot is judged by when
// .ack-watermark does not record one (a file of an older release, or
// none): the slot tool passes the configured sf_durability.
func (s *SlotScan) AssumeDurability(d Durability) { s.assumed, s.assumedKnown = d, true }

// WindowDurability is the durability whose loss window the slot is judged
// by (.ack-watermark's record, else AssumeDurability's), and whether it is
// known; without it the ordered rule of periodic and flush applies and a
// torn range's loss cannot be told from a flush-mode write never answered.
func (s *SlotScan) WindowDurability() (Durability, bool) { return s.durability() }

// durability is the mode whose window applies, and whether it is known.
func (s *SlotScan) durability() (Durability, bool) {
	if s.WatermarkOK && s.Watermark.DurabilityKnown {
		return s.Watermark.Durability, true
	}
	return s.assumed, s.assumedKnown
}

// synced reports whether .ack-watermark records FSN fsn as covered by a
// completed fsync.
func (s *SlotScan) synced(fsn uint64) bool {
	return s.WatermarkOK && s.Watermark.Durable >= fsn
}

// acknowledged is the acked FSN: .ack-watermark's when it is readable, even
// past every frame found (those frames were QuestDB's before the crash
// took them; new FSNs resume above it). Without it, frames of a dictionary
// generation older than the oldest dictionary file present were
// acknowledged: a generation is deleted only once .ack-watermark records
// every frame using it as acked.
func (s *SlotScan) acknowledged() (uint64, bool) {
	if s.WatermarkOK {
		return s.Watermark.Acked, true
	}
	if len(s.Dict.onDisk) == 0 {
		return 0, false
	}
	oldest := uint32(0)
	first := true
	for g := range s.Dict.onDisk {
		if first || g < oldest {
			oldest, first = g, false
		}
	}
	acked, known := uint64(0), false
	for i := range s.Segments {
		seg := &s.Segments[i]
		for j, n := range seg.needs {
			if n.gen < oldest {
				acked, known = seg.Base+uint64(j), true
			}
		}
	}
	return acked, known
}

// judge applies the rule to the scan.
func (s *SlotScan) judge() judgement {
	j := judgement{tail: -1}
	j.acked, j.ackedKnown = s.acknowledged()
	if len(s.Segments) == 0 {
		j.keptEnd, j.cutFirst = j.acked+1, j.acked+1
	} else if d, ok := s.durability(); !ok || d != DurabilityMemory || !s.memoryCut(&j) {
		s.orderedCut(&j)
	}
	if j.cut == cutWhole {
		// What the segments before the cut account for.
		j.keptEnd = s.Segments[j.tail].Base
		if t := j.tail; t > 0 && s.Segments[t-1].HeaderErr == nil && s.Segments[t-1].Damage == nil {
			j.keptEnd = min(j.keptEnd, s.Segments[t-1].End())
		}
	}
	// The highest FSN the slot shows was handed out: .ack-watermark's
	// published FSN, every frame found, a segment created (its base - 1:
	// a batch creates the segments it needs before its first frame).
	high := max(j.cutLast, s.Watermark.Published)
	for i := range s.Segments {
		seg := &s.Segments[i]
		high = max(high, seg.Base-1, seg.End()-1)
		if i > j.tail { // what is left of the writes after the cut
			high = max(high, seg.Base+uint64(seg.HeadlessFrames)-1)
			if d := seg.Damage; d != nil {
				high = max(high, d.FSN+uint64(d.Frames)-1)
			}
		}
	}
	floor := j.acked + 1
	if s.WatermarkOK {
		// Lost at or below the synced FSN: media damage (vanished).
		if first := max(j.keptEnd, floor); s.Watermark.Durable >= first {
			j.lostFirst, j.lostLast = first, s.Watermark.Durable
		}
		floor = max(floor, s.Watermark.Durable+1)
	}
	if first := max(j.keptEnd, floor); high >= first {
		j.tornFirst, j.tornLast = first, high
	}
	return j
}

// orderedCut is the cut in flush and periodic durability (and when the
// mode is unknown): segments are durable in order, so only the tail
// segment (SlotScan.tail) can be torn.
func (s *SlotScan) orderedCut(j *judgement) {
	j.tail = s.tail()
	seg := &s.Segments[j.tail]
	switch {
	case s.tornCreation(j.tail, j.tail):
		j.cut, j.cutFirst, j.cutCause, j.cutTorn = cutWhole, seg.Base, tornCreationCause(seg), TornCreation
		j.cutLast = seg.Base + uint64(seg.HeadlessFrames) - 1
	case seg.HeaderErr != nil && !seg.written():
		j.cut, j.cutFirst, j.cutCause, j.cutTorn = cutWhole, seg.Base, "created, never written: the segment file is empty", TornCreation
		j.cutLast = seg.Base - 1
	case s.tornTail(seg):
		d := seg.Damage
		j.cut, j.keptEnd, j.cutFirst, j.cutLast = cutDamage, d.FSN, d.FSN, d.FSN+uint64(d.Frames)-1
		j.cutCause, j.cutOffset, j.cutTorn = d.Cause, d.Offset, TornTail
	default:
		if last, ok := s.emptyTail(j.tail); ok {
			j.cut, j.cutFirst, j.cutLast, j.cutOffset = cutWhole, seg.Base, last, segmentHeaderSize
			j.cutCause = fmt.Sprintf("no frame: the segment after it starts at FSN %d", last+1)
			j.cutTorn = TornUnwrittenSegment
			return
		}
		// Nothing cut: the window starts past what the tail accounts for
		// (its frames, or its damage, which is media damage).
		j.cutFirst = seg.End()
		if d := seg.Damage; d != nil {
			j.cutFirst = d.FSN + uint64(d.Frames)
			if s.synced(d.FSN) {
				j.cutFirst = max(j.cutFirst, s.Watermark.Durable+1) // damageRange covers up to it
			}
		}
		j.keptEnd, j.cutLast = j.cutFirst, j.cutFirst-1
	}
}

// memoryCut is the cut in memory durability: the first damage above what
// .ack-watermark records as synced (and above the acked FSN), in any
// segment: a hole, an unusable header, a torn frame, an empty segment
// before another. Damage with valid frames after it in its file is the
// medium's (a torn write leaves nothing valid after it), and so is damage
// at or below the synced FSN, or before the last two segments holding
// frames (the one being synced and the active one: the segments before
// them were synced, recorded or not), or any damage when .ack-watermark
// is unreadable (it may have recorded the damaged frames as synced):
// recovery sets those aside. It reports false when there is no such
// damage (the ordered rule then finds the tail).
func (s *SlotScan) memoryCut(j *judgement) bool {
	if s.WatermarkErr != nil {
		return false
	}
	bound := j.acked
	if s.WatermarkOK {
		bound = max(bound, s.Watermark.Durable)
	}
	from := 0 // the first segment the cut may be in
	for i := len(s.Segments) - 1; i >= 0; i-- {
		if s.Segments[i].NonZeroEnd > segmentHeaderSize {
			from = max(0, i-1)
			break
		}
	}
	var prevEnd uint64
	for i := range s.Segments {
		seg := &s.Segments[i]
		if i < from {
			prevEnd = seg.End()
			continue
		}
		if i > from && prevEnd < seg.Base && prevEnd > bound {
			j.tail, j.cut, j.keptEnd, j.cutFirst, j.cutLast = i-1, cutNone, prevEnd, prevEnd, seg.Base-1
			j.cutCause = fmt.Sprintf("missing: %s ends at FSN %d, the next segment starts at FSN %d",
				s.Segments[i-1].Name, prevEnd-1, seg.Base)
			j.cutTorn = TornUnwrittenSegment
			return true
		}
		prevEnd = seg.End()
		switch {
		case seg.HeaderErr != nil && seg.Base > bound:
			j.tail, j.cut, j.cutFirst = i, cutWhole, seg.Base
			j.cutLast = seg.Base + uint64(seg.HeadlessFrames) - 1
			j.cutCause, j.cutTorn = tornCreationCause(seg), TornCreation
			return true
		case seg.Damage != nil && len(seg.Damage.Stray) == 0 && seg.Damage.FSN > bound:
			d := seg.Damage
			j.tail, j.cut, j.keptEnd, j.cutFirst, j.cutLast = i, cutDamage, d.FSN, d.FSN, d.FSN+uint64(d.Frames)-1
			j.cutCause, j.cutOffset, j.cutTorn = d.Cause, d.Offset, TornTail
			return true
		case seg.HeaderErr == nil && len(seg.Frames) == 0 && seg.Damage == nil && i+1 < len(s.Segments) && seg.Base > bound:
			j.tail, j.cut, j.cutFirst, j.cutLast, j.cutOffset = i, cutWhole, seg.Base, s.Segments[i+1].Base-1, segmentHeaderSize
			j.cutCause = fmt.Sprintf("no frame: the segment after it starts at FSN %d", s.Segments[i+1].Base)
			j.cutTorn = TornUnwrittenSegment
			return true
		case seg.HeaderErr != nil || seg.Damage != nil:
			prevEnd = 0 // media damage, reported by the ordered walk
		}
	}
	return false
}

// tornRanges lists the window's loss as FSN ranges with their cause: a
// hole before the cut, the cut, then what was handed out past it, without
// the readable frames of segments after the tail (deleted by recovery,
// counted by it, and still readable by the slot tool) when keepReadable,
// else with them as their own ranges (TornAfterCut).
func (s *SlotScan) tornRanges(j judgement, keepReadable bool) []FSNRange {
	if j.tornLast == 0 {
		return nil
	}
	var out []FSNRange
	add := func(first, last uint64, file string, offset int64, kind TornCause, cause string) {
		first, last = max(first, j.tornFirst), min(last, j.tornLast)
		for i := j.tail + 1; i < len(s.Segments) && first <= last; i++ {
			seg := &s.Segments[i]
			if len(seg.Frames) == 0 || seg.End() <= first || seg.Base > last {
				continue
			}
			if seg.Base > first {
				out = append(out, FSNRange{First: first, Last: seg.Base - 1, Torn: true, TornCause: kind, File: file, Offset: offset, Cause: cause})
			}
			if from := max(first, seg.Base); !keepReadable {
				// On disk, but after the cut: recovery deletes them, as a
				// replay cannot skip the FSNs the cut lost.
				out = append(out, FSNRange{First: from, Last: min(last, seg.End()-1), Torn: true, TornCause: TornAfterCut,
					File: seg.Name, Offset: int64(seg.Frames[from-seg.Base]), Cause: "intact after the cut, deleted with it: a replay cannot skip the FSNs before them"})
			}
			first = seg.End()
		}
		if first <= last && last != 0 {
			out = append(out, FSNRange{First: first, Last: last, Torn: true, TornCause: kind, File: file, Offset: offset, Cause: cause})
		}
	}
	if j.cutFirst > 0 {
		add(j.keptEnd, j.cutFirst-1, "", 0, TornUnwrittenSegment, "missing: handed out before the segment that was cut, not on disk")
	}
	var file string
	if j.tail >= 0 {
		file = s.Segments[j.tail].Name
	}
	add(j.cutFirst, j.cutLast, file, j.cutOffset, j.cutTorn, j.cutCause)
	add(max(j.cutLast+1, j.cutFirst), j.tornLast, "", 0, TornNeverWritten, fmt.Sprintf(
		"never written: handed out up to FSN %d (.ack-watermark's published FSN %d, or a segment's name), not on disk",
		j.tornLast, s.Watermark.Published))
	return slices.Clip(out)
}

// tail is the index of the newest segment holding a valid frame
// (SegmentScan.holds), or of the last one with damage past an intact
// header after a whole segment or that .ack-watermark recorded (0 when
// none): the newest one a crash can have torn. No frame of
// the segments after it reached the disk: a segment's frames are written
// only once the one before is durable (periodic: the rotation fsyncs it;
// flush: the group fsync does, before it writes the next segment's
// frames), and a batch creates (and writes the header of) every segment
// it needs before its first frame. What they hold is a header, torn or
// not, and what a power loss leaves of unsynced writes; recovery deletes
// them.
func (s *SlotScan) tail() int {
	n := len(s.Segments)
	for i := n - 1; i > 0; i-- {
		seg := &s.Segments[i]
		// The last file's damage past an intact header, with no valid
		// frame, is still the tail when the segment before it is whole
		// (its first frame may have been torn: a loss to count) or
		// .ack-watermark recorded an FSN of it as on disk (or cannot be
		// read). Otherwise (the segment before it is torn) it is what a
		// power loss left of writes no fsync completed: a segment's
		// frames are written only once the one before is durable.
		prev := &s.Segments[i-1]
		prevWhole := prev.HeaderErr == nil && prev.Damage == nil && prev.End() == seg.Base
		if seg.holds || i == n-1 && seg.HeaderErr == nil && seg.NonZeroEnd > segmentHeaderSize &&
			(prevWhole || s.WatermarkErr != nil || s.WatermarkOK && s.Watermark.Durable >= seg.Base) {
			return i
		}
	}
	return 0
}

// emptyTail returns, when the tail segment holds no frame (and is no torn
// creation) and segments follow it, the last FSN of its range (the next
// segment's base - 1): a batch created those before its first frame, so
// the tail's FSNs were written, and no completed fsync kept them (in
// periodic durability, the rotation's fsync of the tail did not finish).
// They are its torn frames.
func (s *SlotScan) emptyTail(tail int) (last uint64, ok bool) {
	if tail+1 >= len(s.Segments) {
		return 0, false
	}
	seg := &s.Segments[tail]
	if len(seg.Frames) > 0 || seg.Damage != nil || s.tornCreation(tail, tail) || s.Segments[tail+1].Base <= seg.Base {
		return 0, false
	}
	return s.Segments[tail+1].Base - 1, true
}

// TornCreation reports whether segment i is a torn creation (doc.go,
// Recovery): the tail segment (SlotScan.tail), with
// an unusable header (not of a newer format), and no FSN of it recorded
// as fsynced, by an intact .ack-watermark whose synced FSN is below the
// segment's base, or by none at all. Every
// fsync of a segment file covers
// its header, which is written before any frame, so no fsync of this file
// completed: its frames are the durability mode's loss window, a torn
// tail that recovery deletes whole instead of setting the slot aside. An
// older segment, or one the watermark recorded frames of as fsynced, or any segment
// when .ack-watermark is present but unreadable, is damage.
func (s *SlotScan) TornCreation(i int) bool { return s.tornCreation(i, s.tail()) }

func (s *SlotScan) tornCreation(i, tail int) bool {
	seg := &s.Segments[i]
	return i == tail && seg.HeaderErr != nil && s.WatermarkErr == nil && !s.synced(seg.Base)
}

// tornTail reports whether seg's damage, were seg the tail segment
// (SlotScan.tail), is a torn tail: nothing valid follows it, and
// .ack-watermark does not record its first FSN as fsynced. Damage at an
// FSN a completed fsync covered was done to the medium after the write,
// not by a crash during it: it is kept as evidence like damage anywhere
// else.
func (s *SlotScan) tornTail(seg *SegmentScan) bool {
	return seg.Damage != nil && len(seg.Damage.Stray) == 0 && !s.synced(seg.Damage.FSN)
}

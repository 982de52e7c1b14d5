package questdbexporter

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Bounds of unackedAge's record: one mark per markGranularity while
// frames keep arriving, and at most maxAppendMarks of them (a backlog that
// outlasts that many marks halves their resolution instead of growing).
const (
	markGranularity = time.Second
	maxAppendMarks  = 4096
)

// unackedAge knows when the queue's frames were appended, coarsely, so that
// the oldest_unacked_age gauge can say how long the oldest frame QuestDB has
// not acknowledged has waited. The queue keeps no time per frame, so the
// writer reports each group it appended (its last FSN and the time) and
// this keeps a short list of marks, each the earliest time of a run of
// frames: a mark's time is never later than the true append time of a
// frame it covers, so the age is never understated for frames this process
// appended. Frames recovered at start get the time their segment file was
// last written (recovered).
type unackedAge struct {
	mu    sync.Mutex
	marks []appendMark // ascending last; each covers the frames after the previous mark's last
}

// appendMark: the frames up to last were appended at or after at.
type appendMark struct {
	last uint64
	at   time.Time
}

// appended records that the frames up to last were appended at at.
func (a *unackedAge) appended(last uint64, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n := len(a.marks); n > 0 && at.Sub(a.marks[n-1].at) < markGranularity {
		a.marks[n-1].last = max(a.marks[n-1].last, last)
		return
	}
	a.marks = append(a.marks, appendMark{last: last, at: at})
	if len(a.marks) > maxAppendMarks {
		// Merge neighbours: each pair keeps the earlier time and the
		// later end, so no frame's time moves later.
		half := a.marks[:0]
		for i := 0; i < len(a.marks); i += 2 {
			m := a.marks[i]
			if i+1 < len(a.marks) {
				m.last = a.marks[i+1].last
			}
			half = append(half, m)
		}
		a.marks = half
	}
}

// age is how long the oldest unacknowledged frame has waited at now, given
// the queue's acknowledged and published FSNs; 0 when nothing waits. Marks
// at or below acked are dropped.
func (a *unackedAge) age(acked, published uint64, now time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	i := 0
	for i < len(a.marks) && a.marks[i].last <= acked {
		i++
	}
	a.marks = append(a.marks[:0], a.marks[i:]...)
	if acked >= published || len(a.marks) == 0 {
		return 0
	}
	return max(now.Sub(a.marks[0].at), 0)
}

// recovered seeds the record with the frames a restart found in slotDir
// (acked+1..published): they count from the time the segment holding frame
// acked+1 was last written (its mtime), the latest time they could have been
// appended; without that file, from now.
func (a *unackedAge) recovered(acked, published uint64, slotDir string, now time.Time) {
	if published <= acked {
		return
	}
	at := now
	if t, ok := segmentWriteTime(slotDir, acked+1); ok && t.Before(now) {
		at = t
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.marks = append([]appendMark{{last: published, at: at}}, a.marks...)
}

// segmentWriteTime is the modification time of the segment of slotDir that
// holds fsn: the one with the highest base FSN at or below it. Segment
// files are named by their base FSN in 20 digits and end in .sfseg
// (sfqueue/doc.go, Slot layout).
func segmentWriteTime(slotDir string, fsn uint64) (time.Time, bool) {
	entries, err := os.ReadDir(slotDir)
	if err != nil {
		return time.Time{}, false
	}
	var best string
	var bestBase uint64
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".sfseg")
		if !ok || len(name) != 20 {
			continue
		}
		base, err := strconv.ParseUint(name, 10, 64)
		if err != nil || base > fsn || best != "" && base < bestBase {
			continue
		}
		best, bestBase = e.Name(), base
	}
	if best == "" {
		return time.Time{}, false
	}
	fi, err := os.Stat(filepath.Join(slotDir, best))
	if err != nil {
		return time.Time{}, false
	}
	return fi.ModTime(), true
}

package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// holder is what lockHolder found out about the slot's lock.
type holder struct {
	live bool   // a live process holds the lock
	pid  int    // its PID (or the stale one in .lock.pid)
	how  string // how that was found out
}

func (h holder) String() string {
	switch {
	case h.live:
		return fmt.Sprintf("held by live process %d (%s): a collector has the slot open; the newest segment's tail may be mid-write", h.pid, h.how)
	case h.pid > 0:
		return fmt.Sprintf("free (.lock.pid names process %d, which holds no lock: %s)", h.pid, h.how)
	}
	return fmt.Sprintf("free (%s)", h.how)
}

// view is a slot as the tool reads it: the queue's read-only scan, the lock
// holder, the rebuilt dictionary and the FSN ranges, with the runs a live
// writer is still producing told apart from damage.
type view struct {
	dir    string
	scan   *sfqueue.SlotScan
	holder holder
	dict   *slotDict
	acked  uint64 // the watermark's acked FSN (0 without a usable one)
	ranges []fsnRange
}

// fsnRange is a scanned range; live says why, on a slot a live process
// holds, an unreadable range is that process's work rather than damage.
type fsnRange struct {
	sfqueue.FSNRange
	live string
}

// readSlot checks dir and reads it without taking or trying its lock.
func readSlot(dir string) (*view, error) {
	if err := checkSlot(dir); err != nil {
		return nil, err
	}
	scan, err := sfqueue.ScanSlot(dir)
	if err != nil {
		return nil, err
	}
	v := &view{dir: dir, scan: scan, holder: lockHolder(dir, scan.HolderPID)}
	if scan.WatermarkOK {
		v.acked = scan.Watermark.Acked
	}
	if v.dict, err = loadDict(scan); err != nil {
		return nil, err
	}
	v.judge()
	return v, nil
}

// judge lists the scan's ranges as the recovery rule sees them.
func (v *view) judge() {
	v.ranges = v.ranges[:0]
	for _, r := range v.scan.Ranges() {
		fr := fsnRange{FSNRange: r}
		if v.holder.live && !r.Readable {
			fr.live = liveCause(v.dir, v.scan, r)
		}
		v.ranges = append(v.ranges, fr)
	}
}

// liveCause says why the unreadable range r of a slot a live process holds
// is that process's work, or "" when it is damage. Nothing guarantees a
// consistent picture without the lock, which inspect never takes:
//   - the newest segment's tail may hold a frame being written (a torn
//     run in the scan's terms; stray valid frames after the bad bytes
//     would be damage: a write in progress has nothing valid after it);
//   - frames may be published past what the listing saw;
//   - acknowledgements delete segments, oldest first, while they are read:
//     a segment listed and then gone leaves a hole after segments read
//     before it. Such a hole follows a segment that is gone by now too;
//     a hole after a segment still present is damage.
func liveCause(dir string, scan *sfqueue.SlotScan, r sfqueue.FSNRange) string {
	switch {
	case strings.HasPrefix(r.Cause, "vanished"):
		return "published after inspect listed the slot: not corruption"
	case strings.HasPrefix(r.Cause, "missing"):
		for _, seg := range scan.Segments {
			if seg.End() != r.First {
				continue
			}
			if _, err := os.Stat(filepath.Join(dir, seg.Name)); errors.Is(err, fs.ErrNotExist) {
				return "acknowledged and deleted by the live holder while inspect read: not corruption"
			}
		}
	case r.Torn:
		return "being written by the live holder: not corruption"
	}
	return ""
}

// frameInfo summarises one decoded frame.
type frameInfo struct {
	fsn      uint64
	gen      uint32
	rows     int
	tables   []string
	min, max int64 // designated timestamps, ns; valid when rows > 0 and hasTS
	hasTS    bool
	err      error // the frame cannot be decoded
}

// describeFrame decodes payload (frame fsn) against its generation's
// dictionary with qwptest's decoder and gathers its tables, row count and
// designated timestamps.
func (v *view) describeFrame(fsn uint64, payload []byte) frameInfo {
	fi := frameInfo{fsn: fsn}
	gen, msg, err := splitPayload(payload)
	if err != nil {
		fi.err = err
		return fi
	}
	fi.gen = gen
	dec, err := v.dict.decoder(gen)
	if err != nil {
		fi.err = err
		return fi
	}
	m, err := dec.Decode(msg)
	if err != nil {
		fi.err = err
		return fi
	}
	for _, b := range m.Tables {
		fi.rows += b.Rows
		fi.tables = append(fi.tables, b.Table)
		for _, c := range b.Columns {
			if c.Name != "" {
				continue
			}
			scale := int64(1) // TIMESTAMP_NANOS
			if c.Type == qwp.TypeTimestamp {
				scale = 1000 // microseconds
			}
			for _, val := range c.Values {
				ts, ok := val.(int64)
				if !ok {
					continue
				}
				ts *= scale
				if !fi.hasTS || ts < fi.min {
					fi.min = ts
				}
				if !fi.hasTS || ts > fi.max {
					fi.max = ts
				}
				fi.hasTS = true
			}
		}
	}
	return fi
}

func (fi frameInfo) String() string {
	if fi.err != nil {
		return fmt.Sprintf("FSN %d: cannot be decoded: %v", fi.fsn, fi.err)
	}
	if len(fi.tables) == 0 {
		return fmt.Sprintf("FSN %d (dictionary generation %d): no table (dictionary entries or a bare commit)", fi.fsn, fi.gen)
	}
	s := fmt.Sprintf("FSN %d (dictionary generation %d): %d rows in %s", fi.fsn, fi.gen, fi.rows, strings.Join(fi.tables, ", "))
	if fi.hasTS {
		s += fmt.Sprintf("; row timestamps %s .. %s", nanosUTC(fi.min), nanosUTC(fi.max))
	} else if fi.rows > 0 {
		s += "; no designated timestamp (the server stamps the rows)"
	}
	return s
}

func sum(items []uint32) (n uint64) {
	for _, k := range items {
		n += uint64(k)
	}
	return n
}

func nanosUTC(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

// inspect prints what the slot dir holds. It changes nothing and never
// takes or tries the lock.
func inspect(dir string, w io.Writer) error {
	v, err := readSlot(dir)
	if err != nil {
		return err
	}
	s := v.scan
	fmt.Fprintf(w, "slot:        %s\n", dir)
	fmt.Fprintf(w, "format:      %s\n", formatLine(dir, s))
	fmt.Fprintf(w, "lock:        %s\n", v.holder)
	switch {
	case s.WatermarkOK:
		mode := "durability not recorded"
		if s.Watermark.DurabilityKnown {
			mode = "sf_durability " + s.Watermark.Durability.String()
		}
		fmt.Fprintf(w, "watermark:   acked FSN %d, fsynced up to FSN %d, published up to FSN %d, %s (.ack-watermark)\n",
			s.Watermark.Acked, s.Watermark.Durable, s.Watermark.Published, mode)
	case s.WatermarkErr != nil:
		fmt.Fprintf(w, "watermark:   unusable (%v): every readable frame counts as unacknowledged\n", s.WatermarkErr)
	default:
		fmt.Fprintf(w, "watermark:   none: every readable frame counts as unacknowledged\n")
	}
	printDict(w, v)
	if s.Failed != "" {
		fmt.Fprintf(w, ".failed:     %s\n", s.Failed)
	}
	if len(s.TempFiles) > 0 {
		fmt.Fprintf(w, "temp files:  %s (an interrupted replace)\n", strings.Join(s.TempFiles, ", "))
	}
	fmt.Fprintf(w, "segments:    %d\n", len(s.Segments))
	for i := range s.Segments {
		seg := &s.Segments[i]
		fmt.Fprintf(w, "  %s  ", seg.Name)
		switch {
		case s.TornCreation(i):
			what := "it holds no frame"
			if seg.HeadlessFrames > 0 {
				what = fmt.Sprintf("its %d frames are a torn tail", seg.HeadlessFrames)
			}
			fmt.Fprintf(w, "base FSN %d, header unusable: %v; a torn creation (no frame of it was recorded on disk), "+
				"which recovery deletes: %s", seg.Base, seg.HeaderErr, what)
		case seg.HeaderErr != nil:
			fmt.Fprintf(w, "base FSN %d, header unusable: %v", seg.Base, seg.HeaderErr)
		case len(seg.Frames) == 0:
			fmt.Fprintf(w, "base FSN %d, no valid frame", seg.Base)
		case seg.Items == nil:
			fmt.Fprintf(w, "FSN %d..%d (%d frames, format %d: rows per frame not recorded)", seg.Base, seg.End()-1, len(seg.Frames), seg.Version)
		default:
			fmt.Fprintf(w, "FSN %d..%d (%d frames, %d rows)", seg.Base, seg.End()-1, len(seg.Frames), sum(seg.Items))
		}
		fmt.Fprintf(w, ", %d bytes, written to offset %d\n", seg.Size, seg.NonZeroEnd)
	}
	fmt.Fprintln(w, "ranges:")
	for _, r := range v.ranges {
		note := ""
		switch {
		case r.live != "":
			note = "  [" + r.live + "]"
		case r.Torn:
			note = "  [the durability mode's loss window: accepted, never fsynced, lost to the crash; recovery counts them as torn]"
		case r.Last != 0 && r.Last <= v.acked:
			note = "  [acknowledged]"
		case r.First <= v.acked:
			note = fmt.Sprintf("  [acknowledged up to FSN %d]", v.acked)
		}
		fmt.Fprintf(w, "  %s%s\n", r.FSNRange, note)
	}
	return v.printUnacked(w)
}

// formatLine reports the segment format versions found: 2 (frames carry
// their row count) and 1 (written by a release before it) are both read. A
// rejected header is read again for its version (damaged, or an unknown
// old one: checkSlot refused newer ones).
func formatLine(dir string, s *sfqueue.SlotScan) string {
	seen := map[uint32]bool{}
	for _, seg := range s.Segments {
		if seg.HeaderErr == nil {
			seen[seg.Version] = true
		} else if v, ok, err := sfqueue.SegmentFormat(filepath.Join(dir, seg.Name)); err == nil && ok {
			seen[v] = true
		}
	}
	switch {
	case len(s.Segments) == 0:
		// Acknowledgements delete segments: a drained slot has none.
		return fmt.Sprintf("no segments: every frame was acknowledged and deleted (this tool reads segment format %d)", sfqueue.FormatVersion)
	case len(seen) == 0:
		return fmt.Sprintf("no intact segment header (this tool reads segment format %d)", sfqueue.FormatVersion)
	case len(seen) == 1 && seen[sfqueue.FormatVersion]:
		return fmt.Sprintf("segment format %d", sfqueue.FormatVersion)
	case len(seen) == 1 && seen[1]:
		return "segment format 1 (an older release's: read, but its frames do not record their rows)"
	}
	var vs []string
	for _, v := range slices.Sorted(maps.Keys(seen)) {
		vs = append(vs, fmt.Sprint(v))
	}
	return fmt.Sprintf("segment formats %s (this tool reads %d)", strings.Join(vs, ", "), sfqueue.FormatVersion)
}

func printDict(w io.Writer, v *view) {
	d := v.scan.Dict
	if !d.Present {
		fmt.Fprintf(w, "dictionary:  no dictionary file\n")
	} else {
		fmt.Fprintf(w, "dictionary:  %d bytes in %d files, %d intact\n", d.Size, len(d.Files()), d.IntactBytes)
		for _, f := range d.Files() {
			what := fmt.Sprintf("generation %d", f.Generation)
			if f.Legacy {
				what = "every generation (the layout before per-generation files: the next open moves them into their own files)"
			}
			fmt.Fprintf(w, "  %s: %d bytes, %d intact, %s\n", f.Name, f.Size, f.Intact, what)
		}
		if d.Damage != "" {
			fmt.Fprintf(w, "  damage: %s\n", d.Damage)
		}
	}
	for _, g := range slices.Sorted(maps.Keys(v.dict.gens)) {
		line := fmt.Sprintf("  generation %d: %d entries", g, len(v.dict.gens[g]))
		if n := v.dict.rebuilt[g]; n > 0 {
			line += fmt.Sprintf(" (%d of them rebuilt from the frames' own delta sections)", n)
		}
		fmt.Fprintln(w, line)
	}
}

// printUnacked counts the unacknowledged frames as the scan found them and
// decodes the first and the last one still present.
func (v *view) printUnacked(w io.Writer) error {
	var frames, bytes, rows, rowless int64
	v.scan.EachReadable(func(f sfqueue.ReadableFrame) {
		if f.FSN <= v.acked {
			return
		}
		frames++
		bytes += f.PayloadBytes
		if f.ItemsKnown {
			rows += int64(f.Items)
		} else {
			rowless++
		}
	})
	var (
		first, last frameInfo
		lastPayload []byte
		lastFSN     uint64
		found       bool
	)
	err := v.scan.EachFrame(func(fsn uint64, _ string, _ int64, payload []byte) error {
		if fsn <= v.acked {
			return nil
		}
		if !found {
			first, found = v.describeFrame(fsn, payload), true
		}
		lastFSN, lastPayload = fsn, append(lastPayload[:0], payload...)
		return nil
	})
	if err != nil {
		return err
	}
	if found {
		last = v.describeFrame(lastFSN, lastPayload)
	}
	var unreadable uint64
	unknown := false
	for _, r := range v.ranges {
		if r.Readable || r.live != "" || r.Last != 0 && r.Last <= v.acked {
			continue
		}
		if r.Last == 0 {
			unknown = true
			unreadable += uint64(r.Strays) // at least its valid frames, as recovery counts it
			continue
		}
		unreadable += r.Last - max(r.First, v.acked+1) + 1
	}
	rowNote := fmt.Sprintf("%d rows", rows)
	if rowless > 0 {
		rowNote += fmt.Sprintf(" and %d frames of format 1 whose rows are not recorded", rowless)
	}
	fmt.Fprintf(w, "unacked:     %d readable frames (%s), %d payload bytes, above acked FSN %d\n", frames, rowNote, bytes, v.acked)
	if unreadable > 0 || unknown {
		more := ""
		if unknown {
			more = " and a damaged run of unknown length"
		}
		fmt.Fprintf(w, "unreadable:  %d unacknowledged frames%s (see ranges)\n", unreadable, more)
	}
	switch {
	case found:
		fmt.Fprintf(w, "first:       %s\n", first)
		fmt.Fprintf(w, "last:        %s\n", last)
	case frames > 0:
		fmt.Fprintf(w, "first, last: the segments holding them were deleted (acknowledged) after the scan\n")
	}
	return nil
}

package sfqueue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// This file is the read-only view of a slot: what recovery decides from,
// and what an operator tool (cmd/questdb-slot) prints. Nothing here takes
// the lock or changes a file.

// Watermark is the content of .ack-watermark.
type Watermark struct {
	Acked uint64 // highest FSN the server acknowledged
	// Durable is the highest FSN completed fsyncs covered (segment data
	// and directory entries): what is lost at or below it is media damage.
	Durable uint64
	// Published is the highest FSN appended and published when the file
	// was written: frames up to it that are not in the slot were lost.
	Published uint64
	// Durability is the mode of the queue that wrote the file, which sets
	// the loss window (rule.go); DurabilityKnown is false for a file of an
	// older release, which did not record it.
	Durability      Durability
	DurabilityKnown bool
}

// SlotScan is what a read-only walk of a slot directory found.
type SlotScan struct {
	Dir string // the slot directory
	// Watermark is valid when WatermarkOK; WatermarkErr says why a present
	// file was unusable.
	Watermark    Watermark
	WatermarkOK  bool
	WatermarkErr error
	Dict         DictScan
	Segments     []SegmentScan // ascending base FSN
	TempFiles    []string      // names of *.tmp files (an interrupted replace)
	Failed       string        // reason in .failed; "" when there is none
	HolderPID    int           // PID recorded in .lock.pid (0: none); it may be stale

	// assumed is the durability the slot is judged by when .ack-watermark
	// does not record one (AssumeDurability; recovery: the opening
	// queue's); without either, the strictest rule (periodic's) applies.
	assumed      Durability
	assumedKnown bool
}

// DictScan is what the walk of the dictionary files found (sizes and byte
// counts summed over them; Damage names the first damaged file).
type DictScan struct {
	Present     bool
	Size        int64 // file size
	IntactBytes int64 // length of the valid prefix of records
	// Damage says why the valid prefix ends before the file does ("" when
	// the whole file is valid).
	Damage      string
	Generations map[uint32]int // entries per generation in the valid prefix

	// gens holds the entries themselves: every generation's in ScanSlot's
	// scan, only a legacy .symbol-dict's in recovery's (Open moves them
	// into their own files).
	gens   map[uint32][][]byte
	onDisk map[uint32]int // entries per generation in the files
	files  []dictFileScan
}

// SegmentScan is what a CRC walk of one segment file found.
type SegmentScan struct {
	Name string // file name, <base FSN in 20 digits>.sfseg
	Base uint64 // FSN of the first frame, from the name
	Size int64  // file size in bytes
	// HeaderErr is set when the 24-byte header is unusable (short, bad
	// magic, version or CRC, base FSN other than the name's); the file then
	// has no valid frames. (A newer format is no HeaderErr: the scan
	// refuses the whole slot with a *FormatError.)
	HeaderErr error
	// Version is the segment's format version (valid when HeaderErr is
	// nil): 2, whose frames carry an item count, or 1, whose frames do not.
	Version uint32
	// Frames holds the offset of each valid frame from the header on:
	// Frames[i] holds FSN Base+i.
	Frames []uint32
	// Items holds each valid frame's item count (Items[i] for Frames[i]);
	// nil in format 1, whose frames carry none.
	Items []uint32
	// ValidEnd is the end of the last valid frame (or of the header).
	ValidEnd int64
	// NonZeroEnd is the end of the last non-zero byte: the never-written
	// (preallocated) tail of a segment is zeros and is not damage.
	NonZeroEnd int64
	// Damage is the first bad frame; nil when the walk reached the end of
	// the file or never-written space.
	Damage *FrameDamage
	// HeadlessFrames is set only with HeaderErr: the frames the file
	// appears to hold when walked as if its header were an intact header
	// of the current format with the name's base FSN (its valid frames,
	// then the damaged region's FrameDamage.Frames estimate when written
	// bytes follow them). Recovery counts them as torn when the segment
	// is a torn creation (SlotScan.TornCreation).
	HeadlessFrames int

	// holds: a valid frame was found in the file, walked from the header
	// (past an unusable one, as for HeadlessFrames) or stray after damage.
	holds bool
	needs []symbolNeed // per frame, when symbol use was asked for
}

// FrameDamage describes where a segment's valid frames end short of its
// written data.
type FrameDamage struct {
	Offset int64  // where the first bad frame starts
	FSN    uint64 // the FSN it would hold
	Cause  string // "short frame", "length ... past the end of the file", "CRC32C mismatch"
	// Frames is the number of frames the damaged region appears to hold,
	// following the length fields while they stay inside the written
	// bytes (at least 1). It is an estimate: a damaged length misleads it.
	Frames int
	// Stray holds the offsets of valid frames found after the damage by
	// searching every byte offset. The length that led to them is damaged,
	// so recovery cannot replay them (a slot with stray frames was not torn
	// at its tail but damaged in the middle); the next segment's base can
	// still fix their FSNs (SegmentScan.PlacedStrays).
	Stray []int64
	// StrayItems holds each stray frame's item count (nil in format 1).
	StrayItems []uint32
	// StrayEnd is where the last stray frame ends; StrayGap is set when
	// bytes that are no frame lie between two strays (more damage), so the
	// strays are not one chain.
	StrayEnd int64
	StrayGap bool
}

// End is the FSN after the segment's last valid frame.
func (s *SegmentScan) End() uint64 { return s.Base + uint64(len(s.Frames)) }

// written reports whether the file holds any non-zero byte (a segment
// created but never written is empty or all zeros).
func (s *SegmentScan) written() bool { return s.NonZeroEnd > 0 }

// ScanSlot walks the slot directory dir read-only: it takes no lock and
// changes no file, so it is safe on a slot a live process holds (the newest
// segment's tail may then be mid-write, and segments may vanish while it
// reads: a segment deleted between the listing and its read is skipped).
// A segment of a format newer than this package reads makes it fail with a
// *FormatError.
func ScanSlot(dir string) (*SlotScan, error) {
	return scanSlot(OSFS(), dir, nil, true)
}

// scanSlot is ScanSlot on fsys; with use set it records each frame's
// symbol need for recovery's dictionary check. Without entries it keeps
// the dictionary's entries only where Open needs them (a legacy
// .symbol-dict to move), counting the rest: recovery never holds the
// slot's dictionary in RAM.
func scanSlot(fsys FS, dir string, use func([]byte) (uint32, int64), entries bool) (*SlotScan, error) {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("sfqueue: list slot %s: %w", dir, err)
	}
	s := &SlotScan{Dir: dir}
	w, ok, err := readWatermark(fsys, dir)
	s.Watermark, s.WatermarkOK, s.WatermarkErr = Watermark{Acked: w.acked, Durable: w.synced, Published: w.published, Durability: w.mode, DurabilityKnown: w.modeKnown}, ok, err
	if s.Dict, err = scanSymbolDict(fsys, dir, names, entries); err != nil {
		return nil, err
	}
	if b, err := readSmallFile(fsys, filepath.Join(dir, failedFile), 4096); err == nil {
		s.Failed = strings.TrimSpace(string(b))
		if s.Failed == "" {
			s.Failed = "(empty .failed marker)"
		}
	}
	s.HolderPID = readLockPID(fsys, dir)
	var buf []byte
	for _, name := range names {
		if strings.HasSuffix(name, ".tmp") {
			s.TempFiles = append(s.TempFiles, name)
			continue
		}
		base, ok := parseSegmentName(name)
		if !ok {
			continue
		}
		seg, err := scanSegmentFile(fsys, filepath.Join(dir, name), base, &buf, use)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted (acked) since the listing
		}
		if err != nil {
			return nil, err
		}
		s.Segments = append(s.Segments, seg)
	}
	return s, nil
}

// scanSegmentFile reads one segment file and walks its frames.
func scanSegmentFile(fsys FS, path string, base uint64, buf *[]byte, use func([]byte) (uint32, int64)) (SegmentScan, error) {
	seg := SegmentScan{Name: filepath.Base(path), Base: base}
	f, err := fsys.OpenFile(path, os.O_RDONLY)
	if err != nil {
		return seg, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return seg, err
	}
	if size > MaxSegmentBytesLimit {
		return seg, fmt.Errorf("sfqueue: segment %s is %d bytes, above the %d-byte limit of any segment", path, size, MaxSegmentBytesLimit)
	}
	if int64(cap(*buf)) < size {
		*buf = make([]byte, size)
	}
	data := (*buf)[:size]
	if n, err := f.ReadAt(data, 0); err != nil && !(errors.Is(err, io.EOF) && int64(n) == size) {
		return seg, fmt.Errorf("sfqueue: read segment %s: %w", path, err)
	}
	seg.Size = size
	seg.NonZeroEnd = nonZeroExtent(data)
	walkSegment(&seg, data)
	var newer *FormatError
	if errors.As(seg.HeaderErr, &newer) {
		newer.Path = path
		return seg, newer
	}
	if use != nil {
		for _, off := range seg.Frames {
			payload, _, _, _ := parseFrame(data[off:], seg.Version)
			gen, maxID := use(payload)
			seg.needs = append(seg.needs, symbolNeed{gen, maxID})
		}
	}
	return seg, nil
}

// walkSegment fills the frame fields of seg from data, the whole file. It
// stops at the first frame that is short, oversized or fails its CRC:
// nothing after a bad frame can be placed, because its length is the only
// map to the next. What follows is searched for stray valid frames, which
// tell damage in the middle from a torn tail.
func walkSegment(seg *SegmentScan, data []byte) {
	v, err := checkSegmentHeader(data, seg.Base)
	if err != nil {
		seg.HeaderErr = err
		if newer := (*FormatError)(nil); !errors.As(err, &newer) && seg.written() {
			seg.HeadlessFrames, seg.holds = headlessFrames(seg, data)
		}
		return
	}
	seg.Version = v
	walkFrames(seg, data, v)
	seg.holds = len(seg.Frames) > 0 || seg.Damage != nil && len(seg.Damage.Stray) > 0
}

// headlessFrames walks the frames of a segment whose header is unusable as
// if the header were intact, of the current format (the newest segment,
// the only one this matters for, was written by this release), and counts
// what the walk finds: valid frames and the damaged region's estimate,
// and whether any of them is a valid frame.
func headlessFrames(seg *SegmentScan, data []byte) (n int, valid bool) {
	w := SegmentScan{Base: seg.Base, NonZeroEnd: seg.NonZeroEnd}
	walkFrames(&w, data, segmentVersion)
	n = len(w.Frames)
	valid = n > 0
	if w.Damage != nil {
		n += w.Damage.Frames
		valid = valid || len(w.Damage.Stray) > 0
	}
	return n, valid
}

// walkFrames walks the frames of format v that follow the header in data.
func walkFrames(seg *SegmentScan, data []byte, v uint32) {
	pos := segmentHeaderSize
	for pos < len(data) {
		_, items, size, ok := parseFrame(data[pos:], v)
		if !ok {
			break
		}
		seg.Frames = append(seg.Frames, uint32(pos))
		if v != segmentVersionItemless {
			seg.Items = append(seg.Items, items)
		}
		pos += size
	}
	seg.ValidEnd = int64(pos)
	if seg.NonZeroEnd <= seg.ValidEnd {
		return // the end of the file, or never-written zeros
	}
	over := overheadOf(v)
	d := &FrameDamage{Offset: int64(pos), FSN: seg.End(), Cause: frameFault(data[pos:], v)}
	for p := pos; p+over <= int(seg.NonZeroEnd); {
		n := int(binary.LittleEndian.Uint32(data[p:]))
		if n > len(data)-p-over {
			break
		}
		d.Frames++
		p += n + over
	}
	d.Frames = max(d.Frames, 1)
	strayFrames(d, data, pos+1, int(seg.NonZeroEnd), v)
	seg.Damage = d
}

// frameFault says why the frame at the start of b (format v) is not valid.
func frameFault(b []byte, v uint32) string {
	over := overheadOf(v)
	if len(b) < over {
		return fmt.Sprintf("short frame: %d bytes left, a frame takes at least %d", len(b), over)
	}
	if n := binary.LittleEndian.Uint32(b); uint64(n) > uint64(len(b)-over) {
		return fmt.Sprintf("frame length %d runs past the end of the file (%d bytes left)", n, len(b))
	}
	return "CRC32C mismatch"
}

// strayFrames fills d's stray fields with the valid frames (format v) in
// data that start at or after from and before limit (the end of the
// written bytes; a frame may end past it in zeros: its CRC32C can end in
// zero bytes), found by trying every offset and then following lengths
// from each frame found. A CRC32C that covers the length makes a false
// match about one in 2^32 per candidate. StrayGap is set when a search had
// to skip written bytes after the first one was found.
func strayFrames(d *FrameDamage, data []byte, from, limit int, v uint32) {
	for p := from; p < limit && p+overheadOf(v) <= len(data); {
		_, items, size, ok := parseFrame(data[p:], v)
		if !ok {
			d.StrayGap = d.StrayGap || len(d.Stray) > 0
			p++
			continue
		}
		d.Stray = append(d.Stray, int64(p))
		if v != segmentVersionItemless {
			d.StrayItems = append(d.StrayItems, items)
		}
		p += size
		d.StrayEnd = int64(p)
	}
}

// dictFileScan is what the walk of one dictionary file found.
type dictFileScan struct {
	name         string
	gen          uint32 // per-generation file: its generation
	legacy       bool   // .symbol-dict, every generation in one log
	size, intact int64
	counts       map[uint32]int      // entries per generation in the valid prefix
	gens         map[uint32][][]byte // the entries, when kept
}

// scanSymbolDict reads the dictionary files read-only and keeps their valid
// prefixes (the entries of legacy files, and of every file with entries).
// A generation found both in its own file and in a legacy .symbol-dict (a
// migration interrupted after the rename) is taken from its own file.
func scanSymbolDict(fsys FS, dir string, names []string, entries bool) (DictScan, error) {
	d := DictScan{Generations: map[uint32]int{}, gens: map[uint32][][]byte{}, onDisk: map[uint32]int{}}
	var legacy *dictFileScan
	for _, name := range names {
		gen, perGen := parseGenDictName(name)
		if !perGen && name != symbolDictFile {
			continue
		}
		r, err := scanDictFile(fsys, dir, name, gen, !perGen, entries || !perGen)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return d, err
		}
		d.Present = true
		d.Size += r.size
		d.IntactBytes += r.intact
		if r.damage != "" && d.Damage == "" {
			d.Damage = r.damage
		}
		d.files = append(d.files, r.dictFileScan)
		if !perGen {
			legacy = &d.files[len(d.files)-1]
			continue
		}
		d.onDisk[gen] = r.counts[gen]
		if entries {
			d.gens[gen] = r.gens[gen]
		}
	}
	if legacy != nil {
		for g, n := range legacy.counts {
			if _, ok := d.onDisk[g]; !ok {
				d.onDisk[g], d.gens[g] = n, legacy.gens[g]
			}
		}
	}
	maps.Copy(d.Generations, d.onDisk)
	return d, nil
}

type dictFileResult struct {
	dictFileScan
	damage string
}

// scanDictFile walks one dictionary file a chunk at a time, keeping the
// entries with keep.
func scanDictFile(fsys FS, dir, name string, gen uint32, legacy, keep bool) (dictFileResult, error) {
	r := dictFileResult{dictFileScan: dictFileScan{name: name, gen: gen, legacy: legacy, counts: map[uint32]int{}}}
	if keep {
		r.gens = map[uint32][][]byte{}
	}
	p := filepath.Join(dir, name)
	f, err := fsys.OpenFile(p, os.O_RDONLY)
	if err != nil {
		return r, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return r, err
	}
	r.size = size
	recs := symbolRecords{f: f, path: p, size: size}
	for {
		g, id, entry, at, err := recs.next()
		var fault *recordFault
		switch {
		case err == io.EOF:
			r.intact = at
			return r, nil
		case errors.As(err, &fault):
			r.damage = fmt.Sprintf("%s: record at offset %d is short or fails its CRC32C check", name, at)
		case err != nil:
			return r, err
		case !legacy && g != gen:
			r.damage = fmt.Sprintf("%s: record at offset %d is of generation %d", name, at, g)
		case int(id) != r.counts[g]:
			r.damage = fmt.Sprintf("%s: record at offset %d has id %d of generation %d, want the next id %d", name, at, id, g, r.counts[g])
		}
		if r.damage != "" {
			r.intact = at
			return r, nil
		}
		r.counts[g]++
		if keep {
			r.gens[g] = append(r.gens[g], slices.Clone(entry))
		}
	}
}

// FSNRange is a run of FSNs of a slot, readable or not.
type FSNRange struct {
	First, Last uint64 // inclusive; Last is 0 when the end is unknown
	Readable    bool
	File        string // the segment file ("" for a gap between files)
	Offset      int64  // where in File the run starts (readable: first frame; damaged: first bad byte)
	Cause       string // why it is unreadable ("" when readable)
	// Torn marks the newest segment's torn tail (or torn creation): writes
	// a crash cut short before their fsync, which recovery cuts (the
	// durability mode's loss window) instead of setting the slot aside.
	Torn bool
	// TornCause classifies a Torn range for the torn_frames metric.
	TornCause TornCause
	// Placed marks a readable range of stray frames: valid frames after a
	// damage, their FSNs fixed by the next segment's base
	// (SegmentScan.PlacedStrays).
	Placed bool
	// Strays counts, in an unreadable range, the valid frames after the
	// damage whose FSNs nothing fixes (the newest segment's end is not
	// recorded, or more damage lies between them): they are among the
	// range's FSNs when its end is known.
	Strays int
}

// TornCause is why frames of the durability mode's loss window are gone,
// in a few values fit for a metric attribute (FSNRange.Cause says more).
type TornCause string

const (
	// TornTail: a segment's tail was cut inside a frame, a write the power
	// loss cut short.
	TornTail TornCause = "torn_tail"
	// TornCreation: a segment's creation was cut (its header unusable or
	// the file empty), and its frames with it.
	TornCreation TornCause = "torn_creation"
	// TornUnwrittenSegment: a whole segment (or the FSNs between two
	// segments) never reached the disk while a later one did: in memory
	// durability, nothing orders the write-back of unsynced segments.
	TornUnwrittenSegment TornCause = "unwritten_segment"
	// TornNeverWritten: frames handed out past the last one on disk
	// (.ack-watermark's published FSN, or a segment's name, shows them)
	// whose bytes reached no file.
	TornNeverWritten TornCause = "never_written"
	// TornAfterCut: frames intact on disk after the cut (memory durability:
	// a later segment written back before an earlier one), deleted with
	// it, as a replay cannot skip the FSNs the cut lost.
	TornAfterCut TornCause = "after_cut"
)

// TornCauses lists every TornCause, for those that record a series or an
// alert per cause from the start. A fresh slice on each call.
func TornCauses() []TornCause {
	return []TornCause{TornTail, TornCreation, TornUnwrittenSegment, TornNeverWritten, TornAfterCut}
}

// Frames is the number of FSNs in the range (0 when its end is unknown).
func (r FSNRange) Frames() uint64 {
	if r.Last < r.First {
		return 0
	}
	return r.Last - r.First + 1
}

func (r FSNRange) String() string {
	last := "?"
	if r.Last != 0 {
		last = fmt.Sprint(r.Last)
	}
	if r.Readable {
		s := fmt.Sprintf("FSN %d..%s readable in %s from offset %d", r.First, last, r.File, r.Offset)
		if r.Placed {
			s += fmt.Sprintf(": the valid frames after the damage, placed by the next segment's base FSN %d", r.Last+1)
		}
		if r.Cause != "" {
			s += " but unusable: " + r.Cause
		}
		return s
	}
	if r.File == "" {
		return fmt.Sprintf("FSN %d..%s unreadable: %s", r.First, last, r.Cause)
	}
	return fmt.Sprintf("FSN %d..%s unreadable in %s at offset %d: %s", r.First, last, r.File, r.Offset, r.Cause)
}

// Ranges lists the slot's FSNs in order as readable and unreadable runs:
// each segment's valid frames, each damaged region with the file and offset
// of its first bad byte, each hole between segments, the frames the
// watermark recorded as synced past the last one found (vanished), and,
// Torn, the durability mode's loss window (rule.go): the cut recovery
// makes and the frames handed out past it that never reached the disk
// (in memory durability, segments after the cut may still hold readable
// frames, which recovery deletes and counts but the slot tool can send).
// Runs at or below the watermark are included; compare with
// Watermark.Acked.
func (s *SlotScan) Ranges() []FSNRange {
	j := s.judge()
	var out []FSNRange
	for i := 0; i <= j.tail; i++ {
		seg := &s.Segments[i]
		var next uint64 // first FSN of the next segment; 0 for the tail
		if i < j.tail {
			next = s.Segments[i+1].Base
		}
		cut := i == j.tail && j.cut != cutNone // its cut is in the torn ranges
		switch {
		case cut && j.cut == cutWhole:
		case seg.HeaderErr != nil:
			if seg.written() || next != 0 {
				out = append(out, FSNRange{First: seg.Base, Last: lastBefore(next), File: seg.Name,
					Cause: "unusable segment header: " + seg.HeaderErr.Error()})
			}
		default:
			if len(seg.Frames) > 0 {
				out = append(out, FSNRange{First: seg.Base, Last: seg.End() - 1, Readable: true, File: seg.Name,
					Offset: int64(seg.Frames[0])})
			}
			if seg.Damage != nil && !cut {
				out = append(out, s.damageRange(seg, next))
				if r, ok := placedRange(seg, next); ok {
					out = append(out, r)
				}
			}
		}
		if next != 0 {
			end := seg.End()
			if seg.HeaderErr != nil || seg.Damage != nil {
				end = next // the damage run above covers up to next-1
			}
			switch {
			case end < next:
				out = append(out, FSNRange{First: end, Last: next - 1,
					Cause: fmt.Sprintf("missing: %s ends at FSN %d, the next segment starts at FSN %d", seg.Name, end-1, next)})
			case end > next:
				out = append(out, FSNRange{First: next, Last: end - 1, File: s.Segments[i+1].Name,
					Cause: fmt.Sprintf("overlap: %s already holds FSNs up to %d", seg.Name, end-1)})
			}
		}
	}
	var after []FSNRange
	if j.lostLast != 0 {
		after = append(after, FSNRange{First: j.lostFirst, Last: j.lostLast, Cause: fmt.Sprintf(
			"vanished: .ack-watermark recorded FSN %d as on disk, the slot ends at FSN %d", j.lostLast, j.lostFirst-1)})
	}
	after = append(after, s.tornRanges(j, true)...)
	for i := j.tail + 1; i < len(s.Segments); i++ {
		if seg := &s.Segments[i]; len(seg.Frames) > 0 {
			after = append(after, FSNRange{First: seg.Base, Last: seg.End() - 1, Readable: true, File: seg.Name,
				Offset: int64(seg.Frames[0])})
		}
	}
	sort.SliceStable(after, func(a, b int) bool { return after[a].First < after[b].First })
	return append(out, after...)
}

// damageRange is the unreadable range of seg's damage, up to the FSN
// before next (the next segment's base; 0 for the tail, whose range ends
// where .ack-watermark's synced FSN, when it records the damage, says), or
// up to the first of the stray frames that next places (placedRange).
func (s *SlotScan) damageRange(seg *SegmentScan, next uint64) FSNRange {
	d := seg.Damage
	r := FSNRange{First: d.FSN, Last: lastBefore(next), File: seg.Name, Offset: d.Offset, Cause: d.Cause}
	if first, lost, ok := seg.PlacedStrays(next); ok {
		r.Last = first - 1
		r.Cause += fmt.Sprintf(" (%d damaged frames; the %d valid frames after them, from offset %d, are FSN %d..%d)",
			lost, len(d.Stray), d.Stray[0], first, next-1)
		return r
	}
	if len(d.Stray) > 0 {
		why := "more damage lies between them"
		switch {
		case next == 0:
			why = "the newest segment's end is not recorded"
		case !d.StrayGap && d.StrayEnd < seg.NonZeroEnd:
			why = "written bytes follow the last of them"
		case !d.StrayGap:
			why = "the next segment's base leaves no room for them"
		}
		r.Strays = len(d.Stray)
		r.Cause += fmt.Sprintf(" (%d valid frames follow it, first at offset %d, of unknown FSN: %s)", len(d.Stray), d.Stray[0], why)
	}
	if next == 0 && s.synced(d.FSN) {
		r.Last = max(s.Watermark.Durable, d.FSN+uint64(d.Frames)-1)
		r.Cause += fmt.Sprintf("; .ack-watermark recorded FSNs up to %d as fsynced, so this is damage to written data, not a torn write", s.Watermark.Durable)
	}
	return r
}

// placedRange is the readable range of seg's stray frames that next
// places; ok is false when it places none.
func placedRange(seg *SegmentScan, next uint64) (FSNRange, bool) {
	first, _, ok := seg.PlacedStrays(next)
	if !ok {
		return FSNRange{}, false
	}
	return FSNRange{First: first, Last: next - 1, Readable: true, Placed: true, File: seg.Name, Offset: seg.Damage.Stray[0]}, true
}

// tornCreationCause describes the torn creation seg for a range and a log.
func tornCreationCause(seg *SegmentScan) string {
	return fmt.Sprintf("torn creation: the header is unusable (%v) and no frame of the segment was recorded as on disk: "+
		"no fsync of the file completed before the crash; its %d written bytes appear to hold %d frames",
		seg.HeaderErr, seg.NonZeroEnd, seg.HeadlessFrames)
}

func lastBefore(next uint64) uint64 {
	if next == 0 {
		return 0
	}
	return next - 1
}

// FrameItems returns the item count of the segments' valid frame fsn.
// known is false when the frame is not among them (a stray frame placed
// after a damage is not: EachReadable gives its count) or is of format 1,
// which carries no item count.
func (s *SlotScan) FrameItems(fsn uint64) (items uint32, known bool) {
	i := sort.Search(len(s.Segments), func(i int) bool { return s.Segments[i].End() > fsn })
	if i == len(s.Segments) {
		return 0, false
	}
	seg := &s.Segments[i]
	if fsn < seg.Base || seg.Items == nil {
		return 0, false
	}
	return seg.Items[fsn-seg.Base], true
}

// ReadableFrame is a readable frame as the scan found it.
type ReadableFrame struct {
	FSN          uint64
	Offset       int64 // where the frame starts in the segment file
	PayloadBytes int64
	// Items is the frame's item count; ItemsKnown is false in format 1,
	// whose frames carry none.
	Items      uint32
	ItemsKnown bool
	end        int64 // where the frame ends
}

// EachReadable calls fn with every readable frame the scan found, in FSN
// order, from the scan alone (the files are not read again): each
// segment's valid frames, then the stray frames after its damage where the
// next segment's base places them, as Ranges lists them.
func (s *SlotScan) EachReadable(fn func(ReadableFrame)) {
	j := s.judge()
	for i := range s.Segments {
		s.segmentReadable(i, j, fn)
	}
}

// segmentReadable calls fn with segment i's readable frames, placing its
// strays as Ranges does (only a segment before the tail j.tail has a next
// segment whose base places them).
func (s *SlotScan) segmentReadable(i int, j judgement, fn func(ReadableFrame)) {
	seg := &s.Segments[i]
	over := int64(overheadOf(seg.Version))
	// run calls fn for the frames starting at offs[k] (FSN first+k), the
	// last one ending at end.
	run := func(first uint64, offs func(k int) int64, n int, end int64, items []uint32) {
		for k := range n {
			f := ReadableFrame{FSN: first + uint64(k), Offset: offs(k), end: end}
			if k+1 < n {
				f.end = offs(k + 1)
			}
			f.PayloadBytes = f.end - f.Offset - over
			if items != nil {
				f.Items, f.ItemsKnown = items[k], true
			}
			fn(f)
		}
	}
	run(seg.Base, func(k int) int64 { return int64(seg.Frames[k]) }, len(seg.Frames), seg.ValidEnd, seg.Items)
	if i >= j.tail {
		return
	}
	first, _, ok := seg.PlacedStrays(s.Segments[i+1].Base)
	if !ok {
		return
	}
	d := seg.Damage
	run(first, func(k int) int64 { return d.Stray[k] }, len(d.Stray), d.StrayEnd, d.StrayItems)
}

// EachFrame calls fn with every readable frame of the scanned segments in
// FSN order (EachReadable's), reading the files again (a segment that
// vanished since the scan is skipped). The payload aliases a buffer reused
// for the next call. Stray frames after a damage are included where the
// next segment's base places them, and only there.
func (s *SlotScan) EachFrame(fn func(fsn uint64, file string, offset int64, payload []byte) error) error {
	return s.eachFrame(OSFS(), fn)
}

func (s *SlotScan) eachFrame(fsys FS, fn func(fsn uint64, file string, offset int64, payload []byte) error) error {
	j := s.judge()
	var buf []byte
	var frames []ReadableFrame
	for i := range s.Segments {
		seg := &s.Segments[i]
		frames = frames[:0]
		s.segmentReadable(i, j, func(f ReadableFrame) { frames = append(frames, f) })
		if len(frames) == 0 {
			continue
		}
		path := filepath.Join(s.Dir, seg.Name)
		f, err := fsys.OpenFile(path, os.O_RDONLY)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		size := frames[len(frames)-1].end
		if int64(cap(buf)) < size {
			buf = make([]byte, size)
		}
		data := buf[:size]
		n, err := f.ReadAt(data, 0)
		f.Close()
		if err != nil && !(errors.Is(err, io.EOF) && int64(n) == size) {
			return fmt.Errorf("sfqueue: read segment %s: %w", path, err)
		}
		for _, fr := range frames {
			payload, _, _, ok := parseFrame(data[fr.Offset:], seg.Version)
			if !ok {
				return fmt.Errorf("sfqueue: frame %d of %s at offset %d changed since the scan (fails its CRC32C check)", fr.FSN, seg.Name, fr.Offset)
			}
			if err := fn(fr.FSN, seg.Name, fr.Offset, payload); err != nil {
				return err
			}
		}
	}
	return nil
}

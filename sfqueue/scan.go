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
	Acked   uint64 // highest FSN the server acknowledged
	Durable uint64 // highest FSN its writer knew to be on disk
	// Unsynced: Durable counts frames written that no completed fsync was
	// known to cover (a Close in memory durability, or after a failed
	// fsync), which a power loss may still have torn.
	Unsynced bool
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
	// searching every byte offset. Their FSNs are unknown (the length that
	// led to them is damaged), so recovery cannot replay them; a slot
	// with stray frames was not torn at its tail but damaged in the middle.
	Stray []int64
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
// as fsynced, by an intact .ack-watermark whose on-disk FSN is below the
// segment's base or not known fsynced ("SQWu"), or by none at all. Every
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
	s.Watermark, s.WatermarkOK, s.WatermarkErr = Watermark{Acked: w.acked, Durable: w.durable, Unsynced: w.unsynced}, ok, err
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
	d.Stray = strayFrames(data[:seg.NonZeroEnd], pos+1, v)
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

// strayFrames returns the offsets of valid frames (format v) in data at or
// after from, found by trying every offset and then following lengths from
// each frame found. A CRC32C that covers the length makes a false match
// about one in 2^32 per candidate.
func strayFrames(data []byte, from int, v uint32) []int64 {
	var out []int64
	for p := from; p+overheadOf(v) <= len(data); {
		_, _, size, ok := parseFrame(data[p:], v)
		if !ok {
			p++
			continue
		}
		out = append(out, int64(p))
		p += size
	}
	return out
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
// of its first bad byte (Torn when it is the torn tail or torn creation of
// the tail segment (SlotScan.tail), which recovery cuts; the segments
// after that one hold no FSN), each hole between
// segments, and the frames the watermark recorded as on disk past the last
// one found. Runs at or below the watermark are included; compare with
// Watermark.Acked.
func (s *SlotScan) Ranges() []FSNRange {
	var out []FSNRange
	tail := s.tail()
	for i := 0; i < len(s.Segments) && i <= tail; i++ { // those after the tail hold nothing
		seg := &s.Segments[i]
		var next uint64 // first FSN of the next segment; 0 for the tail
		if i < tail {
			next = s.Segments[i+1].Base
		}
		switch {
		case s.tornCreation(i, tail):
			if n := uint64(seg.HeadlessFrames); n > 0 {
				out = append(out, FSNRange{First: seg.Base, Last: seg.Base + n - 1, Torn: true, File: seg.Name,
					Cause: tornCreationCause(seg)})
			}
		case seg.HeaderErr != nil:
			if seg.written() || next != 0 {
				out = append(out, FSNRange{First: seg.Base, Last: lastBefore(next), File: seg.Name,
					Cause: "unusable segment header: " + seg.HeaderErr.Error()})
			}
		default:
			if last, ok := s.emptyTail(i); ok && i == tail {
				out = append(out, FSNRange{First: seg.Base, Last: last, Torn: true, File: seg.Name, Offset: segmentHeaderSize,
					Cause: fmt.Sprintf("no frame: the segment after it starts at FSN %d", last+1)})
			}
			if len(seg.Frames) > 0 {
				out = append(out, FSNRange{First: seg.Base, Last: seg.End() - 1, Readable: true, File: seg.Name,
					Offset: int64(seg.Frames[0])})
			}
			if d := seg.Damage; d != nil {
				r := s.damageRange(seg, next)
				if next == 0 && s.tornTail(seg) {
					r.Last, r.Torn = d.FSN+uint64(d.Frames)-1, true
				}
				out = append(out, r)
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
	last := s.lastFSN()
	if s.WatermarkOK && s.Watermark.Durable > last {
		out = append(out, FSNRange{First: last + 1, Last: s.Watermark.Durable,
			Cause: fmt.Sprintf("vanished: .ack-watermark recorded FSN %d as on disk, the slot ends at FSN %d", s.Watermark.Durable, last)})
	}
	return out
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

// synced reports whether .ack-watermark records FSN fsn as covered by a
// completed fsync.
func (s *SlotScan) synced(fsn uint64) bool {
	return s.WatermarkOK && !s.Watermark.Unsynced && s.Watermark.Durable >= fsn
}

// damageRange is the unreadable range of seg's damage, up to the FSN
// before next (the next segment's base; 0 for the tail, whose range ends
// where .ack-watermark's on-disk FSN, when it records the damage, says).
func (s *SlotScan) damageRange(seg *SegmentScan, next uint64) FSNRange {
	d := seg.Damage
	r := FSNRange{First: d.FSN, Last: lastBefore(next), File: seg.Name, Offset: d.Offset, Cause: d.Cause}
	if len(d.Stray) > 0 {
		r.Cause += fmt.Sprintf(" (%d valid frames follow it, first at offset %d)", len(d.Stray), d.Stray[0])
	}
	if next == 0 && s.synced(d.FSN) {
		r.Last = max(s.Watermark.Durable, d.FSN+uint64(d.Frames)-1)
		r.Cause += fmt.Sprintf("; .ack-watermark recorded FSNs up to %d as fsynced, so this is damage to written data, not a torn write", s.Watermark.Durable)
	}
	return r
}

// lastFSN is the highest FSN the slot's segments account for (readable or
// damaged, up to the tail), or the watermark when it has no segment.
func (s *SlotScan) lastFSN() uint64 {
	last := uint64(0)
	if s.WatermarkOK {
		last = s.Watermark.Acked
	}
	if len(s.Segments) > 0 {
		tail := s.tail()
		seg := &s.Segments[tail]
		end := seg.End()
		if d := seg.Damage; d != nil {
			end = d.FSN + uint64(d.Frames)
			if s.synced(d.FSN) {
				end = max(end, s.Watermark.Durable+1) // damageRange covers up to it
			}
		}
		if s.tornCreation(tail, tail) {
			end += uint64(seg.HeadlessFrames)
		}
		if l, ok := s.emptyTail(tail); ok {
			end = l + 1
		}
		if seg.HeaderErr == nil || seg.written() {
			last = max(last, end-1)
		}
	}
	return last
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

// FrameItems returns the item count of the readable frame fsn. known is
// false when the frame is not among the scan's readable frames or is of
// format 1, which carries no item count.
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

// EachFrame calls fn with every readable frame of the scanned segments in
// FSN order, reading the files again (a segment that vanished since the
// scan is skipped). The payload aliases a buffer reused for the next call.
// Stray frames (after damage, FSN unknown) are not included.
func (s *SlotScan) EachFrame(fn func(fsn uint64, file string, offset int64, payload []byte) error) error {
	return s.eachFrame(OSFS(), fn)
}

func (s *SlotScan) eachFrame(fsys FS, fn func(fsn uint64, file string, offset int64, payload []byte) error) error {
	var buf []byte
	for i := range s.Segments {
		seg := &s.Segments[i]
		if len(seg.Frames) == 0 {
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
		if int64(cap(buf)) < seg.ValidEnd {
			buf = make([]byte, seg.ValidEnd)
		}
		data := buf[:seg.ValidEnd]
		n, err := f.ReadAt(data, 0)
		f.Close()
		if err != nil && !(errors.Is(err, io.EOF) && int64(n) == seg.ValidEnd) {
			return fmt.Errorf("sfqueue: read segment %s: %w", path, err)
		}
		for j, off := range seg.Frames {
			payload, _, _, ok := parseFrame(data[off:], seg.Version)
			if !ok {
				return fmt.Errorf("sfqueue: frame %d of %s at offset %d changed since the scan (fails its CRC32C check)", seg.Base+uint64(j), seg.Name, off)
			}
			if err := fn(seg.Base+uint64(j), seg.Name, int64(off), payload); err != nil {
				return err
			}
		}
	}
	return nil
}

package sfqueue

import (
	"errors"
	"io"
	"io/fs"
	"os"
)

// Read-only helpers for the slot tool (cmd/questdb-slot), beside ScanSlot:
// they expose what the queue already knows about a slot's files so that the
// tool shares the queue's decoding instead of copying it.

// FormatVersion is the newest segment format version this package reads,
// and the one it writes (the version field of the segment header, see
// doc.go). Format 1 (frames without an item count) is still read.
const FormatVersion = segmentVersion

// SegmentFormat reads the header of the segment file at path and returns its
// format version. ok is false when the file does not start with an intact
// header carrying the segment magic (a damaged or never-written header: the
// version is then unknown, not newer).
func SegmentFormat(path string) (version uint32, ok bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	h := make([]byte, segmentHeaderSize)
	if _, err := io.ReadFull(f, h); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, false, nil
		}
		return 0, false, err
	}
	version, ok = headerVersion(h)
	return version, ok, nil
}

// IsSlotDir reports whether dir looks like a slot: it holds a segment file
// or one of the side files a queue creates (.lock, .ack-watermark, a
// dictionary file).
func IsSlotDir(dir string) (bool, error) {
	names, err := OSFS().ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, n := range names {
		if _, ok := parseSegmentName(n); ok {
			return true, nil
		}
		if _, ok := parseGenDictName(n); ok {
			return true, nil
		}
		switch n {
		case lockFileName, watermarkFile, symbolDictFile:
			return true, nil
		}
	}
	return false, nil
}

// LockSlot takes the lock of the slot directory dir as Open does (flock on
// .lock, our PID in .lock.pid). A slot held by another process is a
// *LockedError naming its PID. Close the result to release the lock.
func LockSlot(dir string) (io.Closer, error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, err
	} else if !fi.IsDir() {
		return nil, &fs.PathError{Op: "lock slot", Path: dir, Err: errors.New("not a directory")}
	}
	return lockSlot(OSFS(), dir)
}

// Entries returns the entries of generation gen in the valid prefix of
// its dictionary file, in id order. The slices must not be modified.
func (d *DictScan) Entries(gen uint32) [][]byte { return d.gens[gen] }

// DictFile is what the walk of one dictionary file found.
type DictFile struct {
	Name string
	// Legacy is set for .symbol-dict, the single log of every generation
	// that slots written before per-generation files hold (the next Open
	// moves its generations into their own files); otherwise the file
	// holds Generation.
	Legacy     bool
	Generation uint32
	Size       int64 // file size
	Intact     int64 // length of the valid prefix of records
}

// Files lists the dictionary files in directory order.
func (d *DictScan) Files() []DictFile {
	out := make([]DictFile, 0, len(d.files))
	for _, f := range d.files {
		out = append(out, DictFile{Name: f.name, Legacy: f.legacy, Generation: f.gen, Size: f.size, Intact: f.intact})
	}
	return out
}

// PlacedStrays gives the stray frames after the segment's damage their
// FSNs where the files fix them: next, the base FSN of the following
// segment, says the segment's last frame held FSN next-1, and strays that
// form one chain running to the end of the written data then held the
// FSNs up to next-1. first is the first stray's FSN and lost the number of
// FSNs from the damage to it (the damaged frames, at least 1). ok is false
// when nothing fixes them: no damage or no strays, the tail segment
// (next 0), more damage between the strays, written bytes after the last
// one, or a chain too long to leave room for the damaged frame. A segment
// whose last frames were lost whole as well is indistinguishable: its
// strays are placed too high by that many FSNs (doc.go, Recovery).
func (s *SegmentScan) PlacedStrays(next uint64) (first, lost uint64, ok bool) {
	d := s.Damage
	if d == nil || len(d.Stray) == 0 || next == 0 || d.StrayGap || d.StrayEnd < s.NonZeroEnd {
		return 0, 0, false
	}
	n := uint64(len(d.Stray))
	if next < d.FSN+n+1 {
		return 0, 0, false
	}
	first = next - n
	return first, first - d.FSN, true
}

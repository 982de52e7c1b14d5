package sfqueue

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.uber.org/zap"
)

// RecoveryReport says what Open found in the slot (SF mode).
type RecoveryReport struct {
	Segments        int   // segment files that survived
	FramesRecovered int   // frames in them above the ack watermark
	TornBytes       int64 // bytes cut from segment tails (and unusable segments)
	SymbolTornBytes int64 // bytes cut from the .symbol-dict tail
	// WatermarkIgnored is set when .ack-watermark was corrupt or pointed past
	// the last recovered frame.
	WatermarkIgnored bool
	// LostFrames counts frames the previous holder recorded as on disk (in
	// .ack-watermark) that recovery did not find: a segment tail that
	// vanished without leaving torn bytes (truncated file, lost power in
	// memory durability after a clean close, a disk lying about fsync).
	LostFrames   uint64
	AckedFSN     uint64 // seeded ack watermark
	PublishedFSN uint64 // last recovered FSN
	// Unreplayable is set when the slot could not be replayed (a gap
	// between segments, or frames using symbol ids .symbol-dict lacks): it
	// was renamed aside and the queue started on a fresh slot.
	Unreplayable *DataLossError
}

// recoveredSegment is a segment found by the scan, with the symbol needs of
// its frames when Options.SymbolUse is set.
type recoveredSegment struct {
	seg   *segment
	needs []symbolNeed
}

type symbolNeed struct {
	gen   uint32
	maxID int64
}

// recover locks the slot and rebuilds the queue state from its files. See
// doc.go for the rules.
func (q *Queue) recover() error {
	if err := q.fs.MkdirAll(q.slot); err != nil {
		return fmt.Errorf("sfqueue: create slot %s: %w", q.slot, err)
	}
	lock, err := lockSlot(q.fs, q.slot)
	if err != nil {
		return err
	}
	q.lock = lock
	report, err := q.recoverLocked()
	if err != nil {
		q.lock.Close()
		return err
	}
	if report.Unreplayable != nil {
		fresh, err := q.setAside(report)
		if err != nil {
			return err
		}
		report = fresh
	}
	q.recovery = report
	if q.o.Durability != DurabilityMemory {
		// The slot and the side files just created must survive a power
		// loss like the frames that will depend on them.
		for _, d := range []string{q.slot, q.o.Dir} {
			if err := q.fs.SyncDir(d); err != nil {
				q.Close()
				return fmt.Errorf("sfqueue: fsync directory %s: %w", d, err)
			}
		}
	}
	return nil
}

// recoverLocked reads the side files and segments of the locked slot.
func (q *Queue) recoverLocked() (RecoveryReport, error) {
	var rep RecoveryReport
	fsys, slot, log := q.fs, q.slot, q.log
	w, wmOK, err := readWatermark(fsys, slot)
	wm := w.acked
	if err != nil {
		log.Warn("sfqueue: ignoring unreadable ack watermark", zap.String("slot", slot), zap.Error(err))
		rep.WatermarkIgnored = true
	}
	dict, symTorn, err := openSymbolDict(fsys, slot)
	if err != nil {
		return rep, err
	}
	rep.SymbolTornBytes = symTorn
	if symTorn > 0 {
		log.Warn("sfqueue: cut torn tail of .symbol-dict", zap.String("slot", slot), zap.Int64("bytes", symTorn))
	}
	q.dict = dict

	names, err := fsys.ReadDir(slot)
	if err != nil {
		return rep, err
	}
	var found []recoveredSegment
	var unusable []uint64 // bases of deleted segments with no valid frame
	var buf []byte
	for _, name := range names {
		if strings.HasSuffix(name, ".tmp") {
			fsys.Remove(filepath.Join(slot, name)) // an interrupted replaceFile
			continue
		}
		base, ok := parseSegmentName(name)
		if !ok {
			continue
		}
		rs, torn, err := q.recoverSegment(filepath.Join(slot, name), base, &buf)
		if err != nil {
			return rep, err
		}
		rep.TornBytes += torn
		if rs != nil {
			found = append(found, *rs)
		} else {
			unusable = append(unusable, base)
		}
	}
	// An unusable segment followed by a good one held frames up to the good
	// one's base: they are gone. (A newest segment with nothing in it is the
	// normal result of a crash right after it was created.)
	for _, b := range unusable {
		for _, rs := range found {
			if from := max(b, wm+1); rs.seg.base > b && rs.seg.base > from {
				rep.LostFrames += rs.seg.base - from
				log.Warn("sfqueue: segment without valid frames precedes later data: frames lost",
					zap.String("slot", slot), zap.Uint64("first_fsn", from), zap.Uint64("last_fsn", rs.seg.base-1))
				break
			} else if rs.seg.base > b {
				break
			}
		}
	}

	last := wm
	if n := len(found); n > 0 {
		last = found[n-1].seg.end() - 1
	}
	if wmOK && w.durable > last {
		rep.LostFrames += w.durable - last
		log.Warn("sfqueue: frames recorded as on disk are missing from the slot",
			zap.String("slot", slot), zap.Uint64("recorded_fsn", w.durable), zap.Uint64("last_recovered_fsn", last),
			zap.Uint64("lost_frames", rep.LostFrames))
	}
	if n := len(found); n > 0 && wmOK && wm > found[n-1].seg.end()-1 {
		log.Warn("sfqueue: ack watermark is beyond the recovered data; ignoring it",
			zap.String("slot", slot), zap.Uint64("watermark", wm), zap.Uint64("last_fsn", found[n-1].seg.end()-1))
		wmOK, wm = false, 0
		rep.WatermarkIgnored = true
	}
	// The chain must be contiguous wherever it holds unacked frames: a hole
	// whose missing FSNs are all at or below the watermark is harmless (a
	// deletion of acked segments that a power loss partly undid).
	for i := 1; i < len(found); i++ {
		prev, cur := found[i-1].seg, found[i].seg
		if prev.end() != cur.base && cur.base-1 > wm {
			rep.Unreplayable = &DataLossError{Reason: fmt.Sprintf(
				"FSN gap between segments: %s ends at FSN %d, the next segment %s starts at FSN %d (ack watermark %d)",
				filepath.Base(prev.path), prev.end()-1, filepath.Base(cur.path), cur.base, wm)}
			break
		}
	}
	// Segments wholly at or below the watermark were acked: delete them.
	for rep.Unreplayable == nil && len(found) > 0 && wmOK && found[0].seg.end()-1 <= wm {
		fsys.Remove(found[0].seg.path)
		found = found[1:]
	}

	acked := wm
	if len(found) > 0 {
		acked = max(acked, found[0].seg.base-1)
	}
	rep.AckedFSN = acked
	if rep.Unreplayable == nil && q.o.SymbolUse != nil {
		rep.Unreplayable = checkSymbols(found, acked, dict)
	}
	for _, rs := range found {
		for i := range rs.seg.offsets {
			if rs.seg.base+uint64(i) > acked {
				rep.FramesRecovered++
			}
		}
	}
	if rep.Unreplayable != nil {
		rep.Unreplayable.Frames = rep.FramesRecovered
		return rep, nil
	}

	for _, rs := range found {
		q.segs = append(q.segs, rs.seg)
		q.used += rs.seg.size
	}
	rep.Segments = len(q.segs)
	q.acked = acked
	q.wmSaved = watermark{acked: wm, durable: w.durable}
	if !wmOK {
		q.wmSaved = watermark{}
	}
	q.nextFSN = acked + 1
	if len(q.segs) > 0 {
		q.nextFSN = q.segs[len(q.segs)-1].end()
	}
	q.durable = q.nextFSN - 1
	rep.PublishedFSN = q.nextFSN - 1
	if rep.TornBytes > 0 || rep.FramesRecovered > 0 {
		log.Info("sfqueue: recovered slot", zap.String("slot", slot), zap.Int("segments", rep.Segments),
			zap.Int("frames", rep.FramesRecovered), zap.Int64("torn_bytes", rep.TornBytes),
			zap.Uint64("acked_fsn", rep.AckedFSN), zap.Uint64("published_fsn", rep.PublishedFSN))
	}
	return rep, nil
}

// recoverSegment CRC-walks one segment file and cuts it at the first bad
// frame. It returns nil (and deletes the file) when no frame survives.
func (q *Queue) recoverSegment(path string, base uint64, buf *[]byte) (*recoveredSegment, int64, error) {
	f, err := q.fs.OpenFile(path, os.O_RDWR)
	if err != nil {
		return nil, 0, err
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if int64(cap(*buf)) < size {
		*buf = make([]byte, size)
	}
	data := (*buf)[:size]
	if n, err := f.ReadAt(data, 0); err != nil && !(errors.Is(err, io.EOF) && int64(n) == size) {
		f.Close()
		return nil, 0, fmt.Errorf("sfqueue: read segment %s: %w", path, err)
	}
	r := scanSegment(data, base)
	if r.headerErr != nil || len(r.offsets) == 0 {
		if r.headerErr != nil {
			q.log.Warn("sfqueue: deleting segment with an unusable header", zap.String("path", path), zap.Error(r.headerErr))
		}
		f.Close()
		if err := q.fs.Remove(path); err != nil {
			return nil, 0, err
		}
		return nil, r.tornBytes, nil
	}
	if r.validEnd < size {
		if r.tornBytes > 0 {
			q.log.Warn("sfqueue: cutting torn segment tail", zap.String("path", path),
				zap.Int64("valid_bytes", r.validEnd), zap.Int64("torn_bytes", r.tornBytes))
		}
		if err := f.Truncate(r.validEnd); err != nil {
			f.Close()
			return nil, 0, fmt.Errorf("sfqueue: cut segment %s at %d: %w", path, r.validEnd, err)
		}
	}
	// Recovered segments are sealed: make the cut durable and keep no file
	// open (the cursor opens what it reads).
	if q.o.Durability != DurabilityMemory {
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, 0, fmt.Errorf("sfqueue: fsync recovered segment %s: %w", path, err)
		}
	}
	if err := f.Close(); err != nil {
		return nil, 0, err
	}
	rs := &recoveredSegment{seg: &segment{base: base, path: path, offsets: r.offsets, size: r.validEnd}}
	if use := q.o.SymbolUse; use != nil {
		for i := range r.offsets {
			payload, _, _ := parseFrame(data[r.offsets[i]:])
			gen, maxID := use(payload)
			rs.needs = append(rs.needs, symbolNeed{gen, maxID})
		}
	}
	return rs, r.tornBytes, nil
}

// checkSymbols finds the first unacked frame using an id the dictionary
// cannot back.
func checkSymbols(found []recoveredSegment, acked uint64, dict *symbolDict) *DataLossError {
	for _, rs := range found {
		for i, n := range rs.needs {
			fsn := rs.seg.base + uint64(i)
			if fsn <= acked || n.maxID < 0 {
				continue
			}
			if have := int64(len(dict.gens[n.gen])); n.maxID >= have {
				return &DataLossError{Reason: fmt.Sprintf(
					"frame %d uses symbol id %d of generation %d, but .symbol-dict holds %d entries of that generation",
					fsn, n.maxID, n.gen, have)}
			}
		}
	}
	return nil
}

// setAside renames the unreplayable slot to <SenderID>.unreplayable-<n>,
// keeps it for inspection, and starts over on a fresh, empty slot.
func (q *Queue) setAside(rep RecoveryReport) (RecoveryReport, error) {
	q.dict.close()
	dst, err := unreplayablePath(q.fs, q.o.Dir, q.o.SenderID)
	if err == nil {
		err = q.fs.Rename(q.slot, dst)
	}
	if err == nil {
		err = q.fs.SyncDir(q.o.Dir)
	}
	q.lock.Close()
	if err != nil {
		return rep, fmt.Errorf("sfqueue: set aside unreplayable slot %s (%s): %w", q.slot, rep.Unreplayable.Reason, err)
	}
	rep.Unreplayable.Path = dst
	q.log.Error("sfqueue: DATA_LOSS: slot cannot be replayed; set aside and starting empty",
		zap.String("slot", q.slot), zap.String("moved_to", dst), zap.Int("unacked_frames", rep.Unreplayable.Frames),
		zap.String("reason", rep.Unreplayable.Reason))

	if err := q.fs.MkdirAll(q.slot); err != nil {
		return rep, err
	}
	lock, err := lockSlot(q.fs, q.slot)
	if err != nil {
		return rep, err
	}
	q.lock = lock
	fresh, err := q.recoverLocked()
	if err != nil {
		lock.Close()
		return rep, err
	}
	fresh.Unreplayable = rep.Unreplayable
	fresh.TornBytes += rep.TornBytes
	fresh.WatermarkIgnored = rep.WatermarkIgnored
	return fresh, nil
}

const unreplayableInfix = ".unreplayable-"

// unreplayablePath returns the first free <dir>/<id>.unreplayable-<n>.
func unreplayablePath(fsys FS, dir, id string) (string, error) {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return "", err
	}
	taken := map[string]bool{}
	for _, n := range names {
		taken[n] = true
	}
	for n := 1; ; n++ {
		name := id + unreplayableInfix + strconv.Itoa(n)
		if !taken[name] {
			return filepath.Join(dir, name), nil
		}
	}
}

// isUnreplayableName reports whether a slot name is a set-aside slot.
func isUnreplayableName(name string) bool {
	i := strings.LastIndex(name, unreplayableInfix)
	if i <= 0 {
		return false
	}
	_, err := strconv.Atoi(name[i+len(unreplayableInfix):])
	return err == nil
}

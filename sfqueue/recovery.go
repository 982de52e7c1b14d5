package sfqueue

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// RecoveryReport says what Open found in the slot (SF mode).
type RecoveryReport struct {
	Segments        int // segment files that survived
	FramesRecovered int // frames in them above the ack watermark
	// TornBytes counts the bytes cut from the newest segment's tail, or
	// the written bytes of a segment deleted as a torn creation (doc.go,
	// Recovery), which may hold no frame (TornFrames 0).
	TornBytes       int64
	SymbolTornBytes int64 // bytes cut from the .symbol-dict tail
	// TornFrames is the number of frames above the ack watermark that the
	// tail cut removed, starting at TornFirstFSN (an estimate that follows
	// the damaged length fields; at least 1 when a torn tail's bytes lie
	// above the watermark). In flush durability they were never answered
	// (seed 004); in periodic and memory durability they are the mode's
	// loss window, which the caller must log and count.
	TornFrames   uint64
	TornFirstFSN uint64
	// Torn lists the torn frames' FSN ranges with their cause (rule.go):
	// the cut (a torn tail, a torn creation, an unsynced segment of memory
	// durability) and frames handed out past it that never reached the
	// disk.
	Torn []FSNRange
	// TornDurability is the durability of the queue that wrote the torn
	// frames (recorded in .ack-watermark, else this queue's): in flush
	// durability none of them was answered to a caller.
	TornDurability Durability
	// SymbolsRebuilt counts dictionary entries .symbol-dict had lost and
	// recovery took back from the delta sections of surviving frames.
	SymbolsRebuilt int
	// WatermarkIgnored is set when .ack-watermark was corrupt (frames are
	// then replayed from the oldest segment, and the file is rewritten).
	WatermarkIgnored bool
	// LostFrames counts accepted frames above the ack watermark that the
	// previous holder recorded as on disk (in .ack-watermark) and that
	// recovery did not find anywhere, not even torn: a segment tail that
	// vanished (a truncated file, a disk lying about fsync, a power loss in
	// memory durability). Lost lists their FSN ranges. Nothing of them is
	// left to keep, so the slot is replayed; the loss is DATA_LOSS all the
	// same and the caller must report it.
	LostFrames   uint64
	Lost         []FSNRange
	AckedFSN     uint64 // seeded ack watermark
	PublishedFSN uint64 // last recovered FSN
	// Unreplayable is set when accepted, unacknowledged frames were
	// unreadable (doc.go, Recovery): the slot was renamed aside whole,
	// unchanged, and the queue started on a fresh slot.
	Unreplayable *DataLossError
}

type symbolNeed struct {
	gen   uint32
	maxID int64
}

// recoveryPlan is what recovery decided from a scan: the changes that make
// the slot replayable, or the unreadable ranges that make it unreplayable.
type recoveryPlan struct {
	wm               uint64 // the acked FSN the rule trusts (rule.go; 0: none)
	wmOK             bool
	watermarkIgnored bool
	keep             []*SegmentScan // segments to replay, ascending
	truncate         []*SegmentScan // cut at ValidEnd
	remove           []string       // segment files to delete
	tornBytes        int64
	torn             []FSNRange   // the window's loss (rule.go), by cause
	tornCreation     *SegmentScan // the newest segment, deleted as a torn creation
	lost             []FSNRange
	unreadable       []FSNRange // non-empty: set the slot aside
}

// plan applies the recovery rule (rule.go) to the scan. It changes nothing.
func (s *SlotScan) plan() recoveryPlan {
	j := s.judge()
	p := recoveryPlan{wm: j.acked, wmOK: j.ackedKnown, watermarkIgnored: s.WatermarkErr != nil}
	unreadable := func(r FSNRange) {
		if r.Last != 0 && r.Last <= p.wm {
			return // acked: may be dropped
		}
		p.unreadable = append(p.unreadable, r)
	}
	segs := s.Segments
	var prevEnd uint64 // FSN the next segment must start at; 0: none yet
	var prevName string
	for i := range segs {
		seg := &segs[i]
		path := filepath.Join(s.Dir, seg.Name)
		var next uint64
		if i < j.tail {
			next = segs[i+1].Base
		}
		if i > j.tail || i == j.tail && j.cut == cutWhole {
			// The window's cut, or after it: nothing of it is replayed
			// (its FSNs are in p.torn); its written bytes are torn.
			if seg.HeaderErr != nil {
				p.tornBytes += seg.NonZeroEnd
			} else if seg.NonZeroEnd > segmentHeaderSize {
				p.tornBytes += seg.NonZeroEnd - segmentHeaderSize
			}
			if seg.HeaderErr != nil && seg.NonZeroEnd > segmentHeaderSize && p.tornCreation == nil {
				p.tornCreation = seg
			}
			p.remove = append(p.remove, path)
			continue
		}
		// The chain must be contiguous wherever it holds unacked frames: a
		// hole whose missing FSNs are all at or below the watermark is
		// harmless (a deletion of acked segments that a power loss partly
		// undid).
		if prevEnd != 0 && prevEnd != seg.Base && max(prevEnd, seg.Base)-1 > p.wm {
			unreadable(FSNRange{First: min(prevEnd, seg.Base), Last: max(prevEnd, seg.Base) - 1, Cause: fmt.Sprintf(
				"FSN gap between segments: %s ends at FSN %d, the next segment %s starts at FSN %d (ack watermark %d)",
				prevName, prevEnd-1, seg.Name, seg.Base, p.wm)})
		}
		// prevEnd: the FSN the next segment must start at, past what this
		// one holds or what the ranges reported for it cover.
		prevEnd, prevName = seg.End(), seg.Name
		switch {
		case seg.HeaderErr != nil:
			unreadable(FSNRange{First: seg.Base, Last: lastBefore(next), File: seg.Name,
				Cause: "unusable segment header: " + seg.HeaderErr.Error()})
			prevEnd = next
			p.remove = append(p.remove, path)
			continue
		case i == j.tail && j.cut == cutDamage:
			// The torn tail: nothing after it was ever written whole.
			p.tornBytes += seg.NonZeroEnd - seg.ValidEnd
			p.truncate = append(p.truncate, seg)
		case seg.Damage != nil:
			dr := s.damageRange(seg, next)
			unreadable(dr)
			if pr, ok := placedRange(seg, next); ok && dr.Last <= p.wm && pr.Last > p.wm {
				// Only acked frames are damaged, but the queue replays a
				// segment up to its damage: the unacked valid frames after
				// it make the slot unreplayable (the slot tool sends them).
				pr.Cause = "unacknowledged valid frames after a damage to acknowledged ones: the queue cannot replay past the damage; questdb-slot salvage sends them"
				unreadable(pr)
			}
			p.truncate = append(p.truncate, seg)
		}
		if len(seg.Frames) == 0 {
			if i < j.tail && seg.Damage == nil {
				// Truncated to its header: segments are deleted whole,
				// never cut, so a segment before the tail holds its frames.
				unreadable(FSNRange{First: seg.Base, Last: next - 1, File: seg.Name, Offset: segmentHeaderSize,
					Cause: fmt.Sprintf("missing: the segment holds no frame, the next segment %s starts at FSN %d", segs[i+1].Name, next)})
			}
			prevEnd = max(prevEnd, next) // its FSNs are reported, or acked
			p.remove = append(p.remove, path)
			continue
		}
		if seg.Damage != nil {
			prevEnd = max(prevEnd, next) // the damage run covers up to next-1
		}
		p.keep = append(p.keep, seg)
	}
	p.torn = s.tornRanges(j, false)
	if j.lostLast != 0 {
		p.lost = append(p.lost, FSNRange{First: j.lostFirst, Last: j.lostLast, Cause: fmt.Sprintf(
			"vanished: .ack-watermark recorded FSN %d as on disk, the slot ends at FSN %d", j.lostLast, j.lostFirst-1)})
	}
	return p
}

// checkSymbols finds the first unacked frame using an id the dictionary
// cannot back.
func checkSymbols(keep []*SegmentScan, acked uint64, counts map[uint32]int) *FSNRange {
	for _, seg := range keep {
		for i, n := range seg.needs {
			fsn := seg.Base + uint64(i)
			if fsn <= acked || n.maxID < 0 {
				continue
			}
			if have := int64(counts[n.gen]); n.maxID >= have {
				return &FSNRange{First: fsn, Last: fsn, Readable: true, File: seg.Name, Offset: int64(seg.Frames[i]),
					Cause: fmt.Sprintf("frame %d uses symbol id %d of generation %d, but .symbol-dict holds %d entries of that generation and no surviving frame defines the rest",
						fsn, n.maxID, n.gen, have)}
			}
		}
	}
	return nil
}

// rebuildSymbols extends the dictionary's valid prefix (counts entries per
// generation, which it updates) with the entries the surviving frames
// define in their own delta sections (seed 000), in FSN order, and returns
// the entries added per generation.
func (q *Queue) rebuildSymbols(s *SlotScan, keep []*SegmentScan, counts map[uint32]int) (map[uint32][][]byte, error) {
	defs := q.o.SymbolDefs
	if defs == nil {
		return nil, nil
	}
	added := map[uint32][][]byte{}
	sub := &SlotScan{Dir: s.Dir}
	for _, seg := range keep {
		sub.Segments = append(sub.Segments, *seg)
	}
	err := sub.eachFrame(q.fs, func(_ uint64, _ string, _ int64, payload []byte) error {
		gen, first, entries := defs(payload)
		have := counts[gen]
		if first > have || first+len(entries) <= have {
			return nil
		}
		for _, e := range entries[have-first:] {
			added[gen] = append(added[gen], append([]byte(nil), e...))
		}
		counts[gen] = first + len(entries)
		return nil
	})
	return added, err
}

// clearFailed removes the slot's .failed marker (Options.ClearFailed). A
// marker that cannot be removed is only logged: the slot works regardless.
func (q *Queue) clearFailed() {
	name := filepath.Join(q.slot, failedFile)
	reason, err := readSmallFile(q.fs, name, 4096)
	if err != nil {
		return
	}
	if err := q.fs.Remove(name); err != nil {
		q.log.Warn("sfqueue: cannot remove the .failed marker an orphan drainer left in our slot", zap.String("slot", q.slot), zap.Error(err))
		return
	}
	q.log.Info("sfqueue: removed the .failed marker an orphan drainer left in our slot; we deliver it ourselves",
		zap.String("slot", q.slot), zap.String("old_reason", strings.TrimSpace(string(reason))))
}

// recover locks the slot and rebuilds the queue state from its files. See
// doc.go for the rules.
func (q *Queue) recover() error {
	// Before the lock, which rewrites .lock.pid, and before makePrivate: a
	// slot of a newer format is left exactly as it is.
	if err := checkSlotFormat(q.fs, q.slot); err != nil {
		return err
	}
	lock, err := mkdirLockSlot(q.fs, q.slot)
	if err != nil {
		return err
	}
	q.lock = lock
	q.makePrivate()
	report, err := q.recoverLocked()
	if err != nil {
		q.lock.Close()
		return err
	}
	if report.Unreplayable != nil {
		if q.o.MarkUnreplayableFailed {
			return q.markUnreplayable(report.Unreplayable)
		}
		fresh, err := q.setAside(report)
		if err != nil {
			return err
		}
		report = fresh
	} else if q.o.ClearFailed {
		// Only once recovery succeeded: a marker cleared before a failed
		// recovery would leave the slot looking like an ordinary orphan.
		q.clearFailed()
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

// makePrivate tightens what earlier versions created 0755/0644: the slot
// directory (0700), every file in it (0600), and this sender's set-aside
// slots. A change it cannot make is logged, not fatal: the data is still
// the data.
func (q *Queue) makePrivate() {
	dirs := []string{q.slot}
	if names, err := q.fs.ReadDir(q.o.Dir); err == nil {
		for _, n := range names {
			if strings.HasPrefix(n, q.o.SenderID+unreplayableInfix) && isUnreplayableName(n) {
				dirs = append(dirs, filepath.Join(q.o.Dir, n))
			}
		}
	}
	for _, dir := range dirs {
		paths := []string{dir}
		if names, err := q.fs.ReadDir(dir); err == nil {
			for _, n := range names {
				paths = append(paths, filepath.Join(dir, n))
			}
		}
		for _, p := range paths {
			mode := privateFileMode
			if q.fs.IsDir(p) {
				mode = privateDirMode
			}
			if err := q.fs.Chmod(p, mode); err != nil && !os.IsNotExist(err) {
				q.log.Warn("sfqueue: cannot make a slot file private", zap.String("path", p), zap.Stringer("mode", mode), zap.Error(err))
			}
		}
	}
}

// recoverLocked scans the locked slot, decides, and either applies the
// decision (report.Unreplayable nil) or changes nothing at all.
func (q *Queue) recoverLocked() (RecoveryReport, error) {
	var rep RecoveryReport
	log := q.log
	scan, err := scanSlot(q.fs, q.slot, q.o.SymbolUse, false)
	if err != nil {
		return rep, err
	}
	if scan.WatermarkErr != nil {
		log.Warn("sfqueue: ignoring unreadable ack watermark", zap.String("slot", q.slot), zap.Error(scan.WatermarkErr))
	}
	if !scan.WatermarkOK || !scan.Watermark.DurabilityKnown {
		scan.AssumeDurability(q.o.Durability)
	}
	p := scan.plan()
	rep.WatermarkIgnored = p.watermarkIgnored
	if scan.WatermarkOK && len(p.keep) > 0 && p.wm > p.keep[len(p.keep)-1].End()-1 {
		log.Info("sfqueue: ack watermark is beyond the recovered data: those frames were acknowledged; new FSNs resume above it",
			zap.String("slot", q.slot), zap.Uint64("watermark", p.wm), zap.Uint64("last_frame", p.keep[len(p.keep)-1].End()-1))
	}
	acked := p.wm
	for _, seg := range p.keep {
		if seg.End()-1 > p.wm || !p.wmOK {
			acked = max(acked, seg.Base-1)
			break
		}
	}
	counts := maps.Clone(scan.Dict.onDisk)
	var rebuilt map[uint32][][]byte
	if len(p.unreadable) == 0 && q.o.SymbolUse != nil {
		if checkSymbols(p.keep, acked, counts) != nil {
			if rebuilt, err = q.rebuildSymbols(scan, p.keep, counts); err != nil {
				return rep, err
			}
			if bad := checkSymbols(p.keep, acked, counts); bad != nil {
				p.unreadable = append(p.unreadable, *bad)
			}
		}
	}
	rep.AckedFSN = acked
	for _, seg := range p.keep {
		for i := range seg.Frames {
			if seg.Base+uint64(i) > acked {
				rep.FramesRecovered++
			}
		}
	}
	if len(p.unreadable) > 0 {
		// Nothing was changed: the slot goes aside as it was found.
		// Readable frames are counted as the slot tool lists them
		// (EachReadable): the valid frames after a damage where the next
		// segment's base places them (the tool sends those), else in the
		// damaged range's unreadable count, never in both (issue 26: a
		// slot of 104 frames counted 131).
		dl := &DataLossError{Reason: p.unreadable[0].String(), Unreadable: p.unreadable}
		scan.EachReadable(func(f ReadableFrame) {
			if f.FSN > p.wm {
				dl.Frames++
			}
		})
		for _, r := range p.unreadable {
			if r.First <= p.wm {
				r.First = p.wm + 1 // the range may start among acked FSNs
			}
			if !r.Readable {
				dl.UnreadableFrames += r.Frames()
			}
			if r.Last == 0 {
				// Of unknown end: at least its valid frames are in it.
				dl.UnreadableFrames += uint64(r.Strays)
			}
		}
		rep.Unreplayable = dl
		return rep, nil
	}
	if err := q.applyPlan(scan, p, rebuilt, &rep); err != nil {
		return rep, err
	}
	q.acked = acked
	q.nextFSN = acked + 1
	if n := len(q.segs); n > 0 {
		q.nextFSN = max(q.nextFSN, q.segs[n-1].end())
	}
	end := q.nextFSN - 1
	if err := q.syncRecovered(scan); err != nil {
		return rep, err
	}
	q.durable = end
	q.written = end
	// Never left stale: the file records what this recovery decided before
	// any FSN is handed out again (an unusable one, acked FSNs the rule
	// moved, frames recorded that are gone and whose FSNs will be given
	// again).
	q.wmSaved = watermark{}
	if scan.WatermarkOK {
		w := scan.Watermark
		q.wmSaved = watermark{acked: w.Acked, synced: w.Durable, published: w.Published, mode: w.Durability, modeKnown: w.DurabilityKnown}
	}
	if w := q.watermarkLocked(); (scan.WatermarkOK || scan.WatermarkErr != nil) && w != q.wmSaved {
		if err := replaceFile(q.fs, q.slot, watermarkFile, encodeWatermark(w)); err != nil {
			return rep, err
		}
		q.wmSaved = w
	}
	rep.Segments = len(q.segs)
	rep.PublishedFSN = q.nextFSN - 1
	rep.TornBytes, rep.Torn = p.tornBytes, p.torn
	rep.TornDurability, _ = scan.durability()
	for _, r := range p.torn {
		if rep.TornFrames == 0 {
			rep.TornFirstFSN = r.First
		}
		rep.TornFrames += r.Frames()
		fields := []zap.Field{zap.String("slot", q.slot), zap.Uint64("first_fsn", r.First), zap.Uint64("last_fsn", r.Last),
			zap.Uint64("frames", r.Frames()), zap.String("cause", r.Cause), zap.Stringer("durability", rep.TornDurability)}
		if rep.TornDurability == DurabilityFlush {
			// Nothing after the last completed fsync was answered (seed 004).
			log.Info("sfqueue: torn frames: cut, their fsync never completed (answered to no caller)", fields...)
		} else {
			log.Error("sfqueue: torn frames: accepted frames lost before they reached the disk (the durability mode's loss window)", fields...)
		}
	}
	rep.Lost = p.lost
	for _, r := range p.lost {
		rep.LostFrames += r.Frames()
		log.Error("sfqueue: DATA_LOSS: frames recorded as on disk are missing from the slot",
			zap.String("slot", q.slot), zap.Uint64("first_fsn", r.First), zap.Uint64("last_fsn", r.Last), zap.String("cause", r.Cause))
	}
	if rep.TornBytes > 0 || rep.FramesRecovered > 0 {
		log.Info("sfqueue: recovered slot", zap.String("slot", q.slot), zap.Int("segments", rep.Segments),
			zap.Int("frames", rep.FramesRecovered), zap.Int64("torn_bytes", rep.TornBytes), zap.Uint64("torn_frames", rep.TornFrames),
			zap.Uint64("acked_fsn", rep.AckedFSN), zap.Uint64("published_fsn", rep.PublishedFSN))
	}
	return rep, nil
}

// syncRecovered fsyncs the recovered segments holding frames that
// .ack-watermark does not record as fsynced: the previous holder may have
// crashed before their fsync (or, in memory durability, closed without
// one), and from here on the queue counts them as durable (q.durable),
// which .ack-watermark then records, so that damage to them is taken for
// the medium's, not a torn write, and the window stays the active segment.
// Without it they would stay in the page cache only. The dictionary files
// not known to be fsynced go with them.
func (q *Queue) syncRecovered(scan *SlotScan) error {
	n, began := 0, time.Now()
	defer func() {
		if n > 0 { // one after a crash; every segment after a memory-durability life
			q.log.Info("sfqueue: fsynced recovered segments .ack-watermark did not record as fsynced",
				zap.String("slot", q.slot), zap.Int("segments", n), zap.Duration("took", time.Since(began)))
		}
	}()
	for _, s := range q.segs {
		if scan.synced(s.end() - 1) {
			continue
		}
		n++
		f, err := q.fs.OpenFile(s.path, os.O_RDWR)
		if err != nil {
			return err
		}
		start := time.Now()
		err = f.Sync()
		q.st.recordFsync(time.Since(start))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("sfqueue: fsync recovered segment %s: %w", s.path, err)
		}
	}
	// And the dictionary entries they use, in any mode (a memory-
	// durability life leaves the files unsynced, and the one before this
	// may have been one): the queue counts the frames durable from here on.
	for _, gf := range q.dict.takeDirty() {
		start := time.Now()
		err := gf.f.Sync()
		q.st.recordFsync(time.Since(start))
		if err != nil {
			return fmt.Errorf("sfqueue: fsync recovered symbol dictionary: %w", err)
		}
	}
	return nil
}

// applyPlan makes the changes of a replayable plan: interrupted temporary
// files, unusable and acked segments, torn tails, the dictionary's torn
// tail and the entries rebuilt from frames.
func (q *Queue) applyPlan(scan *SlotScan, p recoveryPlan, rebuilt map[uint32][][]byte, rep *RecoveryReport) error {
	for _, name := range scan.TempFiles {
		q.fs.Remove(filepath.Join(q.slot, name)) // an interrupted replaceFile
	}
	// A spare segment (spare.go) of the process that crashed: it holds no
	// frame, and whether its zeroing was durable is unknown.
	q.fs.Remove(filepath.Join(q.slot, spareName))
	if seg := p.tornCreation; seg != nil {
		q.log.Warn("sfqueue: deleting the newest segment, a torn creation", zap.String("path", filepath.Join(q.slot, seg.Name)),
			zap.Int64("torn_bytes", seg.NonZeroEnd), zap.Int("frames", seg.HeadlessFrames), zap.String("cause", tornCreationCause(seg)))
	}
	for _, path := range p.remove {
		if err := q.fs.Remove(path); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	for _, seg := range p.truncate {
		if len(seg.Frames) == 0 {
			continue // removed above
		}
		path := filepath.Join(q.slot, seg.Name)
		q.log.Warn("sfqueue: cutting torn segment tail", zap.String("path", path),
			zap.Int64("valid_bytes", seg.ValidEnd), zap.Int64("torn_bytes", seg.NonZeroEnd-seg.ValidEnd))
		f, err := q.fs.OpenFile(path, os.O_RDWR)
		if err != nil {
			return err
		}
		err = f.Truncate(seg.ValidEnd)
		if err == nil && q.o.Durability != DurabilityMemory {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("sfqueue: cut segment %s at %d: %w", path, seg.ValidEnd, err)
		}
	}
	dict, err := openSymbolDict(q.fs, q.slot, scan.Dict, q.o.Durability != DurabilityMemory)
	if err != nil {
		return err
	}
	q.dict = dict
	rep.SymbolTornBytes = scan.Dict.Size - scan.Dict.IntactBytes
	if rep.SymbolTornBytes > 0 {
		q.log.Warn("sfqueue: cut torn tail of .symbol-dict", zap.String("slot", q.slot),
			zap.Int64("bytes", rep.SymbolTornBytes), zap.String("cause", scan.Dict.Damage))
	}
	for gen, entries := range rebuilt {
		if err := dict.persist(gen, dict.counts[gen], entries); err != nil {
			return err
		}
		rep.SymbolsRebuilt += len(entries)
	}
	if rep.SymbolsRebuilt > 0 {
		q.log.Warn("sfqueue: rebuilt symbol dictionary entries from the frames' delta sections",
			zap.String("slot", q.slot), zap.Int("entries", rep.SymbolsRebuilt))
	}
	for _, seg := range p.keep {
		if p.wmOK && seg.End()-1 <= p.wm && len(q.segs) == 0 {
			// Wholly acked: delete.
			if err := q.fs.Remove(filepath.Join(q.slot, seg.Name)); err != nil && !os.IsNotExist(err) {
				return err
			}
			continue
		}
		s := &segment{base: seg.Base, path: filepath.Join(q.slot, seg.Name), version: seg.Version, offsets: seg.Frames, size: seg.ValidEnd}
		for _, n := range seg.Items {
			s.items += uint64(n)
		}
		if !slices.Contains(p.truncate, seg) {
			s.slack = max(0, seg.Size-seg.ValidEnd) // a preallocated tail (sealSlack); a cut file has none
		}
		q.segs = append(q.segs, s)
		q.used += s.size + s.slack
	}
	return nil
}

// markUnreplayable is recovery for an orphan drainer (seed 000): the slot
// stays where it is, unchanged but for a .failed marker naming the loss, so
// later orphan scans skip it; Open returns the *DataLossError.
func (q *Queue) markUnreplayable(dl *DataLossError) error {
	defer q.lock.Close()
	dl.Path = q.slot
	if err := replaceFile(q.fs, q.slot, failedFile, []byte(dl.Error()+"\n")); err != nil {
		return fmt.Errorf("sfqueue: marking unreplayable slot %s .failed (%s): %w", q.slot, dl.Reason, err)
	}
	if !q.o.CallerLogsDataLoss {
		q.log.Error("sfqueue: DATA_LOSS: orphan slot cannot be replayed; marked .failed and kept",
			zap.String("slot", q.slot), zap.Int("unacked_frames", dl.Frames), zap.Uint64("unreadable_frames", dl.UnreadableFrames),
			zap.String("reason", dl.Reason))
	}
	return dl
}

// setAside renames the unreplayable slot to <SenderID>.unreplayable-<n>,
// unchanged, keeps it for inspection, and starts over on a fresh, empty
// slot.
func (q *Queue) setAside(rep RecoveryReport) (RecoveryReport, error) {
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
	if !q.o.CallerLogsDataLoss {
		fields := []zap.Field{zap.String("slot", q.slot), zap.String("moved_to", dst), zap.Int("unacked_frames", rep.Unreplayable.Frames),
			zap.Uint64("unreadable_frames", rep.Unreplayable.UnreadableFrames), zap.String("reason", rep.Unreplayable.Reason)}
		for i, r := range rep.Unreplayable.Unreadable {
			fields = append(fields, zap.Stringer("unreadable_"+strconv.Itoa(i), r))
		}
		q.log.Error("sfqueue: DATA_LOSS: slot cannot be replayed; set aside and starting empty", fields...)
	}

	lock, err := mkdirLockSlot(q.fs, q.slot)
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

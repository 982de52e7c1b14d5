package sfqueue

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// failedFile marks a slot a background drainer gave up on.
const failedFile = ".failed"

// ListOrphans returns the sender IDs of slots under dir, other than those in
// exclude, that hold unacked frames, carry no .failed marker, are not set
// aside (*.unreplayable-<n>) and whose lock is free. A slot whose segments
// cannot be judged (a newer format, a read error) is listed too: Open
// refuses it with the reason, where skipping it would leave its data
// waiting unmentioned. Open one with Options{Dir: dir, SenderID: id}.
func ListOrphans(dir string, exclude []string) ([]string, error) {
	return listOrphans(OSFS(), dir, exclude)
}

func listOrphans(fsys FS, dir string, exclude []string) ([]string, error) {
	return selectSlotDirs(fsys, dir, func(name, slot string) bool {
		if slices.Contains(exclude, name) || isUnreplayableName(name) || validSenderID(name) != nil {
			return false
		}
		if _, err := readSmallFile(fsys, filepath.Join(slot, failedFile), 0); err == nil {
			return false
		}
		unacked, err := slotHasUnacked(fsys, slot)
		return (err != nil || unacked) && slotLockFree(fsys, slot)
	})
}

// selectSlotDirs returns the names of the directories under dir (slots and
// set-aside slots) that keep reports true for. A missing dir has none.
func selectSlotDirs(fsys FS, dir string, keep func(name, slot string) bool) ([]string, error) {
	names, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range names {
		if slot := filepath.Join(dir, name); fsys.IsDir(slot) && keep(name, slot) {
			out = append(out, name)
		}
	}
	return out, nil
}

// slotHasUnacked reports whether the newest written segment of slot holds
// a valid frame above the ack watermark, or damage that only recovery can
// judge.
func slotHasUnacked(fsys FS, slot string) (bool, error) {
	names, err := fsys.ReadDir(slot)
	if err != nil {
		return false, err
	}
	var bases []uint64
	for _, n := range names {
		if b, ok := parseSegmentName(n); ok {
			bases = append(bases, b)
		}
	}
	if len(bases) == 0 {
		return false, nil
	}
	w, _, _ := readWatermark(fsys, slot)
	var buf []byte
	for i := len(bases) - 1; i >= 0; i-- {
		seg, err := scanSegmentFile(fsys, filepath.Join(slot, segmentName(bases[i])), bases[i], &buf, nil)
		if err != nil {
			return false, err
		}
		if len(seg.Frames) > 0 {
			return seg.End()-1 > w.acked || seg.Damage != nil, nil
		}
		if seg.written() {
			// Damaged from its first byte: only recovery can tell what it
			// held, so the slot is an orphan to adopt (or report).
			return true, nil
		}
	}
	return false, nil
}

// SetAsideSlots lists the slots under dir that hold data the queue will
// never send and wait for an operator: those recovery renamed
// <id>.unreplayable-<n>, and orphan slots a drainer marked .failed, for
// DATA_LOSS or for a server's refusal alike (orphan scans skip both, so
// once the drainer's log is gone this is their only trace). A missing dir
// has none.
func SetAsideSlots(dir string) ([]string, error) {
	fsys := OSFS()
	return selectSlotDirs(fsys, dir, func(name, slot string) bool {
		if isUnreplayableName(name) {
			return true
		}
		if strings.HasSuffix(name, removingSuffix) {
			// Delivered and being deleted (salvage --delete may take a
			// .failed marker along).
			return false
		}
		_, err := readSmallFile(fsys, filepath.Join(slot, failedFile), 0)
		return err == nil
	})
}

// MarkFailed writes <dir>/<senderID>/.failed with reason, so that later
// orphan scans skip the slot. The slot and its data are kept.
func MarkFailed(dir, senderID, reason string) error {
	if err := validSenderID(senderID); err != nil {
		return err
	}
	return replaceFile(OSFS(), filepath.Join(dir, senderID), failedFile, []byte(reason+"\n"))
}

// RemoveSlot deletes the slot <dir>/<senderID> after a drainer emptied it.
// It refuses a slot that is locked or still holds unacked frames.
//
// The slot is first renamed, under its lock, to <senderID>.removing and
// deleted there: deleting it in place would unlink .lock while we hold it,
// so an opener racing with the deletion (another drainer, the slot's
// owner starting again) could create a fresh .lock, take it and write
// into a directory whose files the deletion is still unlinking. After the
// rename an opener of <dir>/<senderID> starts on a new, empty slot.
func RemoveSlot(dir, senderID string) error {
	if err := validSenderID(senderID); err != nil {
		return err
	}
	fsys := OSFS()
	slot := filepath.Join(dir, senderID)
	l, err := lockSlot(fsys, slot)
	if err != nil {
		return err
	}
	defer l.Close()
	unacked, err := slotHasUnacked(fsys, slot)
	if err != nil {
		return err
	}
	if unacked {
		return fmt.Errorf("sfqueue: slot %s still holds unacked frames; drain it before removing it", slot)
	}
	return deleteLockedSlot(fsys, slot)
}

// ErrSlotLeftover is wrapped by RemoveSlot and DeleteLockedSlot when the
// slot was renamed to <slot>.removing but not entirely deleted: the slot
// is gone from its path, and RemoveLeftovers deletes the rest later.
var ErrSlotLeftover = errors.New("sfqueue: slot renamed away but not fully deleted; RemoveLeftovers finishes it")

// DeleteLockedSlot deletes the slot directory slot, whose lock the caller
// holds (LockSlot), the way RemoveSlot does: renamed to <slot>.removing
// under the lock, then deleted there, so that an opener racing with the
// deletion starts on a fresh slot instead of writing into a directory
// being unlinked. It does not look at the slot's frames.
func DeleteLockedSlot(slot string) error {
	return deleteLockedSlot(OSFS(), filepath.Clean(slot))
}

func deleteLockedSlot(fsys FS, slot string) error {
	gone := slot + removingSuffix
	// A leftover of a crash between an earlier rename and its deletion.
	if err := removeLeftover(fsys, gone); err != nil {
		return err
	}
	if err := fsys.Rename(slot, gone); err != nil {
		return err
	}
	rerr := fsys.RemoveAll(gone)
	if err := fsys.SyncDir(filepath.Dir(slot)); err != nil && rerr == nil {
		return err
	}
	if rerr != nil {
		return fmt.Errorf("%w: %s: %w", ErrSlotLeftover, gone, rerr)
	}
	return nil
}

// removingSuffix names a drained slot being deleted. It holds no unacked
// frames, so orphan scans and SetAsideSlots pass it by (a .failed marker
// that salvage --delete took along included); no SenderID may end in it
// (validSenderID).
const removingSuffix = ".removing"

// RemoveLeftovers deletes the <id>.removing directories under dir that a
// crash left between RemoveSlot's rename and its deletion (every frame in
// them was acknowledged before the rename), and returns their names. One
// whose lock is held is being deleted now and is passed by. Without it a
// leftover would hold its disk space for good, counted nowhere.
func RemoveLeftovers(dir string) ([]string, error) {
	fsys := OSFS()
	names, err := selectSlotDirs(fsys, dir, func(name, _ string) bool {
		return strings.HasSuffix(name, removingSuffix) && len(name) > len(removingSuffix)
	})
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, name := range names {
		held, err := removeUnlocked(fsys, filepath.Join(dir, name))
		if err != nil {
			return removed, err
		}
		if !held {
			removed = append(removed, name)
		}
	}
	if len(removed) > 0 {
		return removed, fsys.SyncDir(dir)
	}
	return removed, nil
}

// removeLeftover deletes gone (a <id>.removing leftover), unless another
// process holds its lock, which is an error: that process is deleting it.
func removeLeftover(fsys FS, gone string) error {
	if !fsys.IsDir(gone) {
		return nil
	}
	held, err := removeUnlocked(fsys, gone)
	if err == nil && held {
		err = fmt.Errorf("sfqueue: %s is being deleted by another process", gone)
	}
	return err
}

// removeUnlocked deletes the directory path while holding its lock; held
// reports that another process holds the lock, and nothing was deleted.
func removeUnlocked(fsys FS, path string) (held bool, err error) {
	l, err := fsys.Lock(filepath.Join(path, lockFileName))
	if errors.Is(err, ErrLockHeld) {
		return true, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if l != nil {
		defer l.Close()
	}
	return false, fsys.RemoveAll(path)
}

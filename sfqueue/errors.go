package sfqueue

import (
	"errors"
	"fmt"
	"time"
)

// ErrClosed is returned by operations on a closed Queue.
var ErrClosed = errors.New("sfqueue: queue is closed")

// FullReason says why a queue could not take a frame in time.
type FullReason int

const (
	// Publishing: the consumer is connected and acking, but slower than the
	// producer.
	Publishing FullReason = iota
	// Reconnecting: the consumer is in its reconnect loop (see
	// Queue.SetConsumerState) and nothing is being acked.
	Reconnecting
	// DiskFull: the file system refused space (ENOSPC) before the byte cap.
	DiskFull
)

func (r FullReason) String() string {
	switch r {
	case Publishing:
		return "publishing"
	case Reconnecting:
		return "reconnecting"
	case DiskFull:
		return "disk full"
	}
	return fmt.Sprintf("FullReason(%d)", int(r))
}

// FullError is returned by Append when on_full=block waited AppendDeadline
// (or the caller's deadline) without room appearing, or when on_full=
// evict_oldest had nothing left to evict on a full disk. It is retryable:
// nothing was appended, the caller may come back later.
type FullError struct {
	Reason      FullReason
	Attempts    int       // reconnect attempts so far (Reconnecting)
	OutageStart time.Time // when the outage began (Reconnecting)
	Used, Cap   int64     // bytes retained and the cap
	Need        int64     // bytes the refused append needed
	Waited      time.Duration
}

func (e *FullError) Error() string {
	base := fmt.Sprintf("sfqueue: queue full (%d of %d bytes used, %d more needed, waited %v)", e.Used, e.Cap, e.Need, e.Waited.Round(time.Millisecond))
	switch e.Reason {
	case Reconnecting:
		return fmt.Sprintf("%s while reconnecting: %d attempts since %s; fix the outage or raise the cap",
			base, e.Attempts, e.OutageStart.UTC().Format(time.RFC3339))
	case DiskFull:
		return base + ": the file system has no space left (ENOSPC); free disk space or lower the cap"
	}
	return base + " while publishing: the server acks slower than the producer appends; raise the cap, slow the producer or scale the server"
}

// Retryable reports true: a full queue is a transient condition.
func (e *FullError) Retryable() bool { return true }

// FatalError is latched when an fsync (or a write whose outcome is unknown)
// fails: the queue no longer knows what is durable, so it never retries and
// every later append fails with the same error. Reopen to recover.
type FatalError struct {
	Op   string // e.g. "fsync 00000000000000000001.sfseg"
	Err  error
	When time.Time
}

func (e *FatalError) Error() string {
	return fmt.Sprintf("sfqueue: fatal: %s failed: %v; nothing after it is durable, reopen the queue to recover", e.Op, e.Err)
}

func (e *FatalError) Unwrap() error { return e.Err }

// LockedError says the slot is held by another Queue (this or another
// process).
type LockedError struct {
	Path string // the slot directory
	PID  int    // holder's PID from .lock.pid; 0 if unknown
}

func (e *LockedError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("sfqueue: slot %s is locked by another sender (holder PID unknown)", e.Path)
	}
	return fmt.Sprintf("sfqueue: slot %s is locked by another sender, PID %d", e.Path, e.PID)
}

// DataLossError reports a slot that recovery could not replay; the slot was
// renamed to Path unchanged and kept for inspection, and the queue started
// empty (an orphan drainer's slot stays in place, marked .failed).
type DataLossError struct {
	Path   string // where the slot is: <Dir>/<SenderID>.unreplayable-<n>
	Reason string // the first unreadable range and its cause
	// Frames counts the readable frames above the ack watermark left in
	// the set-aside slot: the queue will not send them (an operator can,
	// with the slot tool). Valid frames after a damage in the same segment
	// are here where the next segment's base fixes their FSNs (the slot
	// tool sends them), else in the damaged range's UnreadableFrames, so
	// Frames + UnreadableFrames is the slot's unacknowledged frames where
	// the ranges' ends are known.
	Frames int
	// Unreadable lists every range that made the slot unreplayable, with
	// file, offset and cause; UnreadableFrames counts their FSNs above the
	// ack watermark (of a range whose end is unknown: the valid frames
	// found in it, FSNRange.Strays).
	Unreadable       []FSNRange
	UnreadableFrames uint64
}

func (e *DataLossError) Error() string {
	return fmt.Sprintf("sfqueue: DATA_LOSS: unreplayable slot kept as %s (%d readable unacked frames wait there, %d unreadable): %s",
		e.Path, e.Frames, e.UnreadableFrames, e.Reason)
}

// FrameTooLargeError refuses a payload whose frame cannot fit one segment.
type FrameTooLargeError struct {
	FrameBytes, SegmentBytes int64
}

func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("sfqueue: frame of %d bytes (payload + %d bytes framing) does not fit a segment of %d bytes (%d after the header); raise MaxSegmentBytes or send smaller batches",
		e.FrameBytes, frameOverhead, e.SegmentBytes, e.SegmentBytes-segmentHeaderSize)
}

// FormatError refuses a slot written in a segment format newer than this
// code reads (a newer release wrote it). It is not damage: Open changes
// nothing in the slot (no lock taken, nothing cut, renamed or set aside),
// so the release that wrote it can still open it.
type FormatError struct {
	Path    string // the segment file
	Version uint32 // the segment's format version
	Newest  uint32 // the newest format version this code reads
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("sfqueue: segment %s has format version %d, newer than version %d, the newest this release reads: it was written by a newer release; run that release (or its questdb-slot) on this slot, which was left unchanged",
		e.Path, e.Version, e.Newest)
}

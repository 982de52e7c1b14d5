package sfqueue

import (
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Durability says when appended frames reach stable storage (SF mode only;
// memory-only mode has nothing to make durable).
type Durability int

const (
	// DurabilityMemory writes to the page cache only: frames survive a crash
	// of the process, not a power loss or kernel crash.
	DurabilityMemory Durability = iota
	// DurabilityPeriodic fsyncs every Options.SyncInterval from a background
	// goroutine; a power loss can lose up to one interval of appends.
	DurabilityPeriodic
	// DurabilityFlush is group commit: Append returns only after an fsync
	// covering its frames; appends waiting while an fsync runs share the next.
	DurabilityFlush
)

var durabilityNames = [...]string{"memory", "periodic", "flush"}

func (d Durability) String() string {
	if d >= 0 && int(d) < len(durabilityNames) {
		return durabilityNames[d]
	}
	return fmt.Sprintf("Durability(%d)", int(d))
}

// ParseDurability parses "memory", "periodic" or "flush".
func ParseDurability(s string) (Durability, error) {
	for i, n := range durabilityNames {
		if s == n {
			return Durability(i), nil
		}
	}
	return 0, fmt.Errorf("sfqueue: durability %q is not one of memory, periodic, flush", s)
}

// OnFull says what Append does when the queue is at its byte cap.
type OnFull int

const (
	// OnFullBlock waits up to Options.AppendDeadline for acks to free space,
	// then fails with *FullError. Nothing is dropped.
	OnFullBlock OnFull = iota
	// OnFullEvictOldest deletes the oldest segment(s), acked or not, to make
	// room; the evicted frames and bytes are counted in Stats and logged.
	OnFullEvictOldest
)

var onFullNames = [...]string{"block", "evict_oldest"}

func (o OnFull) String() string {
	if o >= 0 && int(o) < len(onFullNames) {
		return onFullNames[o]
	}
	return fmt.Sprintf("OnFull(%d)", int(o))
}

// ParseOnFull parses "block" or "evict_oldest".
func ParseOnFull(s string) (OnFull, error) {
	for i, n := range onFullNames {
		if s == n {
			return OnFull(i), nil
		}
	}
	return 0, fmt.Errorf("sfqueue: on_full %q is not one of block, evict_oldest", s)
}

// Defaults applied by Open to zero-valued Options fields.
const (
	DefaultMaxTotalBytesSF     int64 = 10 << 30
	DefaultMaxTotalBytesMemory int64 = 128 << 20
	DefaultMaxSegmentBytes     int64 = 4 << 20
	DefaultSyncInterval              = 5 * time.Second
	MinSyncInterval                  = time.Millisecond // shorter intervals are raised to it
	DefaultAppendDeadline            = 5 * time.Second
	// MaxSegmentBytesLimit bounds MaxSegmentBytes so frame offsets fit in 32 bits.
	MaxSegmentBytesLimit int64 = 1 << 30
	// minSegmentBytes leaves room for the header and at least a small frame.
	minSegmentBytes int64 = 256
	// watermarkInterval is the least time between two .ack-watermark writes.
	watermarkInterval = 250 * time.Millisecond
)

// Options configures Open. The zero value is a memory-only queue with the
// defaults.
type Options struct {
	// Dir is sf_dir: the parent of the slot directory. "" selects
	// memory-only mode, which keeps frames in RAM and has no side files.
	Dir string
	// SenderID names the slot <Dir>/<SenderID>/. Required in SF mode.
	SenderID string
	// MaxTotalBytes caps the bytes of retained segments (headers and
	// frames, and in periodic and flush durability the preallocated tail
	// a sealed segment leaves unused, which stays on disk with it) and
	// dictionary files. 0 means 10 GiB in SF mode and 128 MiB in
	// memory-only mode.
	MaxTotalBytes int64
	// MaxSegmentBytes is the size of one segment file (or RAM segment);
	// 0 means 4 MiB. A frame must fit in one segment.
	MaxSegmentBytes int64
	// Durability and SyncInterval (0 = 5 s, periodic mode) apply in SF mode.
	Durability   Durability
	SyncInterval time.Duration
	// OnFull and AppendDeadline (0 = 5 s) decide what a full queue does.
	OnFull         OnFull
	AppendDeadline time.Duration
	// SymbolUse, when set, reports the dictionary generation and the highest
	// symbol id a payload uses (-1: none). Recovery calls it for every
	// unacked frame and sets the slot aside when .symbol-dict cannot back it.
	SymbolUse func(payload []byte) (gen uint32, maxID int64)
	// SymbolDefs, when set, returns the dictionary entries a payload
	// defines itself (its delta section): ids firstID.. of generation gen.
	// When .symbol-dict lost entries that unacked frames use, recovery
	// takes them back from the surviving frames before declaring the slot
	// unreplayable (seed 000). The entries may alias payload.
	SymbolDefs func(payload []byte) (gen uint32, firstID int, entries [][]byte)
	// MarkUnreplayableFailed is for orphan drainers: a slot recovery cannot
	// replay is left in place, unchanged but for a .failed marker holding
	// the reason (so later orphan scans skip it, seed 000), and Open returns
	// the *DataLossError instead of starting on a fresh slot.
	MarkUnreplayableFailed bool
	// ClearFailed is for the slot's owner: a .failed marker an orphan
	// drainer left (it gave up with its own credentials or settings) is
	// removed once recovery succeeds (a slot set aside keeps it), logged
	// at Info with its reason, since the owner delivers
	// the slot itself and the marker would otherwise count it set aside
	// for good. Should the owner die again, the slot is an orphan anew.
	ClearFailed bool
	// Logger receives warnings (evictions, torn tails, data loss); nil = nop.
	Logger *zap.Logger
	// CallerLogsDataLoss: the caller logs the *DataLossError of a slot set
	// aside (RecoveryReport.Unreplayable) or marked .failed (Open's error)
	// itself, in its own words, so the queue does not log it too: one
	// DATA_LOSS line per event.
	CallerLogsDataLoss bool
	// FS is the file system of SF mode; nil = the operating system's. Tests
	// inject a crashable layer here.
	FS FS
}

// withDefaults fills zero fields and validates the rest.
func (o Options) withDefaults() (Options, error) {
	if o.MaxSegmentBytes == 0 {
		o.MaxSegmentBytes = DefaultMaxSegmentBytes
	}
	if o.MaxTotalBytes == 0 {
		o.MaxTotalBytes = DefaultMaxTotalBytesMemory
		if o.Dir != "" {
			o.MaxTotalBytes = DefaultMaxTotalBytesSF
		}
	}
	if o.SyncInterval == 0 {
		o.SyncInterval = DefaultSyncInterval
	}
	if o.SyncInterval > 0 && o.SyncInterval < MinSyncInterval {
		// A nanosecond interval (a bare integer in YAML) would fsync in a
		// loop.
		o.SyncInterval = MinSyncInterval
	}
	if o.AppendDeadline == 0 {
		o.AppendDeadline = DefaultAppendDeadline
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	switch {
	case o.MaxSegmentBytes < minSegmentBytes || o.MaxSegmentBytes > MaxSegmentBytesLimit:
		return o, fmt.Errorf("sfqueue: MaxSegmentBytes %d is outside [%d, %d]", o.MaxSegmentBytes, minSegmentBytes, MaxSegmentBytesLimit)
	case o.MaxTotalBytes < 0:
		return o, fmt.Errorf("sfqueue: MaxTotalBytes %d is negative", o.MaxTotalBytes)
	case o.SyncInterval < 0:
		return o, fmt.Errorf("sfqueue: SyncInterval %v is negative", o.SyncInterval)
	case o.AppendDeadline < 0:
		return o, fmt.Errorf("sfqueue: AppendDeadline %v is negative", o.AppendDeadline)
	case o.Durability < DurabilityMemory || o.Durability > DurabilityFlush:
		return o, fmt.Errorf("sfqueue: Durability %d is not memory, periodic or flush", int(o.Durability))
	case o.OnFull < OnFullBlock || o.OnFull > OnFullEvictOldest:
		return o, fmt.Errorf("sfqueue: OnFull %d is not block or evict_oldest", int(o.OnFull))
	}
	if o.Dir != "" {
		if err := validSenderID(o.SenderID); err != nil {
			return o, err
		}
		if o.FS == nil {
			o.FS = OSFS()
		}
	}
	return o, nil
}

// validSenderID refuses names that would escape Dir or collide with the
// names recovery gives set-aside slots.
func validSenderID(id string) error {
	if id == "" || id == "." || id == ".." {
		return fmt.Errorf("sfqueue: SenderID %q must be a non-empty directory name", id)
	}
	for _, r := range id {
		if r == '/' || r == '\\' || r == 0 {
			return fmt.Errorf("sfqueue: SenderID %q must not contain path separators", id)
		}
	}
	if isUnreplayableName(id) {
		return fmt.Errorf("sfqueue: SenderID %q is reserved for set-aside slots (<id>.unreplayable-<n>)", id)
	}
	if strings.HasSuffix(id, removingSuffix) {
		return fmt.Errorf("sfqueue: SenderID %q is reserved for slots being deleted (<id>%s)", id, removingSuffix)
	}
	return nil
}

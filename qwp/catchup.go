package qwp

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// CatchUpFrames re-registers dictionary ids [from, to) on a new connection:
// it calls emit with each of as few messages as fit, each at most
// maxFrameBytes (0 = the protocol ceiling) with flags
// FlagDeferCommit|FlagDeltaSymbolDict and no tables. Deferred frames commit
// nothing, so the server only accumulates the entries. The frame passed to
// emit is valid only during the call. An entry too large for a frame on its
// own is an error, as is any error from emit, which stops the sequence.
func CatchUpFrames(dict SymbolDict, from, to int, maxFrameBytes int, emit func(frame []byte) error) error {
	if from < 0 || from > to || to > dict.Len() {
		return fmt.Errorf("qwp: catch-up range [%d, %d) is not within the dictionary's %d entries", from, to, dict.Len())
	}
	e := NewCatchUpEncoder(from, maxFrameBytes, emit)
	for id := from; id < to; id++ {
		if err := e.Add(dict.Entry(id)); err != nil {
			return err
		}
	}
	return e.Flush()
}

// catchUpGap is the room a CatchUpEncoder keeps before a frame's entries for
// the header and the start and count varints, written once the frame is
// complete (ids stay below MaxSymbolDictSize, so each varint fits in a
// MaxVarintLen32).
const catchUpGap = HeaderSize + 2*binary.MaxVarintLen32

// CatchUpEncoder builds the frames of CatchUpFrames from entries given one
// at a time, in id order: the same frames, but the caller never needs the
// whole dictionary in memory. A dictionary streamed from disk costs one
// frame (at most maxFrameBytes) and the caller's read buffer.
type CatchUpEncoder struct {
	limit int
	emit  func(frame []byte) error
	start int    // id of the pending frame's first entry
	count int    // entries in the pending frame
	buf   []byte // catchUpGap bytes of room, then the pending frame's entries
}

// NewCatchUpEncoder returns an encoder whose first entry is id from; see
// CatchUpFrames for maxFrameBytes and emit.
func NewCatchUpEncoder(from, maxFrameBytes int, emit func(frame []byte) error) *CatchUpEncoder {
	limit := maxFrameBytes
	if limit <= 0 || limit > HeaderSize+MaxPayloadBytes {
		limit = HeaderSize + MaxPayloadBytes
	}
	return &CatchUpEncoder{limit: limit, emit: emit, start: from, buf: make([]byte, catchUpGap)}
}

// Add takes the next entry. When it does not fit in the pending frame, that
// frame is emitted first. entry is copied: the caller may reuse it.
func (e *CatchUpEncoder) Add(entry []byte) error {
	n := len(entry)
	add := uvarintLen(uint64(n)) + n
	if e.count > 0 && e.size(add) > e.limit {
		if err := e.Flush(); err != nil {
			return err
		}
	}
	if e.size(add) > e.limit {
		return fmt.Errorf("qwp: symbol id %d (%d bytes) does not fit in a %d-byte catch-up frame", e.start, n, e.limit)
	}
	if need := len(e.buf) + add; need > cap(e.buf) {
		// Doubling, up to the largest frame: append's growth of large
		// slices (1.25x) would allocate about five frames to build one.
		grown := make([]byte, len(e.buf), min(max(2*cap(e.buf), need), catchUpGap+e.limit))
		copy(grown, e.buf)
		e.buf = grown
	}
	e.buf = binary.AppendUvarint(e.buf, uint64(n))
	e.buf = append(e.buf, entry...)
	e.count++
	return nil
}

// size is the pending frame's size with one more entry of add bytes.
func (e *CatchUpEncoder) size(add int) int {
	return HeaderSize + uvarintLen(uint64(e.start)) + uvarintLen(uint64(e.count+1)) + len(e.buf) - catchUpGap + add
}

// Flush emits the pending frame, if it holds any entry.
func (e *CatchUpEncoder) Flush() error {
	if e.count == 0 {
		return nil
	}
	entryBytes := len(e.buf) - catchUpGap
	var head [catchUpGap]byte
	h := appendHeader(head[:0], FlagDeferCommit|FlagDeltaSymbolDict, 0,
		uvarintLen(uint64(e.start))+uvarintLen(uint64(e.count))+entryBytes)
	h = binary.AppendUvarint(h, uint64(e.start))
	h = binary.AppendUvarint(h, uint64(e.count))
	off := catchUpGap - len(h)
	copy(e.buf[off:], h)
	if err := e.emit(e.buf[off:]); err != nil {
		return err
	}
	e.start += e.count
	e.count = 0
	e.buf = e.buf[:catchUpGap]
	return nil
}

// AppendCommit appends a bare commit to dst: a message with no tables and no
// flags. It commits whatever the connection's deferred group holds (nothing,
// after rowless catch-up frames) and so gets the OK that a real server
// withholds from FlagDeferCommit frames until a later frame commits.
func AppendCommit(dst []byte) []byte { return appendHeader(dst, 0, 0, 0) }

// Deferred reports whether message msg carries FlagDeferCommit: the server
// withholds its OK until a later message without the flag. A message shorter
// than the header is not deferred.
func Deferred(msg []byte) bool { return len(msg) >= HeaderSize && msg[5]&FlagDeferCommit != 0 }

// DeltaDictRange reads the delta symbol dictionary section of message msg:
// the entries it defines are ids [start, end), and a message can reference
// only ids below end. A message without FlagDeltaSymbolDict carries and
// references no global ids: (0, 0, nil).
func DeltaDictRange(msg []byte) (start, end int, err error) {
	return DeltaDictRangeHead(msg, len(msg))
}

// DeltaDictRangeHead is DeltaDictRange of a message of msgLen bytes of
// which head is the start: the header and the section's start and count
// (HeaderSize+20 bytes suffice), for a message that is not in memory whole.
func DeltaDictRangeHead(head []byte, msgLen int) (start, end int, err error) {
	s, c, _, err := deltaSection(head, msgLen)
	return s, s + c, err
}

// DeltaDictEntries returns the entries the delta symbol dictionary section
// of msg defines, ids start, start+1, ...; they alias msg. A message without
// FlagDeltaSymbolDict defines none. A recovering queue rebuilds a damaged
// persisted dictionary from them.
func DeltaDictEntries(msg []byte) (start int, entries [][]byte, err error) {
	s, c, rest, err := deltaSection(msg, len(msg))
	if err != nil || c == 0 {
		return s, nil, err
	}
	entries = make([][]byte, 0, min(c, len(rest)))
	for range c {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return s, nil, fmt.Errorf("qwp: delta dictionary entry %d runs past the payload", s+len(entries))
		}
		entries = append(entries, rest[k:k+int(n)])
		rest = rest[k+int(n):]
	}
	return s, entries, nil
}

// deltaSection reads the start and count of the delta section of a message
// of msgLen bytes whose start msg is, and returns the bytes of msg after
// them.
func deltaSection(msg []byte, msgLen int) (start, count int, rest []byte, err error) {
	if len(msg) < HeaderSize {
		return 0, 0, nil, fmt.Errorf("qwp: message of %d bytes is shorter than the %d-byte header", len(msg), HeaderSize)
	}
	if m := binary.LittleEndian.Uint32(msg); m != Magic {
		return 0, 0, nil, fmt.Errorf("qwp: message magic %#08x is not %#08x", m, Magic)
	}
	if msg[5]&FlagDeltaSymbolDict == 0 {
		return 0, 0, nil, nil
	}
	plen := binary.LittleEndian.Uint32(msg[8:])
	if uint64(plen) > uint64(msgLen-HeaderSize) {
		return 0, 0, nil, fmt.Errorf("qwp: payload_length %d exceeds the %d bytes present", plen, msgLen-HeaderSize)
	}
	payload := msg[HeaderSize:]
	payload = payload[:min(uint64(plen), uint64(len(payload)))]
	s, n := binary.Uvarint(payload)
	if n <= 0 {
		return 0, 0, nil, errTruncatedDict
	}
	c, m := binary.Uvarint(payload[n:])
	if m <= 0 {
		return 0, 0, nil, errTruncatedDict
	}
	if s > MaxSymbolDictSize || c > MaxSymbolDictSize-s {
		return 0, 0, nil, fmt.Errorf("qwp: delta dictionary [%d, +%d) exceeds %d ids", s, c, MaxSymbolDictSize)
	}
	return int(s), int(c), payload[n+m:], nil
}

var errTruncatedDict = errors.New("qwp: delta symbol dictionary header is truncated")

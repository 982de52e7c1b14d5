package sender

import (
	"fmt"
	"time"
)

// window maps one connection's wire sequence numbers to FSNs.
//
// The server numbers binary messages in receive order from 0. A connection
// first sends catchUp dictionary frames that carry no FSN, then stored frames
// from fsnAtZero in strict order, with now and then a bare commit between
// them (also without an FSN: it closes a deferred group whose OK would
// otherwise be withheld). So a data frame's FSN is fsnAtZero plus the number
// of data frames before it:
//
//	fsn = fsnAtZero + wireSeq - catchUp - (bare commits before wireSeq)
type window struct {
	fsnAtZero uint64
	catchUp   int64 // C: leading frames on this connection that carry no FSN
	sent      int64 // next wire sequence number
	okSeq     int64 // highest wire sequence confirmed by an OK; -1 before any
	okData    int64 // data frames confirmed by an OK

	// commits holds the wire sequences of bare commits above okSeq,
	// ascending; commitsAcked counts those at or below it. Commits are rare
	// (only after a deferred stored frame), so a slice is enough.
	commits      []int64
	commitsAcked int64

	// sentAt[dataIndex % len] is the send time of a data frame, for ack
	// latency; the ring holds maxInFlight entries, which is all that can be
	// unacknowledged.
	sentAt []time.Time
}

func newWindow(fsnAtZero uint64, maxInFlight int) *window {
	return &window{fsnAtZero: fsnAtZero, okSeq: -1, sentAt: make([]time.Time, maxInFlight)}
}

// sendCatchUp accounts for one dictionary frame; they all precede data frames.
func (w *window) sendCatchUp() {
	if w.sent != w.catchUp {
		panic("sender: catch-up frame after a data frame")
	}
	w.sent++
	w.catchUp++
}

// sendCommit accounts for one bare commit sent after data frames.
func (w *window) sendCommit() {
	w.commits = append(w.commits, w.sent)
	w.sent++
}

// sendData accounts for one stored frame and returns the FSN it must carry.
func (w *window) sendData(now time.Time) uint64 {
	i := w.dataBefore(w.sent)
	w.sentAt[i%int64(len(w.sentAt))] = now
	w.sent++
	return w.fsnAtZero + uint64(i)
}

// dataBefore is the number of data frames below wire sequence seq; seq must
// be above okSeq (or at most catchUp).
func (w *window) dataBefore(seq int64) int64 {
	n := seq - w.catchUp - w.commitsAcked
	for _, c := range w.commits {
		if c >= seq {
			break
		}
		n--
	}
	return n
}

// nextFSN is the FSN the next data frame on this connection must carry.
func (w *window) nextFSN() uint64 { return w.fsnAtZero + uint64(w.dataBefore(w.sent)) }

// inFlight is the number of frames after the catch-up sent and not yet
// confirmed by an OK. Catch-up frames are excluded: a real server withholds
// their OK until the first data frame, so counting them could stall a large
// dictionary forever.
func (w *window) inFlight() int {
	acked := max(w.okSeq+1, w.catchUp)
	return int(w.sent - acked)
}

// ok applies a cumulative OK for wireSeq. It returns the highest FSN the OK
// newly covers (0 when it covers no data frame not covered before) and the
// latency of that frame.
func (w *window) ok(wireSeq int64, now time.Time) (fsn uint64, latency time.Duration, err error) {
	if wireSeq >= w.sent {
		return 0, 0, fmt.Errorf("server acknowledged wire sequence %d but only %d frames were sent on this connection", wireSeq, w.sent)
	}
	if wireSeq < w.okSeq {
		return 0, 0, fmt.Errorf("server acknowledged wire sequence %d after %d: cumulative OKs must not go back", wireSeq, w.okSeq)
	}
	if wireSeq == w.okSeq {
		return 0, 0, nil
	}
	data := max(w.dataBefore(wireSeq+1), 0)
	w.okSeq = wireSeq
	for len(w.commits) > 0 && w.commits[0] <= wireSeq {
		w.commits = w.commits[1:]
		w.commitsAcked++
	}
	if data <= w.okData {
		return 0, 0, nil
	}
	w.okData = data
	at := w.sentAt[(data-1)%int64(len(w.sentAt))]
	return w.fsnAtZero + uint64(data-1), now.Sub(at), nil
}

// rejected names the frame an error response refers to: its FSN, or isData
// == false for a frame without one (catch-up or bare commit).
func (w *window) rejected(wireSeq int64) (fsn uint64, isData bool, err error) {
	if wireSeq < 0 || wireSeq >= w.sent {
		return 0, false, fmt.Errorf("server rejected wire sequence %d but only %d frames were sent on this connection", wireSeq, w.sent)
	}
	if wireSeq < w.catchUp {
		return 0, false, nil
	}
	if wireSeq <= w.okSeq {
		return 0, false, fmt.Errorf("server rejected wire sequence %d, which its OK of %d already acknowledged", wireSeq, w.okSeq)
	}
	for _, c := range w.commits {
		if c == wireSeq {
			return 0, false, nil
		}
	}
	return w.fsnAtZero + uint64(w.dataBefore(wireSeq)), true, nil
}

package sender

import (
	"fmt"
	"time"
)

// window maps one connection's wire sequence numbers to FSNs.
//
// The server numbers binary messages in receive order from 0. A connection
// first sends catchUp dictionary frames that carry no FSN, then stored frames
// from fsnAtZero in strict order, so for wireSeq >= catchUp:
//
//	fsn = fsnAtZero + wireSeq - catchUp
type window struct {
	fsnAtZero uint64
	catchUp   int64 // C: frames on this connection that carry no FSN
	sent      int64 // next wire sequence number
	okSeq     int64 // highest wire sequence confirmed by an OK; -1 before any

	// sentAt[(wireSeq-catchUp) % len] is the send time of a data frame,
	// for ack latency; the ring holds maxInFlight entries, which is all that
	// can be unacknowledged.
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

// sendData accounts for one stored frame and returns the FSN it must carry.
func (w *window) sendData(now time.Time) uint64 {
	fsn := w.fsnOf(w.sent)
	w.sentAt[(w.sent-w.catchUp)%int64(len(w.sentAt))] = now
	w.sent++
	return fsn
}

// nextFSN is the FSN the next data frame on this connection must carry.
func (w *window) nextFSN() uint64 { return w.fsnOf(w.sent) }

// fsnOf maps a data frame's wire sequence to its FSN; callers ensure
// wireSeq >= catchUp.
func (w *window) fsnOf(wireSeq int64) uint64 {
	return w.fsnAtZero + uint64(wireSeq-w.catchUp)
}

// inFlight is the number of data frames sent and not yet confirmed by an OK.
// Catch-up frames are excluded: a real server withholds their OK until the
// first data frame, so counting them could stall a large dictionary forever.
func (w *window) inFlight() int {
	acked := max(w.okSeq+1, w.catchUp)
	return int(w.sent - acked)
}

// ok applies a cumulative OK for wireSeq. It returns the highest FSN the OK
// covers (0 when it covers only catch-up frames) and the latency of the
// newest frame it covers.
func (w *window) ok(wireSeq int64, now time.Time) (fsn uint64, latency time.Duration, err error) {
	if wireSeq >= w.sent {
		return 0, 0, fmt.Errorf("server acknowledged wire sequence %d but only %d frames were sent on this connection", wireSeq, w.sent)
	}
	if wireSeq < w.okSeq {
		return 0, 0, fmt.Errorf("server acknowledged wire sequence %d after %d: cumulative OKs must not go back", wireSeq, w.okSeq)
	}
	w.okSeq = wireSeq
	if wireSeq < w.catchUp {
		return 0, 0, nil
	}
	at := w.sentAt[(wireSeq-w.catchUp)%int64(len(w.sentAt))]
	return w.fsnOf(wireSeq), now.Sub(at), nil
}

// rejected names the frame an error response refers to: its FSN, or isData
// == false for a catch-up frame.
func (w *window) rejected(wireSeq int64) (fsn uint64, isData bool, err error) {
	if wireSeq < 0 || wireSeq >= w.sent {
		return 0, false, fmt.Errorf("server rejected wire sequence %d but only %d frames were sent on this connection", wireSeq, w.sent)
	}
	if wireSeq < w.catchUp {
		return 0, false, nil
	}
	return w.fsnOf(wireSeq), true, nil
}

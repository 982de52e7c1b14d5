package qwptest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// flagDurableAckPoll is the header-only durable-ack poll flag of newer
// servers; without a negotiated durable ack it is a parse error.
const flagDurableAckPoll = 0x02

// okEvery is the number of unacknowledged frames after which an OK is sent
// even in the middle of a socket read.
const okEvery = 8

// drainTimeout bounds how long a closing connection keeps reading after its
// CLOSE frame, so that the client sees the CLOSE rather than a reset
// (QwpIngressProcessorState.CLOSE_DRAIN_TIMEOUT_MICROS).
const drainTimeout = 5 * time.Second

// controlTimeout bounds writing a PONG or CLOSE frame.
const controlTimeout = 10 * time.Second

type itemKind int

const (
	itemFrame     itemKind = iota // a BINARY frame with FIN set: one message
	itemFragment                  // BINARY without FIN, or CONTINUATION: CLOSE 1002
	itemText                      // a TEXT frame: CLOSE 1003
	itemTooBig                    // a frame header over the receive buffer: CLOSE 1009
	itemViolation                 // a header QuestDB's parser refuses: TCP close
	itemPing                      // flush OKs, then PONG
	itemClose                     // the client's CLOSE: flush OKs, answer it
	itemGone                      // the connection failed
)

// item is what the reading goroutine hands to the connection's processor,
// in wire order.
type item struct {
	kind itemKind
	data []byte
	code int
	err  error
}

// conn is one upgraded connection. A reading goroutine parses WebSocket
// frames into items; run processes them one at a time and is the only
// writer, so responses leave in frame order.
type conn struct {
	s       *Server
	nc      net.Conn
	br      *bufio.Reader // nc's bytes, from the end of the upgrade request
	id      int
	durable qwp.Status // status of durable-ack frames, 0 when not negotiated

	in         chan item
	wake       chan struct{} // ReleaseAcks, EmitDurableAcks
	stop       chan struct{} // closed by kill
	stopOnce   sync.Once
	done       chan struct{} // closed when run returns
	readerDone chan struct{}

	dec          Decoder
	seq          int64 // the next frame's seq; also the frames received
	poisoned     bool
	pend         pending
	deferred     bool  // a FLAG_DEFER_COMMIT group is open
	groupRowless bool  // the open group has a frame without rows
	committedSeq int64 // highest seq whose rows are committed
	okSeq        int64 // highest seq covered by a sent OK
	okTables     []tableTxn
	heldErr      []byte          // an error frame held by StallAcks
	tables       map[*table]bool // distinct tables written, for maxTablesPerConn
	okTxn        map[*table]int64
	durableSent  map[*table]int64
}

func newConn(s *Server, nc net.Conn, br *bufio.Reader, id int, durable qwp.Status) *conn {
	return &conn{
		s: s, nc: nc, br: br, id: id, durable: durable,
		in: make(chan item), wake: make(chan struct{}, 1), stop: make(chan struct{}),
		done: make(chan struct{}), readerDone: make(chan struct{}),
		dec:          Decoder{CountOnly: s.opts.CountOnly},
		committedSeq: -1, okSeq: -1,
		tables: map[*table]bool{}, okTxn: map[*table]int64{}, durableSent: map[*table]int64{},
	}
}

// kill drops the connection without a CLOSE frame.
func (c *conn) kill() {
	c.stopOnce.Do(func() { close(c.stop) })
	_ = c.nc.Close()
}

func (c *conn) stopped() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

func (c *conn) run() {
	go c.read()
	defer func() {
		close(c.done)
		_ = c.nc.Close()
		<-c.readerDone
		c.pend.reset() // uncommitted rows, including an open deferred group, are lost
	}()
	for {
		select {
		case it := <-c.in:
			if !c.handle(it) {
				return
			}
		case <-c.wake:
			c.release()
		case <-c.stop:
			return
		}
	}
}

// handle processes an item and every frame already read behind it, then
// flushes the cumulative OK: one OK per socket read, as QuestDB does. It
// returns false when the connection must end.
func (c *conn) handle(it item) bool {
	for {
		switch it.kind {
		case itemFrame:
			if !c.frame(it.data) {
				return false
			}
		case itemPing:
			c.flushOK()
			c.writeControl(opPong, it.data)
			return true
		case itemFragment:
			c.closeWith(closeProtocolError, reasonFragmented)
			return false
		case itemText:
			c.closeWith(closeUnsupportedData, reasonText)
			return false
		case itemTooBig:
			c.closeWith(closeMessageTooBig, reasonTooBig)
			return false
		case itemViolation:
			// QuestDB drops the socket without a CLOSE frame; its
			// onConnectionClosed still flushes the pending OK first.
			c.flushOK()
			c.s.logf("conn %d: %v: dropped without a CLOSE frame", c.id, it.err)
			return false
		case itemClose:
			// handleClose: OKs, the normalised code without a reason,
			// then FIN (gracefulCloseAndDisconnect).
			c.flushOK()
			c.writeControl(opClose, closePayload(echoCloseCode(it.code), ""))
			if tc, ok := c.nc.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			return false
		case itemGone:
			c.s.logf("conn %d: %v", c.id, it.err)
			return false
		}
		select {
		case it = <-c.in:
		default:
			c.flushOK()
			return true
		}
	}
}

// frame handles one BINARY message; false ends the connection.
func (c *conn) frame(data []byte) bool {
	if c.stopped() {
		return false
	}
	seq := c.seq
	c.seq++
	reject, drop := c.s.frameFaults(len(data))
	if !c.poisoned {
		if reject != nil {
			c.fail(seq, &StatusError{Status: reject.status, Msg: reject.msg})
		} else if err := c.process(seq, data); err != nil {
			c.fail(seq, err)
		}
	}
	if drop != nil {
		if drop.flushAcks {
			c.flushOK()
		}
		c.s.logf("conn %d: dropped after frame %d (fault)", c.id, seq)
		return false
	}
	return true
}

func (c *conn) process(seq int64, data []byte) *StatusError {
	if len(data) == 0 { // a bare commit
		c.commit(seq)
		return nil
	}
	m, err := c.dec.Decode(data)
	if err != nil {
		return err.(*StatusError)
	}
	if m.Flags&flagDurableAckPoll != 0 && c.durable == 0 {
		return parseErr("durable-ack poll flag 0x%02x without a negotiated durable ack", flagDurableAckPoll)
	}
	for i := range m.Tables {
		if err := c.s.store.stage(&m.Tables[i], &c.pend, c.tables); err != nil {
			return err
		}
	}
	switch {
	case m.Flags&flagDurableAckPoll != 0 && c.deferred:
		// A poll never commits an open deferred group, nor is it
		// acknowledged before the group's commit, which covers both
		// (QwpIngressAckLeapfrogTest.testDurableAckPollMustNotCommitDeferredGroup).
		c.sendDurable()
	case m.Flags&flagDurableAckPoll != 0:
		// On a clean connection the poll's own seq is acknowledged, then
		// the durable progress it asks for is sent.
		c.commit(seq)
		c.flushOK()
		c.sendDurable()
	case m.Flags&qwp.FlagDeferCommit != 0:
		c.deferFrame(seq, m)
	default:
		c.commit(seq)
	}
	return nil
}

// deferFrame keeps a FLAG_DEFER_COMMIT frame's rows uncommitted, except
// that a table reaching MaxUncommittedRows is committed on its own. Once
// nothing is left uncommitted the frame can be acknowledged, unless the
// group holds a rowless frame (dictionary catch-up), which stays uncovered
// until the group commits.
func (c *conn) deferFrame(seq int64, m *Message) {
	c.deferred = true
	rows := 0
	for _, b := range m.Tables {
		rows += b.Rows
	}
	if rows == 0 {
		c.groupRowless = true
	}
	limit := int64(c.s.opts.MaxUncommittedRows)
	for _, tx := range c.s.store.commit(&c.pend, func(n int64) bool { return n >= limit }) {
		c.addOKTable(tx)
	}
	if c.pend.empty() && !c.groupRowless {
		c.committedSeq = seq
	}
}

// commit commits the staged rows (closing any deferred group) through seq.
func (c *conn) commit(seq int64) {
	for _, tx := range c.s.store.commit(&c.pend, nil) {
		c.addOKTable(tx)
	}
	c.committedSeq = seq
	closedGroup := c.deferred
	c.deferred, c.groupRowless = false, false
	if closedGroup || seq-c.okSeq >= okEvery {
		c.flushOK()
	}
}

// addOKTable records a commit for the next OK: one latest seqTxn per table.
func (c *conn) addOKTable(tx tableTxn) {
	for i := range c.okTables {
		if c.okTables[i].t == tx.t {
			c.okTables[i] = tx
			return
		}
	}
	c.okTables = append(c.okTables, tx)
}

// fail rolls back everything uncommitted, sends pending OKs and the error
// frame, and poisons the connection.
func (c *conn) fail(seq int64, err *StatusError) {
	c.pend.reset()
	c.deferred, c.groupRowless = false, false
	c.flushOK()
	ef := c.errorFrame(err.Status, seq, err.Msg)
	if c.s.isStalled() {
		c.heldErr = ef
	} else {
		c.write(ef)
	}
	c.poisoned = true
	c.s.logf("conn %d: frame %d refused with %s: %s", c.id, seq, err.Status, err.Msg)
}

// flushOK sends the cumulative OK if any committed frame is unacknowledged.
func (c *conn) flushOK() {
	if c.committedSeq <= c.okSeq || c.s.isStalled() {
		return
	}
	c.write(c.okFrame(c.committedSeq, c.okTables))
	for _, tx := range c.okTables {
		c.okTxn[tx.t] = tx.seqTxn
	}
	acked := c.okTables
	c.okTables = nil
	c.okSeq = c.committedSeq
	if c.durable != 0 && c.s.opts.AutoDurable {
		c.s.store.makeDurable(acked)
		c.sendDurable()
	}
}

// sendDurable sends a durable ack for the tables whose durable seqTxn
// advanced, never past what this connection's OKs reported.
func (c *conn) sendDurable() {
	if c.durable == 0 || c.s.isStalled() {
		return
	}
	var entries []tableTxn
	for t, ok := range c.okTxn {
		d := min(c.s.store.durableTxn(t), ok)
		if d > c.durableSent[t] {
			c.durableSent[t] = d
			entries = append(entries, tableTxn{t: t, name: t.name, seqTxn: d})
		}
	}
	if len(entries) == 0 {
		return
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	c.write(c.durableFrame(c.durable, entries))
}

// release runs on ReleaseAcks and EmitDurableAcks.
func (c *conn) release() {
	if c.s.isStalled() {
		return
	}
	c.flushOK()
	if c.heldErr != nil {
		c.write(c.heldErr)
		c.heldErr = nil
	}
	c.sendDurable()
}

// write sends a response. It has no deadline: like QuestDB, a connection
// whose client does not read stops processing frames, which pushes back
// through TCP; kill unblocks it.
func (c *conn) write(b []byte) {
	if err := writeFrame(c.nc, opBinary, b); err != nil {
		c.s.logf("conn %d: write: %v", c.id, err)
	}
}

// writeControl sends a PONG or CLOSE frame within controlTimeout.
func (c *conn) writeControl(opcode byte, payload []byte) {
	_ = c.nc.SetWriteDeadline(time.Now().Add(controlTimeout))
	if err := writeFrame(c.nc, opcode, payload); err != nil {
		c.s.logf("conn %d: write control frame 0x%x: %v", c.id, opcode, err)
	}
	_ = c.nc.SetWriteDeadline(time.Time{})
}

// closeWith flushes OKs, sends a CLOSE frame, half-closes the TCP
// connection and drains what the client still sends, as QuestDB does.
func (c *conn) closeWith(code int, reason string) {
	c.flushOK()
	c.writeControl(opClose, closePayload(code, reason))
	<-c.readerDone // the reader stopped after handing over this item
	nc := c.nc
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	_ = nc.SetReadDeadline(time.Now().Add(drainTimeout))
	_, _ = io.Copy(io.Discard, nc)
	c.s.logf("conn %d: closed with %d", c.id, code)
}

// push hands an item to the processor; false once the connection ended.
func (c *conn) push(it item) bool {
	select {
	case c.in <- it:
		return true
	case <-c.done:
		return false
	}
}

// read parses client frames into items until the first terminal one. Like
// QuestDB's processWebSocketFrames it refuses a header before reading the
// payload, and hands a frame over only once all of it has arrived.
func (c *conn) read() {
	defer close(c.readerDone)
	limit := uint64(c.s.opts.RecvBufferSize)
	for {
		h, err := readFrameHeader(c.br)
		switch {
		case errors.Is(err, errViolation):
			c.push(item{kind: itemViolation, err: err})
			return
		case err != nil:
			c.push(item{kind: itemGone, err: err})
			return
		case uint64(h.size)+h.length > limit:
			c.push(item{kind: itemTooBig})
			return
		}
		data := make([]byte, h.length)
		if _, err := io.ReadFull(c.br, data); err != nil {
			c.push(item{kind: itemGone, err: err})
			return
		}
		unmask(data, h.maskKey)
		it := item{data: data}
		switch h.opcode {
		case opBinary:
			it.kind = itemFrame
			if !h.fin {
				it.kind = itemFragment
			}
		case opContinuation:
			it.kind = itemFragment
		case opText:
			it.kind = itemText
		case opPing:
			it.kind = itemPing
		case opPong:
			continue // handleWebSocketFrame only logs it
		case opClose:
			it.kind, it.code = itemClose, -1
			if len(data) >= 2 {
				it.code = int(binary.BigEndian.Uint16(data))
			}
		}
		if !c.push(it) || (it.kind != itemFrame && it.kind != itemPing) {
			return
		}
	}
}

package questdbexporter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// frameQueue is the part of the SF queue the writer appends to
// (sfqueue.Queue satisfies it).
type frameQueue interface {
	AppendWith(ctx context.Context, b sfqueue.Batch) (lastFSN uint64, err error)
}

// batchEncoder turns pdata batches into QWP messages under the frame limit,
// calling emit with each finished message (valid only during the call), and
// returns the rows it wrote. Rows of successive batches share frames until
// flush. reset starts a new dictionary generation: the encoder's next frame
// defines ids from 0 of dict. Skipped data points are the encoder's to count;
// an error means the batch could not be converted at all.
type batchEncoder interface {
	encodeMetrics(md pmetric.Metrics, emit func(frame []byte) error) (rows int, err error)
	encodeLogs(ld plog.Logs, emit func(frame []byte) error) (rows int, err error)
	encodeTraces(td ptrace.Traces, emit func(frame []byte) error) (rows int, err error)
	flush(emit func(frame []byte) error) error
	// finishInto makes the encoder finish frames at the end of *buf, gap
	// bytes after it, and hand emit that tail of *buf (the writer's arena,
	// with room for the generation prefix: no copy of a frame).
	finishInto(buf *[]byte, gap int)
	reset(dict qwp.SymbolDict)
	// frameRows is the rows of the frame being handed to emit (valid
	// during the call): the queue stores it with the frame, so that an
	// eviction counts the rows it drops.
	frameRows() int
}

// writerObserver receives the writer's telemetry. Calls come from the
// writer goroutine.
type writerObserver interface {
	// groupAppended: one AppendBatch of frames carrying rows rows, for
	// callers callers, whose last frame is lastFSN.
	groupAppended(callers, frames, rows int, lastFSN uint64)
	// groupStalled: the queue lacked room for a group when its append
	// started, so the append waits (on_full: block) and may be refused.
	groupStalled()
	// groupFailed: a group whose frames were not appended.
	groupFailed(callers int, err error)
	// dictBoundReached: after a frame, the dictionary generation reached
	// its working limit: fill is how far (1 or more; against the limit
	// before any growth), limit the working limit after, growths how many
	// times it doubled, and end the bound the generation ended at
	// (dictContinues when it grew and goes on).
	dictBoundReached(fill float64, limit, growths int, end dictEnd)
}

// errWriterClosed is what calls get after Shutdown began.
var errWriterClosed = errors.New("questdb exporter is shut down")

// writeRequest is one Consume call waiting for the group commit.
type writeRequest struct {
	ctx     context.Context
	signal  signal // which of the batches below is set
	metrics pmetric.Metrics
	logs    plog.Logs
	traces  ptrace.Traces
	done    chan writeResult // buffered: the writer never blocks on it
	// state hands the batch over: the writer reads it only after moving
	// reqQueued to reqEncoding, and closes encoded when done reading; a
	// caller that gives up first moves reqQueued to reqAbandoned, and the
	// batch is never read. So no call returns while its batch is being read.
	state   atomic.Int32
	encoded chan struct{}

	// set by the writer
	err       error // the caller's own encoding error
	lastFrame int   // index in the group of the frame holding its last row; -1 none
}

// letGo drops the request's batch once the writer is done reading it: the
// group, which stays until its append returns, must not keep an encoded
// batch's pdata live while the rest of the group is encoded and stored
// (issue #25: pdata is most of what the live heap's spikes are made of).
// The caller never reads these fields after handing r over.
func (r *writeRequest) letGo() {
	r.metrics, r.logs, r.traces = pmetric.Metrics{}, plog.Logs{}, ptrace.Traces{}
}

// signal names the kind of batch a request carries.
type signal int

const (
	signalMetrics signal = iota
	signalLogs
	signalTraces
)

// String is the signal's name in the collector's terms (the signal
// attribute of skipped_data_points).
func (s signal) String() string {
	return [...]string{"metrics", "logs", "traces"}[s]
}

// writeRequest states.
const (
	reqQueued int32 = iota
	reqEncoding
	reqAbandoned
)

func newWriteRequest(ctx context.Context) *writeRequest {
	return &writeRequest{ctx: ctx, done: make(chan writeResult, 1), encoded: make(chan struct{}), lastFrame: -1}
}

// writeResult is what a caller learns: the FSN of the frame holding its
// last row (0 when the batch produced no rows), or why it was not stored.
type writeResult struct {
	fsn uint64
	err error
}

// writer is the group-commit loop (seed 004): one goroutine owns the
// encoder and the dictionary; it takes every request waiting right now,
// encodes them into frames, appends the frames with the new dictionary
// entries they define in one AppendWith (admitted under the cap together;
// flush durability fsyncs once for the group) and then answers every
// caller. There is no timer: a group is what
// arrived while the previous one was being stored.
//
// Results per caller. A group is appended all or nothing (AppendBatch's
// contract), so:
//   - the append failed: every caller of the group gets that error and
//     nothing of the group, frames or dictionary entries, is in the queue;
//   - a caller's own batch failed to encode (a bug-class error, not a
//     skipped point): that caller gets a permanent error, while rows of it
//     already written to frames are stored with the group (a retry would
//     duplicate them; DEDUP keys make that harmless). Other callers are
//     unaffected;
//   - otherwise the caller gets nil, and its rows are in the queue.
//
// No caller ever gets nil for rows that were not appended.
type writer struct {
	q    frameQueue
	dict *genDict
	enc  batchEncoder
	obs  writerObserver
	// room reports whether the queue has room for a batch right now; only
	// used to count backpressure stalls. nil: never counted.
	room func(sfqueue.Batch) bool
	// maxFrameBytes bounds catch-up frames like the encoder's (max_batch_bytes).
	maxFrameBytes int

	mu     sync.RWMutex // closed and sends on reqs
	closed bool
	reqs   chan *writeRequest
	done   chan struct{}

	// group state, owned by the loop and reused across groups
	group    []*writeRequest
	arena    []byte   // stored payloads back to back
	ends     []int    // end offset of each payload in arena
	items    []uint32 // rows of each payload
	payloads [][]byte
	genEnd   int   // highest delta end of this group's frames in the current generation
	groupErr error // why the group cannot be stored; set by emit or the append
	rows     int
}

// maxGroupRequests bounds one group so that a storm of callers cannot grow
// a group's memory without limit; the rest go to the next group.
const maxGroupRequests = 1024

func newWriter(q frameQueue, dict *genDict, enc batchEncoder, obs writerObserver, room func(sfqueue.Batch) bool, maxFrameBytes int) *writer {
	w := &writer{
		q: q, dict: dict, enc: enc, obs: obs, room: room, maxFrameBytes: maxFrameBytes,
		reqs: make(chan *writeRequest, maxGroupRequests),
		done: make(chan struct{}),
	}
	enc.finishInto(&w.arena, genPrefixBytes)
	go w.run()
	return w
}

// writeMetrics stores md and returns the FSN of its last frame.
func (w *writer) writeMetrics(ctx context.Context, md pmetric.Metrics) (uint64, error) {
	r := newWriteRequest(ctx)
	r.metrics = md
	return w.write(r)
}

// writeLogs stores ld and returns the FSN of its last frame.
func (w *writer) writeLogs(ctx context.Context, ld plog.Logs) (uint64, error) {
	r := newWriteRequest(ctx)
	r.logs, r.signal = ld, signalLogs
	return w.write(r)
}

// writeTraces stores td and returns the FSN of its last frame.
func (w *writer) writeTraces(ctx context.Context, td ptrace.Traces) (uint64, error) {
	r := newWriteRequest(ctx)
	r.traces, r.signal = td, signalTraces
	return w.write(r)
}

func (w *writer) write(r *writeRequest) (uint64, error) {
	ctx := r.ctx
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return 0, errWriterClosed
	}
	select {
	case w.reqs <- r:
	case <-ctx.Done():
		w.mu.RUnlock()
		return 0, fmt.Errorf("questdb exporter: gave up waiting to enter the write queue: %w", ctx.Err())
	}
	w.mu.RUnlock()
	select {
	case res := <-r.done:
		return res.fsn, res.err
	case <-ctx.Done():
	}
	if r.state.CompareAndSwap(reqQueued, reqAbandoned) {
		return 0, fmt.Errorf("questdb exporter: gave up before the batch was written: %w", ctx.Err())
	}
	// The writer is reading the batch, which must not outlive this call.
	select {
	case <-r.encoded:
	case res := <-r.done:
		return res.fsn, res.err
	}
	// The group may still store the batch: the caller's retry then
	// duplicates it, which at-least-once allows. It is never told nil.
	return 0, fmt.Errorf("questdb exporter: gave up waiting for the queue append: %w", ctx.Err())
}

// close stops accepting requests, lets the loop finish every request already
// accepted, and waits for it.
func (w *writer) close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.reqs)
	}
	w.mu.Unlock()
	<-w.done
}

func (w *writer) run() {
	defer close(w.done)
	for first := range w.reqs {
		group := append(w.group[:0], first)
	more:
		for len(group) < maxGroupRequests {
			select {
			case r, ok := <-w.reqs:
				if !ok {
					break more
				}
				group = append(group, r)
			default:
				break more
			}
		}
		w.commit(group)
		clear(group)
		w.group = group[:0]
	}
}

// commit encodes, stores and answers one group.
func (w *writer) commit(group []*writeRequest) {
	w.arena, w.ends, w.items, w.genEnd, w.groupErr, w.rows = w.arena[:0], w.ends[:0], w.items[:0], 0, nil, 0

	// Ids assigned by an earlier group that failed to append are defined by
	// no queued frame: re-register them first (rowless deferred frames).
	if from, to := w.dict.unqueued(); from < to {
		// store, not emit: the dictionary must not rotate under the
		// catch-up's feet. The catch-up frames are deferred, and a real
		// server withholds their OK until a later frame commits: a bare
		// commit closes them, so that neither the generation (when it
		// rotates next) nor the queue (when no row follows) ends on a frame
		// whose OK never comes.
		err := qwp.CatchUpFrames(w.dict, from, to, w.maxFrameBytes, w.storeRowless)
		if err == nil {
			var commit [qwp.HeaderSize]byte
			err = w.storeRowless(qwp.AppendCommit(commit[:0]))
		}
		if err == nil {
			w.rotateIfFull()
		} else if w.groupErr == nil {
			w.groupErr = err
		}
	}
	for _, r := range group {
		if w.groupErr != nil {
			break
		}
		if !r.state.CompareAndSwap(reqQueued, reqEncoding) {
			r.letGo()
			continue // abandoned: its caller is gone and was told so
		}
		var rows int
		var err error
		switch r.signal {
		case signalLogs:
			rows, err = w.enc.encodeLogs(r.logs, w.emit)
		case signalTraces:
			rows, err = w.enc.encodeTraces(r.traces, w.emit)
		default:
			rows, err = w.enc.encodeMetrics(r.metrics, w.emit)
		}
		close(r.encoded)
		r.letGo()
		w.rows += rows
		if rows > 0 {
			r.lastFrame = len(w.ends) // the frame in progress, or the next one
		}
		if err != nil && w.groupErr == nil {
			r.err = consumererror.NewPermanent(fmt.Errorf("questdb exporter: converting the batch to rows: %w", err))
		}
	}
	if w.groupErr == nil {
		if err := w.enc.flush(w.emit); err != nil && w.groupErr == nil {
			w.groupErr = err
		}
	}
	if w.groupErr != nil {
		// Discard the partial frame; ids it assigned become catch-up of
		// the next group.
		w.enc.reset(w.dict)
	}
	var first uint64
	if w.groupErr == nil && len(w.ends) > 0 {
		w.payloads = w.payloads[:0]
		start := 0
		for _, end := range w.ends {
			w.payloads = append(w.payloads, w.arena[start:end:end])
			start = end
		}
		b := sfqueue.Batch{Payloads: w.payloads, Items: w.items, Symbols: w.dict.pending(), IndexBytes: w.dict.IndexBytes()}
		if w.room != nil && !w.room(b) {
			w.obs.groupStalled()
		}
		ctx, cancel := groupContext(group)
		last, err := w.q.AppendWith(ctx, b)
		cancel()
		clear(w.payloads)
		if err != nil {
			w.groupErr = err
		} else {
			first = last - uint64(len(w.ends)) + 1
			w.dict.storedPending()
			w.dict.markQueued(w.genEnd)
			w.obs.groupAppended(len(group), len(w.ends), w.rows, last)
		}
	}
	// Entries of generations rotated away from went with the frames, or
	// are abandoned with them.
	w.dict.dropRetired()
	if w.groupErr != nil {
		w.obs.groupFailed(len(group), w.groupErr)
	}
	for _, r := range group {
		res := writeResult{err: r.err}
		switch {
		case w.groupErr != nil:
			res.err = w.groupErr
		case r.lastFrame >= 0:
			res.fsn = first + uint64(min(r.lastFrame, len(w.ends)-1))
		}
		r.done <- res
	}
}

// storeRowless stores a message without rows (catch-up, bare commit).
func (w *writer) storeRowless(frame []byte) error { return w.store(frame, 0) }

// store appends one finished message carrying rows rows to the group with
// its generation prefix.
func (w *writer) store(frame []byte, rows int) error {
	if w.groupErr != nil {
		return w.groupErr
	}
	start := len(w.arena)
	w.arena = append(w.arena, make([]byte, genPrefixBytes)...)
	w.arena = append(w.arena, frame...)
	return w.stored(start, rows)
}

// stored records the arena's tail from start as one payload: the
// generation prefix's room, filled here, then a message carrying rows rows.
// On failure the tail is cut off again.
func (w *writer) stored(start, rows int) error {
	if w.groupErr != nil {
		w.arena = w.arena[:start]
		return w.groupErr
	}
	_, end, err := qwp.DeltaDictRange(w.arena[start+genPrefixBytes:])
	if err != nil {
		w.arena = w.arena[:start]
		w.groupErr = fmt.Errorf("questdb exporter: encoder produced an unreadable message: %w", err)
		return w.groupErr
	}
	appendGenPrefix(w.arena[start:start], w.dict.Gen()) // in place
	w.genEnd = max(w.genEnd, end)
	w.ends = append(w.ends, len(w.arena))
	w.items = append(w.items, uint32(rows))
	return nil
}

// emit stores a message the encoder finished at the arena's end, after room
// for the generation prefix (finishInto), and starts a new dictionary
// generation once the current one is full.
func (w *writer) emit(frame []byte) error {
	start := len(w.arena) - len(frame) - genPrefixBytes
	if len(frame) == 0 || start < 0 || &w.arena[len(w.arena)-1] != &frame[len(frame)-1] {
		// Not where finishInto puts it: a bug, refused rather than stored
		// from the wrong bytes.
		if w.groupErr == nil {
			w.groupErr = errors.New("questdb exporter: the encoder finished a frame outside the writer's arena")
		}
		return w.groupErr
	}
	if err := w.stored(start, w.enc.frameRows()); err != nil {
		return err
	}
	w.rotateIfFull()
	return nil
}

// rotateIfFull starts the next dictionary generation between two frames
// when the current one reached symbol_dict_max_entries or
// symbol_dict_max_bytes.
func (w *writer) rotateIfFull() {
	limit, growths := w.dict.Limit(), w.dict.growths
	end := w.dict.ending()
	full := end != dictContinues
	if !full && w.dict.growths == growths {
		return // the common case: no bound reached, nothing to report
	}
	// Reported here, against the limit full found: after this, a growth
	// or a rotation has taken the fill below 1 again, and the gauges, read
	// later, would never show where the generation ended or grew.
	w.obs.dictBoundReached(w.dict.fillAt(limit), w.dict.Limit(), w.dict.growths-growths, end)
	if !full {
		return
	}
	w.dict.rotate()
	w.genEnd = 0
	w.enc.reset(w.dict)
}

// groupContext bounds the group's AppendWith by the latest deadline among
// its callers (the queue's sf_append_deadline bounds it further): a caller
// with a shorter deadline stops waiting on its own, and must not make the
// whole group fail early.
func groupContext(group []*writeRequest) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, r := range group {
		d, ok := r.ctx.Deadline()
		if !ok {
			return context.WithCancel(context.Background())
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.Background(), latest)
}

package questdbexporter

import (
	"encoding/binary"
	"fmt"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// Stored payloads are a 4-byte little-endian dictionary generation followed
// by the QWP message (API.md, root package).
const genPrefixBytes = 4

// appendGenPrefix appends the generation prefix of a stored payload.
func appendGenPrefix(dst []byte, gen uint32) []byte {
	return binary.LittleEndian.AppendUint32(dst, gen)
}

// splitPayload returns the generation and the QWP message of a stored payload.
func splitPayload(payload []byte) (gen uint32, msg []byte, err error) {
	if len(payload) < genPrefixBytes {
		return 0, nil, fmt.Errorf("stored payload of %d bytes is shorter than its %d-byte generation prefix", len(payload), genPrefixBytes)
	}
	return binary.LittleEndian.Uint32(payload), payload[genPrefixBytes:], nil
}

// payloadSymbolUse reports the dictionary generation of a stored payload and
// the highest id its message can reference (-1 for none): the ids below the
// end of its delta section. Recovery uses it to check that .symbol-dict
// still backs every frame on disk.
func payloadSymbolUse(payload []byte) (gen uint32, maxID int64) {
	gen, msg, err := splitPayload(payload)
	if err != nil {
		return 0, -1
	}
	_, end, err := qwp.DeltaDictRange(msg)
	if err != nil {
		// A message the codec cannot read references nothing we can name;
		// the CRC already vouched for its bytes, so let the server judge it.
		return gen, -1
	}
	return gen, int64(end) - 1
}

// payloadSymbolDefs returns the dictionary entries a stored payload defines
// in its delta section (ids first..), so that recovery can rebuild entries
// a damaged .symbol-dict lost.
func payloadSymbolDefs(payload []byte) (gen uint32, first int, entries [][]byte) {
	gen, msg, err := splitPayload(payload)
	if err != nil {
		return 0, 0, nil
	}
	first, entries, err = qwp.DeltaDictEntries(msg)
	if err != nil {
		return gen, 0, nil
	}
	return gen, first, entries
}

// symbolStore is the part of the SF queue that persists the dictionary
// (sfqueue.Queue satisfies it).
type symbolStore interface {
	AddSymbols(gen uint32, firstID int, entries [][]byte) error
	Symbols(gen uint32) [][]byte
}

// genDict is the writer's SYMBOL dictionary: a qwp.SymbolDict for the
// current generation, persisted through the queue's .symbol-dict.
//
// Generation rule. Ids are per generation and start at 0. Once the current
// generation holds maxEntries ids or maxBytes of symbol text, the writer finishes the frame in progress
// and starts generation+1 with an empty dictionary; frames carry their
// generation in the 4-byte prefix of the stored payload, and the I/O loop
// recycles the connection at the first frame of a newer generation and sends
// that generation's dictionary as catch-up. A generation can exceed
// its bounds by the new symbols of one frame at most (the default 1,000,000
// is half the server's 2,000,000-id limit for that reason), and a frame never
// references an id of another generation: ids are handed out only inside the
// frame's own generation.
//
// Three watermarks, each <= the next: ids below queued are defined by frames
// already appended to the queue (or, after a restart, by the catch-up the
// I/O loop sends on connect); ids below persisted are in .symbol-dict; Len()
// ids are assigned. Entries are persisted before the frames that define them
// are appended. When a group of frames fails to append, the ids it defined
// stay assigned (and persisted); the next group starts with catch-up frames
// for [queued, Len()) so that no later frame references an id the server was
// never sent, and a bare commit after them, so that no generation and not
// the queue ends on a deferred frame whose OK the server withholds.
//
// Not safe for concurrent use: the writer goroutine owns it.
type genDict struct {
	*qwp.MemDict // the current generation's ids (ID, Len, Entry)

	store      symbolStore
	maxEntries int
	maxBytes   int // symbol text of one generation

	bytes   int // symbol text of ids below counted
	counted int

	gen       uint32
	persisted int
	queued    int

	scratch [][]byte // reused argument of AddSymbols
}

var _ qwp.SymbolDict = (*genDict)(nil)

// openGenDict loads generation gen from store. Every loaded entry counts as
// persisted and queued: the I/O loop re-sends the whole generation on
// connect. A generation that is already full (the writer rotated after its
// last frame, which left no trace of the empty new one) continues as
// generation gen+1.
func openGenDict(store symbolStore, maxEntries, maxBytes int, gen uint32) (*genDict, error) {
	if maxEntries <= 0 {
		return nil, fmt.Errorf("symbol_dict_max_entries %d must be positive", maxEntries)
	}
	if maxBytes <= 0 {
		return nil, fmt.Errorf("symbol_dict_max_bytes %d must be positive", maxBytes)
	}
	d := &genDict{MemDict: qwp.NewMemDict(), store: store, maxEntries: maxEntries, maxBytes: maxBytes, gen: gen}
	for id, e := range store.Symbols(gen) {
		if got := d.ID(e); got != uint32(id) {
			return nil, fmt.Errorf("persisted symbol dictionary generation %d holds %q twice (ids %d and %d); each symbol must have one id",
				gen, e, got, id)
		}
	}
	d.persisted, d.queued = d.Len(), d.Len()
	if d.full() {
		if err := d.rotate(); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Gen is the current generation.
func (d *genDict) Gen() uint32 { return d.gen }

// full reports whether the current generation reached maxEntries ids or
// maxBytes of symbol text, so the next frame must start a new generation.
func (d *genDict) full() bool {
	for ; d.counted < d.Len(); d.counted++ {
		d.bytes += len(d.Entry(d.counted))
	}
	return d.Len() >= d.maxEntries || d.bytes >= d.maxBytes
}

// Bytes is the symbol text the current generation holds.
func (d *genDict) Bytes() int {
	d.full()
	return d.bytes
}

// persist stores the entries not yet in .symbol-dict. Call it before
// appending frames that define them.
func (d *genDict) persist() error {
	if d.persisted == d.Len() {
		return nil
	}
	d.scratch = d.scratch[:0]
	for id := d.persisted; id < d.Len(); id++ {
		d.scratch = append(d.scratch, d.Entry(id))
	}
	err := d.store.AddSymbols(d.gen, d.persisted, d.scratch)
	clear(d.scratch)
	if err != nil {
		return fmt.Errorf("persisting symbol ids [%d, %d) of dictionary generation %d: %w", d.persisted, d.Len(), d.gen, err)
	}
	d.persisted = d.Len()
	return nil
}

// unqueued is the range of ids assigned but defined by no queued frame.
func (d *genDict) unqueued() (from, to int) { return d.queued, d.Len() }

// markQueued records that frames defining ids below end are in the queue.
func (d *genDict) markQueued(end int) {
	if end > d.queued {
		d.queued = end
	}
}

// rotate persists what is left of the current generation and starts the
// next one with an empty dictionary.
func (d *genDict) rotate() error {
	if err := d.persist(); err != nil {
		return err
	}
	d.gen++
	d.MemDict = qwp.NewMemDict()
	d.persisted, d.queued, d.bytes, d.counted = 0, 0, 0, 0
	return nil
}

package questdbexporter

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/sfqueue"
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

// symbolStore is the part of the SF queue that holds the dictionary
// (sfqueue.Queue satisfies it): the writer streams its generation from it
// at start (loadGenDict); new entries reach it with the frames that define
// them (frameQueue).
type symbolStore interface {
	OpenSymbols(gen uint32) (*sfqueue.SymbolReader, error)
}

// symbolEntries yields one stored generation's entries in id order and
// io.EOF after the last (sfqueue.SymbolReader). An entry is valid until the
// next call.
type symbolEntries interface {
	Next() ([]byte, error)
}

// genDict is the writer's SYMBOL dictionary: a qwp.SymbolDict for the
// current generation, stored in the queue with the frames.
//
// Generation rule. Ids are per generation and start at 0. Once the current
// generation holds maxEntries ids, maxBytes of symbol text or an index of
// 3 × maxBytes in RAM (many symbols shorter than about 15 bytes), the writer finishes the frame
// in progress and starts generation+1 with an empty dictionary; frames
// carry their generation in the 4-byte prefix of the stored payload, and
// the I/O loop recycles the connection at the first frame of a newer
// generation, whose delta section starts at id 0. A
// generation can exceed its bounds by the new symbols of one frame at most
// (the default 1,000,000 is half the server's 2,000,000-id limit for that
// reason), and a frame never references an id of another generation: ids
// are handed out only inside the frame's own generation.
//
// Growth. A generation starts at a working limit of startBytes (text, and
// three times that of index) and ends there, as at maxBytes, unless its
// symbols recur: when at least half of its entries (estimated from a
// sixteenth of them, qwp.MemDict.SampledHashes) were entries of the
// generations rotated away from, up to maxBytes of their text back, the
// working set is coming round again and rotating would only re-send it on
// every point, so the limit doubles instead, up to maxBytes. Under series
// churn nothing recurs and generations stay at startBytes, the RAM small.
// Several generations are remembered, not only the previous one, because a
// working set read in the same order every interval (a scrape) and larger
// than one generation fills each new generation mostly with the part the
// previous one never held. The remembered hashes say nothing about ids: a collision of
// two symbols' 64-bit hashes can only misjudge the growth.
//
// Three watermarks, each <= the next: ids below queued are defined by frames
// already appended to the queue (or, after a restart, are in the queue's
// dictionary, from which the I/O loop registers them); ids below stored are
// in the queue's dictionary; Len() ids are assigned. New entries go to the queue in the
// same all-or-nothing append as the frames that define them (pending,
// then stored or abandoned): a group that fails stores neither. Its ids
// stay assigned; the next group starts with catch-up frames for [queued,
// Len()) so that no later frame references an id the server was never
// sent, and so that the stored frames' delta sections chain (each starts
// where the previous one of its generation ended: a connection's catch-up
// covers only the ids below its first frame's), and a bare commit after them, so that no generation and not the
// queue ends on a deferred frame whose OK the server withholds. The
// entries of a generation the group rotated away from go with the group
// too; when it fails they are abandoned, as no later frame can use them.
//
// Not safe for concurrent use: the writer goroutine owns it.
type genDict struct {
	*qwp.MemDict // the current generation's ids (ID, Len, Entry)

	maxEntries int
	maxBytes   int // symbol text of one generation
	startBytes int // the working limit a generation starts at, <= maxBytes
	limit      int // the current generation's working limit (Growth)
	growths    int // doublings of limit by full since the dictionary opened, for telemetry

	// seen holds the sampled hashes of the generations rotated away from,
	// seenBytes of their symbol text (at most maxBytes); checked of the
	// current generation's sampled hashes were looked up in it, recurred
	// found.
	seen              map[uint64]struct{}
	seenBytes         int
	checked, recurred int

	gen    uint32
	stored int
	queued int

	retired []sfqueue.SymbolRun // entries of generations rotated away from, not yet stored
	// recycle is the generation last rotated away from at the starting
	// limit, whose memory the current generation takes (qwp.MemDict.Recycle)
	// once no retired run aliases its entries (dropRetired). A grown
	// generation is left to the garbage collector: its memory would
	// outlast the next generation's needs.
	recycle *qwp.MemDict
	runs    []sfqueue.SymbolRun // reused result of pending
	entries [][]byte            // reused entries of pending's run of the current generation
}

var _ qwp.SymbolDict = (*genDict)(nil)

// loadGenDict streams generation gen from store into the writer's
// dictionary (openGenDict). An entry that cannot be read fails the load
// with an error naming the generation and the cause: a generation cut
// short would hand out again ids that the file and the frames on disk
// already hold, and QuestDB would store rows under the wrong symbols.
func loadGenDict(store symbolStore, maxEntries, maxBytes, startBytes int, gen uint32) (*genDict, error) {
	r, err := store.OpenSymbols(gen)
	if err != nil {
		return nil, fmt.Errorf("symbol dictionary generation %d: %w", gen, err)
	}
	d, err := openGenDict(r, maxEntries, maxBytes, startBytes, gen)
	if cerr := r.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("symbol dictionary generation %d: %w", gen, cerr)
	}
	if err != nil {
		return nil, err
	}
	return d, nil
}

// openGenDict loads generation gen from its stored entries. Every loaded
// entry counts as stored and queued, though the last frame on disk may
// define fewer (entries stored after it): the I/O loop registers from the
// queue's dictionary the ids below a frame's delta section that no frame
// it sent on the connection defined, recycling to do so mid-connection. A generation that is already full (the writer
// rotated after its last frame, which left no trace of the empty new one)
// continues as generation gen+1. A generation that had grown past
// startBytes continues at the working limit it had reached (the least
// doubling that holds it): it grew because its symbols recurred, and
// rotating it now would re-send them all. No hashes of earlier generations
// survive a restart, so its next growth waits for a rotation.
func openGenDict(stored symbolEntries, maxEntries, maxBytes, startBytes int, gen uint32) (*genDict, error) {
	if maxEntries <= 0 {
		return nil, fmt.Errorf("symbol_dict_max_entries %d must be positive", maxEntries)
	}
	if maxBytes <= 0 {
		return nil, fmt.Errorf("symbol_dict_max_bytes %d must be positive", maxBytes)
	}
	if startBytes <= 0 || startBytes > maxBytes {
		return nil, fmt.Errorf("a generation's starting limit %d must be positive and at most symbol_dict_max_bytes (%d)", startBytes, maxBytes)
	}
	d := &genDict{MemDict: qwp.NewMemDict(), maxEntries: maxEntries, maxBytes: maxBytes, startBytes: startBytes, limit: startBytes,
		gen: gen, seen: map[uint64]struct{}{}}
	for id := 0; ; id++ {
		e, err := stored.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("symbol dictionary generation %d: reading id %d: %w", gen, id, err)
		}
		if got := d.ID(e); got != uint32(id) {
			return nil, fmt.Errorf("persisted symbol dictionary generation %d holds %q twice (ids %d and %d); each symbol must have one id",
				gen, e, got, id)
		}
	}
	d.stored, d.queued = d.Len(), d.Len()
	for d.limit < d.maxBytes && d.atLimit(d.limit) {
		d.limit = min(2*d.limit, d.maxBytes)
	}
	if d.full() {
		d.rotate()
	}
	return d, nil
}

// Gen is the current generation.
func (d *genDict) Gen() uint32 { return d.gen }

// full reports whether the current generation must end (ending).
func (d *genDict) full() bool { return d.ending() != dictContinues }

// ending reports the bound the current generation reached: maxEntries ids,
// maxBytes of symbol text or 3 × maxBytes of index, or its working limit
// without recurring symbols (Growth), so the next frame must start a new
// generation; dictContinues if none. At its working limit a generation
// whose symbols recur grows.
func (d *genDict) ending() dictEnd {
	if d.Len() >= d.maxEntries {
		return dictEndEntries
	}
	if d.atLimit(d.maxBytes) {
		return d.limitCause(d.maxBytes)
	}
	for d.atLimit(d.limit) { // ends: atLimit(maxBytes) is false
		if !d.recurs() {
			return d.limitCause(d.limit)
		}
		d.limit = min(2*d.limit, d.maxBytes)
		d.growths++
	}
	return dictContinues
}

// dictEnd is the bound a generation ended at, the cause attribute of the
// dictionary_generations_ended counter.
type dictEnd string

const (
	dictContinues  dictEnd = ""        // the generation did not end
	dictEndEntries dictEnd = "entries" // symbol_dict_max_entries
	dictEndText    dictEnd = "text"    // symbol text at the working limit
	dictEndIndex   dictEnd = "index"   // the index at three times the limit
)

// dictEndCauses lists the causes, for the counter's series at 0.
var dictEndCauses = []dictEnd{dictEndEntries, dictEndText, dictEndIndex}

// limitCause is which half of atLimit(limit) holds: the text, else the
// index.
func (d *genDict) limitCause(limit int) dictEnd {
	if d.TextBytes() >= limit {
		return dictEndText
	}
	return dictEndIndex
}

// atLimit reports whether the current generation holds limit bytes of
// symbol text or 3 × limit of index. Memory lent by the generation before
// it (qwp.MemDict.Recycle) is not the generation's own: counted, a
// generation of short symbols that rotated on its index would start the
// next one at its limit.
func (d *genDict) atLimit(limit int) bool {
	return d.TextBytes() >= limit || d.IndexBytes()-d.SpareBytes() >= 3*int64(limit)
}

// recurs reports whether at least half of the current generation's sampled
// entries were sampled in the remembered generations: half, because a
// working set coming round again shows as most of a generation's new
// entries, while under churn (new series) none recur; a generation mostly
// of one-off series would only hold them longer if it grew.
func (d *genDict) recurs() bool {
	s := d.SampledHashes()
	for ; d.checked < len(s); d.checked++ {
		if _, ok := d.seen[s[d.checked]]; ok {
			d.recurred++
		}
	}
	return d.checked > 0 && 2*d.recurred >= d.checked
}

// Limit is the current generation's working limit (Growth).
func (d *genDict) Limit() int { return d.limit }

// Fill is how near the current generation is to its end at the working
// limit: the largest of its symbol text over the limit, its own index over
// three times the limit and its entries over maxEntries (atLimit, full). At
// 1 the next frame starts a new generation, or the limit doubles when the
// symbols recur; one frame's new symbols can take it past 1.
func (d *genDict) Fill() float64 { return d.fillAt(d.limit) }

// fillAt is Fill against a working limit of limit bytes.
func (d *genDict) fillAt(limit int) float64 {
	text := float64(d.TextBytes()) / float64(limit)
	index := float64(d.IndexBytes()-d.SpareBytes()) / (3 * float64(limit))
	entries := float64(d.Len()) / float64(d.maxEntries)
	return max(text, index, entries)
}

// seenEntryBytes is about what a remembered hash costs in the seen map.
const seenEntryBytes = 16

// IndexBytes is the RAM the dictionary holds: the current generation's
// MemDict (its text, entry records, table and sampled hashes;
// qwp.MemDict.MemBytes) and, about, the remembered hashes.
func (d *genDict) IndexBytes() int64 { return d.MemBytes() + int64(len(d.seen))*seenEntryBytes }

// pending is what the next append must store with its frames: the
// entries of generations rotated away from and the current generation's
// ids from stored on. Valid until the next call of any method.
func (d *genDict) pending() []sfqueue.SymbolRun {
	d.runs = append(d.runs[:0], d.retired...)
	if run, ok := d.unstoredRun(d.entries[:0]); ok {
		d.runs = append(d.runs, run)
		d.entries = run.Entries
	}
	return d.runs
}

// unstoredRun is the current generation's entries from stored on, if any,
// appended to entries. The entries are the MemDict's text, not copies.
func (d *genDict) unstoredRun(entries [][]byte) (sfqueue.SymbolRun, bool) {
	if d.stored == d.Len() {
		return sfqueue.SymbolRun{}, false
	}
	entries = slices.Grow(entries, d.Len()-d.stored)
	for id := d.stored; id < d.Len(); id++ {
		entries = append(entries, d.Entry(id))
	}
	return sfqueue.SymbolRun{Gen: d.gen, FirstID: d.stored, Entries: entries}, true
}

// storedPending records that the entries pending returned are in the queue.
func (d *genDict) storedPending() {
	d.stored = d.Len()
	d.dropRetired()
}

// entriesKeep bounds the entries buffer pending keeps between groups
// (24 bytes an entry): a group with a million new series must not pin 24
// MB for good.
const entriesKeep = 1 << 16

// dropRetired forgets the retired generations' entries: stored, or
// abandoned with the group that failed (no later frame uses them).
func (d *genDict) dropRetired() {
	clear(d.retired)
	d.retired = d.retired[:0]
	clear(d.runs)
	d.runs = d.runs[:0]
	clear(d.entries)
	d.entries = d.entries[:0]
	if cap(d.entries) > entriesKeep {
		d.entries = nil
	}
	if d.recycle != nil {
		d.MemDict.Recycle(d.recycle)
		d.recycle = nil
	}
}

// unqueued is the range of ids assigned but defined by no queued frame.
func (d *genDict) unqueued() (from, to int) { return d.queued, d.Len() }

// markQueued records that frames defining ids below end are in the queue.
func (d *genDict) markQueued(end int) {
	if end > d.queued {
		d.queued = end
	}
}

// rotate starts the next generation with an empty dictionary at the
// starting limit; the current generation's entries not yet stored go with
// the group (pending), its sampled hashes to the remembered ones. When
// those would stand for more than maxBytes of text they are all forgotten
// and only this generation's are kept (a working set larger than that
// cannot stay anyway; one that fits is seen again within a rotation or two).
func (d *genDict) rotate() {
	if run, ok := d.unstoredRun(nil); ok {
		d.retired = append(d.retired, run)
	}
	bytes := d.TextBytes()
	if d.seenBytes+bytes > d.maxBytes {
		d.seen, d.seenBytes = map[uint64]struct{}{}, 0 // a new map: clear would keep its size
	}
	for _, h := range d.SampledHashes() {
		d.seen[h] = struct{}{}
	}
	d.seenBytes += bytes
	d.gen++
	d.recycle = nil
	// Only a generation that ended at its starting limit's text lends its
	// memory: one of short symbols ends on its index, and lent to the next
	// its table and chunks would count in that one's index too (atLimit
	// does not count the spares, but a taken table is larger than the next
	// generation's own would be).
	if d.limit == d.startBytes && bytes >= d.limit {
		d.recycle = d.MemDict
	}
	d.MemDict = d.Successor()
	d.stored, d.queued, d.checked, d.recurred = 0, 0, 0, 0
	d.limit = d.startBytes
}

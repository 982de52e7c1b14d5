package qwp

import "hash/maphash"

// SymbolDict maps SYMBOL strings to the connection-wide ids carried by
// messages with FlagDeltaSymbolDict. Ids are dense and start at 0, so a
// dictionary is fully described by its entries in id order; that is what
// lets a caller persist it and replay it as catch-up after a reconnect.
//
// An Encoder calls ID for every SYMBOL value and reads Len and Entry when it
// writes a message's delta section. A dictionary must be used by at most one
// Encoder at a time, and between the Encoder's Resets only that Encoder may
// add entries: it looks for new ones only after its own lookups, so an entry
// added by anyone else would ride in a later frame than its first use.
type SymbolDict interface {
	// ID returns the id of sym, assigning the next id (equal to Len before
	// the call) when sym is new. It must not retain sym.
	ID(sym []byte) uint32
	// Len is the number of ids assigned.
	Len() int
	// Entry returns the bytes of id, 0 <= id < Len. The caller must not
	// modify them.
	Entry(id int) []byte
}

// MemDict is an in-memory SymbolDict, laid out for dictionaries of millions
// of entries (one new series per point): the text of the entries in large
// byte chunks, a fixed-size record per id in blocks, and an open-addressed table of
// ids. An entry costs its text plus about 27 bytes, and the garbage
// collector sees a handful of pointer-free arrays instead of a map of
// strings (one object and one pointer per entry).
type MemDict struct {
	seed   maphash.Seed
	chunks [][]byte // text; a chunk never grows past its capacity, so Entry slices stay valid
	// blocks hold the entry records by id, dictBlock to a block: a new
	// block, not a copy of all records, when the last one is full.
	blocks [][]dictEntry
	n      int // ids assigned
	text   int // bytes of the entries' text
	// slots holds, by hash with linear probing, the low half of an
	// entry's hash over its id+1 (0 is empty): a probe rejects other
	// entries without reading them, and growing needs no rehash. Its
	// length is a power of two, or 0.
	slots []uint64
	// sampled holds the full hash of each entry whose hash falls in the
	// sampled sixteenth (SampledHashes), in id order.
	sampled []uint64
	// spareChunks and spareBlocks are full-size text chunks and entry
	// blocks of a dictionary recycled into this one (Recycle), used before
	// new ones are allocated.
	spareChunks [][]byte
	spareBlocks [][]dictEntry
	// spareSlots is a recycled table, taken by the next growth it holds
	// (at once, from empty: a dictionary filling as the last one did
	// needs the table it grew to).
	spareSlots []uint64
}

// dictEntry locates one entry's text.
type dictEntry struct {
	chunk, off, len uint32
}

const (
	// dictChunkMin and dictChunkMax bound a text chunk: a small dictionary
	// stays small, a large one wastes at most the tail of each 256 KiB
	// chunk that the next entry did not fit. An entry longer than
	// dictChunkMax gets a chunk of its own.
	dictChunkMin = 256
	dictChunkMax = 256 << 10
	dictMinSlots = 16
	// dictBlock is the entry records of a block: 48 KiB.
	dictBlock = 4096
	// dictSampleShift picks the sampled entries: those whose hash has its
	// top 4 bits clear, one in 16, so a sample costs half a byte per entry.
	dictSampleShift = 60
)

// NewMemDict returns an empty dictionary.
func NewMemDict() *MemDict {
	return &MemDict{seed: maphash.MakeSeed()}
}

// ID implements SymbolDict. Looking up an existing symbol allocates nothing.
func (d *MemDict) ID(sym []byte) uint32 {
	full := maphash.Bytes(d.seed, sym)
	h := uint64(uint32(full))
	if d.n+1 > len(d.slots)/4*3 {
		d.grow()
	}
	tag, mask := h<<32, uint64(len(d.slots)-1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := d.slots[i]
		if s == 0 {
			id := uint32(d.n)
			if d.n%dictBlock == 0 {
				d.newBlock()
			}
			d.blocks[len(d.blocks)-1] = append(d.blocks[len(d.blocks)-1], d.store(sym))
			d.n++
			d.slots[i] = tag | uint64(id+1)
			if full>>dictSampleShift == 0 {
				d.sampled = append(d.sampled, full)
			}
			return id
		}
		if s&^(1<<32-1) == tag {
			if id := uint32(s) - 1; string(d.Entry(int(id))) == string(sym) {
				return id
			}
		}
	}
}

// Successor returns an empty dictionary that hashes as d does, so that the
// SampledHashes of the two compare: the same symbol has the same hash in
// both and is sampled in both or in neither.
func (d *MemDict) Successor() *MemDict {
	return &MemDict{seed: d.seed}
}

// SampledHashes returns the 64-bit hashes of about one entry in 16, those
// whose hash falls in a fixed sixteenth of the range, in id order: an
// unbiased sample by which a caller can estimate, without keeping the
// text, how many entries a dictionary shares with an earlier one of its
// lineage (Successor). Two symbols can share a hash, so the estimate is
// only an estimate. The caller must not modify the result.
func (d *MemDict) SampledHashes() []uint64 { return d.sampled }

// Recycle gives d, in place of new allocations, the full-size text chunks,
// entry blocks and table of old, a dictionary no longer used: under series churn
// every generation would otherwise allocate a generation's worth of text,
// for the garbage collector to free a generation later. The caller must
// not use old again, nor any entry old returned, whose bytes d overwrites;
// old is left empty. Spares d already had are dropped, so d holds at most
// one dictionary's worth of them.
func (d *MemDict) Recycle(old *MemDict) {
	clear(d.spareChunks) // dropped: nothing may keep them reachable
	clear(d.spareBlocks)
	d.spareChunks, d.spareBlocks = d.spareChunks[:0], d.spareBlocks[:0]
	for _, c := range old.chunks {
		if cap(c) == dictChunkMax {
			d.spareChunks = append(d.spareChunks, c[:0])
		}
	}
	for _, b := range old.blocks {
		if cap(b) == dictBlock {
			d.spareBlocks = append(d.spareBlocks, b[:0])
		}
	}
	d.spareSlots = nil
	if len(old.slots) > len(d.slots) {
		d.spareSlots = old.slots
	}
	*old = MemDict{}
}

// newBlock starts the next block of entry records: a spare one, else a new
// one (the first grows as a slice does, so that a small dictionary stays
// small).
func (d *MemDict) newBlock() {
	if k := len(d.spareBlocks); k > 0 {
		d.blocks = append(d.blocks, d.spareBlocks[k-1])
		d.spareBlocks[k-1] = nil
		d.spareBlocks = d.spareBlocks[:k-1]
		return
	}
	d.blocks = append(d.blocks, make([]dictEntry, 0, min(d.n, dictBlock)))
}

// store copies sym into the current chunk, starting a new one (a spare
// one if there is one and sym fits it) when it does not fit.
func (d *MemDict) store(sym []byte) dictEntry {
	n := len(d.chunks)
	if n == 0 || cap(d.chunks[n-1])-len(d.chunks[n-1]) < len(sym) {
		if k := len(d.spareChunks); k > 0 && len(sym) <= dictChunkMax {
			d.chunks = append(d.chunks, d.spareChunks[k-1])
			d.spareChunks[k-1] = nil
			d.spareChunks = d.spareChunks[:k-1]
		} else {
			size := dictChunkMin
			if n > 0 {
				size = min(2*cap(d.chunks[n-1]), dictChunkMax)
			}
			d.chunks = append(d.chunks, make([]byte, 0, max(size, len(sym))))
		}
		n++
	}
	d.text += len(sym)
	c := d.chunks[n-1]
	e := dictEntry{chunk: uint32(n - 1), off: uint32(len(c)), len: uint32(len(sym))}
	d.chunks[n-1] = append(c, sym...)
	return e
}

// grow doubles the table (or makes the first), or takes a recycled one at
// least that large, and re-slots every id by the hash its slot keeps (the low half, all that masks of up to 2^32
// slots use).
func (d *MemDict) grow() {
	old := d.slots
	if size := max(dictMinSlots, 2*len(old)); len(d.spareSlots) >= size {
		d.slots, d.spareSlots = d.spareSlots, nil
		clear(d.slots)
	} else {
		d.slots = make([]uint64, size)
	}
	mask := uint64(len(d.slots) - 1)
	for _, s := range old {
		if s == 0 {
			continue
		}
		i := s >> 32 & mask
		for d.slots[i] != 0 {
			i = (i + 1) & mask
		}
		d.slots[i] = s
	}
}

// MemBytes is the RAM the dictionary holds: its chunks, entry records,
// table and sampled hashes, capacity included, and its spares (Recycle).
func (d *MemDict) MemBytes() int64 {
	return memBytes(d.chunks, d.blocks, len(d.slots)+cap(d.sampled)) + d.SpareBytes()
}

// SpareBytes is the part of MemBytes that Recycle lent and the entries do
// not need: the spares not taken yet, and the part of a taken table beyond
// the one the entries' own growth would have made. A generation's limits
// judge what it needs, not what it was lent.
func (d *MemDict) SpareBytes() int64 {
	own := dictMinSlots
	for d.n > own/4*3 {
		own *= 2
	}
	return memBytes(d.spareChunks, d.spareBlocks, len(d.spareSlots)+max(len(d.slots)-own, 0))
}

// memBytes is the RAM of text chunks, entry blocks and a number of 8-byte
// words (table slots, sampled hashes).
func memBytes(chunks [][]byte, blocks [][]dictEntry, words int) int64 {
	n := int64(cap(chunks)+cap(blocks))*24 + int64(words)*8
	for _, b := range blocks {
		n += int64(cap(b)) * 12
	}
	for _, c := range chunks {
		n += int64(cap(c))
	}
	return n
}

// TextBytes is the length of all entries' text together.
func (d *MemDict) TextBytes() int { return d.text }

// Len implements SymbolDict.
func (d *MemDict) Len() int { return d.n }

// Entry implements SymbolDict. The result aliases the stored text, so it
// costs no copy; SymbolDict's contract already forbids modifying it.
func (d *MemDict) Entry(id int) []byte {
	e := d.blocks[id/dictBlock][id%dictBlock]
	return d.chunks[e.chunk][e.off : e.off+e.len : e.off+e.len]
}

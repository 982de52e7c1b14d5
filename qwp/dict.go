package qwp

import "unsafe"

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

// MemDict is an in-memory SymbolDict: a map from string to id and a slice
// from id to string. Each entry is stored once; the map key and the slice
// element share its bytes.
type MemDict struct {
	ids     map[string]uint32
	entries []string
}

// NewMemDict returns an empty dictionary.
func NewMemDict() *MemDict {
	return &MemDict{ids: make(map[string]uint32)}
}

// ID implements SymbolDict. Looking up an existing symbol allocates nothing.
func (d *MemDict) ID(sym []byte) uint32 {
	if id, ok := d.ids[string(sym)]; ok {
		return id
	}
	s := string(sym)
	id := uint32(len(d.entries))
	d.ids[s] = id
	d.entries = append(d.entries, s)
	return id
}

// Len implements SymbolDict.
func (d *MemDict) Len() int { return len(d.entries) }

// Entry implements SymbolDict. The result aliases the stored string, so it
// costs no copy; SymbolDict's contract already forbids modifying it.
func (d *MemDict) Entry(id int) []byte {
	s := d.entries[id]
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

package sender

import (
	"strings"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// stashEntry is one OK held back until a durable ack covers it.
type stashEntry struct {
	fsn    uint64         // highest FSN the OK covers
	tables []qwp.TableTxn // names in lower case
}

// durableStash implements durable-ack trim: OKs no longer advance ackedFSN,
// they queue up with their per-table seqTxn, and each durable-ack frame
// raises per-table durable watermarks; every head entry whose tables are all
// at or below their watermark pops and releases its FSN. An OK naming no
// table (nothing committed) is durable as soon as everything before it is.
//
// The stash lives and dies with one connection: the server restarts its
// watermarks on a new connection, and the frames are replayed.
type durableStash struct {
	entries []stashEntry
	head    int
	durable map[string]int64 // table (lower case) -> durable seqTxn
	popped  uint64           // highest FSN released since the last take
}

func newDurableStash() *durableStash {
	return &durableStash{durable: make(map[string]int64)}
}

// add stashes an OK. tables is copied.
func (d *durableStash) add(fsn uint64, tables []qwp.TableTxn) {
	e := stashEntry{fsn: fsn}
	if len(tables) > 0 {
		e.tables = make([]qwp.TableTxn, len(tables))
		for i, t := range tables {
			// QuestDB table names are case-insensitive.
			e.tables[i] = qwp.TableTxn{Name: strings.ToLower(t.Name), SeqTxn: t.SeqTxn}
		}
	}
	d.entries = append(d.entries, e)
	// An OK that commits nothing may already be durable.
	d.popCovered()
}

// pending reports whether any OK still waits for a durable ack.
func (d *durableStash) pending() bool { return d.head < len(d.entries) }

// take returns the highest FSN released since the last call (0 if none).
func (d *durableStash) take() uint64 {
	f := d.popped
	d.popped = 0
	return f
}

// durableAck applies one durable-ack frame's watermarks.
func (d *durableStash) durableAck(tables []qwp.TableTxn) {
	for _, t := range tables {
		name := strings.ToLower(t.Name)
		if t.SeqTxn > d.durable[name] {
			d.durable[name] = t.SeqTxn
		}
	}
	d.popCovered()
}

func (d *durableStash) popCovered() {
	for d.head < len(d.entries) && d.covered(d.entries[d.head]) {
		if f := d.entries[d.head].fsn; f > d.popped {
			d.popped = f
		}
		d.entries[d.head] = stashEntry{}
		d.head++
	}
	if d.head == len(d.entries) {
		d.entries, d.head = d.entries[:0], 0
	}
}

func (d *durableStash) covered(e stashEntry) bool {
	for _, t := range e.tables {
		if d.durable[t.Name] < t.SeqTxn {
			return false
		}
	}
	return true
}

package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// genPrefixBytes is the dictionary generation that prefixes every payload
// the exporter stores: a 4-byte little-endian generation, then the QWP
// message (the root package's dict.go).
const genPrefixBytes = 4

// splitPayload returns the generation and the QWP message of a stored payload.
func splitPayload(payload []byte) (gen uint32, msg []byte, err error) {
	if len(payload) < genPrefixBytes+qwp.HeaderSize {
		return 0, nil, fmt.Errorf("stored payload of %d bytes is shorter than the %d-byte generation prefix and the %d-byte QWP header",
			len(payload), genPrefixBytes, qwp.HeaderSize)
	}
	return binary.LittleEndian.Uint32(payload), payload[genPrefixBytes:], nil
}

// checkSlot refuses, with a message an operator can act on, a path that is
// missing, is no directory, is a directory but no slot, or is a slot of a
// segment format newer than this tool reads.
func checkSlot(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s does not exist: give the slot directory, <sf_dir>/<sender_id> or <sf_dir>/<sender_id>.unreplayable-<n>", dir)
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory: a slot is the directory <sf_dir>/<sender_id>", dir)
	}
	ok, err := sfqueue.IsSlotDir(dir)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s is not a slot: it holds no segment (*.sfseg) and none of .lock, .ack-watermark, .symbol-dict* (is it sf_dir itself? give <sf_dir>/<sender_id>)", dir)
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range names {
		if !strings.HasSuffix(e.Name(), ".sfseg") {
			continue
		}
		v, ok, err := sfqueue.SegmentFormat(filepath.Join(dir, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // acknowledged and deleted since the listing
		}
		if err != nil {
			return err
		}
		if ok && v > sfqueue.FormatVersion {
			return fmt.Errorf("%s: segment %s has format version %d, newer than the version %d this questdb-slot reads: use the questdb-slot built with the collector that wrote it",
				dir, e.Name(), v, sfqueue.FormatVersion)
		}
	}
	return nil
}

// slotDict is a slot's symbol dictionary per generation: the valid prefix
// of .symbol-dict, extended with the entries the readable frames define in
// their own delta sections (what recovery rebuilds, seed 000).
type slotDict struct {
	gens    map[uint32][][]byte
	rebuilt map[uint32]int // entries taken from frames, per generation
}

// loadDict builds the dictionary of scan, reading every readable frame.
func loadDict(scan *sfqueue.SlotScan) (*slotDict, error) {
	d := &slotDict{gens: map[uint32][][]byte{}, rebuilt: map[uint32]int{}}
	for _, g := range slices.Sorted(maps.Keys(scan.Dict.Generations)) {
		d.gens[g] = append([][]byte(nil), scan.Dict.Entries(g)...)
	}
	err := scan.EachFrame(func(_ uint64, _ string, _ int64, payload []byte) error {
		gen, msg, err := splitPayload(payload)
		if err != nil {
			return nil // reported per frame where it matters
		}
		first, entries, err := qwp.DeltaDictEntries(msg)
		if err != nil {
			return nil
		}
		have := len(d.gens[gen])
		if first > have || first+len(entries) <= have {
			return nil
		}
		for _, e := range entries[have-first:] {
			d.gens[gen] = append(d.gens[gen], append([]byte(nil), e...))
			d.rebuilt[gen]++
		}
		return nil
	})
	return d, err
}

// decoder returns a strict QWP decoder (qwptest's, which implements the
// ingress specification) holding generation gen's dictionary as a server
// holds it after the exporter's catch-up on a new connection.
func (d *slotDict) decoder(gen uint32) (*qwptest.Decoder, error) {
	dec := &qwptest.Decoder{}
	entries := d.gens[gen]
	err := qwp.CatchUpFrames(entryList(entries), 0, len(entries), 0, func(frame []byte) error {
		_, err := dec.Decode(frame)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dictionary generation %d: %w", gen, err)
	}
	return dec, nil
}

// entryList is a slice of entries as the qwp.SymbolDict catch-up reads.
type entryList [][]byte

func (l entryList) ID([]byte) uint32   { panic("questdb-slot: catch-up only reads entries") }
func (l entryList) Len() int           { return len(l) }
func (l entryList) Entry(i int) []byte { return l[i] }

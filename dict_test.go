package questdbexporter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/sfqueue"
	"github.com/questdbexporter/questdbexporter/sfqueue/sfqueuetest"
)

// memSymbols holds generations as a queue would; store takes what a
// genDict has pending, as a queue's append would.
type memSymbols struct {
	gens   map[uint32][][]byte
	stores int
}

func (m *memSymbols) Symbols(gen uint32) [][]byte { return m.gens[gen] }

// entries streams generation gen, as OpenSymbols would.
func (m *memSymbols) entries(gen uint32) *sliceEntries {
	return &sliceEntries{entries: m.gens[gen]}
}

// sliceEntries is a symbolEntries of entries, then err (io.EOF when nil).
type sliceEntries struct {
	entries [][]byte
	err     error
}

func (s *sliceEntries) Next() ([]byte, error) {
	if len(s.entries) == 0 {
		if s.err != nil {
			return nil, s.err
		}
		return nil, io.EOF
	}
	e := s.entries[0]
	s.entries = s.entries[1:]
	return e, nil
}

// store stores d's pending entries (fail: the append fails and stores
// none), and tells d.
func (m *memSymbols) store(t *testing.T, d *genDict, fail bool) {
	t.Helper()
	runs := d.pending()
	if fail {
		d.dropRetired()
		return
	}
	for _, r := range runs {
		if r.FirstID != len(m.gens[r.Gen]) {
			t.Fatalf("generation %d: entries from id %d, %d stored", r.Gen, r.FirstID, len(m.gens[r.Gen]))
		}
		for _, e := range r.Entries {
			m.gens[r.Gen] = append(m.gens[r.Gen], slices.Clone(e))
		}
	}
	m.stores++
	d.storedPending()
}

func TestGenDictIDsStoreAndRotate(t *testing.T) {
	store := &memSymbols{gens: map[uint32][][]byte{}}
	d, err := openGenDict(store.entries(0), 3, 1<<30, 1<<30, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := []byte("a")
	if id := d.ID(buf); id != 0 {
		t.Fatalf("first id %d", id)
	}
	buf[0] = 'b' // ID must not retain its argument
	if id := d.ID(buf); id != 1 {
		t.Fatalf("second id %d", id)
	}
	if id := d.ID([]byte("a")); id != 0 || d.Len() != 2 || string(d.Entry(0)) != "a" {
		t.Fatalf("lookup of a: id %d, len %d, entry %q", id, d.Len(), d.Entry(0))
	}
	if from, to := d.unqueued(); from != 0 || to != 2 {
		t.Fatalf("unqueued [%d, %d), want [0, 2)", from, to)
	}
	store.store(t, d, false)
	if runs := d.pending(); len(runs) != 0 {
		t.Fatalf("pending after everything was stored: %v", runs)
	}
	d.markQueued(2)
	d.ID([]byte("c"))
	if !d.full() {
		t.Fatal("3 entries with a limit of 3 is not full")
	}
	d.rotate()
	if d.Gen() != 1 || d.Len() != 0 || d.full() {
		t.Fatalf("after rotate: gen %d len %d", d.Gen(), d.Len())
	}
	if id := d.ID([]byte("a")); id != 0 {
		t.Fatalf("a in generation 1 got id %d, want 0 (a new dictionary)", id)
	}
	// One append stores the rotated generation's last entry and the new
	// generation's first.
	runs := d.pending()
	if len(runs) != 2 || runs[0].Gen != 0 || runs[0].FirstID != 2 || string(runs[0].Entries[0]) != "c" ||
		runs[1].Gen != 1 || runs[1].FirstID != 0 || string(runs[1].Entries[0]) != "a" {
		t.Fatalf("pending after a rotation: %+v", runs)
	}
	store.store(t, d, false)
	if got := store.Symbols(0); len(got) != 3 || string(got[2]) != "c" {
		t.Fatalf("generation 0 stored %q, want a b c", got)
	}
	if got := store.Symbols(1); len(got) != 1 {
		t.Fatalf("generation 1 stored %q, want a", got)
	}
}

// An append that fails stores nothing: the current generation's entries
// stay pending for the next one; a rotated generation's are abandoned
// with the frames that needed them.
func TestGenDictFailedAppendKeepsEntriesPending(t *testing.T) {
	store := &memSymbols{gens: map[uint32][][]byte{}}
	d, err := openGenDict(store.entries(4), 2, 1<<30, 1<<30, 4)
	if err != nil {
		t.Fatal(err)
	}
	d.ID([]byte("x"))
	store.store(t, d, true)
	if runs := d.pending(); len(runs) != 1 || runs[0].Gen != 4 || runs[0].FirstID != 0 || len(runs[0].Entries) != 1 {
		t.Fatalf("pending after a failed append: %+v, want x again", runs)
	}
	d.ID([]byte("y"))
	d.full()
	d.rotate()
	d.ID([]byte("z"))
	store.store(t, d, true)
	runs := d.pending()
	if len(runs) != 1 || runs[0].Gen != 5 || len(runs[0].Entries) != 1 || string(runs[0].Entries[0]) != "z" {
		t.Fatalf("pending after a failed append across a rotation: %+v, want z of generation 5 only", runs)
	}
	store.store(t, d, false)
	if len(store.Symbols(4)) != 0 || len(store.Symbols(5)) != 1 {
		t.Fatalf("stored %q and %q", store.Symbols(4), store.Symbols(5))
	}
}

func TestOpenGenDict(t *testing.T) {
	tests := []struct {
		name    string
		stored  map[uint32][][]byte
		gen     uint32
		max     int
		wantLen int
		wantGen uint32 // 0: gen
		wantErr bool
	}{
		{name: "empty", stored: map[uint32][][]byte{}, max: 5},
		{name: "loads its generation only", stored: map[uint32][][]byte{1: {[]byte("a")}, 2: {[]byte("b"), []byte("c")}}, gen: 2, max: 5, wantLen: 2},
		{name: "a full generation continues as the next", stored: map[uint32][][]byte{2: {[]byte("a"), []byte("b")}}, gen: 2, max: 2, wantGen: 3},
		{name: "duplicate entry", stored: map[uint32][][]byte{0: {[]byte("a"), []byte("a")}}, max: 5, wantErr: true},
		{name: "zero limit", stored: map[uint32][][]byte{}, max: 0, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := openGenDict((&memSymbols{gens: tt.stored}).entries(tt.gen), tt.max, 1<<30, 1<<30, tt.gen)
			if tt.wantErr {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantGen := tt.gen
			if tt.wantGen != 0 {
				wantGen = tt.wantGen
			}
			if d.Len() != tt.wantLen || d.Gen() != wantGen {
				t.Fatalf("len %d gen %d, want %d and %d", d.Len(), d.Gen(), tt.wantLen, wantGen)
			}
			if from, to := d.unqueued(); from != to {
				t.Fatalf("loaded entries count as unqueued [%d, %d): the I/O loop re-sends them", from, to)
			}
			for id := range d.Len() {
				if got := d.ID(d.Entry(id)); int(got) != id {
					t.Fatalf("loaded entry %d maps to id %d", id, got)
				}
			}
		})
	}
}

func TestPayloadSymbolUse(t *testing.T) {
	dict := qwp.NewMemDict()
	enc := qwp.NewEncoder(dict, qwp.EncoderOptions{DeltaSymbolDict: true})
	tb, _ := enc.Table("t")
	c, _ := tb.Column("s", qwp.TypeSymbol)
	for _, s := range []string{"a", "b", "a"} {
		tb.SymbolString(c, s)
		if err := tb.EndRow(); err != nil {
			t.Fatal(err)
		}
	}
	msg := enc.Finish(nil)
	tests := []struct {
		name    string
		payload []byte
		gen     uint32
		maxID   int64
	}{
		{"two symbols", append(appendGenPrefix(nil, 7), msg...), 7, 1},
		{"short payload", []byte{1, 2}, 0, -1},
		{"not a message", append(appendGenPrefix(nil, 3), 1, 2, 3), 3, -1},
	}
	for _, tt := range tests {
		gen, maxID := payloadSymbolUse(tt.payload)
		if gen != tt.gen || maxID != tt.maxID {
			t.Errorf("%s: (%d, %d), want (%d, %d)", tt.name, gen, maxID, tt.gen, tt.maxID)
		}
	}
}

func TestPayloadSymbolDefs(t *testing.T) {
	dict := qwp.NewMemDict()
	dict.ID([]byte("old"))
	enc := qwp.NewEncoder(dict, qwp.EncoderOptions{DeltaSymbolDict: true})
	tb, _ := enc.Table("t")
	c, _ := tb.Column("s", qwp.TypeSymbol)
	for _, s := range []string{"old", "a", "b"} {
		tb.SymbolString(c, s)
		if err := tb.EndRow(); err != nil {
			t.Fatal(err)
		}
	}
	gen, first, entries := payloadSymbolDefs(append(appendGenPrefix(nil, 4), enc.Finish(nil)...))
	if gen != 4 || first != 1 || len(entries) != 2 || string(entries[0]) != "a" || string(entries[1]) != "b" {
		t.Fatalf("payloadSymbolDefs = %d, %d, %q; want 4, 1, [a b]", gen, first, entries)
	}
	if _, _, entries := payloadSymbolDefs([]byte{1}); entries != nil {
		t.Fatalf("short payload defines %q", entries)
	}
	if _, _, entries := payloadSymbolDefs(append(appendGenPrefix(nil, 3), 1, 2, 3)); entries != nil {
		t.Fatalf("a payload that is no QWP message defines %q", entries)
	}
}

func TestGenDictThroughSFQueue(t *testing.T) {
	dir := t.TempDir()
	open := func() *sfqueue.Queue {
		q, err := sfqueue.Open(sfqueue.Options{Dir: dir, SenderID: "d", SymbolUse: payloadSymbolUse})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	q := open()
	d, err := loadGenDict(q, 2, 1<<30, 1<<30, 0)
	if err != nil {
		t.Fatal(err)
	}
	d.ID([]byte("a"))
	d.ID([]byte("b"))
	d.rotate()
	d.ID([]byte("c"))
	if _, err := q.AppendWith(context.Background(), sfqueue.Batch{Payloads: [][]byte{appendGenPrefix(nil, 1)}, Symbols: d.pending()}); err != nil {
		t.Fatal(err)
	}
	d.storedPending()
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	q = open()
	defer q.Close()
	d, err = loadGenDict(q, 2, 1<<30, 1<<30, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Len() != 1 || string(d.Entry(0)) != "c" {
		t.Fatalf("reopened generation 1: %d entries", d.Len())
	}
	if id := d.ID([]byte("d")); id != 1 {
		t.Fatalf("next id after reopen %d, want 1", id)
	}
}

// A persisted generation that names one symbol twice cannot be trusted: the
// frames on disk may use either id.
func TestGenDictRefusesAPersistedDuplicate(t *testing.T) {
	store := &memSymbols{gens: map[uint32][][]byte{2: {[]byte("a"), []byte("b"), []byte("a")}}}
	_, err := openGenDict(store.entries(2), 10, 1<<30, 1<<30, 2)
	if err == nil || !strings.Contains(err.Error(), `"a" twice (ids 0 and 2)`) || !strings.Contains(err.Error(), "generation 2") {
		t.Fatalf("openGenDict = %v, want an error naming the symbol, both ids and the generation", err)
	}
	store.gens[2] = store.gens[2][:2]
	d, err := openGenDict(store.entries(2), 10, 1<<30, 1<<30, 2)
	if err != nil {
		t.Fatal(err)
	}
	if d.Len() != 2 || d.ID([]byte("b")) != 1 || d.Gen() != 2 {
		t.Fatalf("loaded generation: len %d, id(b) %d, gen %d", d.Len(), d.ID([]byte("b")), d.Gen())
	}
}

func TestGenDictRotatesAtMaxBytes(t *testing.T) {
	store := &memSymbols{gens: map[uint32][][]byte{}}
	d, err := openGenDict(store.entries(0), 1000, 1000, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	d.ID(slices.Repeat([]byte("a"), 400))
	d.ID(slices.Repeat([]byte("b"), 400))
	if d.full() || d.TextBytes() != 800 {
		t.Fatalf("800 bytes of a 1000-byte generation: full %v, bytes %d", d.full(), d.TextBytes())
	}
	d.ID(slices.Repeat([]byte("c"), 200))
	if !d.full() {
		t.Fatal("a generation holding 1000 bytes of a 1000-byte bound is not full")
	}
	d.rotate()
	if d.Gen() != 1 || d.full() || d.TextBytes() != 0 {
		t.Fatalf("after rotation: generation %d, full %v, bytes %d", d.Gen(), d.full(), d.TextBytes())
	}
	if _, err := openGenDict(store.entries(0), 1000, 0, 0, 0); err == nil {
		t.Fatal("a zero byte bound was accepted")
	}
}

// MemBytes, which the memory-only cap counts as the dictionary's index,
// must not under-state what a qwp.MemDict holds, nor over-state it much
// (that would evict frames for nothing).
func TestMemDictMemBytes(t *testing.T) {
	for _, size := range []int{8, 20, 33, 108, 300, 780, 5000} {
		for _, n := range []int{20000, 150000} {
			if n*size > 100<<20 || testing.Short() && n > 20000 {
				continue
			}
			// HeapAlloc is the process's: goroutines other tests left
			// winding down can free memory during a measurement (the heap
			// then "shrinks"), so a size is measured up to three times and
			// fails only when no measurement agrees with MemBytes.
			var est, held int64
			for range 3 {
				if est, held = measureMemDict(t, n, size); est >= held-64<<10 && est <= held+held/8+64<<10 {
					break
				}
			}
			if est < held-64<<10 || est > held+held/8+64<<10 {
				t.Errorf("%d entries of %d bytes: MemBytes %d, the heap grew %d", n, size, est, held)
			}
		}
	}
}

// measureMemDict fills a qwp.MemDict with n entries of size bytes and returns
// its MemBytes and how much the heap grew.
func measureMemDict(t *testing.T, n, size int) (est, held int64) {
	var before, after runtime.MemStats
	// Twice: the first collection moves sync.Pool contents (left by earlier
	// tests) to the victim cache, the second
	// frees them, so they cannot leave the heap between the two readings.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	d := qwp.NewMemDict()
	buf := make([]byte, size)
	for i := range n {
		copy(buf, fmt.Sprintf("%08d", i))
		d.ID(buf)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if d.Len() != n {
		t.Fatalf("%d distinct entries, want %d", d.Len(), n)
	}
	est = d.MemBytes()
	runtime.KeepAlive(d)
	return est, int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// Many tiny symbols end a generation at an index of three times the byte
// bound, before the text bound.
func TestGenDictRotatesAtIndexBytes(t *testing.T) {
	d, err := openGenDict(&sliceEntries{}, 1_000_000, 1000, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; !d.full(); i++ {
		d.ID([]byte(fmt.Sprint(i)))
	}
	if d.TextBytes() >= 1000 || d.IndexBytes() < 3000 {
		t.Fatalf("full at %d bytes of text and an index of %d bytes", d.TextBytes(), d.IndexBytes())
	}
}

// TestGenDictLoadFailsOnAnUnreadableEntry: an entry that cannot be read
// fails the load with an error naming the generation and the cause, never
// a dictionary of the entries before it (whose next id the file already
// holds). Through a real queue: an I/O error and a record damaged after
// recovery read the file.
func TestGenDictLoadFailsOnAnUnreadableEntry(t *testing.T) {
	d, err := openGenDict(&sliceEntries{entries: [][]byte{[]byte("a"), []byte("b")}, err: syscall.EIO}, 10, 1<<30, 1<<30, 3)
	if d != nil || !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "generation 3: reading id 2") {
		t.Fatalf("openGenDict = %v, %v; want no dictionary and EIO at id 2 of generation 3", d, err)
	}

	dir := t.TempDir()
	ffs := sfqueuetest.NewFaultFS()
	q, err := sfqueue.Open(sfqueue.Options{Dir: dir, SenderID: "d", SymbolUse: payloadSymbolUse, FS: ffs})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.AddSymbols(0, 0, [][]byte{[]byte("alpha"), []byte("beta"), []byte("gamma")}); err != nil {
		t.Fatal(err)
	}
	if d, err := loadGenDict(q, 10, 1<<30, 1<<30, 0); err != nil || d.Len() != 3 {
		t.Fatalf("intact generation: %v", err)
	}

	ffs.Inject(sfqueuetest.Fault{Op: sfqueuetest.Read, Pattern: ".symbol-dict.*", Err: syscall.EIO})
	d, err = loadGenDict(q, 10, 1<<30, 1<<30, 0)
	if d != nil || !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "symbol dictionary generation 0") {
		t.Fatalf("read error: %v, %v; want no dictionary and an error naming generation 0 and EIO", d, err)
	}
	ffs.Clear()

	path := filepath.Join(dir, "d", ".symbol-dict.0000000000")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	second := 12 + len("alpha") + 4 // the second record: header, entry, CRC
	b[second+12] ^= 0xff            // a bit of "beta"
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	d, err = loadGenDict(q, 10, 1<<30, 1<<30, 0)
	if d != nil || err == nil {
		t.Fatalf("damaged record: %v, %v; want an error", d, err)
	}
	for _, w := range []string{"generation 0", path, fmt.Sprintf("offset %d", second), "CRC32C"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("damaged record: error %q lacks %q", err, w)
		}
	}
}

// TestGenDictPendingReusesItsEntries: the current generation's pending run
// is built in a buffer kept between groups, so a group's store allocates no
// slice of its new entries (under churn one 24-byte element a point); the
// run still holds exactly the ids from stored on.
func TestGenDictPendingReusesItsEntries(t *testing.T) {
	d, err := openGenDict(&sliceEntries{}, 1_000_000, 1<<30, 1<<30, 0)
	if err != nil {
		t.Fatal(err)
	}
	next := 0
	add := func(n int) {
		for range n {
			d.ID(fmt.Appendf(nil, "series-%d", next))
			next++
		}
	}
	add(5000) // past the first block of entry records, which grows as a slice
	d.pending()
	d.storedPending()
	var sym []byte
	allocs := testing.AllocsPerRun(100, func() {
		sym = strconv.AppendInt(append(sym[:0], "series-"...), int64(next), 10)
		d.ID(sym)
		next++
		if runs := d.pending(); len(runs) != 1 || runs[0].FirstID != next-1 || len(runs[0].Entries) != 1 {
			t.Fatalf("pending: %d runs, want one of id %d", len(runs), next-1)
		}
		d.storedPending()
	})
	if allocs > 0.1 {
		t.Fatalf("a group of one new entry allocates %.2f times, want none", allocs)
	}
	add(3)
	runs := d.pending()
	if len(runs) != 1 || runs[0].FirstID != next-3 || len(runs[0].Entries) != 3 || string(runs[0].Entries[2]) != fmt.Sprint("series-", next-1) {
		t.Fatalf("pending after three new entries: %+v", runs)
	}
}

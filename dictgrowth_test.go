package questdbexporter

import (
	"bytes"
	"fmt"
	"testing"
)

// growthSymbol is series i's symbol: about 100 bytes, like a point's
// attribute JSON.
func growthSymbol(i int) []byte {
	return fmt.Appendf(nil, `{"cpu":"cpu%07d","state":"user","host.arch":"amd64","cloud.region":"eu-west-1","zone":"eu-west-1a"}`, i)
}

// growthRun feeds d symbols as the writer does, 100 to a frame: after each
// frame it stores the pending entries and rotates a full generation. It
// reports the rotations, the symbol text stored and the most index RAM
// seen.
type growthRun struct {
	d         *genDict
	store     *memSymbols
	rotations int
	stored    int
	maxIndex  int64
}

func newGrowthRun(t *testing.T, maxEntries, maxBytes, startBytes int) *growthRun {
	t.Helper()
	store := &memSymbols{gens: map[uint32][][]byte{}}
	d, err := openGenDict(store.entries(0), maxEntries, maxBytes, startBytes, 0)
	if err != nil {
		t.Fatal(err)
	}
	return &growthRun{d: d, store: store}
}

func (r *growthRun) feed(t *testing.T, series func(int) int, n int) {
	t.Helper()
	for i := range n {
		r.d.ID(growthSymbol(series(i)))
		if (i+1)%100 != 0 {
			continue
		}
		for _, run := range r.d.pending() {
			for _, e := range run.Entries {
				r.stored += len(e)
			}
		}
		r.store.store(t, r.d, false)
		r.maxIndex = max(r.maxIndex, r.d.IndexBytes())
		if r.d.TextBytes() > r.d.maxBytes+100*len(growthSymbol(0)) {
			t.Fatalf("generation %d holds %d bytes of text, over the cap %d by more than a frame", r.d.Gen(), r.d.TextBytes(), r.d.maxBytes)
		}
		if r.d.full() {
			r.d.rotate()
			r.rotations++
		}
	}
}

// TestGenDictGrowsForARecurringWorkingSet: a working set larger than the
// starting limit but under the cap, read in the same order every interval,
// stops rotating (after at most two rotations under twice the starting
// limit, a few more above it) and then stores each symbol once. With
// generations fixed at the starting limit it rotated every interval and
// stored the whole set again each time.
func TestGenDictGrowsForARecurringWorkingSet(t *testing.T) {
	const start, maxBytes = 256 << 10, 4 << 20
	size := len(growthSymbol(0))
	for _, tt := range []struct {
		name         string
		series       int
		maxRotations int
	}{
		{"1.9x the start", 19 * start / 10 / size, 2},
		{"3.5x the start", 35 * start / 10 / size, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newGrowthRun(t, 1_000_000, maxBytes, start)
			const rounds = 5
			r.feed(t, func(i int) int { return i % tt.series }, rounds*tt.series)
			if r.rotations > tt.maxRotations {
				t.Fatalf("%d rotations over %d rounds of %d recurring series, want at most %d", r.rotations, rounds, tt.series, tt.maxRotations)
			}
			if r.d.Len() != tt.series || r.d.Limit() <= start {
				t.Fatalf("the last generation holds %d of the %d series at a limit of %d; want all of them, grown past %d", r.d.Len(), tt.series, r.d.Limit(), start)
			}
			// Every symbol is stored at most once per generation, and
			// the rounds after the growth store nothing.
			before, rotations := r.stored, r.rotations
			r.feed(t, func(i int) int { return i % tt.series }, 3*tt.series)
			if r.stored != before || r.rotations != rotations {
				t.Fatalf("three more rounds stored %d bytes and rotated %d times; want none", r.stored-before, r.rotations-rotations)
			}
			if limit := (rotations + 1) * tt.series * size; r.stored > limit {
				t.Fatalf("stored %d bytes of symbol text for %d series, more than once per generation (%d)", r.stored, tt.series, limit)
			}
		})
	}
}

// TestGenDictChurnKeepsTheStartingLimit: under series churn (every symbol
// new) no generation grows: each ends at the starting limit, and the
// dictionary's RAM stays about the starting limit's index.
func TestGenDictChurnKeepsTheStartingLimit(t *testing.T) {
	const start, maxBytes = 256 << 10, 4 << 20
	r := newGrowthRun(t, 1_000_000, maxBytes, start)
	n := 4 * maxBytes / len(growthSymbol(0))
	r.feed(t, func(i int) int { return i }, n)
	if want := n * len(growthSymbol(0)) / start; r.rotations < want-1 {
		t.Fatalf("%d rotations for %d new series, want about %d (generations at the starting limit)", r.rotations, n, want)
	}
	if r.d.Limit() != start {
		t.Fatalf("churn grew the limit to %d, want %d", r.d.Limit(), start)
	}
	// The index bound at the starting limit, one frame of new entries and
	// the remembered hashes at most.
	if bound := int64(3*start + 100*(len(growthSymbol(0))+64)); r.maxIndex > bound {
		t.Fatalf("dictionary RAM reached %d bytes under churn, over %d", r.maxIndex, bound)
	}
}

// TestGenDictGrowthStopsAtTheCap: a recurring working set larger than the
// cap grows generations to the cap and no further; the entry bound still
// ends a growing generation.
func TestGenDictGrowthStopsAtTheCap(t *testing.T) {
	const start, maxBytes = 128 << 10, 512 << 10
	series := 3 * maxBytes / 2 / len(growthSymbol(0))
	r := newGrowthRun(t, 1_000_000, maxBytes, start)
	r.feed(t, func(i int) int { return i % series }, 6*series) // feed fails past the cap
	if r.d.Limit() > maxBytes || r.rotations < 4 {
		t.Fatalf("limit %d (cap %d), %d rotations; want rotations at the cap", r.d.Limit(), maxBytes, r.rotations)
	}
	if r.maxIndex > 3*maxBytes+100*(int64(len(growthSymbol(0)))+64) {
		t.Fatalf("index RAM %d over three times the cap", r.maxIndex)
	}

	r = newGrowthRun(t, 1500, maxBytes, start)
	r.feed(t, func(i int) int { return i % 2000 }, 10*2000)
	if r.d.Len() > 1500 || r.rotations < 10 {
		t.Fatalf("%d entries and %d rotations with symbol_dict_max_entries 1500; want rotations at 1500 entries", r.d.Len(), r.rotations)
	}
}

// TestGenDictRestartContinuesAGrownGeneration: a generation that had grown
// past the starting limit loads as it was and continues, at a limit that
// holds it, and its working set stores nothing more.
func TestGenDictRestartContinuesAGrownGeneration(t *testing.T) {
	const start, maxBytes = 256 << 10, 4 << 20
	series := 3 * start / len(growthSymbol(0))
	r := newGrowthRun(t, 1_000_000, maxBytes, start)
	r.feed(t, func(i int) int { return i % series }, 5*series)
	gen := r.d.Gen()
	if r.d.Len() != series || r.d.TextBytes() < start {
		t.Fatalf("setup: generation %d holds %d entries, %d bytes; want %d series past %d bytes", gen, r.d.Len(), r.d.TextBytes(), series, start)
	}

	d, err := openGenDict(r.store.entries(gen), 1_000_000, maxBytes, start, gen)
	if err != nil {
		t.Fatal(err)
	}
	if d.Gen() != gen || d.Len() != series || d.Limit() <= d.TextBytes() {
		t.Fatalf("reloaded generation %d with %d entries at limit %d (%d bytes); want generation %d continued with %d entries under its limit",
			d.Gen(), d.Len(), d.Limit(), d.TextBytes(), gen, series)
	}
	r2 := &growthRun{d: d, store: r.store}
	r2.feed(t, func(i int) int { return i % series }, 3*series)
	if r2.rotations != 0 || r2.stored != 0 {
		t.Fatalf("after the restart the working set rotated %d times and stored %d bytes; want neither", r2.rotations, r2.stored)
	}

	// A generation at the cap still rotates at load.
	d, err = openGenDict(r.store.entries(gen), 1_000_000, r.d.TextBytes(), start, gen)
	if err != nil {
		t.Fatal(err)
	}
	if d.Gen() != gen+1 || d.Len() != 0 {
		t.Fatalf("a generation at its cap loaded as generation %d with %d entries; want %d, empty", d.Gen(), d.Len(), gen+1)
	}
}

// TestGenDictRecyclesAChurnedGeneration: under churn a generation rotated
// away from at the starting limit lends its memory to the next one once
// its entries are stored (the next generation holds it as spare before it
// holds that much text), and every entry stored across the recycled
// generations is still its own symbol; a generation that had grown is not
// recycled.
func TestGenDictRecyclesAChurnedGeneration(t *testing.T) {
	const start = 1 << 20
	r := newGrowthRun(t, 1_000_000, 4<<20, start)
	next := 0
	frame := func() {
		for range 100 {
			r.d.ID(growthSymbol(next))
			next++
		}
		r.store.store(t, r.d, false)
	}
	for r.d.Gen() < 3 {
		frame()
		if r.d.full() {
			r.d.rotate()
			frame() // stores the rotated generation's tail: its memory is free
			if spare := r.d.MemBytes() - int64(r.d.TextBytes()); spare < 3*256<<10 {
				t.Fatalf("generation %d after one frame holds %d bytes beside its %d of text, want the last one's chunks", r.d.Gen(), spare, r.d.TextBytes())
			}
		}
	}
	i := 0
	for gen := range r.d.Gen() + 1 {
		for _, e := range r.store.gens[gen] {
			if want := growthSymbol(i); !bytes.Equal(e, want) {
				t.Fatalf("generation %d stored %q for series %d", gen, e, i)
			}
			i++
		}
	}
	if i != next-r.d.Len()+int(r.d.stored) || i < 3*start/len(growthSymbol(0)) {
		t.Fatalf("%d entries stored of %d assigned", i, next)
	}

	// A generation grown past the starting limit is left to the GC.
	g := newGrowthRun(t, 1_000_000, 4*start, start)
	series := 3 * start / 2 / len(growthSymbol(0))
	g.feed(t, func(i int) int { return i % series }, 3*series)
	if g.d.Limit() == start {
		t.Fatalf("setup: the limit did not grow for a recurring working set")
	}
	g.d.rotate()
	g.store.store(t, g.d, false)
	if held := g.d.MemBytes(); held > 64<<10 {
		t.Fatalf("after a grown generation rotated the next one holds %d bytes", held)
	}
}

// TestRecycledMemoryIsNotTheGenerationsOwn: under churn of short symbols a
// generation reaches its index limit before its text limit; the memory it
// lends the next generation (qwp.MemDict.Recycle) must not count against
// the next one's limit, or that one is full after a frame and the one
// after it holds a fraction of a generation.
func TestRecycledMemoryIsNotTheGenerationsOwn(t *testing.T) {
	const start = 1 << 20
	r := newGrowthRun(t, 1_000_000, 4*start, start)
	var sizes []int
	next := 0
	for len(sizes) < 6 {
		for range 1000 {
			r.d.ID(fmt.Appendf(nil, "%08x", next))
			next++
		}
		r.store.store(t, r.d, false)
		if r.d.full() {
			if r.d.TextBytes() >= start {
				t.Fatalf("setup: generation %d rotates on its text (%d bytes), not its index", r.d.Gen(), r.d.TextBytes())
			}
			sizes = append(sizes, r.d.Len())
			r.d.rotate()
		}
	}
	for i, n := range sizes {
		if n < sizes[0]/2 {
			t.Fatalf("generation sizes %v: generation %d holds %d entries, under half of the first's", sizes, i, n)
		}
	}
}

// feedRecurring feeds a working set of three times start bytes of symbols
// six times over, calling frame after every 100 symbols, stored: the
// generations grow and end.
func (r *growthRun) feedRecurring(t *testing.T, start int, frame func()) {
	series := 3 * start / len(growthSymbol(0))
	for i := range 6 * series {
		r.d.ID(growthSymbol(i % series))
		if (i+1)%100 == 0 {
			r.store.store(t, r.d, false)
			frame()
		}
	}
}

// TestGenDictFillReachesOneWhereTheGenerationEndsOrGrows: Fill (of which
// the dictionary_fill_ratio gauge shows the peak) is below 1 while the generation has room
// under its working limit, at least 1 at every rotation and growth, below 1
// again right after a growth and about 0 after a rotation; under a recurring
// working set Limit (dictionary_limit_bytes) shows the growth. The entry
// bound and the index bound count too.
func TestGenDictFillReachesOneWhereTheGenerationEndsOrGrows(t *testing.T) {
	const start, maxBytes = 128 << 10, 1 << 20
	r := newGrowthRun(t, 1_000_000, maxBytes, start)
	var rotations, growths int
	r.feedRecurring(t, start, func() {
		fill, limit := r.d.Fill(), r.d.Limit()
		if want := float64(r.d.TextBytes()) / float64(limit); fill < want {
			t.Fatalf("fill %v below the text's share of the limit %v", fill, want)
		}
		switch {
		case r.d.full():
			rotations++
			if fill < 1 {
				t.Fatalf("generation %d ended at fill %v", r.d.Gen(), fill)
			}
			r.d.rotate()
			// Empty but for the remembered hashes, which count in the index.
			if r.d.Len() != 0 || r.d.Fill() > 0.1 || r.d.Limit() != start {
				t.Fatalf("a new generation of %d entries at fill %v, limit %d; want empty, about 0, at %d", r.d.Len(), r.d.Fill(), r.d.Limit(), start)
			}
		case r.d.Limit() > limit:
			growths++
			if fill < 1 || r.d.Fill() >= 1 {
				t.Fatalf("the limit grew %d -> %d at fill %v, leaving %v; want from 1 to below 1", limit, r.d.Limit(), fill, r.d.Fill())
			}
		case fill >= 1:
			t.Fatalf("fill %v at limit %d, and the generation neither ended nor grew", fill, limit)
		}
	})
	if rotations == 0 || growths == 0 || r.d.Limit() <= start {
		t.Fatalf("%d rotations, %d growths, limit %d; want both, and the limit grown past %d", rotations, growths, r.d.Limit(), start)
	}

	d, err := openGenDict(&sliceEntries{}, 8, maxBytes, start, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		d.ID(growthSymbol(i))
	}
	if d.Fill() != 0.5 {
		t.Errorf("4 of symbol_dict_max_entries 8: fill %v, want 0.5", d.Fill())
	}

	// Short symbols end a generation on its index, before its text.
	d, err = openGenDict(&sliceEntries{}, 1_000_000, 4<<10, 4<<10, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; !d.full(); i++ {
		d.ID(fmt.Appendf(nil, "%d", i))
	}
	if d.TextBytes() >= d.Limit() || d.Fill() < 1 {
		t.Errorf("short symbols: %d bytes of text under the limit %d, fill %v; want the index to fill it", d.TextBytes(), d.Limit(), d.Fill())
	}
}

// dictObserver records the writer's dictBoundReached calls.
type dictObserver struct {
	countingObserver
	calls   int
	fill    float64 // the last call's
	limit   int     // the last call's
	growths int     // total
	ends    map[dictEnd]int
	lastEnd dictEnd
	maxFill float64 // the largest fill reported
}

func (o *dictObserver) dictBoundReached(fill float64, limit, growths int, end dictEnd) {
	o.calls++
	o.fill, o.limit, o.lastEnd = fill, limit, end
	o.growths += growths
	o.maxFill = max(o.maxFill, fill)
	if end != dictContinues {
		o.ends[end]++
	}
}

// TestWriterReportsWhereGenerationsEndAndGrow: the writer reports the fill
// at which a generation ended or its limit grew (1 or more, which the
// current generation's, read after the writer acted, never is), the limit
// it ended at, each doubling and each end by its bound: text for long
// symbols, index for short ones, entries at symbol_dict_max_entries; after
// a frame that reached no bound it reports nothing.
func TestWriterReportsWhereGenerationsEndAndGrow(t *testing.T) {
	const start, maxBytes = 128 << 10, 1 << 20
	r := newGrowthRun(t, 1_000_000, maxBytes, start)
	obs := &dictObserver{ends: map[dictEnd]int{}}
	w := &writer{dict: r.d, enc: newTinyEncoder(t, r.d, 16<<10), obs: obs}
	var rotations, growths int
	r.feedRecurring(t, start, func() {
		gen, limit, fill, calls := r.d.Gen(), r.d.Limit(), r.d.Fill(), obs.calls
		w.rotateIfFull()
		if obs.calls != calls && (obs.calls != calls+1 || obs.fill != fill) {
			t.Fatalf("%d reports, the last at fill %v; want one, at the generation's fill before the check %v", obs.calls-calls, obs.fill, fill)
		}
		switch {
		case r.d.Gen() != gen:
			rotations++
			if obs.calls != calls+1 || obs.lastEnd != dictEndText || obs.fill < 1 || obs.limit < limit || r.d.Limit() != start {
				t.Fatalf("generation %d ended: reported %q at fill %v, limit %d (had %d); want text, 1 or more, its limit", gen, obs.lastEnd, obs.fill, obs.limit, limit)
			}
		case r.d.Limit() > limit:
			growths++
			if obs.calls != calls+1 || obs.lastEnd != dictContinues || obs.fill < 1 || obs.limit != r.d.Limit() {
				t.Fatalf("the limit grew %d -> %d: reported %q at fill %v, limit %d", limit, r.d.Limit(), obs.lastEnd, obs.fill, obs.limit)
			}
		case obs.calls != calls:
			t.Fatalf("no bound reached at fill %v, yet reported %q at fill %v", fill, obs.lastEnd, obs.fill)
		}
	})
	if rotations == 0 || growths == 0 || obs.ends[dictEndText] != rotations || len(obs.ends) != 1 || obs.growths < growths {
		t.Fatalf("%d rotations, %d growths; reported ends %v, %d doublings", rotations, growths, obs.ends, obs.growths)
	}

	// Short symbols end on the index, and symbol_dict_max_entries on entries.
	for _, c := range []struct {
		maxEntries int
		symbol     func(int) []byte
		want       dictEnd
	}{
		{1_000_000, func(i int) []byte { return fmt.Appendf(nil, "%d", i) }, dictEndIndex},
		{10, growthSymbol, dictEndEntries},
	} {
		d, err := openGenDict(&sliceEntries{}, c.maxEntries, 4<<10, 4<<10, 0)
		if err != nil {
			t.Fatal(err)
		}
		obs := &dictObserver{ends: map[dictEnd]int{}}
		w := &writer{dict: d, enc: newTinyEncoder(t, d, 16<<10), obs: obs}
		for i := 0; d.Gen() == 0; i++ {
			d.ID(c.symbol(i))
			w.rotateIfFull()
		}
		if obs.ends[c.want] != 1 || len(obs.ends) != 1 || obs.maxFill < 1 {
			t.Errorf("want one end by %s: reported %v, largest fill %v", c.want, obs.ends, obs.maxFill)
		}
	}
}

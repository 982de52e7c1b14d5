package sfqueue

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSymbolsPersistInOrder(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			o := m.opts(t)
			q := mustOpen(t, o)
			defer func() { q.Close() }()
			if err := q.AddSymbols(0, 0, [][]byte{[]byte("a"), []byte("bb")}); err != nil {
				t.Fatal(err)
			}
			if err := q.AddSymbols(0, 2, [][]byte{[]byte("ccc")}); err != nil {
				t.Fatal(err)
			}
			if err := q.AddSymbols(1, 0, [][]byte{[]byte("g1")}); err != nil {
				t.Fatal(err)
			}
			for _, bad := range []struct {
				gen   uint32
				first int
			}{{0, 1}, {0, 4}, {1, 0}, {2, 1}} {
				err := q.AddSymbols(bad.gen, bad.first, [][]byte{[]byte("x")})
				if err == nil || !strings.Contains(err.Error(), "in order") {
					t.Fatalf("AddSymbols(gen %d, first %d) out of order: %v", bad.gen, bad.first, err)
				}
			}
			entry := []byte("mut")
			if err := q.AddSymbols(2, 0, [][]byte{entry}); err != nil {
				t.Fatal(err)
			}
			entry[0] = 'X' // the queue keeps its own copy
			check := func(q *Queue) {
				t.Helper()
				want := map[uint32][]string{0: {"a", "bb", "ccc"}, 1: {"g1"}, 2: {"mut"}}
				for gen, w := range want {
					got := symbols(t, q, gen)
					if len(got) != len(w) {
						t.Fatalf("Symbols(%d) = %q, want %q", gen, got, w)
					}
					for i := range w {
						if string(got[i]) != w[i] {
							t.Fatalf("Symbols(%d)[%d] = %q, want %q", gen, i, got[i], w[i])
						}
					}
				}
				if gens := q.SymbolGenerations(); len(gens) != 3 || gens[2] != 2 {
					t.Fatalf("SymbolGenerations = %v", gens)
				}
			}
			check(q)
			if o.Dir == "" {
				return
			}
			q.Close()
			q = mustOpen(t, o)
			check(q)
			if err := q.DropSymbolGenerationsBelow(2); err != nil {
				t.Fatal(err)
			}
			if len(symbols(t, q, 0)) != 0 || len(symbols(t, q, 2)) != 1 {
				t.Fatalf("after dropping generations below 2: gen0 %q gen2 %q", symbols(t, q, 0), symbols(t, q, 2))
			}
			if err := q.AddSymbols(2, 1, [][]byte{[]byte("next")}); err != nil {
				t.Fatal(err)
			}
			q.Close()
			q = mustOpen(t, o)
			if gens := q.SymbolGenerations(); len(gens) != 1 || gens[0] != 2 || len(symbols(t, q, 2)) != 2 || string(symbols(t, q, 2)[1]) != "next" {
				t.Fatalf("after compaction and reopen: gens %v, gen2 %q", gens, symbols(t, q, 2))
			}
		})
	}
}

func TestSymbolDictTornTailIsDropped(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(b []byte) []byte
		want   int // entries of generation 0 that survive
	}{
		{"cut inside the last record", func(b []byte) []byte { return b[:len(b)-3] }, 2},
		{"cut inside the last header", func(b []byte) []byte { return b[:len(b)-symbolRecordHeader-4] }, 2},
		{"garbage after the records", func(b []byte) []byte { return append(b, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17) }, 3},
		{"flip in the second record", func(b []byte) []byte { b[symbolRecordHeader+4+1+symbolRecordHeader] ^= 1; return b }, 1},
		{"record with an id out of sequence", func(b []byte) []byte { return appendSymbolRecord(b, 0, 9, []byte("late")) }, 3},
		{"zeroed tail", func(b []byte) []byte { return append(b, make([]byte, 40)...) }, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Dir: t.TempDir(), SenderID: "s"}
			q := mustOpen(t, o)
			if err := q.AddSymbols(0, 0, [][]byte{[]byte("a"), []byte("b"), []byte("c")}); err != nil {
				t.Fatal(err)
			}
			q.Close()
			p := filepath.Join(o.Dir, "s", genDictName(0))
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, tc.damage(b), 0o644); err != nil {
				t.Fatal(err)
			}
			q = mustOpen(t, o)
			defer q.Close()
			if got := symbols(t, q, 0); len(got) != tc.want {
				t.Fatalf("%d entries survive, want %d", len(got), tc.want)
			}
			if rep := q.Recovery(); rep.SymbolTornBytes <= 0 {
				t.Fatalf("SymbolTornBytes %d after damaging the tail", rep.SymbolTornBytes)
			}
			// New entries continue after the survivors and persist.
			if err := q.AddSymbols(0, tc.want, [][]byte{[]byte("new")}); err != nil {
				t.Fatal(err)
			}
			q.Close()
			q2 := mustOpen(t, o)
			defer q2.Close()
			if got := symbols(t, q2, 0); len(got) != tc.want+1 || string(got[tc.want]) != "new" || q2.Recovery().SymbolTornBytes != 0 {
				t.Fatalf("after cutting the tail and appending: %q, torn %d", got, q2.Recovery().SymbolTornBytes)
			}
		})
	}
}

func TestSymbolsFsyncedBeforeFramesInFlushMode(t *testing.T) {
	for _, d := range []Durability{DurabilityPeriodic, DurabilityFlush} {
		t.Run(d.String(), func(t *testing.T) {
			cfs := newCrashFS()
			o := Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: d, SymbolUse: symUse}
			q := mustOpen(t, o)
			if err := q.AddSymbols(0, 0, [][]byte{[]byte("a"), []byte("b")}); err != nil {
				t.Fatal(err)
			}
			// A power loss right after AddSymbols keeps the entries.
			snap := cfs.PowerLoss(dropUnsynced, nil)
			q.Close()
			o.FS = snap
			q2 := mustOpen(t, o)
			defer q2.Close()
			if got := symbols(t, q2, 0); len(got) != 2 {
				t.Fatalf("%v: %d dictionary entries survive a power loss right after AddSymbols, want 2", d, len(got))
			}
		})
	}
}

func TestSymbolFsyncDoesNotBlockTheConsumer(t *testing.T) {
	cfs := newCrashFS()
	q := mustOpen(t, Options{Dir: "/d", SenderID: "s", FS: cfs, Durability: DurabilityFlush})
	defer q.Close()
	mustAppend(t, q, testPayload(1, 50))
	entered, release := make(chan struct{}), make(chan struct{})
	cfs.mu.Lock()
	cfs.syncHook = func(name string) {
		if strings.Contains(name, symbolDictFile) {
			close(entered)
			<-release
		}
	}
	cfs.mu.Unlock()
	added := make(chan error, 1)
	go func() { added <- q.AddSymbols(0, 0, [][]byte{[]byte("a")}) }()
	<-entered
	// The consumer reads and acks while the dictionary fsync runs...
	if got := drain(t, q.NewCursor()); len(got) != 1 {
		t.Fatalf("consumer read %d frames during the dictionary fsync", len(got))
	}
	q.Ack(1)
	// ...but AddSymbols has not returned, and compaction waits for it.
	dropped := make(chan error, 1)
	go func() { dropped <- q.DropSymbolGenerationsBelow(0) }()
	select {
	case err := <-added:
		t.Fatalf("AddSymbols returned (%v) before its fsync completed", err)
	default:
	}
	close(release)
	if err := <-added; err != nil {
		t.Fatal(err)
	}
	if err := <-dropped; err != nil {
		t.Fatal(err)
	}
	if got := symbols(t, q, 0); len(got) != 1 {
		t.Fatalf("Symbols(0) = %q after AddSymbols", got)
	}
}

// Dropping a symbol generation writes the ack watermark first: a crash right
// after the drop must not leave recovery replaying acked frames whose
// dictionary is gone (the slot would be set aside as unreplayable).
func TestDropSymbolGenerationsSavesTheWatermarkFirst(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir, SenderID: "s1"}
	q := mustOpen(t, o)
	defer func() { q.Close() }()
	if err := q.AddSymbols(0, 0, [][]byte{[]byte("old")}); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i := range 5 {
		fsn, err := q.Append(context.Background(), testPayload(uint64(i), 64))
		if err != nil {
			t.Fatal(err)
		}
		last = fsn
	}
	q.Ack(last)
	if err := q.DropSymbolGenerationsBelow(1); err != nil {
		t.Fatal(err)
	}
	// No Close: what is on disk now is what a SIGKILL would leave.
	w, ok, err := readWatermark(q.fs, q.slot)
	if err != nil || !ok {
		t.Fatalf("readWatermark: ok %v, %v", ok, err)
	}
	if w.acked != last {
		t.Fatalf(".ack-watermark holds acked FSN %d after the drop, want %d (the frames of the dropped generation)", w.acked, last)
	}
}

// A slot written before per-generation files keeps every generation in
// .symbol-dict: Open moves each into its own file and deletes the old one,
// and a migration interrupted after some renames is finished.
func TestLegacySymbolDictIsSplitPerGeneration(t *testing.T) {
	for _, interrupted := range []bool{false, true} {
		t.Run(fmt.Sprintf("interrupted=%v", interrupted), func(t *testing.T) {
			o := Options{Dir: t.TempDir(), SenderID: "s"}
			slot := filepath.Join(o.Dir, "s")
			if err := os.MkdirAll(slot, 0o700); err != nil {
				t.Fatal(err)
			}
			var legacy []byte
			legacy = appendSymbolRecord(legacy, 0, 0, []byte("a"))
			legacy = appendSymbolRecord(legacy, 1, 0, []byte("x"))
			legacy = appendSymbolRecord(legacy, 0, 1, []byte("b"))
			legacy = appendSymbolRecord(legacy, 1, 1, []byte("y"))
			if err := os.WriteFile(filepath.Join(slot, symbolDictFile), legacy, 0o600); err != nil {
				t.Fatal(err)
			}
			if interrupted { // generation 0 was moved already
				var g0 []byte
				g0 = appendSymbolRecord(g0, 0, 0, []byte("a"))
				g0 = appendSymbolRecord(g0, 0, 1, []byte("b"))
				if err := os.WriteFile(filepath.Join(slot, genDictName(0)), g0, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 { // the second open finds the new layout
				q := mustOpen(t, o)
				if got := fmt.Sprintf("%q %q", symbols(t, q, 0), symbols(t, q, 1)); got != `["a" "b"] ["x" "y"]` {
					t.Fatalf("generations after the move: %s", got)
				}
				q.Close()
				if _, err := os.Stat(filepath.Join(slot, symbolDictFile)); !os.IsNotExist(err) {
					t.Fatalf("the legacy %s is still there: %v", symbolDictFile, err)
				}
				for _, g := range []uint32{0, 1} {
					if _, err := os.Stat(filepath.Join(slot, genDictName(g))); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

// Deleting a generation deletes its file at once: no rewrite, no copy.
func TestDropDeletesGenerationFiles(t *testing.T) {
	o := Options{Dir: t.TempDir(), SenderID: "s"}
	q := mustOpen(t, o)
	defer q.Close()
	for g := range uint32(3) {
		if err := q.AddSymbols(g, 0, [][]byte{[]byte("entry")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.DropSymbolGenerationsBelow(2); err != nil {
		t.Fatal(err)
	}
	for g, want := range []bool{false, false, true} {
		_, err := os.Stat(filepath.Join(o.Dir, "s", genDictName(uint32(g))))
		if (err == nil) != want {
			t.Fatalf("file of generation %d: %v, want present %v", g, err, want)
		}
	}
	if got := q.SymbolGenerations(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("generations %v, want [2]", got)
	}
}

package sfqueue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// symbolRun is a run of n entries of size bytes each, ids first.., of gen.
func symbolRun(gen uint32, first, n, size int) SymbolRun {
	r := SymbolRun{Gen: gen, FirstID: first}
	for i := range n {
		e := bytes.Repeat([]byte{byte('a' + i%26)}, size)
		copy(e, fmt.Sprint(first+i))
		r.Entries = append(r.Entries, e)
	}
	return r
}

// dictFiles is the size of every dictionary file of an SF slot.
func dictFiles(t *testing.T, slot string) map[string]int64 {
	t.Helper()
	des, err := os.ReadDir(slot)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, de := range des {
		if strings.HasPrefix(de.Name(), symbolDictFile) {
			info, err := de.Info()
			if err != nil {
				t.Fatal(err)
			}
			out[de.Name()] = info.Size()
		}
	}
	return out
}

// At the cap under on_full: block, a batch whose frames would fit but whose
// dictionary entries with them would not is refused whole: nothing of it is
// counted or written. Once acks make room the same batch goes in, entries
// and frames together.
func TestSymbolsAdmittedWithTheirFrames(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			o := m.opts(t)
			o.SymbolUse = genUse
			o.MaxSegmentBytes, o.MaxTotalBytes, o.AppendDeadline = 1024, 2048, 20*time.Millisecond
			q := mustOpen(t, o)
			defer q.Close()
			ctx := context.Background()
			if _, err := q.AppendWith(ctx, Batch{Payloads: [][]byte{genPayload(0, 300)}, Symbols: []SymbolRun{symbolRun(0, 0, 2, 100)}}); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				mustAppend(t, q, genPayload(0, 300))
			}
			before := q.Stats()
			var files map[string]int64
			if m.name == "sf" {
				files = dictFiles(t, q.slot)
			}
			// One more frame alone fits: its entries with it do not. (A
			// frame of generation 0, so that generation 0 stays in use.)
			frame := genPayload(0, 100)
			if before.UsedBytes+frameSize(len(frame))+segmentHeaderSize > o.MaxTotalBytes {
				t.Fatalf("set-up: %d bytes used leave no room for the frame alone", before.UsedBytes)
			}
			batch := Batch{Payloads: [][]byte{frame}, Symbols: []SymbolRun{symbolRun(0, 2, 1, 50), symbolRun(1, 0, 3, 200)}}
			_, err := q.AppendWith(ctx, batch)
			var fe *FullError
			if !errors.As(err, &fe) {
				t.Fatalf("frames and entries over the cap together: %v, want *FullError", err)
			}
			if fe.Need <= frameSize(len(frame)) {
				t.Errorf("the refusal says %d bytes were needed, not counting the entries", fe.Need)
			}
			after := q.Stats()
			if after.UsedBytes != before.UsedBytes || after.DictBytes != before.DictBytes || after.PublishedFSN != before.PublishedFSN {
				t.Fatalf("a refused batch changed the queue: used %d -> %d, dictionary %d -> %d, published %d -> %d",
					before.UsedBytes, after.UsedBytes, before.DictBytes, after.DictBytes, before.PublishedFSN, after.PublishedFSN)
			}
			if got := q.SymbolGenerations(); !slices.Equal(got, []uint32{0}) || len(symbols(t, q, 0)) != 2 {
				t.Fatalf("after the refusal: generations %v, %d entries of generation 0; want [0] and 2", got, len(symbols(t, q, 0)))
			}
			if m.name == "sf" {
				if got := dictFiles(t, q.slot); !maps.Equal(got, files) {
					t.Fatalf("a refused batch changed the dictionary files: %v -> %v", files, got)
				}
			}

			q.Ack(q.PublishedFSN())
			fsn, err := q.AppendWith(ctx, batch)
			if err != nil {
				t.Fatalf("the same batch once acks made room: %v", err)
			}
			if got := symbols(t, q, 0); len(got) != 3 || !bytes.Equal(got[2], batch.Symbols[0].Entries[0]) {
				t.Fatalf("generation 0 holds %d entries after the batch, want 3 ending in its own", len(got))
			}
			if got := symbols(t, q, 1); len(got) != 3 || !bytes.Equal(got[0], batch.Symbols[1].Entries[0]) {
				t.Fatalf("generation 1 holds %d entries, want the batch's 3", len(got))
			}
			c := q.NewCursor()
			c.Seek(fsn)
			if got := drain(t, c); len(got) != 1 || !bytes.Equal(got[0].payload, frame) {
				t.Fatalf("the batch's frame: %d frames read", len(got))
			}
			if m.name == "sf" && len(dictFiles(t, q.slot)) != 2 {
				t.Fatalf("dictionary files %v, want generations 0 and 1", dictFiles(t, q.slot))
			}
		})
	}
}

// Under evict_oldest, evicting the oldest frames frees their dictionary
// too, which makes room for a batch's frames and entries together.
func TestEvictionMakesRoomForSymbolsAndFrames(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			o := m.opts(t)
			o.SymbolUse = genUse
			o.OnFull = OnFullEvictOldest
			o.MaxSegmentBytes, o.MaxTotalBytes = 1024, 4096
			q := mustOpen(t, o)
			defer q.Close()
			ctx := context.Background()
			if _, err := q.AppendWith(ctx, Batch{Payloads: [][]byte{genPayload(0, 300), genPayload(0, 300), genPayload(0, 300)},
				Symbols: []SymbolRun{symbolRun(0, 0, 4, 300)}}); err != nil {
				t.Fatal(err)
			}
			if _, err := q.AppendWith(ctx, Batch{Payloads: [][]byte{genPayload(1, 100)}, Symbols: []SymbolRun{symbolRun(1, 0, 1, 10)}}); err != nil {
				t.Fatal(err)
			}
			// Room for these takes the segment of generation 0's frames,
			// and then generation 0's dictionary.
			batch := Batch{Payloads: [][]byte{genPayload(1, 300)}, Symbols: []SymbolRun{symbolRun(1, 1, 4, 600)}}
			if st := q.Stats(); st.UsedBytes+2400 <= o.MaxTotalBytes {
				t.Fatalf("set-up: %d bytes used leave room for the batch", st.UsedBytes)
			}
			if _, err := q.AppendWith(ctx, batch); err != nil {
				t.Fatalf("evict_oldest with frames and entries over the cap: %v", err)
			}
			st := q.Stats()
			if st.FramesEvicted != 3 || st.UsedBytes > o.MaxTotalBytes || st.Segments == 0 {
				t.Fatalf("after the batch: %d frames evicted (want generation 0's 3), %d of %d bytes used in %d segments",
					st.FramesEvicted, st.UsedBytes, o.MaxTotalBytes, st.Segments)
			}
			if got := q.SymbolGenerations(); !slices.Equal(got, []uint32{1}) || len(symbols(t, q, 1)) != 5 {
				t.Fatalf("generations %v (generation 1: %d entries): the evicted frames' generation 0 should be gone", got, len(symbols(t, q, 1)))
			}
		})
	}
}

// crashQueueWithTwoSymbols opens an SF queue at /d/s on a new crashFS,
// with o's sizes and durability and a 10 ms append deadline, and appends
// one frame with ids 0 and 1 of generation 0; it returns the queue, the
// file system and that generation's file.
func crashQueueWithTwoSymbols(t *testing.T, o Options) (*Queue, *crashFS, string) {
	t.Helper()
	cfs := newCrashFS()
	o.Dir, o.SenderID, o.FS, o.SymbolUse, o.AppendDeadline = "/d", "s", cfs, genUse, 10*time.Millisecond
	q := mustOpen(t, o)
	if _, err := q.AppendWith(context.Background(), Batch{Payloads: [][]byte{genPayload(0, 100)}, Symbols: []SymbolRun{symbolRun(0, 0, 2, 20)}}); err != nil {
		q.Close()
		t.Fatal(err)
	}
	return q, cfs, clean("/d/s/" + genDictName(0))
}

// A full disk met writing the frames takes back the batch's entries: the
// dictionary file is as before, and the batch goes in once the disk has
// room.
func TestFrameWriteENOSPCUndoesTheSymbols(t *testing.T) {
	for _, d := range []Durability{DurabilityMemory, DurabilityPeriodic} {
		t.Run(d.String(), func(t *testing.T) {
			q, cfs, dictName := crashQueueWithTwoSymbols(t, Options{MaxSegmentBytes: 1024, Durability: d})
			defer q.Close()
			ctx := context.Background()
			size := func() int { return cfs.fileSize(dictName) }
			before, used := size(), q.Stats().UsedBytes
			cfs.mu.Lock()
			cfs.fillDiskForSegments()
			cfs.mu.Unlock()
			batch := Batch{Payloads: [][]byte{genPayload(0, 600), genPayload(1, 600)},
				Symbols: []SymbolRun{symbolRun(0, 2, 3, 20), symbolRun(1, 0, 2, 20)}}
			_, err := q.AppendWith(ctx, batch)
			var fe *FullError
			if !errors.As(err, &fe) || fe.Reason != DiskFull {
				t.Fatalf("frames hitting ENOSPC: %v, want DiskFull", err)
			}
			if q.Stats().Fatal != nil {
				t.Fatalf("ENOSPC latched a fatal error: %v", q.Stats().Fatal)
			}
			if got := size(); got != before || q.Stats().UsedBytes != used || len(symbols(t, q, 0)) != 2 {
				t.Fatalf("after the refusal: dictionary file %d bytes (was %d), used %d (was %d), %d entries (was 2)",
					got, before, q.Stats().UsedBytes, used, len(symbols(t, q, 0)))
			}
			for _, n := range cfs.fileNames() {
				if strings.HasSuffix(n, genDictName(1)) {
					t.Fatalf("the refused batch's new generation file was left behind: %s", n)
				}
			}
			cfs.mu.Lock()
			cfs.failWrite, cfs.failAlloc = nil, nil
			cfs.mu.Unlock()
			if _, err := q.AppendWith(ctx, batch); err != nil {
				t.Fatalf("the same batch once the disk has room: %v", err)
			}
			if len(symbols(t, q, 0)) != 5 || len(symbols(t, q, 1)) != 2 {
				t.Fatalf("after the retry: %d and %d entries, want 5 and 2", len(symbols(t, q, 0)), len(symbols(t, q, 1)))
			}
		})
	}
}

// Memory-only mode stores a generation's entries back to back in chunks:
// what it counts is the chunks' capacity, need predicts it, entries of
// any size read back, and undo takes a run back to the byte.
func TestMemoryDictionaryChunks(t *testing.T) {
	d := newMemoryDict()
	var want [][]byte
	first := 0
	for i, size := range []int{0, 1, 100, 255, 256, 3000, memChunkMax, memChunkMax + 7, 10, 40} {
		r := symbolRun(0, first, 20, size)
		if i == 0 {
			r = SymbolRun{Gen: 0, Entries: [][]byte{{}}}
		}
		need, bytes := d.need([]SymbolRun{r}), d.bytes
		if _, _, err := d.add([]SymbolRun{r}); err != nil {
			t.Fatal(err)
		}
		if d.bytes-bytes != need || d.bytes != d.mem[0].bytes() {
			t.Fatalf("entries of %d bytes: need said %d, the chunks grew %d (%d held)", size, need, d.bytes-bytes, d.mem[0].bytes())
		}
		want = append(want, r.Entries...)
		first += len(r.Entries)
	}
	got := readMem(d, 0)
	if len(got) != len(want) {
		t.Fatalf("read %d entries, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("entry %d reads back %d bytes, want %d", i, len(got[i]), len(want[i]))
		}
	}
	var text int64
	for _, e := range want {
		text += int64(len(e))
	}
	if d.bytes > text+text/4+2*memChunkMax {
		t.Fatalf("%d bytes held for %d bytes of text", d.bytes, text)
	}

	bytesBefore := d.bytes
	marks, _, err := d.add([]SymbolRun{symbolRun(0, first, 30, 500), symbolRun(1, 0, 5, 9)})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.undo(marks); err != nil {
		t.Fatal(err)
	}
	if d.bytes != bytesBefore || d.counts[0] != first || d.mem[1] != nil || d.counts[1] != 0 {
		t.Fatalf("after undo: %d bytes (was %d), %d entries (was %d), generation 1 %v", d.bytes, bytesBefore, d.counts[0], first, d.mem[1])
	}
	if _, _, err := d.add([]SymbolRun{symbolRun(0, first, 1, 3)}); err != nil {
		t.Fatalf("adding after an undo: %v", err)
	}
	if got := readMem(d, 0); len(got) != len(want)+1 || !bytes.Equal(got[len(want)], symbolRun(0, first, 1, 3).Entries[0]) {
		t.Fatalf("after undo and an add: %d entries", len(got))
	}
	if err := d.dropBelow(1); err != nil || d.bytes != 0 {
		t.Fatalf("dropping every generation leaves %d bytes (%v)", d.bytes, err)
	}
}

// A run that does not start at its generation's next id is refused, and
// with it the runs of the same call already added.
func TestSymbolRunsOutOfOrderAreRefusedWhole(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			q := mustOpen(t, m.opts(t))
			defer q.Close()
			_, err := q.AppendWith(context.Background(), Batch{Payloads: [][]byte{genPayload(0, 10)},
				Symbols: []SymbolRun{symbolRun(0, 0, 2, 5), symbolRun(1, 3, 1, 5)}})
			if err == nil || !strings.Contains(err.Error(), "in order") {
				t.Fatalf("a run starting at id 3 of an empty generation: %v", err)
			}
			if st := q.Stats(); st.DictBytes != 0 || st.PublishedFSN != 0 || len(q.SymbolGenerations()) != 0 {
				t.Fatalf("a refused batch left %d dictionary bytes, %d frames, generations %v", st.DictBytes, st.PublishedFSN, q.SymbolGenerations())
			}
			if m.name == "sf" {
				if files := dictFiles(t, filepath.Join(q.o.Dir, q.o.SenderID)); len(files) != 0 {
					t.Fatalf("a refused batch left dictionary files %v", files)
				}
			}
		})
	}
}

// In memory-only mode the producer's index counts in the cap: a batch that
// reports an index the cap cannot hold is refused, and the index is
// counted once admitted. SF mode's cap is disk: the index is not counted.
func TestIndexBytesCountInMemoryMode(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			o := m.opts(t)
			o.MaxSegmentBytes, o.MaxTotalBytes, o.AppendDeadline = 1024, 4096, 10*time.Millisecond
			q := mustOpen(t, o)
			defer q.Close()
			ctx := context.Background()
			mustAppend(t, q, genPayload(0, 100))
			_, err := q.AppendWith(ctx, Batch{Payloads: [][]byte{genPayload(0, 100)}, IndexBytes: 5000})
			var fe *FullError
			if m.name == "sf" {
				if err != nil || q.Stats().IndexBytes != 0 {
					t.Fatalf("SF mode: an index of 5000 bytes: %v, counted %d", err, q.Stats().IndexBytes)
				}
				return
			}
			if !errors.As(err, &fe) {
				t.Fatalf("an index larger than the cap: %v, want *FullError", err)
			}
			if _, err := q.AppendWith(ctx, Batch{Payloads: [][]byte{genPayload(0, 100)}, IndexBytes: 2000}); err != nil {
				t.Fatal(err)
			}
			st := q.Stats()
			if st.IndexBytes != 2000 || st.UsedBytes != 2000+st.DictBytes+segmentHeaderSize+2*frameSize(100) {
				t.Fatalf("after an index of 2000 bytes: %+v", st)
			}
			mustAppend(t, q, genPayload(0, 100)) // AppendBatch keeps the index reported
			if got := q.Stats().IndexBytes; got != 2000 {
				t.Fatalf("index %d after a plain append, want 2000 kept", got)
			}
		})
	}
}

// readMem reads generation gen of a memory-only dictionary as a
// SymbolReader does.
func readMem(d *symbolDict, gen uint32) [][]byte {
	var out [][]byte
	chunks := d.mem[gen].view()
	for range d.counts[gen] {
		var e []byte
		e, chunks = nextEntry(chunks)
		out = append(out, e)
	}
	return out
}

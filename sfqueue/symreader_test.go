package sfqueue

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// readerEntries is a generation of several read chunks, with one entry
// larger than a chunk and one empty entry among ordinary ones.
func readerEntries() [][]byte {
	var es [][]byte
	for i := range 3000 {
		es = append(es, fmt.Appendf(nil, `{"series":%d,"pad":%q}`, i, strings.Repeat("x", i%97)))
	}
	es[1500] = bytes.Repeat([]byte("L"), 3*symbolReadChunk/2)
	es[1501] = []byte{}
	return es
}

// readAll drains r, copying every entry, and checks Next's io.EOF after it.
func readAll(t *testing.T, r *SymbolReader) [][]byte {
	t.Helper()
	var out [][]byte
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Next after %d entries: %v", len(out), err)
		}
		out = append(out, bytes.Clone(e))
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("Next past the end: %v, want io.EOF", err)
	}
	return out
}

// symbols reads generation gen of q whole; a read error fails the test.
func symbols(t *testing.T, q *Queue, gen uint32) [][]byte {
	t.Helper()
	r, err := q.OpenSymbols(gen)
	if err != nil {
		t.Fatalf("opening symbol generation %d: %v", gen, err)
	}
	defer r.Close()
	return readAll(t, r)
}

func equalEntries(t *testing.T, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d entries, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("entry %d: %d bytes %.20q, want %d bytes %.20q", i, len(got[i]), got[i], len(want[i]), want[i])
		}
	}
}

// TestSymbolReaderStreams: a generation reads back whole and in order, in
// SF mode through a buffer of one chunk (or one record, when a record is
// larger), never the generation; in memory-only mode without copies.
func TestSymbolReaderStreams(t *testing.T) {
	want := readerEntries()
	var total int64
	for _, e := range want {
		total += symbolRecordBytes(e)
	}
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			q := mustOpen(t, m.opts(t))
			defer q.Close()
			for i := 0; i < len(want); i += 1000 {
				if err := q.AddSymbols(3, i, want[i:i+1000]); err != nil {
					t.Fatal(err)
				}
			}
			r, err := q.OpenSymbols(3)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.Len() != len(want) {
				t.Fatalf("Len %d, want %d", r.Len(), len(want))
			}
			var got [][]byte
			maxBuf := 0
			for {
				e, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if q.sf {
					maxBuf = max(maxBuf, cap(r.recs.buf))
				} else if len(e) > 0 && !inChunks(e, q.dict.mem[3].chunks) {
					t.Fatalf("memory-only entry %d is a copy", len(got))
				}
				got = append(got, bytes.Clone(e))
			}
			equalEntries(t, got, want)
			if limit := int(symbolRecordBytes(want[1500])); q.sf && (maxBuf > limit || total < int64(3*limit)) {
				t.Fatalf("the reader's buffer reached %d bytes for a %d-byte generation; want at most the largest record, %d", maxBuf, total, limit)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			equalEntries(t, symbols(t, q, 3), want)
		})
	}
}

// TestSymbolReaderSnapshot: a reader returns the entries the generation
// held when it was opened, even when more are added or the generation is
// deleted before it is read; a generation the queue does not hold reads as
// empty; a closed queue opens none.
func TestSymbolReaderSnapshot(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			q := mustOpen(t, m.opts(t))
			defer q.Close()
			if err := q.AddSymbols(0, 0, [][]byte{[]byte("a"), []byte("b")}); err != nil {
				t.Fatal(err)
			}
			r, err := q.OpenSymbols(0)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if err := q.AddSymbols(0, 2, [][]byte{[]byte("late")}); err != nil {
				t.Fatal(err)
			}
			if err := q.AddSymbols(1, 0, [][]byte{[]byte("g1")}); err != nil {
				t.Fatal(err)
			}
			if err := q.DropSymbolGenerationsBelow(1); err != nil {
				t.Fatal(err)
			}
			if q.sf {
				if _, err := os.Stat(filepath.Join(q.slot, genDictName(0))); !os.IsNotExist(err) {
					t.Fatalf("generation 0's file after the drop: %v", err)
				}
			}
			equalEntries(t, readAll(t, r), [][]byte{[]byte("a"), []byte("b")})
			gone, err := q.OpenSymbols(0)
			if err != nil {
				t.Fatal(err)
			}
			if gone.Len() != 0 || len(readAll(t, gone)) != 0 {
				t.Fatalf("a deleted generation reads %d entries", gone.Len())
			}
			q.Close()
			if _, err := q.OpenSymbols(1); !errors.Is(err, ErrClosed) {
				t.Fatalf("OpenSymbols on a closed queue: %v", err)
			}
		})
	}
}

// TestSymbolReaderDamage: a record damaged after the queue opened the slot
// stops the reader with an error naming the file and the record's offset;
// the entries before it were returned.
func TestSymbolReaderDamage(t *testing.T) {
	entries := [][]byte{[]byte("alpha"), []byte("beta"), []byte("gamma")}
	second := symbolRecordBytes(entries[0]) // offset of record 1
	third := second + symbolRecordBytes(entries[1])
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
		at     int64
		want   string
	}{
		{"flipped byte", func(t *testing.T, p string) { patch(t, p, second+symbolRecordHeader, []byte("X")) }, second, "fails its CRC32C check"},
		{"wrong id", func(t *testing.T, p string) {
			patch(t, p, second, appendSymbolRecord(nil, 0, 7, entries[1]))
		}, second, "is id 7 of generation 0"},
		{"huge length", func(t *testing.T, p string) {
			patch(t, p, third+8, binary.LittleEndian.AppendUint32(nil, maxSymbolBytes+1))
		}, third, "above the"},
		{"cut short", func(t *testing.T, p string) {
			if err := os.Truncate(p, third+3); err != nil {
				t.Fatal(err)
			}
		}, third, "is cut short"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := mustOpen(t, Options{Dir: t.TempDir(), SenderID: "s1"})
			defer q.Close()
			if err := q.AddSymbols(0, 0, entries); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(q.slot, genDictName(0))
			tc.damage(t, path)
			r, err := q.OpenSymbols(0)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var read int
			for {
				_, err = r.Next()
				if err != nil {
					break
				}
				read++
			}
			wantMsg := fmt.Sprintf("%s: record at offset %d", path, tc.at)
			if err == io.EOF || !strings.Contains(err.Error(), wantMsg) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("after %d entries: %v; want an error with %q and %q", read, err, wantMsg, tc.want)
			}
			if wantRead := int(map[int64]int{second: 1, third: 2}[tc.at]); read != wantRead {
				t.Fatalf("%d entries read before the damage at offset %d, want %d", read, tc.at, wantRead)
			}
		})
	}
}

// TestSymbolReaderReadError: an I/O error reading a generation that
// recovery found intact stops the reader with an error naming the id, the
// generation, the file and the cause, after the entries of the chunks read
// before it; the reader never reports io.EOF for a generation cut short.
func TestSymbolReaderReadError(t *testing.T) {
	cfs := newCrashFS()
	o := Options{Dir: "/sf", SenderID: "s1", FS: cfs}
	q := mustOpen(t, o)
	want := readerEntries()
	if err := q.AddSymbols(0, 0, want); err != nil {
		t.Fatal(err)
	}
	q.Close()
	q = mustOpen(t, o) // recovery reads the file whole
	defer q.Close()
	path := filepath.Join(q.slot, genDictName(0))
	reads := 0
	cfs.mu.Lock()
	cfs.failRead = func(name string) error {
		if name != path {
			return nil
		}
		if reads++; reads == 3 {
			return syscall.EIO
		}
		return nil
	}
	cfs.mu.Unlock()
	r, err := q.OpenSymbols(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	read := 0
	var failed error
	for {
		e, err := r.Next()
		if err == nil {
			if !bytes.Equal(e, want[read]) {
				t.Fatalf("entry %d: %.20q, want %.20q", read, e, want[read])
			}
			read++
			continue
		}
		if !errors.Is(err, syscall.EIO) || err == io.EOF {
			t.Fatalf("after %d entries: %v, want EIO", read, err)
		}
		for _, w := range []string{fmt.Sprintf("symbol id %d of generation 0", read), path, "input/output error"} {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("error %q lacks %q", err, w)
			}
		}
		failed = err
		break
	}
	if read == 0 || read >= len(want) {
		t.Fatalf("%d of %d entries read before the third chunk's read failed", read, len(want))
	}
	if _, err2 := r.Next(); err2 == nil || err2.Error() != failed.Error() {
		t.Fatalf("Next after the failed read: %v, want the same error again (never the end of a generation cut short)", err2)
	}
}

// patch overwrites the file at p from offset off with b.
func patch(t *testing.T, p string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// inChunks reports whether e lies in one of chunks' arrays.
func inChunks(e []byte, chunks [][]byte) bool {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(e)))
	for _, c := range chunks {
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(c)))
		if p >= lo && p < lo+uintptr(cap(c)) {
			return true
		}
	}
	return false
}

// TestOpenDoesNotLoadTheDictionary: recovery walks the dictionary files a
// chunk at a time and keeps counts, not entries, so opening a slot whose
// dictionary holds megabytes allocates a small part of it; the generations
// read back whole afterwards.
func TestOpenDoesNotLoadTheDictionary(t *testing.T) {
	o := Options{Dir: t.TempDir(), SenderID: "s1", SymbolUse: genUse, MaxSegmentBytes: 64 << 10}
	q := mustOpen(t, o)
	want := map[uint32][][]byte{}
	for g := range uint32(3) {
		for i := range 20000 {
			want[g] = append(want[g], fmt.Appendf(nil, `{"gen":%d,"series":%d,"pad":%q}`, g, i, strings.Repeat("p", 64)))
		}
		if err := q.AddSymbols(g, 0, want[g]); err != nil {
			t.Fatal(err)
		}
		mustAppend(t, q, genPayload(g, 64))
	}
	dictBytes := q.Stats().DictBytes
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	q = mustOpen(t, o)
	runtime.ReadMemStats(&after)
	defer q.Close()
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(dictBytes/4) {
		t.Fatalf("Open allocated %d bytes for a dictionary of %d on disk; want at most a quarter of it (the whole dictionary was loaded before)", alloc, dictBytes)
	}
	for g, w := range want {
		equalEntries(t, symbols(t, q, g), w)
	}
}

// TestSymbolReaderSeesOnlyCommittedEntries: a batch's dictionary entries
// are fsynced with the queue's lock released before its frames go in, and
// taken back (the file cut to its old size) when the frames then fail. A
// reader opened in that window must not count them: the cut would run
// under it, and a catch-up would stop the sender on a record cut short.
func TestSymbolReaderSeesOnlyCommittedEntries(t *testing.T) {
	cfs := newCrashFS()
	o := Options{Dir: "/d", SenderID: "s", FS: cfs, MaxSegmentBytes: 1024, Durability: DurabilityPeriodic,
		SymbolUse: genUse, AppendDeadline: 10 * time.Millisecond}
	q := mustOpen(t, o)
	defer q.Close()
	ctx := context.Background()
	committed := symbolRun(0, 0, 2, 20)
	if _, err := q.AppendWith(ctx, Batch{Payloads: [][]byte{genPayload(0, 100)}, Symbols: []SymbolRun{committed}}); err != nil {
		t.Fatal(err)
	}
	type opened struct {
		r   *SymbolReader
		err error
	}
	got := make(chan opened, 1)
	var once sync.Once
	cfs.mu.Lock()
	cfs.syncHook = func(name string) {
		if !strings.HasSuffix(name, genDictName(0)) {
			return
		}
		once.Do(func() {
			go func() {
				r, err := q.OpenSymbols(0)
				got <- opened{r, err}
			}()
			// Long enough for a reader that does not wait to have counted.
			time.Sleep(50 * time.Millisecond)
		})
	}
	cfs.fillDiskForSegments()
	cfs.mu.Unlock()
	_, err := q.AppendWith(ctx, Batch{Payloads: [][]byte{genPayload(0, 900)}, Symbols: []SymbolRun{symbolRun(0, 2, 3, 20)}})
	var fe *FullError
	if !errors.As(err, &fe) || fe.Reason != DiskFull {
		t.Fatalf("frames hitting ENOSPC: %v, want DiskFull", err)
	}
	o2 := <-got
	if o2.err != nil {
		t.Fatal(o2.err)
	}
	defer o2.r.Close()
	if o2.r.Len() != 2 {
		t.Errorf("the reader counts %d entries; want the 2 committed ones", o2.r.Len())
	}
	equalEntries(t, readAll(t, o2.r), committed.Entries)
}

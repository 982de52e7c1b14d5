package sender

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// catchUpGenBytes is the symbol text of the full generation the catch-up
// benchmark registers: the exporter's default symbol_dict_max_bytes.
const catchUpGenBytes = 16 << 20

// catchUpEntries is a generation of attribute-JSON symbols, one per series
// as a high-cardinality gauge produces them, up to catchUpGenBytes of text.
func catchUpEntries() [][]byte {
	var entries [][]byte
	for n, id := 0, 0; n < catchUpGenBytes; id++ {
		e := fmt.Appendf(nil, `{"http.method":"GET","http.route":"/api/v1/item/%d","http.status_code":200,"id":%d,"net.peer":"10.0.0.%d"}`,
			id%20, 1_000_000+id, id%10)
		entries = append(entries, e)
		n += len(e)
	}
	return entries
}

// catchUpPhase opens an SF slot holding one data frame of generation 0, with
// entries in that generation's dictionary, and returns how long a new
// sender takes from Start until the frame is acknowledged: connect, the
// generation's catch-up, the frame.
func catchUpPhase(b *testing.B, srv *qwptest.Server, entries [][]byte) time.Duration {
	q, err := sfqueue.Open(sfqueue.Options{Dir: b.TempDir(), SenderID: "bench", MaxTotalBytes: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	if len(entries) > 0 {
		if err := q.AddSymbols(0, 0, entries); err != nil {
			b.Fatal(err)
		}
	}
	newFeeder(b, q, false).frames(1, benchRowsPerFrame)
	ctx := context.Background()
	start := time.Now()
	s, err := New(q, Options{Endpoints: []string{srv.URL()}})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	if err := s.WaitAcked(ctx, 1); err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	if err := s.Close(ctx); err != nil {
		b.Fatal(err)
	}
	return took
}

// BenchmarkCatchUpFullGeneration measures what one full dictionary
// generation (16 MiB of attribute-JSON symbols, the default
// symbol_dict_max_bytes) costs a connection: the catch-up bytes on the wire
// and the time from the sender's start to the first data frame's OK, beside
// the same frame on an empty generation in the same run (alternating), into
// a count-only qwptest server on loopback. catch-up-ms is the difference.
func BenchmarkCatchUpFullGeneration(b *testing.B) {
	srv, err := qwptest.NewServer(qwptest.Options{CountOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	entries := catchUpEntries()
	dict := qwp.NewMemDict()
	for _, e := range entries {
		dict.ID(e)
	}
	var wire, frames int
	if err := qwp.CatchUpFrames(dict, 0, dict.Len(), srv.MaxBatchSize(), func(frame []byte) error {
		wire += len(frame)
		frames++
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	var full, empty time.Duration
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			full += catchUpPhase(b, srv, entries)
			empty += catchUpPhase(b, srv, nil)
		} else {
			empty += catchUpPhase(b, srv, nil)
			full += catchUpPhase(b, srv, entries)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(len(entries)), "entries")
	b.ReportMetric(float64(wire)/(1<<20), "catch-up-MiB")
	b.ReportMetric(float64(frames), "catch-up-frames")
	b.ReportMetric(full.Seconds()*1000/n, "full-gen-ms")
	b.ReportMetric(empty.Seconds()*1000/n, "empty-gen-ms")
	b.ReportMetric((full-empty).Seconds()*1000/n, "catch-up-ms")
	b.ReportMetric(float64(wire)/(1<<20)/((full-empty).Seconds()/n), "catch-up-MiB/s")
}

// loadGeneration reads a dictionary file the way the sender did before its
// catch-up streamed (up to 19a2b56^): the whole file in one buffer, then one
// copy per entry, every record's CRC32C checked.
func loadGeneration(b *testing.B, path string, count int) [][]byte {
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	entries := make([][]byte, 0, count)
	for pos := 0; pos < len(data); {
		end := pos + 12 + int(binary.LittleEndian.Uint32(data[pos+8:]))
		if crc32.Checksum(data[pos:end], crc32.MakeTable(crc32.Castagnoli)) != binary.LittleEndian.Uint32(data[end:]) {
			b.Fatalf("%s: record at offset %d fails its CRC", path, pos)
		}
		entries = append(entries, slices.Clone(data[pos+12:end]))
		pos = end + 4
	}
	return entries
}

// entryList is a loaded generation as a qwp.SymbolDict (Len and Entry are
// all CatchUpFrames reads).
type entryList [][]byte

func (l entryList) Len() int            { return len(l) }
func (l entryList) Entry(id int) []byte { return l[id] }
func (l entryList) ID([]byte) uint32    { panic("catch-up assigns no ids") }

// catchUpGen is one generation on disk, caught up by the loaded (before) or
// the streamed (the sender's) way.
type catchUpGen struct {
	q     *sfqueue.Queue
	path  string
	count int
	limit int
}

// run sends the generation's catch-up through emit.
func (g *catchUpGen) run(b *testing.B, streamed bool, emit func([]byte) error) {
	if !streamed {
		entries := loadGeneration(b, g.path, g.count)
		if err := qwp.CatchUpFrames(entryList(entries), 0, len(entries), g.limit, emit); err != nil {
			b.Fatal(err)
		}
		return
	}
	r, err := g.q.OpenSymbols(0)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	if readErr, err := streamDictionary(r, r.Len(), g.limit, emit); readErr != nil || err != nil {
		b.Fatal(readErr, err)
	}
}

// wire catches the generation up on a new connection to srv, commits, and
// returns the time from the first read of the dictionary to the commit's OK.
func (g *catchUpGen) wire(b *testing.B, srv *qwptest.Server, streamed bool) time.Duration {
	qc, err := qwp.Dial(context.Background(), qwp.DialOptions{URL: srv.URL()})
	if err != nil {
		b.Fatal(err)
	}
	defer qc.WS.Close()
	start := time.Now()
	g.run(b, streamed, qc.WriteMessage)
	if err := qc.WriteMessage(qwp.AppendCommit(nil)); err != nil {
		b.Fatal(err)
	}
	_, msg, err := qc.WS.ReadMessage()
	var r qwp.Response
	if err == nil {
		err = qwp.DecodeResponse(msg, &r)
	}
	if err != nil || r.Status != qwp.StatusOK {
		b.Fatalf("the commit after the catch-up: %v, status %v %s", err, r.Status, r.Message)
	}
	return time.Since(start)
}

// heap catches the generation up into a sink (no server: the in-process
// qwptest would count) and returns the bytes allocated and the largest live
// heap above what was live before, measured after a GC at every frame (the
// loaded way holds the generation from before the first frame to after the
// last), with the frames' bytes, count and checksum.
func (g *catchUpGen) heap(b *testing.B, streamed bool) (alloc, peak uint64, bytes, frames int, sum uint32) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base, allocBase := ms.HeapAlloc, ms.TotalAlloc
	g.run(b, streamed, func(frame []byte) error {
		bytes += len(frame)
		frames++
		sum = crc32.Update(sum, crc32.IEEETable, frame)
		runtime.GC()
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > base {
			peak = max(peak, ms.HeapAlloc-base)
		}
		return nil
	})
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc - allocBase, peak, bytes, frames, sum
}

// BenchmarkCatchUpFromDisk compares, side by side (alternating), the two
// ways a connection's catch-up of one full default generation (16 MiB of
// attribute-JSON symbols) on disk can be built: loaded, the whole
// generation read into RAM and then framed (the sender before 19a2b56), and
// streamed, the file read in chunks into one frame at a time (the sender
// now). Each iteration sends both over a new connection to a count-only
// qwptest server on loopback, timed from the first read to the commit's
// OK, and then builds each into a sink to count the bytes it allocates and
// its live heap. The two must produce the same frames.
func BenchmarkCatchUpFromDisk(b *testing.B) {
	srv, err := qwptest.NewServer(qwptest.Options{CountOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	dir := b.TempDir()
	q, err := sfqueue.Open(sfqueue.Options{Dir: dir, SenderID: "bench", MaxTotalBytes: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	g := &catchUpGen{q: q, path: filepath.Join(dir, "bench", fmt.Sprintf(".symbol-dict.%010d", 0)),
		limit: min(DefaultMaxBatchBytes, srv.MaxBatchSize())}
	{
		entries := catchUpEntries()
		if err := q.AddSymbols(0, 0, entries); err != nil {
			b.Fatal(err)
		}
		g.count = len(entries)
	}
	var took [2]time.Duration
	var alloc, peak [2]uint64
	var bytes, frames [2]int
	var sums [2]uint32
	b.ResetTimer()
	for i := range b.N {
		for k := range 2 {
			streamed := (i+k)%2 == 1
			m := map[bool]int{false: 0, true: 1}[streamed]
			took[m] += g.wire(b, srv, streamed)
			for srv.Connections() > 0 { // its goroutines would count in the heap
				time.Sleep(time.Millisecond)
			}
			a, p, n, f, s := g.heap(b, streamed)
			alloc[m] += a
			peak[m] = max(peak[m], p)
			bytes[m], frames[m], sums[m] = n, f, s
		}
	}
	if bytes[0] != bytes[1] || frames[0] != frames[1] || sums[0] != sums[1] {
		b.Fatalf("loaded: %d bytes in %d frames (crc %08x); streamed: %d in %d (crc %08x): the frames differ",
			bytes[0], frames[0], sums[0], bytes[1], frames[1], sums[1])
	}
	n := float64(b.N)
	b.ReportMetric(float64(g.count), "entries")
	b.ReportMetric(float64(bytes[1])/(1<<20), "catch-up-MiB")
	b.ReportMetric(float64(frames[1]), "catch-up-frames")
	for m, name := range []string{"loaded", "streamed"} {
		b.ReportMetric(took[m].Seconds()*1000/n, name+"-ms")
		b.ReportMetric(float64(alloc[m])/n/(1<<20), name+"-alloc-MiB")
		b.ReportMetric(float64(peak[m])/(1<<20), name+"-peak-heap-MiB")
	}
	b.ReportMetric(took[1].Seconds()/took[0].Seconds(), "streamed/loaded-time")
	b.ReportMetric(float64(peak[1])/float64(peak[0]), "streamed/loaded-peak-heap")
}

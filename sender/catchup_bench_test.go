package sender

import (
	"context"
	"fmt"
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

package sender

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// benchRowsPerFrame is the size of one benchmark frame: a typical group
// commit of the exporter's writer.
const benchRowsPerFrame = 500

// benchFrame encodes one stored frame whose delta section registers every
// symbol it uses, so the same payload can be appended any number of times.
func benchFrame(b *testing.B, q *sfqueue.Queue) []byte {
	f := newFeeder(b, q, true)
	return append([]byte(nil), f.encode(benchRowsPerFrame)...)
}

func benchQueue(b *testing.B) *sfqueue.Queue {
	q, err := sfqueue.Open(sfqueue.Options{MaxTotalBytes: 4 << 30})
	if err != nil {
		b.Fatal(err)
	}
	return q
}

func benchSender(b *testing.B, q *sfqueue.Queue, url string) *Sender {
	s, err := New(q, Options{Endpoints: []string{url}})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	return s
}

func reportRates(b *testing.B, frames int, d time.Duration) {
	b.ReportMetric(float64(frames)/d.Seconds(), "frames/s")
	b.ReportMetric(float64(frames*benchRowsPerFrame)/d.Seconds(), "rows/s")
}

// BenchmarkSteadyState: a producer appends b.N frames while the sender
// streams them to a count-only qwptest server on loopback.
func BenchmarkSteadyState(b *testing.B) {
	srv, err := qwptest.NewServer(qwptest.Options{CountOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	q := benchQueue(b)
	defer q.Close()
	payload := benchFrame(b, q)
	s := benchSender(b, q, srv.URL())
	defer s.Close(context.Background())
	ctx := context.Background()
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := q.Append(ctx, payload); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.WaitAcked(ctx, q.PublishedFSN()); err != nil {
		b.Fatal(err)
	}
	reportRates(b, b.N, time.Since(start))
}

// backlogFrames is the replayed backlog: QDB_BACKLOG_FRAMES, default 2000.
func backlogFrames(b *testing.B) int {
	if v := os.Getenv("QDB_BACKLOG_FRAMES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("QDB_BACKLOG_FRAMES %q is not a positive integer", v)
		}
		return n
	}
	return 2000
}

// BenchmarkBacklogReplay: the sender starts against a queue already holding
// a backlog (as after an outage or a restart) and replays all of it.
func BenchmarkBacklogReplay(b *testing.B) {
	srv, err := qwptest.NewServer(qwptest.Options{CountOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	n := backlogFrames(b)
	ctx := context.Background()
	var total time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		q := benchQueue(b)
		payload := benchFrame(b, q)
		batch := make([][]byte, 64)
		for i := range batch {
			batch[i] = payload
		}
		for left := n; left > 0; left -= len(batch) {
			if _, err := q.AppendBatch(ctx, batch[:min(left, len(batch))]); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		start := time.Now()
		s := benchSender(b, q, srv.URL())
		if err := s.WaitAcked(ctx, q.PublishedFSN()); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		b.StopTimer()
		_ = s.Close(ctx)
		_ = q.Close()
		b.StartTimer()
	}
	reportRates(b, b.N*n, total)
}

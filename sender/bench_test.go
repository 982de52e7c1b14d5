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

// benchFrames is the frames per measured phase: QDB_BACKLOG_FRAMES,
// default 2000 (about 9 MB).
func benchFrames(b *testing.B) int {
	if v := os.Getenv("QDB_BACKLOG_FRAMES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("QDB_BACKLOG_FRAMES %q is not a positive integer", v)
		}
		return n
	}
	return 2000
}

// benchPhase sends n frames through a new queue and sender to srv and
// returns how long delivery took. With backlog the frames are all queued
// before the sender starts (replay after an outage or restart); without, a
// producer appends them while the sender runs (steady state).
func benchPhase(b *testing.B, srv *qwptest.Server, n int, backlog bool) time.Duration {
	ctx := context.Background()
	q, err := sfqueue.Open(sfqueue.Options{MaxTotalBytes: 4 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	payload := benchFrame(b, q)
	appendAll := func() {
		for range n {
			if _, err := q.Append(ctx, payload); err != nil {
				b.Fatal(err)
			}
		}
	}
	if backlog {
		appendAll()
	}
	start := time.Now()
	s, err := New(q, Options{Endpoints: []string{srv.URL()}})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	defer s.Close(ctx)
	if !backlog {
		appendAll()
	}
	if err := s.WaitAcked(ctx, uint64(n)); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkSenderThroughput measures frames and rows per second through a
// Sender into a count-only qwptest server on loopback, in steady state and
// replaying a backlog. The two phases alternate within each iteration so
// that machine noise hits both alike; the ratio is backlog / steady.
func BenchmarkSenderThroughput(b *testing.B) {
	srv, err := qwptest.NewServer(qwptest.Options{CountOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	n := benchFrames(b)
	var steady, backlog time.Duration
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			steady += benchPhase(b, srv, n, false)
			backlog += benchPhase(b, srv, n, true)
		} else {
			backlog += benchPhase(b, srv, n, true)
			steady += benchPhase(b, srv, n, false)
		}
	}
	frames := float64(b.N * n)
	b.ReportMetric(frames/steady.Seconds(), "steady-frames/s")
	b.ReportMetric(frames*benchRowsPerFrame/steady.Seconds(), "steady-rows/s")
	b.ReportMetric(frames/backlog.Seconds(), "backlog-frames/s")
	b.ReportMetric(frames*benchRowsPerFrame/backlog.Seconds(), "backlog-rows/s")
	b.ReportMetric(steady.Seconds()/backlog.Seconds(), "backlog/steady")
}

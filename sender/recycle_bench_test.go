package sender

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// switchClock timestamps, for each generation boundary, the OK that
// acknowledges the old generation's last frame and the sending of the new
// generation's first frame. Frames are sent once each (no failures), so the
// k-th frame sent is FSN k.
type switchClock struct {
	NopObserver
	mu     sync.Mutex
	acked  uint64
	sent   uint64
	last   map[uint64]int // FSN of a generation's last frame -> boundary index
	ackAt  []time.Time
	sendAt []time.Time
}

func (c *switchClock) FramesAcked(n int) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for range n {
		c.acked++
		if i, ok := c.last[c.acked]; ok {
			c.ackAt[i] = now
		}
	}
}

func (c *switchClock) FramesSent(n int) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent += uint64(n)
	if i, ok := c.last[c.sent-1]; ok {
		c.sendAt[i] = now
	}
}

// switchPhase drains gens generations of frames frames each from an SF slot
// on disk and returns the drain time and, per boundary, the recycle latency.
func switchPhase(b *testing.B, srv *qwptest.Server, gens, frames int) (time.Duration, []time.Duration) {
	q, err := sfqueue.Open(sfqueue.Options{Dir: b.TempDir(), SenderID: "bench", MaxTotalBytes: 4 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	f := newFeeder(b, q, true)
	clock := &switchClock{last: map[uint64]int{}}
	for g := range gens {
		if g > 0 {
			f.newGeneration()
		}
		last := f.frames(frames, benchRowsPerFrame)
		if g < gens-1 {
			clock.last[last] = g
		}
	}
	clock.ackAt = make([]time.Time, gens-1)
	clock.sendAt = make([]time.Time, gens-1)
	ctx := context.Background()
	start := time.Now()
	s, err := New(q, Options{Endpoints: []string{srv.URL()}, Observer: clock})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	if err := s.WaitAcked(ctx, q.PublishedFSN()); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	if err := s.Close(ctx); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, gens-1)
	for i := range clock.ackAt {
		lat = append(lat, clock.sendAt[i].Sub(clock.ackAt[i]))
	}
	return elapsed, lat
}

// BenchmarkGenerationSwitch drains a backlog of 40 dictionary generations
// of 5 frames (500 rows each) from a slot on disk, and the same frames in
// one generation, alternating, into a count-only qwptest server on
// loopback. It reports the recycle latency (the OK of a generation's last
// frame to the next generation's first frame on the wire: recycle, dial,
// catch-up) and the drain rate across switches against the one-generation
// rate of the same run.
func BenchmarkGenerationSwitch(b *testing.B) {
	srv, err := qwptest.NewServer(qwptest.Options{CountOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	const gens, frames = 40, 5
	var switching, single time.Duration
	var lat []time.Duration
	b.ResetTimer()
	for range b.N {
		d, l := switchPhase(b, srv, gens, frames)
		switching += d
		lat = append(lat, l...)
		d, _ = switchPhase(b, srv, 1, gens*frames)
		single += d
	}
	slices.Sort(lat)
	total := float64(b.N * gens * frames)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "recycle-ms-p50")
	b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds())/1000, "recycle-ms-p90")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "recycle-ms-max")
	b.ReportMetric(total/switching.Seconds(), "switching-frames/s")
	b.ReportMetric(total/single.Seconds(), "one-gen-frames/s")
	b.ReportMetric(switching.Seconds()/single.Seconds(), "switching/one-gen")
}

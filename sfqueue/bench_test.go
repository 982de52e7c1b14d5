package sfqueue_test

// Benchmarks that put the queue beside the plain file operation it is built
// on, in the same run, so BENCHMARKS.md can report ratios. See the
// "### sfqueue benchmarks" section there for the commands and figures.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/questdbexporter/questdbexporter/sfqueue"
)

const (
	benchSegment = sfqueue.DefaultMaxSegmentBytes
	// benchAckEvery acks the queue's published frames this often, so that
	// whole segments are trimmed as the baseline removes its written files.
	benchAckEvery = 64
	// envRecoveryBytes sizes the slot BenchmarkRecoveryScan builds.
	envRecoveryBytes     = "SFQUEUE_BENCH_RECOVERY_BYTES"
	defaultRecoveryBytes = 256 << 20
)

var benchSizes = []int{1 << 10, 64 << 10}

func sizeName(n int) string {
	if n%(1<<10) == 0 {
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}

func benchQueue(b *testing.B, d sfqueue.Durability) *sfqueue.Queue {
	b.Helper()
	q, err := sfqueue.Open(sfqueue.Options{Dir: b.TempDir(), SenderID: "bench", Durability: d})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := q.Close(); err != nil {
			b.Error(err)
		}
	})
	return q
}

// rotatingFile is the baseline writer: plain os.File.Write into files of the
// queue's segment size, each removed once the next one starts (the queue
// trims its acked segments the same way). prealloc fallocates each file
// first, as the queue does for a segment when it fsyncs (periodic, flush).
type rotatingFile struct {
	dir      string
	prealloc bool
	f        *os.File
	n        int
	written  int64
}

func (r *rotatingFile) write(b *testing.B, p []byte) {
	if r.f == nil || r.written+int64(len(p)) > benchSegment {
		if r.f != nil {
			r.f.Close()
			os.Remove(r.f.Name())
		}
		r.n++
		f, err := os.Create(filepath.Join(r.dir, strconv.Itoa(r.n)))
		if err != nil {
			b.Fatal(err)
		}
		if r.prealloc {
			if err := sfqueue.Preallocate(f, benchSegment); err != nil {
				b.Fatal(err)
			}
		}
		r.f, r.written = f, 0
	}
	if _, err := r.f.Write(p); err != nil {
		b.Fatal(err)
	}
	r.written += int64(len(p))
}

func (r *rotatingFile) close() {
	if r.f != nil {
		r.f.Close()
	}
}

// pairMetrics reports the throughput of a measured operation and of its
// baseline, timed alternately inside one benchmark so that the noise of a
// shared machine hits both alike, and their ratio (the figure with a target).
func pairMetrics(b *testing.B, bytes int64, name string, d time.Duration, base string, bd time.Duration) {
	mbps := func(d time.Duration) float64 { return float64(bytes) * float64(b.N) / 1e6 / d.Seconds() }
	b.ReportMetric(mbps(d), name+"-MB/s")
	b.ReportMetric(mbps(bd), base+"-MB/s")
	b.ReportMetric(mbps(d)/mbps(bd), "ratio")
}

// BenchmarkAppendMemory compares Append with sf_durability=memory to plain
// os.File.Write, alternating one of each per iteration (ns/op is their sum).
// Two baselines: the payloads alone ("ratio", target >= 0.8), and the same
// bytes the queue puts on disk, the payload framed by its length and CRC
// ("ratio-framed"), which isolates the queue's own cost from the cost of
// writes that no longer end on page boundaries.
func BenchmarkAppendMemory(b *testing.B) {
	const framing = 12 // the queue's length, item count and CRC32C (u32 each) around a payload
	for _, size := range benchSizes {
		payload := makePayload(1, size, 0, -1)
		framed := make([]byte, size+framing)
		b.Run("size="+sizeName(size), func(b *testing.B) {
			q := benchQueue(b, sfqueue.DurabilityMemory)
			r := &rotatingFile{dir: b.TempDir()}
			defer r.close()
			rf := &rotatingFile{dir: b.TempDir()}
			defer rf.close()
			ctx := context.Background()
			var qd, fd, ffd time.Duration
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				fsn, err := q.Append(ctx, payload)
				if err != nil {
					b.Fatal(err)
				}
				if fsn%benchAckEvery == 0 {
					q.Ack(fsn)
				}
				t1 := time.Now()
				r.write(b, payload)
				t2 := time.Now()
				rf.write(b, framed)
				ffd += time.Since(t2)
				fd += t2.Sub(t1)
				qd += t1.Sub(t0)
			}
			pairMetrics(b, int64(size), "sfqueue", qd, "osfile", fd)
			b.ReportMetric(float64(ffd)/float64(qd), "ratio-framed")
		})
	}
}

// BenchmarkMemorySealSync measures what memory durability's background
// fsync of sealed segments costs (issue 23): one appender, 4 MiB segments,
// acks every 64 frames, at full speed (the worst case for fsyncs per
// second: the appender outruns the disk) and paced at 20 MB/s (a busy
// collector). It reports the ingest rate, the append latency (p50, p99,
// max) and the fsyncs the queue ran per second and the device time they
// took per second of ingest (Stats.Fsyncs, Stats.FsyncTotal).
func BenchmarkMemorySealSync(b *testing.B) {
	for _, rate := range []int{0, 20} { // MB/s; 0: unpaced
		for _, size := range benchSizes {
			name := "rate=max/size=" + sizeName(size)
			if rate > 0 {
				name = "rate=" + strconv.Itoa(rate) + "MBps/size=" + sizeName(size)
			}
			b.Run(name, func(b *testing.B) { benchSealSync(b, size, rate) })
		}
	}
}

func benchSealSync(b *testing.B, size, rate int) {
	payload := makePayload(1, size, 0, -1)
	q := benchQueue(b, sfqueue.DurabilityMemory)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	before := q.Stats()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if rate > 0 { // stay at or under rate, a millisecond at a time
			due := start.Add(time.Duration(float64(i*size) / float64(rate) * 1e3)) // bytes / (MB/s) = µs; *1e3 = ns
			if d := time.Until(due); d > time.Millisecond {
				time.Sleep(d)
			}
		}
		t0 := time.Now()
		fsn, err := q.Append(ctx, payload)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		if fsn%benchAckEvery == 0 {
			q.Ack(fsn)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	st := q.Stats()
	b.ReportMetric(float64(size)*float64(b.N)/1e6/elapsed.Seconds(), "MB/s")
	latencyMetrics(b, "", lat, elapsed)
	b.ReportMetric(float64(slices.Max(lat).Microseconds()), "max-us")
	b.ReportMetric(float64(st.Fsyncs-before.Fsyncs)/elapsed.Seconds(), "fsyncs/s")
	b.ReportMetric(float64((st.FsyncTotal-before.FsyncTotal).Milliseconds())/elapsed.Seconds(), "fsync-ms/s")
}

// latencyMetrics reports frames/s and the p50/p99 latency of one frame,
// their names prefixed, and returns the p99.
func latencyMetrics(b *testing.B, prefix string, lat []time.Duration, elapsed time.Duration) time.Duration {
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), prefix+"frames/s")
	b.ReportMetric(float64(q(0.50).Microseconds()), prefix+"p50-us")
	b.ReportMetric(float64(q(0.99).Microseconds()), prefix+"p99-us")
	return q(0.99)
}

// BenchmarkFlushGroupCommit compares sf_durability=flush with 1, 8 and 64
// concurrent appenders against serial appends that each wait for their own
// fsync, in the same file setup (1 KiB frames written into 4 MiB segment
// files preallocated as the queue's are, each deleted when the next one
// starts, an fsync after every frame; the queue recycles its acked
// segments instead, zeroed back to unwritten extents, the state a fresh
// preallocated file's frames meet too). The two alternate in phases of equal
// duration, flushPhases per run, so that the load of a shared machine and
// its disk's slow spells fall on both alike; the latency of an append (or of
// one write+fsync) is recorded for every frame. Targets at 64 appenders:
// >= 20x the baseline's frames/s, p99 at most twice the baseline's p99
// (p99-ratio <= 2).
func BenchmarkFlushGroupCommit(b *testing.B) {
	const size = 1 << 10
	payload := makePayload(1, size, 0, -1)
	for _, appenders := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("sfqueue/appenders=%d", appenders), func(b *testing.B) {
			q := benchQueue(b, sfqueue.DurabilityFlush)
			base := &rotatingFile{dir: b.TempDir(), prealloc: true}
			defer base.close()
			framed := make([]byte, size+8) // the bytes the queue writes per frame
			var lat, baseLat []time.Duration
			var elapsed, baseElapsed time.Duration
			b.SetBytes(size)
			b.ResetTimer()
			for phase := range flushPhases {
				n := b.N / flushPhases
				if phase < b.N%flushPhases {
					n++
				}
				d, l := appendConcurrently(b, q, payload, appenders, n)
				elapsed += d
				lat = append(lat, l...)
				t := time.Now()
				for end := t.Add(d); ; {
					t0 := time.Now()
					base.write(b, framed)
					if err := base.f.Sync(); err != nil {
						b.Fatal(err)
					}
					baseLat = append(baseLat, time.Since(t0))
					if !time.Now().Before(end) {
						break
					}
				}
				baseElapsed += time.Since(t)
			}
			b.StopTimer()
			p99 := latencyMetrics(b, "", lat, elapsed)
			baseP99 := latencyMetrics(b, "base-", baseLat, baseElapsed)
			b.ReportMetric(float64(len(lat))/elapsed.Seconds()/(float64(len(baseLat))/baseElapsed.Seconds()), "x-base")
			b.ReportMetric(float64(p99)/float64(baseP99), "p99-ratio")
			// How well group commit batches: frames per fsync and the mean
			// fsync time, to compare with the baseline's per-frame fsync.
			if st := q.Stats(); st.Fsyncs > 0 {
				b.ReportMetric(float64(st.FramesAppended)/float64(st.Fsyncs), "frames/fsync")
				b.ReportMetric(float64(st.FsyncTotal.Microseconds())/float64(st.Fsyncs), "fsync-us")
			}
		})
	}
}

// flushPhases is how many times BenchmarkFlushGroupCommit alternates
// between the queue and its baseline in one run.
const flushPhases = 10

// appendConcurrently appends n frames from the given number of goroutines,
// acking every benchAckEvery FSNs, and returns the time it took and the
// latency of every append.
func appendConcurrently(b *testing.B, q *sfqueue.Queue, payload []byte, appenders, n int) (time.Duration, []time.Duration) {
	ctx := context.Background()
	left := atomic.Int64{}
	left.Store(int64(n))
	lats := make([][]time.Duration, appenders)
	errs := make([]error, appenders)
	var wg sync.WaitGroup
	start := time.Now()
	for g := range appenders {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				t0 := time.Now()
				fsn, err := q.Append(ctx, payload)
				if err != nil {
					errs[g] = err
					return
				}
				lats[g] = append(lats[g], time.Since(t0))
				if fsn%benchAckEvery == 0 {
					q.Ack(fsn)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	return elapsed, slices.Concat(lats...)
}

func recoveryBytes(b *testing.B) int64 {
	s := os.Getenv(envRecoveryBytes)
	if s == "" {
		return defaultRecoveryBytes
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1<<20 {
		b.Fatalf("%s=%q: want a byte count of at least 1 MiB", envRecoveryBytes, s)
	}
	return n
}

// BenchmarkRecoveryScan compares Open of a full slot (the CRC walk of every
// segment) with os.ReadFile of the same segment files, both with a warm page
// cache, alternating per iteration; it also reports reading every frame back
// through a Cursor (replay). Target: ratio (Open MB/s / ReadFile MB/s) >=
// 0.5. The slot holds SFQUEUE_BENCH_RECOVERY_BYTES of 64 KiB payloads
// (default 256 MiB). Building it is not timed.
func BenchmarkRecoveryScan(b *testing.B) {
	const size = 64 << 10
	dir := b.TempDir()
	opts := sfqueue.Options{Dir: dir, SenderID: "bench", Durability: sfqueue.DurabilityMemory}
	q, err := sfqueue.Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	want := uint64(recoveryBytes(b) / size)
	for i := range want {
		if _, err := q.Append(context.Background(), makePayload(i+1, size, 0, -1)); err != nil {
			q.Close()
			b.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		b.Fatal(err)
	}
	segs, err := filepath.Glob(filepath.Join(dir, "bench", "*.sfseg"))
	if err != nil || len(segs) == 0 {
		b.Fatalf("no segment files after appending %d frames (%v)", want, err)
	}
	var total int64
	for _, s := range segs {
		st, err := os.Stat(s)
		if err != nil {
			b.Fatal(err)
		}
		total += st.Size()
	}
	b.Logf("slot: %d frames of %d bytes, %d segment files, %d bytes on disk", want, size, len(segs), total)

	// A sub-benchmark, so that the slot is built once per -count, not once
	// per b.N probe.
	b.Run("frames="+sizeName(size), func(b *testing.B) {
		var openD, replayD, readD time.Duration
		for range b.N {
			t0 := time.Now()
			q, err := sfqueue.Open(opts)
			if err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if got := q.PublishedFSN(); got != want {
				b.Fatalf("recovered PublishedFSN %d, want %d", got, want)
			}
			c := q.NewCursor()
			c.Seek(1)
			n := uint64(0)
			for {
				_, _, ok, err := c.Next()
				if err != nil {
					b.Fatal(err)
				}
				if !ok {
					break
				}
				n++
			}
			t2 := time.Now()
			if n != want {
				b.Fatalf("replayed %d frames, want %d", n, want)
			}
			if err := q.Close(); err != nil {
				b.Fatal(err)
			}
			t3 := time.Now()
			for _, s := range segs {
				if _, err := os.ReadFile(s); err != nil {
					b.Fatal(err)
				}
			}
			readD += time.Since(t3)
			openD += t1.Sub(t0)
			replayD += t2.Sub(t1)
		}
		pairMetrics(b, total, "open", openD, "readfile", readD)
		b.ReportMetric(float64(total)*float64(b.N)/1e6/replayD.Seconds(), "replay-MB/s")
	})
}

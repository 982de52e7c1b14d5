//go:build linux

package sfqueue

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// segmentWriter is one way to put frames into 4 MiB segment files, rotating
// (and deleting the previous file) when one is full. The queue uses
// preallocPwrite; the others are the alternatives it was measured against.
type segmentWriter interface {
	write(b *testing.B, frame []byte)
	close()
}

type rotation struct {
	dir  string
	n    int
	size int64
}

func (r *rotation) next(b *testing.B) *os.File {
	r.n++
	f, err := os.OpenFile(filepath.Join(r.dir, strconv.Itoa(r.n)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	if r.n > 1 {
		os.Remove(filepath.Join(r.dir, strconv.Itoa(r.n-1)))
	}
	return f
}

// preallocPwrite: fallocate the whole segment, then pwrite each frame at its
// offset (what the queue does).
type preallocPwrite struct {
	rotation
	f   *os.File
	off int64
}

func (w *preallocPwrite) write(b *testing.B, frame []byte) {
	if w.f == nil || w.off+int64(len(frame)) > w.size {
		w.close()
		w.f = w.next(b)
		if err := allocate(w.f, w.size); err != nil {
			b.Fatal(err)
		}
		w.off = 0
	}
	if _, err := w.f.WriteAt(frame, w.off); err != nil {
		b.Fatal(err)
	}
	w.off += int64(len(frame))
}

func (w *preallocPwrite) close() {
	if w.f != nil {
		w.f.Close()
	}
}

// appendWrite: plain write(2) growing the file, no preallocation.
type appendWrite struct {
	rotation
	f   *os.File
	off int64
}

func (w *appendWrite) write(b *testing.B, frame []byte) {
	if w.f == nil || w.off+int64(len(frame)) > w.size {
		w.close()
		w.f = w.next(b)
		w.off = 0
	}
	if _, err := w.f.Write(frame); err != nil {
		b.Fatal(err)
	}
	w.off += int64(len(frame))
}

func (w *appendWrite) close() {
	if w.f != nil {
		w.f.Close()
	}
}

// mmapCopy: fallocate, map the segment shared, copy frames into the mapping.
type mmapCopy struct {
	rotation
	f   *os.File
	m   []byte
	off int
}

func (w *mmapCopy) write(b *testing.B, frame []byte) {
	if w.m == nil || w.off+len(frame) > len(w.m) {
		w.close()
		w.f = w.next(b)
		if err := allocate(w.f, w.size); err != nil {
			b.Fatal(err)
		}
		m, err := syscall.Mmap(int(w.f.Fd()), 0, int(w.size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
		if err != nil {
			b.Fatal(err)
		}
		w.m, w.off = m, 0
	}
	w.off += copy(w.m[w.off:], frame)
}

func (w *mmapCopy) close() {
	if w.m != nil {
		syscall.Munmap(w.m)
		w.m = nil
	}
	if w.f != nil {
		w.f.Close()
	}
}

// BenchmarkSegmentWritePath measures the three ways of writing frames into
// segments (page cache only, no fsync), for the choice documented in
// BENCHMARKS.md. Each iteration writes one frame with each method in turn,
// timed separately, so the noise of a shared machine hits all three alike;
// the metrics are ns per frame of each and their ratio to prealloc-pwrite:
//
//	go test -run '^$' -bench SegmentWritePath -count 5 ./sfqueue
func BenchmarkSegmentWritePath(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		frame := make([]byte, size)
		for i := range frame {
			frame[i] = byte(i)
		}
		b.Run(strconv.Itoa(size>>10)+"KiB", func(b *testing.B) {
			names := []string{"prealloc-pwrite", "append-write", "mmap-copy"}
			writers := []segmentWriter{
				&preallocPwrite{rotation: rotation{dir: b.TempDir(), size: DefaultMaxSegmentBytes}},
				&appendWrite{rotation: rotation{dir: b.TempDir(), size: DefaultMaxSegmentBytes}},
				&mmapCopy{rotation: rotation{dir: b.TempDir(), size: DefaultMaxSegmentBytes}},
			}
			spent := make([]time.Duration, len(writers))
			b.SetBytes(int64(size * len(writers)))
			for b.Loop() {
				for i, w := range writers {
					start := time.Now()
					w.write(b, frame)
					spent[i] += time.Since(start)
				}
			}
			for i, w := range writers {
				w.close()
				b.ReportMetric(float64(spent[i].Nanoseconds())/float64(b.N), names[i]+"-ns/frame")
				if i > 0 {
					b.ReportMetric(float64(spent[i])/float64(spent[0]), names[i]+"/pwrite")
				}
			}
		})
	}
}

// BenchmarkFramedWrite is plain write(2) of a payload against the same
// payload framed as the queue stores it (8 bytes more: length and CRC),
// alternating one of each per iteration into rotating 4 MiB files. The
// framed writes start and end off page boundaries, so the page cache takes
// more, smaller folios for them: this bounds the ratio BenchmarkAppendMemory
// can reach against its payload-only baseline. The metric is framed MB/s /
// payload MB/s (payload bytes both):
//
//	go test -run '^$' -bench FramedWrite -benchtime 2s -count 3 ./sfqueue
func BenchmarkFramedWrite(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		payload := make([]byte, size)
		framed := make([]byte, size+frameOverhead)
		b.Run(strconv.Itoa(size>>10)+"KiB", func(b *testing.B) {
			plain := &appendWrite{rotation: rotation{dir: b.TempDir(), size: DefaultMaxSegmentBytes}}
			withFrame := &appendWrite{rotation: rotation{dir: b.TempDir(), size: DefaultMaxSegmentBytes}}
			defer plain.close()
			defer withFrame.close()
			var pd, fd time.Duration
			for b.Loop() {
				t0 := time.Now()
				plain.write(b, payload)
				t1 := time.Now()
				withFrame.write(b, framed)
				fd += time.Since(t1)
				pd += t1.Sub(t0)
			}
			b.ReportMetric(float64(pd)/float64(fd), "framed/plain")
		})
	}
}

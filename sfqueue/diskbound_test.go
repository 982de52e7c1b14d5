//go:build unix

package sfqueue

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// allocatedBytes is the disk space the files in dir hold (st_blocks), what
// an operator's du shows.
func allocatedBytes(t *testing.T, dir string) int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		}
	}
	return n
}

// TestDiskHoldsNoMoreThanTheCap: batches that fill segments badly (a
// 600 KiB frame in a 1 MiB segment leaves 400 KiB unused) must not let the
// disk hold more than MaxTotalBytes, beside the active segment's
// preallocated tail and the spare, which the cap counts. Before the
// unused tails of sealed segments counted, the queue filled 17 MiB of
// disk under a 10 MiB cap. Also across a restart.
func TestDiskHoldsNoMoreThanTheCap(t *testing.T) {
	for _, d := range []Durability{DurabilityPeriodic, DurabilityFlush, DurabilityMemory} {
		t.Run(d.String(), func(t *testing.T) {
			const seg, total = 1 << 20, 10 << 20
			o := Options{Dir: t.TempDir(), SenderID: "s", MaxSegmentBytes: seg, MaxTotalBytes: total, Durability: d}
			slot := filepath.Join(o.Dir, o.SenderID)
			fill := func(q *Queue) int {
				p := make([]byte, 600<<10)
				n := 0
				for {
					ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
					_, err := q.Append(ctx, p)
					cancel()
					var full *FullError
					if errors.As(err, &full) {
						return n
					}
					if err != nil {
						t.Fatal(err)
					}
					n++
				}
			}
			check := func(q *Queue, when string) {
				// The active segment's unused tail is the one allowance.
				limit := int64(total + seg)
				if got := allocatedBytes(t, slot); got > limit {
					t.Fatalf("%s: the slot holds %d bytes on disk, the cap is %d (+%d for the active segment)", when, got, total, seg)
				}
				if used := q.Stats().UsedBytes; used > total {
					t.Fatalf("%s: UsedBytes %d over the cap %d", when, used, total)
				}
			}
			q := mustOpen(t, o)
			if n := fill(q); n < 8 {
				t.Fatalf("only %d frames of 600 KiB fit a 10 MiB cap", n)
			}
			check(q, "full")
			mustClose(t, q)
			q = mustOpen(t, o)
			defer q.Close()
			if n := fill(q); n != 0 {
				t.Fatalf("after a restart %d more frames fit a full queue", n)
			}
			check(q, "full after a restart")
		})
	}
}

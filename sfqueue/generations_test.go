package sfqueue

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// genPayload is a payload whose first 4 bytes are its dictionary
// generation, as the exporter stores them; genUse reads it back.
func genPayload(gen uint32, size int) []byte {
	p := make([]byte, size)
	binary.LittleEndian.PutUint32(p, gen)
	return p
}

func genUse(p []byte) (uint32, int64) { return binary.LittleEndian.Uint32(p), -1 }

func addGen(t *testing.T, q *Queue, gen uint32) {
	t.Helper()
	if err := q.AddSymbols(gen, 0, [][]byte{[]byte("sym")}); err != nil {
		t.Fatal(err)
	}
}

func waitGens(t *testing.T, q *Queue, want ...uint32) {
	t.Helper()
	waitFor(t, fmt.Sprintf("generations %v held", want), func() bool {
		return slices.Equal(q.SymbolGenerations(), want)
	})
}

// A generation is deleted once no unacknowledged frame uses it, by acks
// alone (no consumer connection involved), never the newest one.
func TestUnusedGenerationsDeletedOnAck(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			o := m.opts(t)
			o.SymbolUse = genUse
			q := mustOpen(t, o)
			defer q.Close()
			addGen(t, q, 0)
			for range 3 {
				mustAppend(t, q, genPayload(0, 64))
			}
			addGen(t, q, 1)
			for range 2 {
				mustAppend(t, q, genPayload(1, 64))
			}
			q.Ack(2) // frame 3 still uses generation 0
			addGen(t, q, 2)
			if got := q.SymbolGenerations(); !slices.Equal(got, []uint32{0, 1, 2}) {
				t.Fatalf("generations %v with frame 3 of generation 0 unacknowledged", got)
			}
			q.Ack(3)
			waitGens(t, q, 1, 2)
			if m.name == "sf" {
				// The watermark on disk covers the frames of the deleted
				// generation (a crash now must not find them unacked).
				w, ok, err := readWatermark(q.fs, q.slot)
				if err != nil || !ok || w.acked < 3 {
					t.Fatalf("watermark %+v (ok %v, %v) after deleting generation 0, want acked >= 3", w, ok, err)
				}
			}
			q.Ack(5) // everything acked: generation 2 is the writer's
			waitGens(t, q, 2)
		})
	}
}

// Eviction frees the dictionaries that only evicted frames used.
func TestEvictionDeletesUnusedGenerations(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			o := m.opts(t)
			o.SymbolUse = genUse
			o.OnFull = OnFullEvictOldest
			o.MaxSegmentBytes = 1024
			o.MaxTotalBytes = 2048
			q := mustOpen(t, o)
			defer q.Close()
			addGen(t, q, 0)
			for range 3 {
				mustAppend(t, q, genPayload(0, 200))
			}
			addGen(t, q, 1)
			st := q.Stats()
			before, dictBefore := st.FramesEvicted, st.DictBytes
			for q.Stats().FramesEvicted == before {
				mustAppend(t, q, genPayload(1, 200))
			}
			waitGens(t, q, 1)
			if st := q.Stats(); st.DictBytes >= dictBefore {
				t.Fatalf("dictionary bytes %d after evicting generation 0's frames, %d before", st.DictBytes, dictBefore)
			}
		})
	}
}

// Frames recovered at Open have generations the queue did not see appended:
// their dictionaries stay until every recovered frame is acknowledged.
func TestRecoveredFramesKeepTheirGenerations(t *testing.T) {
	o := Options{Dir: t.TempDir(), SenderID: "s1", SymbolUse: genUse}
	q := mustOpen(t, o)
	addGen(t, q, 0)
	mustAppend(t, q, genPayload(0, 64))
	addGen(t, q, 1)
	mustAppend(t, q, genPayload(1, 64))
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	q = mustOpen(t, o)
	defer q.Close()
	q.Ack(1)
	addGen(t, q, 2)
	mustAppend(t, q, genPayload(2, 64))
	if got := q.SymbolGenerations(); !slices.Equal(got, []uint32{0, 1, 2}) {
		t.Fatalf("generations %v with a recovered frame unacknowledged, want all kept", got)
	}
	q.Ack(2)
	waitGens(t, q, 2)
}

// The dictionary's records count in the cap with the segments.
func TestDictionaryCountsInTheCap(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			o := m.opts(t)
			o.SymbolUse = genUse
			o.MaxSegmentBytes, o.MaxTotalBytes, o.AppendDeadline = 1024, 2048, time.Millisecond
			q := mustOpen(t, o)
			defer q.Close()
			if err := q.AddSymbols(0, 0, [][]byte{make([]byte, 1200)}); err != nil {
				t.Fatal(err)
			}
			st := q.Stats()
			want := int64(1200 + 16) // a record
			if !st.OnDisk {
				want = 1200 + 2 // a chunk of its own: uvarint length and bytes
			}
			if st.DictBytes != want || st.UsedBytes != st.DictBytes || st.DictGenerations != 1 {
				t.Fatalf("after 1,200 bytes of symbols: %+v, want %d bytes", st, want)
			}
			mustAppend(t, q, genPayload(0, 300)) // 1216 + 24 + 308 fit 2048
			_, err := q.Append(context.Background(), genPayload(0, 600))
			var fe *FullError
			if !errors.As(err, &fe) {
				t.Fatalf("a frame that fits beside the segments but not beside the dictionary: %v, want *FullError", err)
			}
		})
	}
}

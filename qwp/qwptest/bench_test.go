package qwptest

import (
	"context"
	"strings"
	"testing"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// benchFrame is a 1000-row frame of every type with a third of the values
// NULL, Gorilla timestamps and delta symbols.
func benchFrame(b *testing.B) []byte {
	t := &testing.T{}
	e := qwp.NewEncoder(qwp.NewMemDict(), qwp.EncoderOptions{Gorilla: true, DeltaSymbolDict: true})
	frame, _ := encodeRows(t, e, "bench", allTypes, 0, 1000, func(col, row int) bool { return (row+col)%3 == 1 })
	if t.Failed() || len(frame) == 0 {
		b.Fatal("encoding the benchmark frame failed")
	}
	return frame
}

// BenchmarkDecode compares full decoding with count-only validation of the
// same frame.
func BenchmarkDecode(b *testing.B) {
	frame := benchFrame(b)
	for _, countOnly := range []bool{false, true} {
		name := "full"
		if countOnly {
			name = "count-only"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				d := Decoder{CountOnly: countOnly}
				if _, err := d.Decode(frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkServerIngest sends frames of 1000 LONG rows over one connection
// and waits for the cumulative OK, with rows kept and in count-only mode.
func BenchmarkServerIngest(b *testing.B) {
	frame := longRows(0, "bench", 1000)
	for _, countOnly := range []bool{false, true} {
		name := "rows-kept"
		if countOnly {
			name = "count-only"
		}
		b.Run(name, func(b *testing.B) {
			s, err := NewServer(Options{CountOnly: countOnly})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			c, err := qwp.Dial(context.Background(), qwp.DialOptions{URL: s.URL()})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ws := c.WS
			b.SetBytes(int64(len(frame)))
			var r qwp.Response
			sent, acked := int64(-1), int64(-1)
			readOK := func() {
				_, msg, err := ws.ReadMessage()
				if err != nil {
					b.Fatal(err)
				}
				if err := qwp.DecodeResponse(msg, &r); err != nil || r.Status != qwp.StatusOK {
					b.Fatal(err, r)
				}
				acked = r.Seq
			}
			for b.Loop() {
				if err := c.WriteMessage(frame); err != nil { // one frame, as QuestDB requires
					b.Fatal(err)
				}
				sent++
				for sent-acked > 64 { // OKs are cumulative: keep up to 64 frames in flight
					readOK()
				}
			}
			for acked < sent {
				readOK()
			}
		})
	}
}

// BenchmarkCommitDedup stages and commits 1000 rows of (timestamp,
// series_id, value) per op, decoding excluded: into a table without dedup
// keys, into one with DEDUP UPSERT KEYS(ts, series_id) where every row is
// new, and into that table where every row replays one already stored.
func BenchmarkCommitDedup(b *testing.B) {
	const rows = 1000
	for _, mode := range []string{"no-dedup", "dedup-new", "dedup-replay"} {
		b.Run(mode, func(b *testing.B) {
			s, err := NewServer(Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ddl := metricsDDL
			if mode == "no-dedup" {
				ddl = strings.TrimSuffix(ddl, " DEDUP UPSERT KEYS(ts, series_id)")
			}
			if err := s.Exec(ddl); err != nil {
				b.Fatal(err)
			}
			ts, keys, vals := make([]any, rows), make([]any, rows), make([]any, rows)
			block := Block{Table: "m", Rows: rows, Columns: []Column{
				{Name: "", Type: qwp.TypeTimestampNanos, Values: ts},
				{Name: "series_id", Type: qwp.TypeLong, Values: keys},
				{Name: "value", Type: qwp.TypeDouble, Values: vals},
			}}
			var p pending
			seen := map[*table]bool{}
			b.ReportAllocs()
			op := int64(0)
			for b.Loop() {
				for i := range rows {
					base := op * rows
					if mode == "dedup-replay" {
						base = 0
					}
					ts[i], keys[i], vals[i] = base+int64(i), int64(i%10), float64(op)
				}
				op++
				if err := s.store.stage(&block, &p, seen); err != nil {
					b.Fatal(err)
				}
				s.store.commit(&p, nil)
			}
			want := op * rows
			if mode == "dedup-replay" {
				want = rows
			}
			if got := s.RowCount("m"); got != want {
				b.Fatalf("%d rows, want %d", got, want)
			}
		})
	}
}

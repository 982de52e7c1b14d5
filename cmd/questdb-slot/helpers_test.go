package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/questdbexporter/questdbexporter/internal/datamodel"
	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// slotSpec describes a slot the tests build with the queue's own writer.
type slotSpec struct {
	gens     int    // dictionary generations
	perGen   int    // data points per generation
	ack      uint64 // FSNs 1..ack acknowledged before Close
	table    string // gauge table name ("" = otel_metrics_gauge)
	promoted []string
}

// builtSlot is a slot on disk and what the test knows of its frames.
type builtSlot struct {
	dir    string
	frames int            // FSNs 1..frames
	rows   map[uint64]int // rows per FSN
	gen    map[uint64]uint32
	minTS  map[uint64]int64
	maxTS  map[uint64]int64
	table  string
}

// rowsAbove sums the rows of the frames above fsn, except those in skip.
func (b *builtSlot) rowsAbove(fsn uint64, skip func(uint64) bool) int64 {
	var n int64
	for f := fsn + 1; f <= uint64(b.frames); f++ {
		if skip == nil || !skip(f) {
			n += int64(b.rows[f])
		}
	}
	return n
}

// buildSlot writes gauge data points as the exporter's writer does: rows
// encoded by the data model into QWP messages with a delta symbol
// dictionary (about 1 KiB each), each generation's entries persisted with
// AddSymbols before the frames that use them, every payload prefixed with
// its generation; segments of 4 KiB, so a slot spans several.
func buildSlot(t *testing.T, parent, id string, s slotSpec) *builtSlot {
	t.Helper()
	if s.table == "" {
		s.table = "otel_metrics_gauge"
	}
	q, err := sfqueue.Open(sfqueue.Options{Dir: parent, SenderID: id, MaxSegmentBytes: 4096, Durability: sfqueue.DurabilityMemory})
	if err != nil {
		t.Fatal(err)
	}
	b := &builtSlot{dir: filepath.Join(parent, id), rows: map[uint64]int{}, gen: map[uint64]uint32{},
		minTS: map[uint64]int64{}, maxTS: map[uint64]int64{}, table: s.table}
	promoted, err := datamodel.PromotedColumns(s.promoted)
	if err != nil {
		t.Fatal(err)
	}
	tables := datamodel.DefaultTables()
	tables.Gauge = s.table
	point := 0
	for g := range s.gens {
		gen := uint32(g)
		dict := qwp.NewMemDict()
		enc := qwp.NewEncoder(dict, qwp.EncoderOptions{MaxFrameBytes: 1024, DeltaSymbolDict: true, Gorilla: true})
		rows, err := datamodel.NewEncoder(enc, datamodel.EncoderConfig{Tables: tables, Promoted: promoted})
		if err != nil {
			t.Fatal(err)
		}
		dec := &qwptest.Decoder{}
		persisted := 0
		emit := func(frame []byte) error {
			var entries [][]byte
			for id := persisted; id < dict.Len(); id++ {
				entries = append(entries, dict.Entry(id))
			}
			if err := q.AddSymbols(gen, persisted, entries); err != nil {
				return err
			}
			persisted = dict.Len()
			m, err := dec.Decode(frame)
			if err != nil {
				return fmt.Errorf("frame FSN %d does not decode: %w", b.frames+1, err)
			}
			n := 0
			for _, blk := range m.Tables {
				n += blk.Rows
			}
			// With its row count, as the exporter's writer stores it.
			payload := binary.LittleEndian.AppendUint32(nil, gen)
			fsn, err := q.AppendBatchItems(context.Background(), [][]byte{append(payload, frame...)}, []uint32{uint32(n)})
			if err != nil {
				return err
			}
			b.frames, b.gen[fsn], b.rows[fsn] = int(fsn), gen, n
			for _, blk := range m.Tables {
				for _, c := range blk.Columns {
					if c.Name != "" {
						continue
					}
					for _, v := range c.Values {
						ts := v.(int64)
						if lo, ok := b.minTS[fsn]; !ok || ts < lo {
							b.minTS[fsn] = ts
						}
						b.maxTS[fsn] = max(b.maxTS[fsn], ts)
					}
				}
			}
			return nil
		}
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", fmt.Sprintf("svc-%d", g))
		sm := rm.ScopeMetrics().AppendEmpty()
		m := sm.Metrics().AppendEmpty()
		m.SetName("queue.depth")
		dps := m.SetEmptyGauge().DataPoints()
		for range s.perGen {
			dp := dps.AppendEmpty()
			dp.SetTimestamp(pcommon.Timestamp(1_767_225_600_000_000_000 + int64(point)*1_000_000))
			dp.SetDoubleValue(float64(point))
			dp.Attributes().PutStr("request", fmt.Sprintf("r-%d", point)) // a new symbol per point
			for _, k := range s.promoted {
				dp.Attributes().PutStr(k, fmt.Sprintf("%s-%d", k, point%3))
			}
			point++
		}
		if _, err := rows.EncodeMetrics(md, emit); err != nil {
			t.Fatal(err)
		}
		if err := rows.Flush(emit); err != nil {
			t.Fatal(err)
		}
	}
	if s.ack > 0 {
		q.Ack(s.ack)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if b.frames < 8 {
		t.Fatalf("the slot holds %d frames; the tests need several segments", b.frames)
	}
	return b
}

// slotState renders every file of dir but those named in skip (name, mode,
// content digest), to prove that a command left the slot as it was.
func slotState(t *testing.T, dir string, skip ...string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range ents {
		if slices.Contains(skip, e.Name()) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %v %x\n", e.Name(), info.Mode(), sha256.Sum256(data))
	}
	return b.String()
}

// runTool runs the command line and returns exit code, stdout and stderr.
func runTool(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// mustContain fails unless s holds every want.
func mustContain(t *testing.T, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("output lacks %q:\n%s", w, s)
		}
	}
}

// scanOf is the queue's own scan of dir, for locating frames to damage.
func scanOf(t *testing.T, dir string) *sfqueue.SlotScan {
	t.Helper()
	s, err := sfqueue.ScanSlot(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

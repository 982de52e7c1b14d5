package questdbexporter

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/questdbexporter/questdbexporter/sfqueue"
)

func TestLevelAlerter(t *testing.T) {
	type step struct {
		advance time.Duration
		sample  queueSample
		level   queueLevel
		logged  zapcore.Level // level of the expected log entry; -2 = none
	}
	const none = zapcore.Level(-2)
	capB := int64(1000)
	tests := []struct {
		name  string
		evict bool
		steps []step
	}{
		{
			name: "ok to high to full to ok",
			steps: []step{
				{sample: queueSample{Used: 100, Capacity: capB}, level: levelOK, logged: none},
				{sample: queueSample{Used: 799, Capacity: capB}, level: levelOK, logged: none},
				{sample: queueSample{Used: 800, Capacity: capB}, level: levelHigh, logged: zapcore.WarnLevel},
				{sample: queueSample{Used: 900, Capacity: capB}, level: levelHigh, logged: none},
				{sample: queueSample{Used: 1000, Capacity: capB}, level: levelFull, logged: zapcore.ErrorLevel},
				// Hysteresis: full holds until below 80 %, never falling back to high.
				{sample: queueSample{Used: 850, Capacity: capB}, level: levelFull, logged: none},
				{sample: queueSample{Used: 800, Capacity: capB}, level: levelFull, logged: none},
				{sample: queueSample{Used: 799, Capacity: capB}, level: levelOK, logged: zapcore.InfoLevel},
				{sample: queueSample{Used: 850, Capacity: capB}, level: levelHigh, logged: zapcore.WarnLevel},
				{sample: queueSample{Used: 10, Capacity: capB}, level: levelOK, logged: zapcore.InfoLevel},
				{sample: queueSample{Used: 0, Capacity: capB}, level: levelOK, logged: none},
			},
		},
		{
			name: "full repeats every ten minutes while it lasts",
			steps: []step{
				{sample: queueSample{Used: 1000, Capacity: capB}, level: levelFull, logged: zapcore.ErrorLevel},
				{advance: time.Minute, sample: queueSample{Used: 1000, Capacity: capB}, level: levelFull, logged: none},
				{advance: 8 * time.Minute, sample: queueSample{Used: 1000, Capacity: capB}, level: levelFull, logged: none},
				{advance: time.Minute, sample: queueSample{Used: 1000, Capacity: capB}, level: levelFull, logged: zapcore.ErrorLevel},
				{advance: 9 * time.Minute, sample: queueSample{Used: 1000, Capacity: capB}, level: levelFull, logged: none},
				{advance: time.Minute, sample: queueSample{Used: 1000, Capacity: capB}, level: levelFull, logged: zapcore.ErrorLevel},
			},
		},
		{
			name: "refusing, draining a little and refusing again is one full alert",
			steps: []step{
				{sample: queueSample{Used: 700, Capacity: capB}, level: levelOK, logged: none},
				{advance: time.Second, sample: queueSample{Used: 810, Capacity: capB, AtCap: true, Refused: 1}, level: levelFull, logged: zapcore.ErrorLevel},
				{advance: time.Second, sample: queueSample{Used: 820, Capacity: capB, Refused: 1}, level: levelFull, logged: none},
				{advance: 5 * time.Second, sample: queueSample{Used: 830, Capacity: capB, AtCap: true, Refused: 2}, level: levelFull, logged: none},
				{advance: time.Second, sample: queueSample{Used: 900, Capacity: capB, Refused: 2}, level: levelFull, logged: none},
				{advance: time.Second, sample: queueSample{Used: 100, Capacity: capB, Refused: 2}, level: levelOK, logged: zapcore.InfoLevel},
			},
		},
		{
			name: "a refusal since the last check is full even below the cap",
			steps: []step{
				{sample: queueSample{Used: 500, Capacity: capB, Refused: 3}, level: levelOK, logged: none},
				{sample: queueSample{Used: 500, Capacity: capB, Refused: 4}, level: levelFull, logged: zapcore.ErrorLevel},
				{sample: queueSample{Used: 500, Capacity: capB, Refused: 4}, level: levelOK, logged: zapcore.InfoLevel},
			},
		},
		{
			name:  "an eviction is full under evict_oldest",
			evict: true,
			steps: []step{
				{sample: queueSample{Used: 900, Capacity: capB}, level: levelHigh, logged: zapcore.WarnLevel},
				{sample: queueSample{Used: 900, Capacity: capB, Evicted: 2}, level: levelFull, logged: zapcore.ErrorLevel},
				{sample: queueSample{Used: 900, Capacity: capB, Evicted: 2}, level: levelFull, logged: none},
				{sample: queueSample{Used: 700, Capacity: capB, Evicted: 2}, level: levelOK, logged: zapcore.InfoLevel},
			},
		},
		{
			name: "no capacity known stays ok",
			steps: []step{
				{sample: queueSample{Used: 5}, level: levelOK, logged: none},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.DebugLevel)
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			a := newLevelAlerter(zap.New(core), func() time.Time { return now }, tt.evict)
			for i, s := range tt.steps {
				now = now.Add(s.advance)
				if got := a.observe(s.sample); got != s.level {
					t.Fatalf("step %d: level %v, want %v", i, got, s.level)
				}
				entries := logs.TakeAll()
				if s.logged == none {
					if len(entries) != 0 {
						t.Fatalf("step %d: logged %q, want nothing", i, entries[0].Message)
					}
					continue
				}
				if len(entries) != 1 || entries[0].Level != s.logged {
					t.Fatalf("step %d: entries %v, want one at %v", i, entries, s.logged)
				}
				if got := entries[0].ContextMap()["level"]; got != s.level.String() {
					t.Fatalf("step %d: level field %v, want %v", i, got, s.level)
				}
			}
		})
	}
}

func TestLevelAlerterFullWording(t *testing.T) {
	for _, evict := range []bool{false, true} {
		core, logs := observer.New(zapcore.DebugLevel)
		a := newLevelAlerter(zap.New(core), time.Now, evict)
		a.observe(queueSample{Used: 10, Capacity: 10})
		want := "refusing new records"
		if evict {
			want = "evicting the oldest records"
		}
		if logs.FilterMessageSnippet(want).Len() != 1 {
			t.Fatalf("evict=%v: full alert %v does not say %q", evict, logs.All(), want)
		}
	}
}

// TestEvictionSummary: a queue evicting for nearly every append logs the
// full alert once (with the frames and rows evicted so far) and then one
// summary per evictionSummaryInterval, with the frames, rows and bytes
// evicted since the previous line and the totals.
func TestEvictionSummary(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := newLevelAlerter(zap.New(core), func() time.Time { return now }, true)
	var evicted uint64
	for range 150 { // 150 s of one eviction of 10 frames (1000 bytes, 500 rows) per second
		evicted += 10
		a.observe(queueSample{Used: 990, Capacity: 1000, AtCap: true, Evicted: evicted, EvictedBytes: evicted * 100, EvictedRows: evicted * 50})
		now = now.Add(time.Second)
	}
	all := logs.AllUntimed()
	if len(all) != 3 || all[0].Level != zapcore.ErrorLevel {
		t.Fatalf("150 s of evictions logged %d lines %v; want the full alert and two summaries", len(all), all)
	}
	if m := all[0].ContextMap(); m["evicted_frames_total"] != uint64(10) || m["evicted_rows_total"] != uint64(500) || m["evicted_frames_rows_unknown_total"] != nil {
		t.Fatalf("full alert %v; want 10 frames and 500 rows evicted, no frames of unknown rows", m)
	}
	for i, e := range all[1:] {
		m := e.ContextMap()
		if e.Level != zapcore.WarnLevel || m["frames"] != uint64(600) || m["rows"] != uint64(30000) || m["payload_bytes"] != uint64(60000) ||
			m["over"] != time.Minute || m["evicted_rows_total"] != uint64(30000*(i+1)+500) || m["frames_rows_unknown"] != nil {
			t.Fatalf("summary %d: %v %v; want a warn with 600 frames, 30000 rows, 60000 bytes over 1m", i, e.Level, m)
		}
	}
}

// TestEvictionSummaryFlushedAtShutdown: the evictions since the last
// summary are logged at shutdown however recent it was, and nothing is
// logged when there are none.
func TestEvictionSummaryFlushedAtShutdown(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := newLevelAlerter(zap.New(core), func() time.Time { return now }, true)
	a.observe(queueSample{Used: 990, Capacity: 1000, AtCap: true, Evicted: 2, EvictedRows: 20})
	now = now.Add(5 * time.Second)
	a.observe(queueSample{Used: 990, Capacity: 1000, AtCap: true, Evicted: 5, EvictedRows: 50})
	if n := logs.Len(); n != 1 {
		t.Fatalf("%d lines before the shutdown, want the full alert only", n)
	}
	a.flushEvictions(queueSample{Used: 990, Capacity: 1000, Evicted: 6, EvictedRows: 61})
	all := logs.AllUntimed()
	if len(all) != 2 {
		t.Fatalf("%d lines after the flush, want a summary", len(all))
	}
	if m := all[1].ContextMap(); m["frames"] != uint64(4) || m["rows"] != uint64(41) || m["evicted_rows_total"] != uint64(61) {
		t.Fatalf("flushed summary %v; want 4 frames, 41 rows, 61 rows in total", m)
	}
	a.flushEvictions(queueSample{Used: 990, Capacity: 1000, Evicted: 6, EvictedRows: 61})
	if logs.Len() != 2 {
		t.Fatalf("a flush without new evictions logged: %v", logs.AllUntimed()[2:])
	}
}

// TestEvictionSummaryNamesFramesOfUnknownRows: frames an older release
// wrote record no rows; their evictions are logged as frames of unknown
// rows, never folded into the rows as zero.
func TestEvictionSummaryNamesFramesOfUnknownRows(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := newLevelAlerter(zap.New(core), func() time.Time { return now }, true)
	a.observe(queueSample{Used: 990, Capacity: 1000, AtCap: true, Evicted: 4, EvictedRowsUnknown: 4})
	now = now.Add(time.Minute)
	a.observe(queueSample{Used: 990, Capacity: 1000, AtCap: true, Evicted: 10, EvictedRows: 60, EvictedRowsUnknown: 7})
	all := logs.AllUntimed()
	if len(all) != 2 {
		t.Fatalf("logged %d lines %v; want the full alert and a summary", len(all), all)
	}
	if m := all[0].ContextMap(); m["evicted_frames_rows_unknown_total"] != uint64(4) || m["evicted_rows_total"] != uint64(0) {
		t.Fatalf("full alert %v; want 4 frames of unknown rows and 0 rows", m)
	}
	m := all[1].ContextMap()
	if m["frames"] != uint64(6) || m["rows"] != uint64(60) || m["frames_rows_unknown"] != uint64(3) ||
		!strings.Contains(all[1].Message, "older release") {
		t.Fatalf("summary %q %v; want 6 frames, 60 rows, 3 frames of unknown rows named as an older release's", all[1].Message, m)
	}
}

// TestFullAlertNamesDiskFull: refusals by a full file system below the cap
// reach the full alert (through sampleQueue, as the exporter samples),
// with their count and what to do, since the queue's own ENOSPC Warn is
// summarised once a minute.
func TestFullAlertNamesDiskFull(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	a := newLevelAlerter(zap.New(core), time.Now, false)
	a.observe(sampleQueue(sfqueue.Stats{UnackedBytes: 100, CapacityBytes: 1000}))
	a.observe(sampleQueue(sfqueue.Stats{UnackedBytes: 100, CapacityBytes: 1000, AtCap: true, FullErrors: 7, DiskFullErrors: 5}))
	full := logs.FilterMessageSnippet("file system is full (ENOSPC)").AllUntimed()
	if len(full) != 1 || full[0].Level != zapcore.ErrorLevel {
		t.Fatalf("disk-full refusals: lines %v; want one full alert naming ENOSPC", logs.AllUntimed())
	}
	if m := full[0].ContextMap(); m["refused_total"] != uint64(7) || m["refused_disk_full_total"] != uint64(5) {
		t.Fatalf("full alert fields %v; want refused_total 7, refused_disk_full_total 5", m)
	}
}

package questdbexporter

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
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
// full alert once and then one summary per evictionSummaryInterval, with the
// frames and bytes evicted since the previous line.
func TestEvictionSummary(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := newLevelAlerter(zap.New(core), func() time.Time { return now }, true)
	var evicted uint64
	for range 150 { // 150 s of one eviction of 10 frames (1000 bytes) per second
		evicted += 10
		a.observe(queueSample{Used: 990, Capacity: 1000, AtCap: true, Evicted: evicted, EvictedBytes: evicted * 100})
		now = now.Add(time.Second)
	}
	all := logs.AllUntimed()
	if len(all) != 3 || all[0].Level != zapcore.ErrorLevel {
		t.Fatalf("150 s of evictions logged %d lines %v; want the full alert and two summaries", len(all), all)
	}
	for i, e := range all[1:] {
		m := e.ContextMap()
		if e.Level != zapcore.WarnLevel || m["frames"] != uint64(600) || m["payload_bytes"] != uint64(60000) || m["over"] != time.Minute {
			t.Fatalf("summary %d: %v %v; want a warn with 600 frames, 60000 bytes over 1m", i, e.Level, m)
		}
	}
}

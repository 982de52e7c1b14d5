package questdbexporter

import (
	"time"

	"go.uber.org/zap"
)

// queueLevel is the fill level of the SF queue as the alerts report it
// (seed 002): ok below 80 % of sf_max_total_bytes, high from 80 %, full at the
// cap or when a frame was refused or evicted since the previous check.
type queueLevel int

const (
	levelOK queueLevel = iota
	levelHigh
	levelFull
)

func (l queueLevel) String() string {
	switch l {
	case levelHigh:
		return "high"
	case levelFull:
		return "full"
	default:
		return "ok"
	}
}

// highWatermarkPercent is where the queue level turns high.
const highWatermarkPercent = 80

// fullRepeatInterval is how often the full alert is repeated while it lasts.
const fullRepeatInterval = 10 * time.Minute

// queueSample is one look at the queue for the alert state machine.
type queueSample struct {
	Used, Capacity int64
	// Refused and Evicted are running totals: appends refused under
	// on_full: block and frames deleted under on_full: evict_oldest. An
	// increase since the previous sample counts as full even when the bytes
	// are already below the cap again.
	Refused, Evicted uint64
}

// levelAlerter is the queue-level alert state machine. It logs a level
// change once (high: warn, full: error, ok: info) and repeats the full alert
// every fullRepeatInterval while the level stays full. Not safe for
// concurrent use: one monitor goroutine owns it.
type levelAlerter struct {
	logger  *zap.Logger
	now     func() time.Time
	evict   bool // on_full: evict_oldest, which changes the wording of full
	level   queueLevel
	prev    queueSample
	started bool
	fullLog time.Time // when the full alert was last logged
}

func newLevelAlerter(logger *zap.Logger, now func() time.Time, evict bool) *levelAlerter {
	return &levelAlerter{logger: logger, now: now, evict: evict}
}

// classify returns the level of s given the previous sample.
func classify(s, prev queueSample, havePrev bool) queueLevel {
	if s.Capacity > 0 && s.Used >= s.Capacity {
		return levelFull
	}
	if havePrev && (s.Refused > prev.Refused || s.Evicted > prev.Evicted) {
		return levelFull
	}
	if s.Capacity > 0 && s.Used*100 >= s.Capacity*highWatermarkPercent {
		return levelHigh
	}
	return levelOK
}

// observe feeds one sample and logs what changed. It returns the new level.
func (a *levelAlerter) observe(s queueSample) queueLevel {
	next := classify(s, a.prev, a.started)
	prev := a.level
	a.prev, a.started = s, true
	a.level = next
	fields := []zap.Field{
		zap.String("level", next.String()),
		zap.Int64("queue_bytes", s.Used),
		zap.Int64("queue_capacity_bytes", s.Capacity),
		zap.Float64("fill_ratio", fillRatio(s.Used, s.Capacity)),
	}
	switch {
	case next == levelFull && (prev != levelFull || a.now().Sub(a.fullLog) >= fullRepeatInterval):
		a.fullLog = a.now()
		msg := "QuestDB exporter queue full: refusing new records (on_full: block); sources are told to retry"
		if a.evict {
			msg = "QuestDB exporter queue full: evicting the oldest records (on_full: evict_oldest), data gap"
		}
		a.logger.Error(msg, append(fields, zap.Uint64("refused_total", s.Refused), zap.Uint64("evicted_frames_total", s.Evicted))...)
	case next == levelHigh && prev != levelHigh:
		a.logger.Warn("QuestDB exporter queue high: at or above 80% of sf_max_total_bytes; QuestDB is slow or unreachable", fields...)
	case next == levelOK && prev != levelOK:
		a.logger.Info("QuestDB exporter queue ok: back below 80% of sf_max_total_bytes", fields...)
	}
	return next
}

func fillRatio(used, capacity int64) float64 {
	if capacity <= 0 {
		return 0
	}
	return float64(used) / float64(capacity)
}

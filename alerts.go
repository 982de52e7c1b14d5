package questdbexporter

import (
	"time"

	"go.uber.org/zap"

	"github.com/questdbexporter/questdbexporter/sfqueue"
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

// highWatermarkPercent is where the queue level turns high, and below
// which a full or high queue is ok again.
const highWatermarkPercent = 80

// fullRepeatInterval is how often the full alert is repeated while it lasts.
const fullRepeatInterval = 10 * time.Minute

// evictionSummaryInterval is the shortest time between two eviction
// summaries: a queue at its cap under evict_oldest evicts a segment for
// nearly every append.
const evictionSummaryInterval = time.Minute

// queueSample is one look at the queue for the alert state machine and the
// fill gauges. Build it with sampleQueue, which is where the queue's
// bytes and fill ratio are defined.
type queueSample struct {
	// Used is queue_bytes: the bytes of unacknowledged frames (what an
	// outage piles up), out of Capacity (sf_max_total_bytes).
	Used, Capacity int64
	// AtCap: appends are finding no room right now (refused or evicting).
	AtCap bool
	// Refused and Evicted are running totals: appends refused under
	// on_full: block and frames deleted under on_full: evict_oldest. An
	// increase since the previous sample counts as full even when the bytes
	// are already below the cap again. EvictedBytes are the evicted frames'
	// payload bytes, EvictedRows the rows they held (rows_evicted), and
	// EvictedRowsUnknown the evicted frames whose rows are not recorded
	// (written by an older release, segment format 1, or unreadable at
	// eviction): counted in Evicted, not in EvictedRows.
	Refused, Evicted, EvictedBytes  uint64
	EvictedRows, EvictedRowsUnknown uint64
	// DiskFull is the Refused whose reason was a full file system (ENOSPC)
	// below the cap: the full alert names it, as the queue's own ENOSPC
	// Warn is logged at most once a minute.
	DiskFull uint64
	// DictBytes are the dictionary's records (files when DictOnDisk, else
	// RAM) in DictGenerations generations; they count in Capacity too.
	DictBytes       int64
	DictGenerations int
	DictOnDisk      bool
}

// sampleQueue is the one definition of queue_bytes and of the state behind
// fill_ratio, for the gauges and the alerts alike.
func sampleQueue(s sfqueue.Stats) queueSample {
	return queueSample{
		Used: s.UnackedBytes, Capacity: s.CapacityBytes, AtCap: s.AtCap,
		DictBytes: s.DictBytes, DictGenerations: s.DictGenerations, DictOnDisk: s.OnDisk,
		Refused: s.FullErrors, DiskFull: s.DiskFullErrors, Evicted: s.FramesEvicted, EvictedBytes: s.BytesEvicted,
		EvictedRows: s.ItemsEvicted, EvictedRowsUnknown: s.FramesEvictedItemsUnknown,
	}
}

// FillRatio is queue_fill_ratio: 1 while appends find no room (the moment
// a client gets its first 429, or the queue evicts), else the unacknowledged
// bytes over the cap. The cap also holds acknowledged frames that the
// segment taking appends still keeps and the headers of segments, so the
// bytes alone can stay short of 1 at a refusal.
func (s queueSample) FillRatio() float64 {
	switch {
	case s.Capacity <= 0:
		return 0
	case s.AtCap || s.Used >= s.Capacity:
		return 1
	}
	return float64(s.Used) / float64(s.Capacity)
}

// levelAlerter is the queue-level alert state machine (seed 002). Full is
// entered at the cap or on a refusal or eviction since the previous sample,
// and holds until the queue is below 80 % again: a queue that refuses, drains
// a little and refuses again stays one full alert. The full alert is logged
// on entry and repeated every fullRepeatInterval while it lasts; high is
// logged once on entry (from ok), ok once on return. Under evict_oldest the
// evictions are summarised at most every evictionSummaryInterval. Not safe
// for concurrent use: one monitor goroutine owns it.
type levelAlerter struct {
	logger  *zap.Logger
	now     func() time.Time
	evict   bool // on_full: evict_oldest, which changes the wording of full
	level   queueLevel
	prev    queueSample
	started bool
	fullLog time.Time // when the full alert was last logged

	// When evictions were last reported (by the full alert or a summary),
	// and the totals then. An eviction always enters or renews full, whose
	// alert reports the first ones.
	evictLog    time.Time
	evictLogged queueSample
}

func newLevelAlerter(logger *zap.Logger, now func() time.Time, evict bool) *levelAlerter {
	return &levelAlerter{logger: logger, now: now, evict: evict}
}

// classify returns the level of s given the current level and the previous
// sample.
func (a *levelAlerter) classify(s queueSample) queueLevel {
	if s.AtCap || s.FillRatio() >= 1 {
		return levelFull
	}
	if a.started && (s.Refused > a.prev.Refused || s.Evicted > a.prev.Evicted) {
		return levelFull
	}
	if s.Capacity > 0 && s.Used*100 >= s.Capacity*highWatermarkPercent {
		if a.level == levelFull {
			return levelFull // hysteresis: full until below 80 %
		}
		return levelHigh
	}
	return levelOK
}

// observe feeds one sample and logs what changed. It returns the new level.
func (a *levelAlerter) observe(s queueSample) queueLevel {
	next := a.classify(s)
	prev := a.level
	a.prev, a.started = s, true
	a.level = next
	now := a.now()
	fields := []zap.Field{
		zap.String("level", next.String()),
		zap.Int64("queue_bytes", s.Used),
		zap.Int64("queue_capacity_bytes", s.Capacity),
		zap.Float64("fill_ratio", s.FillRatio()),
	}
	switch {
	case next == levelFull && (prev != levelFull || now.Sub(a.fullLog) >= fullRepeatInterval):
		a.fullLog = now
		msg := "QuestDB exporter queue full: refusing new records (on_full: block); sources are told to retry; repeated every 10 minutes while it lasts"
		if a.evict {
			msg = "QuestDB exporter queue full: evicting the oldest records (on_full: evict_oldest), data gap; repeated every 10 minutes while it lasts"
		}
		fields = append(fields, zap.Uint64("refused_total", s.Refused), zap.Uint64("evicted_frames_total", s.Evicted),
			zap.Uint64("evicted_rows_total", s.EvictedRows))
		if s.EvictedRowsUnknown > 0 {
			fields = append(fields, zap.Uint64("evicted_frames_rows_unknown_total", s.EvictedRowsUnknown))
		}
		if s.DiskFull > 0 {
			fields = append(fields, zap.Uint64("refused_disk_full_total", s.DiskFull))
			msg += "; the file system is full (ENOSPC) below sf_max_total_bytes: free disk space or lower the cap"
		}
		a.logger.Error(msg, fields...)
		a.markEvictionsLogged(s, now)
	case next == levelHigh && prev == levelOK:
		a.logger.Warn("QuestDB exporter queue high: at or above 80% of sf_max_total_bytes; QuestDB is slow or unreachable", fields...)
	case next == levelOK && prev != levelOK:
		a.logger.Info("QuestDB exporter queue ok: back below 80% of sf_max_total_bytes", fields...)
	}
	a.summariseEvictions(s, now, false)
	return next
}

// flushEvictions logs the evictions not reported yet, however recent the
// last summary: at shutdown, so that the log accounts for every evicted
// frame and row.
func (a *levelAlerter) flushEvictions(s queueSample) {
	a.summariseEvictions(s, a.now(), true)
}

// markEvictionsLogged records that the evictions up to s are reported.
func (a *levelAlerter) markEvictionsLogged(s queueSample, now time.Time) {
	a.evictLog, a.evictLogged = now, s
}

// summariseEvictions logs the frames and rows evicted since the last
// report, at most once per evictionSummaryInterval unless forced. Frames
// whose rows are not recorded (an older release's) are named as such, never
// as 0 rows.
func (a *levelAlerter) summariseEvictions(s queueSample, now time.Time, force bool) {
	prev := a.evictLogged
	if s.Evicted <= prev.Evicted || !force && now.Sub(a.evictLog) < evictionSummaryInterval {
		return
	}
	fields := []zap.Field{
		zap.Uint64("frames", s.Evicted-prev.Evicted), zap.Uint64("rows", s.EvictedRows-prev.EvictedRows),
		zap.Uint64("payload_bytes", s.EvictedBytes-prev.EvictedBytes),
		zap.Duration("over", now.Sub(a.evictLog).Round(time.Second)),
		zap.Uint64("evicted_frames_total", s.Evicted), zap.Uint64("evicted_rows_total", s.EvictedRows),
	}
	msg := "QuestDB exporter evicted the oldest unacknowledged frames (on_full: evict_oldest): data gap"
	if n := s.EvictedRowsUnknown - prev.EvictedRowsUnknown; n > 0 {
		fields = append(fields, zap.Uint64("frames_rows_unknown", n))
		msg += "; some were written by an older release, which does not record rows per frame: their rows are not in rows (frames_rows_unknown)"
	}
	a.logger.Warn(msg, fields...)
	a.markEvictionsLogged(s, now)
}

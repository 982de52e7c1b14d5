package datamodel

import (
	"encoding/hex"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// metricKind is the metric type byte of series_id (see hash.go).
type metricKind byte

const (
	kindGauge metricKind = 1 + iota
	kindSum
	kindHistogram
	kindExpHistogram
	kindSummary
)

// metricRow is what the rows of one metric share.
type metricRow struct {
	name, unit, description string
	seed                    uint64 // series_id seed: XXH64 of the scope and metric identity
	key                     uint64 // qwp.SymbolKeyed key of name, unit, description and temporality
	bound                   int    // row bound share of the scope and metric columns
}

// EncodeMetrics writes every data point of md as a row of its kind's table
// (see Encoder for frames and emit). Integer values become DOUBLE; NaN
// and ±Inf are written as they are. A data point without a time gets the
// export time as its designated timestamp.
func (r *Encoder) EncodeMetrics(md pmetric.Metrics, emit func(frame []byte) error) (Stats, error) {
	r.beginBatch()
	defer r.endKeyed() // keep none of the batch reachable, on every return
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		r.beginResource(rm.Resource().Attributes(), seriesTag)
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			sm := sms.At(j)
			r.beginScope(sm.Scope())
			ms := sm.Metrics()
			for k := 0; k < ms.Len(); k++ {
				if err := r.writeMetric(ms.At(k), emit); err != nil {
					return r.stats, err
				}
			}
		}
	}
	r.res = pcommon.Map{} // do not keep the batch reachable
	return r.stats, nil
}

func (r *Encoder) writeMetric(m pmetric.Metric, emit func([]byte) error) error {
	mr := metricRow{
		name:        validString(m.Name()),
		unit:        validString(m.Unit()),
		description: validString(m.Description()),
	}
	if mr.name == "" {
		if n := dataPointCount(m); n > 0 {
			r.stats.Skipped[skipEmptyMetricName] += n
			r.logger.Warn("dropping the data points of a metric without a name",
				zap.String("reason", skipEmptyMetricName.String()), zap.String("type", m.Type().String()), zap.Int("data_points", n))
		}
		return nil
	}
	mr.key = qwp.NewSymbolKey()
	mr.bound = r.scopeBound + symbolBound(len(mr.name)) + symbolBound(len(mr.unit)) + symbolBound(len(mr.description))
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		r.seriesSeed(&mr, kindGauge)
		return r.writeNumberPoints(&r.tables[tableGauge], &mr, m.Gauge().DataPoints(), pmetric.Sum{}, emit)
	case pmetric.MetricTypeSum:
		r.seriesSeed(&mr, kindSum)
		return r.writeNumberPoints(&r.tables[tableSum], &mr, m.Sum().DataPoints(), m.Sum(), emit)
	case pmetric.MetricTypeHistogram:
		r.seriesSeed(&mr, kindHistogram)
		return r.writeHistogramPoints(&mr, m.Histogram(), emit)
	case pmetric.MetricTypeExponentialHistogram:
		r.seriesSeed(&mr, kindExpHistogram)
		return r.writeExpHistogramPoints(&mr, m.ExponentialHistogram(), emit)
	case pmetric.MetricTypeSummary:
		r.seriesSeed(&mr, kindSummary)
		return r.writeSummaryPoints(&mr, m.Summary(), emit)
	}
	return nil // MetricTypeEmpty has no data points
}

// seriesSeed hashes the scope and metric part of series_id.
func (r *Encoder) seriesSeed(mr *metricRow, kind metricKind) {
	r.idBuf = appendMetricIdentity(append(r.idBuf[:0], r.scopeID...), kind, mr.name)
	mr.seed = xxh64(0, r.idBuf)
}

func dataPointCount(m pmetric.Metric) int {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints().Len()
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints().Len()
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().Len()
	case pmetric.MetricTypeExponentialHistogram:
		return m.ExponentialHistogram().DataPoints().Len()
	case pmetric.MetricTypeSummary:
		return m.Summary().DataPoints().Len()
	}
	return 0
}

// pointCommon holds the per-point values every metric row has.
type pointCommon struct {
	time, start pcommon.Timestamp
	flags       uint32
	seriesID    int64
	bound       int // row bound of everything but the kind-specific values
}

// preparePoint renders the point's attributes and promoted values and
// computes series_id.
func (r *Encoder) preparePoint(tb *table, mr *metricRow, attrs pcommon.Map, time, start pcommon.Timestamp, flags uint32) pointCommon {
	r.attrJSON = r.appendRowAttrs(r.attrJSON[:0], attrs)
	return pointCommon{
		time:     time,
		start:    start,
		flags:    flags,
		seriesID: seriesID(mr.seed, r.attrJSON),
		bound:    tb.fixed + mr.bound + symbolBound(len(r.attrJSON)) + varcharOverhead + r.pointPromoted(attrs),
	}
}

// setMetricCommon writes the columns every metric row has, in schema order.
func (r *Encoder) setMetricCommon(tb *table, mr *metricRow, pc *pointCommon) {
	t := tb.t
	ts, ok := timestampNanos(pc.time)
	if !ok {
		ts = r.nowNano
	}
	t.TimestampNanos(tb.time, ts)
	if start, ok := timestampNanos(pc.start); ok && tb.kind != tableGauge {
		t.TimestampNanos(tb.start, start)
	}
	if r.keyedFor != mr.key || r.keyedTable != tb {
		r.beginKeyed(tb, mr.key)
		addKeyed(&r.keyed, tb.service, r.service)
		r.keyed.AddString(tb.metricName, mr.name)
		addKeyed(&r.keyed, tb.unit, mr.unit)
		addKeyed(&r.keyed, tb.description, mr.description)
		r.addScopeRun(tb)
	}
	t.Symbols(&r.keyed)
	if len(r.attrJSON) > 0 { // built here, invalid UTF-8 repaired: the *Valid setters skip a second check
		if r.attrsVarchar {
			t.VarcharValid(tb.attrs, r.attrJSON)
		} else {
			t.SymbolValidHashed(tb.attrs, r.attrJSON, uint64(pc.seriesID)) // series_id hashes the JSON: the column's cache of ids
		}
	}
	t.Long(tb.seriesID, pc.seriesID)
	t.Int(tb.flags, int32(pc.flags))
}

// writeMetricRow writes one row: the common columns, then setValues for the
// kind-specific ones, then the promoted columns, again into a fresh frame
// when the current one is full. variable is the row bound share of the
// kind-specific values.
func (r *Encoder) writeMetricRow(tb *table, mr *metricRow, pc *pointCommon, variable int, emit func([]byte) error, setValues func(t *qwp.Table)) error {
	if !r.fits(tb, pc.bound+variable, mr.name) {
		return nil
	}
	for attempt := 0; ; attempt++ {
		r.setMetricCommon(tb, mr, pc)
		setValues(tb.t)
		r.setPromoted(tb)
		again, err := r.endRow(tb, emit, attempt, mr.name)
		if !again || err != nil {
			return err
		}
	}
}

// writeNumberPoints writes gauge points, or sum points when sum is set.
func (r *Encoder) writeNumberPoints(tb *table, mr *metricRow, dps pmetric.NumberDataPointSlice, sum pmetric.Sum, emit func([]byte) error) error {
	var temporality string
	if tb.kind == tableSum {
		temporality = temporalityName(sum.AggregationTemporality())
	}
	var dp pmetric.NumberDataPoint
	setValues := func(t *qwp.Table) { // built once, not per point: it reads dp as the loop sets it
		switch dp.ValueType() {
		case pmetric.NumberDataPointValueTypeDouble:
			t.Double(tb.value, dp.DoubleValue())
		case pmetric.NumberDataPointValueTypeInt:
			t.Double(tb.value, float64(dp.IntValue()))
		}
		if tb.kind == tableSum {
			t.Bool(tb.isMonotonic, sum.IsMonotonic())
			t.SymbolStringKeyed(tb.temporality, temporality, mr.key)
		}
		if len(r.exJSON) > 0 {
			t.VarcharValid(tb.exemplars, r.exJSON)
		}
	}
	for i := 0; i < dps.Len(); i++ {
		dp = dps.At(i)
		pc := r.preparePoint(tb, mr, dp.Attributes(), dp.Timestamp(), dp.StartTimestamp(), uint32(dp.Flags()))
		r.exJSON = r.appendExemplars(r.exJSON[:0], dp.Exemplars())
		variable := len(r.exJSON) + varcharOverhead + symbolBound(len(temporality))
		err := r.writeMetricRow(tb, mr, &pc, variable, emit, setValues)
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *Encoder) writeHistogramPoints(mr *metricRow, h pmetric.Histogram, emit func([]byte) error) error {
	tb := &r.tables[tableHistogram]
	temporality := temporalityName(h.AggregationTemporality())
	dps := h.DataPoints()
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		pc := r.preparePoint(tb, mr, dp.Attributes(), dp.Timestamp(), dp.StartTimestamp(), uint32(dp.Flags()))
		r.exJSON = r.appendExemplars(r.exJSON[:0], dp.Exemplars())
		r.floats = appendCounts(r.floats[:0], dp.BucketCounts())
		r.floats2 = appendFloats(r.floats2[:0], dp.ExplicitBounds())
		variable := len(r.exJSON) + varcharOverhead + symbolBound(len(temporality)) +
			2*arrayOverhead + 8*(len(r.floats)+len(r.floats2))
		err := r.writeMetricRow(tb, mr, &pc, variable, emit, func(t *qwp.Table) {
			setHistogramStats(t, tb, dp)
			r.setArray(t, tb.bucketCounts, r.floats)
			r.setArray(t, tb.explicitBounds, r.floats2)
			t.SymbolStringKeyed(tb.temporality, temporality, mr.key)
			if len(r.exJSON) > 0 {
				t.VarcharValid(tb.exemplars, r.exJSON)
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *Encoder) writeExpHistogramPoints(mr *metricRow, h pmetric.ExponentialHistogram, emit func([]byte) error) error {
	tb := &r.tables[tableExpHistogram]
	temporality := temporalityName(h.AggregationTemporality())
	dps := h.DataPoints()
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		pc := r.preparePoint(tb, mr, dp.Attributes(), dp.Timestamp(), dp.StartTimestamp(), uint32(dp.Flags()))
		r.exJSON = r.appendExemplars(r.exJSON[:0], dp.Exemplars())
		pos, neg := dp.Positive(), dp.Negative()
		r.floats = appendCounts(r.floats[:0], pos.BucketCounts())
		r.floats2 = appendCounts(r.floats2[:0], neg.BucketCounts())
		variable := len(r.exJSON) + varcharOverhead + symbolBound(len(temporality)) +
			2*arrayOverhead + 8*(len(r.floats)+len(r.floats2))
		err := r.writeMetricRow(tb, mr, &pc, variable, emit, func(t *qwp.Table) {
			setHistogramStats(t, tb, dp)
			t.Int(tb.scale, intQuantity(dp.Scale()))
			t.Long(tb.zeroCount, clampCount(dp.ZeroCount()))
			t.Double(tb.zeroThreshold, dp.ZeroThreshold())
			t.Int(tb.posOffset, intQuantity(pos.Offset()))
			r.setArray(t, tb.posCounts, r.floats)
			t.Int(tb.negOffset, intQuantity(neg.Offset()))
			r.setArray(t, tb.negCounts, r.floats2)
			t.SymbolStringKeyed(tb.temporality, temporality, mr.key)
			if len(r.exJSON) > 0 {
				t.VarcharValid(tb.exemplars, r.exJSON)
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// histogramStats is what histogram and exponential histogram points share.
type histogramStats interface {
	Count() uint64
	HasSum() bool
	Sum() float64
	HasMin() bool
	Min() float64
	HasMax() bool
	Max() float64
}

// setHistogramStats sets count, and sum, min and max when the point has
// them (absent ones stay NULL). Generic, so the pdata values are not boxed.
func setHistogramStats[P histogramStats](t *qwp.Table, tb *table, dp P) {
	t.Long(tb.count, clampCount(dp.Count()))
	if dp.HasSum() {
		t.Double(tb.sum, dp.Sum())
	}
	if dp.HasMin() {
		t.Double(tb.min, dp.Min())
	}
	if dp.HasMax() {
		t.Double(tb.max, dp.Max())
	}
}

func (r *Encoder) writeSummaryPoints(mr *metricRow, s pmetric.Summary, emit func([]byte) error) error {
	tb := &r.tables[tableSummary]
	dps := s.DataPoints()
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		pc := r.preparePoint(tb, mr, dp.Attributes(), dp.Timestamp(), dp.StartTimestamp(), uint32(dp.Flags()))
		qs := dp.QuantileValues()
		r.floats, r.floats2 = r.floats[:0], r.floats2[:0]
		for j := 0; j < qs.Len(); j++ {
			r.floats = append(r.floats, qs.At(j).Quantile())
			r.floats2 = append(r.floats2, qs.At(j).Value())
		}
		variable := 2*arrayOverhead + 8*(len(r.floats)+len(r.floats2))
		err := r.writeMetricRow(tb, mr, &pc, variable, emit, func(t *qwp.Table) {
			t.Long(tb.count, clampCount(dp.Count()))
			t.Double(tb.sum, dp.Sum())
			r.setArray(t, tb.quantiles, r.floats)
			r.setArray(t, tb.quantileValues, r.floats2)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// setArray writes vals as a one-dimensional DOUBLE[]; no values make an
// empty array, which is a value (a histogram without buckets), not NULL.
func (r *Encoder) setArray(t *qwp.Table, c qwp.Col, vals []float64) {
	r.shape[0] = int32(len(vals))
	t.DoubleArray(c, r.shape[:], vals)
}

// appendCounts appends bucket counts as float64 (exact up to 2⁵³).
func appendCounts(dst []float64, counts pcommon.UInt64Slice) []float64 {
	for i := 0; i < counts.Len(); i++ {
		dst = append(dst, float64(counts.At(i)))
	}
	return dst
}

func appendFloats(dst []float64, vals pcommon.Float64Slice) []float64 {
	for i := 0; i < vals.Len(); i++ {
		dst = append(dst, vals.At(i))
	}
	return dst
}

// temporalityName is the temporality SYMBOL value.
func temporalityName(t pmetric.AggregationTemporality) string {
	switch t {
	case pmetric.AggregationTemporalityDelta:
		return "delta"
	case pmetric.AggregationTemporalityCumulative:
		return "cumulative"
	}
	return "unspecified"
}

// appendExemplars renders exemplars as a JSON array, or nothing when there
// are none:
//
//	[{"time_unix_nano":1700000000000000000,"value":1.5,
//	  "filtered_attributes":{...},"trace_id":"<32 hex>","span_id":"<16 hex>"}]
//
// value is a JSON integer for an int exemplar, a number (or "NaN", "+Inf",
// "-Inf") for a double one, null when unset; filtered_attributes, trace_id
// and span_id appear only when set.
func (r *Encoder) appendExemplars(dst []byte, exs pmetric.ExemplarSlice) []byte {
	if exs.Len() == 0 { // inlined: most points have none
		return dst
	}
	return r.renderExemplars(dst, exs)
}

// renderExemplars is appendExemplars for a point with exemplars.
func (r *Encoder) renderExemplars(dst []byte, exs pmetric.ExemplarSlice) []byte {
	dst = append(dst, '[')
	for i := 0; i < exs.Len(); i++ {
		ex := exs.At(i)
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"time_unix_nano":`...)
		dst = strconv.AppendUint(dst, uint64(ex.Timestamp()), 10)
		dst = append(dst, `,"value":`...)
		switch ex.ValueType() {
		case pmetric.ExemplarValueTypeInt:
			dst = strconv.AppendInt(dst, ex.IntValue(), 10)
		case pmetric.ExemplarValueTypeDouble:
			dst = appendJSONFloat(dst, ex.DoubleValue())
		default:
			dst = append(dst, "null"...)
		}
		if attrs := ex.FilteredAttributes(); attrs.Len() > 0 {
			dst = append(dst, `,"filtered_attributes":`...)
			dst = r.json.appendMap(dst, attrs)
		}
		if id := ex.TraceID(); !id.IsEmpty() {
			dst = append(dst, `,"trace_id":"`...)
			dst = append(hex.AppendEncode(dst, id[:]), '"')
		}
		if id := ex.SpanID(); !id.IsEmpty() {
			dst = append(dst, `,"span_id":"`...)
			dst = append(hex.AppendEncode(dst, id[:]), '"')
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

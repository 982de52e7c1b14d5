package datamodel

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// tableKind indexes the seven tables of the data model.
type tableKind int

const (
	tableGauge tableKind = iota
	tableSum
	tableHistogram
	tableExpHistogram
	tableSummary
	tableLogs
	tableTraces
	numTables
)

// Tables are the QuestDB table names of the data model.
type Tables struct {
	Gauge, Sum, Histogram, ExponentialHistogram, Summary, Logs, Traces string
}

// DefaultTables are the names DESIGN.md gives the tables.
func DefaultTables() Tables {
	return Tables{
		Gauge:                "otel_metrics_gauge",
		Sum:                  "otel_metrics_sum",
		Histogram:            "otel_metrics_histogram",
		ExponentialHistogram: "otel_metrics_exp_histogram",
		Summary:              "otel_metrics_summary",
		Logs:                 "otel_logs",
		Traces:               "otel_traces",
	}
}

func (n Tables) of(k tableKind) string {
	return [numTables]string{n.Gauge, n.Sum, n.Histogram, n.ExponentialHistogram, n.Summary, n.Logs, n.Traces}[k]
}

// SkipReason says why a data point or log record was not written. A skip
// drops that one row, counted and logged; the rest of the batch is written.
type SkipReason int

const (
	// skipEmptyMetricName: the metric has no name (every data point of it).
	skipEmptyMetricName SkipReason = iota
	// skipRowTooLarge: the row does not fit in an otherwise empty frame.
	skipRowTooLarge
	NumSkipReasons
)

func (r SkipReason) String() string {
	return [NumSkipReasons]string{"empty_metric_name", "row_too_large"}[r]
}

// Stats counts what one EncodeMetrics, EncodeLogs or EncodeTraces call did.
type Stats struct {
	Rows    [numTables]int      // rows written, per table
	Skipped [NumSkipReasons]int // rows dropped, per reason
}

// EncoderConfig carries the configuration an Encoder needs; the
// component maps its Config onto it.
type EncoderConfig struct {
	Tables Tables
	// Promoted are the attributes_as_symbols columns (see PromotedColumns).
	Promoted []PromotedColumn
	// AttributesVarchar writes metric data point attributes as VARCHAR
	// instead of SYMBOL.
	AttributesVarchar bool
	// Now is the export time: the designated timestamp of a log record with
	// neither time nor observed time, and of a data point without a time.
	// nil means time.Now.
	Now func() time.Time
	// Logger receives one warning per dropped row; nil means no logging.
	Logger *zap.Logger
}

// Encoder turns pdata batches into rows of the data model's tables (see
// DESIGN.md "Data model"), writing them through a qwp.Encoder.
//
// Frames are handed to the caller's emit function whenever the encoder's
// frame is full; the frame slice is reused afterwards, so emit must copy or
// consume it before returning (or see FinishInto). emit may call Reset on the encoder (to start
// a new symbol dictionary generation): the row in progress is written again
// after emit returns. An error from emit aborts the batch and is returned;
// the caller should then Reset the encoder, discarding the partial frame.
// After a batch the last, partial frame stays in the encoder so that several
// batches can share frames; call Flush to emit it.
//
// Text that is not valid UTF-8 is repaired (U+FFFD) before it reaches the
// encoder, and a row that could not fit in an empty frame is dropped before
// any of its symbols enter the dictionary (a symbol registered by a row that
// is then refused would ride in the next frame's delta section regardless).
//
// Empty SYMBOL values (unit, description, scope name and version, service
// name, severity text, event name, promoted values) and empty attribute maps
// are NULL, not "" or "{}". A log body that is an empty string stays an
// empty VARCHAR; a body without a value is NULL.
//
// An Encoder is not safe for concurrent use.
type Encoder struct {
	enc          *qwp.Encoder
	promoted     []PromotedColumn
	attrsVarchar bool
	now          func() time.Time
	logger       *zap.Logger

	tables [numTables]table

	json     jsonWriter
	rowAttrs keyLayout // key layout of the last point or record attributes
	frame    []byte    // Finish's reusable buffer, without FinishInto
	out      *[]byte   // FinishInto's buffer
	outGap   int

	stats   Stats
	nowNano int64 // export time of the batch in progress

	// Per resource and scope (metrics and logs alike).
	res                pcommon.Map
	tag                byte   // seriesTag or recordTag
	scopeID            []byte // scope(tag) of hash.go
	scopeSeed          uint64 // XXH64 of scopeID (record_key seed)
	scopeBound         int    // row bound share of the resource and scope columns
	resJSON, scopeJSON []byte
	service            string
	resKey, scopeKey   uint64 // identities of the resource and the scope (qwp.NewSymbolKey): the runs built for them
	lastService        string // kept across batches to avoid a string per resource
	serviceBuf         []byte
	scopeName          string
	scopeVersion       string
	promotedScope      [][]byte // promoted value from scope, else resource; nil = absent
	promotedScopeBuf   [][]byte
	promotedPoint      [][]byte // the values of the row in progress; nil = NULL
	promotedBuf        [][]byte // scratch for row-level promoted values

	ordinals ordinals // identical log records (spans) seen in the batch, by record_key (span_key)

	// keyed is the run of SYMBOL values every row of the current table,
	// resource, scope (and metric) repeats, written with one qwp.Symbols
	// call; keyedFor is the key it was built for (the metric's, or for
	// logs the scope's), keyedTable its table.
	keyed      qwp.SymbolRun
	keyedFor   uint64
	keyedTable *table

	// serviceRun is service_name as a one-value run for the span rows,
	// which set it apart from the keyed run (schema order), built for the
	// resource serviceFor (resKey) and the table serviceTable.
	serviceRun   qwp.SymbolRun
	serviceFor   uint64
	serviceTable *table

	// severityRun is a log row's service_name and severity_text, adjacent
	// in the schema order, as one run built for the resource severityFor
	// (resKey) and the text severityText (it usually repeats from record
	// to record).
	severityRun  qwp.SymbolRun
	severityFor  uint64
	severityText string

	// Per row.
	idBuf    []byte // canonical identity encoding being hashed
	attrJSON []byte
	exJSON   []byte
	text     []byte
	floats   []float64
	floats2  []float64
	shape    [1]int32
	traceHex [32]byte
	spanHex  [16]byte

	span spanScratch // EncodeTraces' per-span buffers (traces.go)
}

// table holds one table's handles. Handles stay valid across frames; a
// column joins a frame's block only when a row sets it, so columns that are
// NULL throughout a frame cost nothing.
type table struct {
	kind tableKind
	t    *qwp.Table
	// fixed bounds the size of a one-row frame of this table apart from the
	// variable-length values (see fits).
	fixed int

	time, start, service, metricName, unit, description,
	scopeName, scopeVersion, resAttrs, scopeAttrs, attrs, seriesID, flags qwp.Col

	value, exemplars, isMonotonic, temporality,
	count, sum, min, max, bucketCounts, explicitBounds,
	scale, zeroCount, zeroThreshold, posOffset, posCounts, negOffset, negCounts,
	quantiles, quantileValues qwp.Col

	observed, severityText, severityNumber, body, traceID, spanID, traceFlags, eventName, recordID qwp.Col

	spanCols spanColumns // otel_traces only (traces.go)

	promoted []qwp.Col
}

// column describes one column of a table for declaration.
type column struct {
	handle *qwp.Col
	name   string
	typ    qwp.ColumnType
}

// Column names of the data model.
const (
	colStartTimestamp      = "start_timestamp"
	colServiceName         = "service_name"
	colMetricName          = "metric_name"
	colMetricUnit          = "metric_unit"
	colMetricDescription   = "metric_description"
	colScopeName           = "scope_name"
	colScopeVersion        = "scope_version"
	colResourceAttributes  = "resource_attributes"
	colScopeAttributes     = "scope_attributes"
	colAttributes          = "attributes"
	colSeriesID            = "series_id"
	colFlags               = "flags"
	colValue               = "value"
	colExemplars           = "exemplars"
	colIsMonotonic         = "is_monotonic"
	colTemporality         = "temporality"
	colCount               = "count"
	colSum                 = "sum"
	colMin                 = "min"
	colMax                 = "max"
	colBucketCounts        = "bucket_counts"
	colExplicitBounds      = "explicit_bounds"
	colScale               = "scale"
	colZeroCount           = "zero_count"
	colZeroThreshold       = "zero_threshold"
	colPositiveOffset      = "positive_offset"
	colPositiveBucketCount = "positive_bucket_counts"
	colNegativeOffset      = "negative_offset"
	colNegativeBucketCount = "negative_bucket_counts"
	colQuantiles           = "quantiles"
	colQuantileValues      = "quantile_values"
	colObservedTimestamp   = "observed_timestamp"
	colSeverityText        = "severity_text"
	colSeverityNumber      = "severity_number"
	colBody                = "body"
	colTraceID             = "trace_id"
	colSpanID              = "span_id"
	colTraceFlags          = "trace_flags"
	colEventName           = "event_name"
	colRecordID            = "record_id"
	// colDesignated is the name QuestDB gives the empty-name designated
	// timestamp column.
	colDesignated = "timestamp"
)

// columns lists a table's columns in schema order (the order rows set them).
// attrsType is the type of the attributes column of metric tables.
func (tb *table) columns(attrsType qwp.ColumnType) []column {
	var cols []column
	add := func(h *qwp.Col, name string, typ qwp.ColumnType) {
		cols = append(cols, column{h, name, typ})
	}
	add(&tb.time, "", qwp.TypeTimestampNanos)
	if tb.kind == tableTraces {
		tb.declareSpanColumns(add)
		return cols
	}
	if tb.kind == tableLogs {
		add(&tb.observed, colObservedTimestamp, qwp.TypeTimestampNanos)
		add(&tb.service, colServiceName, qwp.TypeSymbol)
		add(&tb.severityText, colSeverityText, qwp.TypeSymbol)
		add(&tb.severityNumber, colSeverityNumber, qwp.TypeInt)
		add(&tb.body, colBody, qwp.TypeVarchar)
		add(&tb.traceID, colTraceID, qwp.TypeVarchar)
		add(&tb.spanID, colSpanID, qwp.TypeVarchar)
		add(&tb.traceFlags, colTraceFlags, qwp.TypeInt)
		add(&tb.eventName, colEventName, qwp.TypeSymbol)
		add(&tb.scopeName, colScopeName, qwp.TypeSymbol)
		add(&tb.scopeVersion, colScopeVersion, qwp.TypeSymbol)
		add(&tb.resAttrs, colResourceAttributes, qwp.TypeSymbol)
		add(&tb.scopeAttrs, colScopeAttributes, qwp.TypeSymbol)
		add(&tb.attrs, colAttributes, qwp.TypeVarchar)
		add(&tb.recordID, colRecordID, qwp.TypeLong)
		return cols
	}
	if tb.kind != tableGauge {
		add(&tb.start, colStartTimestamp, qwp.TypeTimestampNanos)
	}
	add(&tb.service, colServiceName, qwp.TypeSymbol)
	add(&tb.metricName, colMetricName, qwp.TypeSymbol)
	add(&tb.unit, colMetricUnit, qwp.TypeSymbol)
	add(&tb.description, colMetricDescription, qwp.TypeSymbol)
	add(&tb.scopeName, colScopeName, qwp.TypeSymbol)
	add(&tb.scopeVersion, colScopeVersion, qwp.TypeSymbol)
	add(&tb.resAttrs, colResourceAttributes, qwp.TypeSymbol)
	add(&tb.scopeAttrs, colScopeAttributes, qwp.TypeSymbol)
	add(&tb.attrs, colAttributes, attrsType)
	add(&tb.seriesID, colSeriesID, qwp.TypeLong)
	add(&tb.flags, colFlags, qwp.TypeInt)
	// addStats declares the columns setHistogramStats writes.
	addStats := func() {
		add(&tb.count, colCount, qwp.TypeLong)
		add(&tb.sum, colSum, qwp.TypeDouble)
		add(&tb.min, colMin, qwp.TypeDouble)
		add(&tb.max, colMax, qwp.TypeDouble)
	}
	switch tb.kind {
	case tableGauge:
		add(&tb.value, colValue, qwp.TypeDouble)
		add(&tb.exemplars, colExemplars, qwp.TypeVarchar)
	case tableSum:
		add(&tb.value, colValue, qwp.TypeDouble)
		add(&tb.isMonotonic, colIsMonotonic, qwp.TypeBoolean)
		add(&tb.temporality, colTemporality, qwp.TypeSymbol)
		add(&tb.exemplars, colExemplars, qwp.TypeVarchar)
	case tableHistogram:
		addStats()
		add(&tb.bucketCounts, colBucketCounts, qwp.TypeDoubleArray)
		add(&tb.explicitBounds, colExplicitBounds, qwp.TypeDoubleArray)
		add(&tb.temporality, colTemporality, qwp.TypeSymbol)
		add(&tb.exemplars, colExemplars, qwp.TypeVarchar)
	case tableExpHistogram:
		addStats()
		add(&tb.scale, colScale, qwp.TypeInt)
		add(&tb.zeroCount, colZeroCount, qwp.TypeLong)
		add(&tb.zeroThreshold, colZeroThreshold, qwp.TypeDouble)
		add(&tb.posOffset, colPositiveOffset, qwp.TypeInt)
		add(&tb.posCounts, colPositiveBucketCount, qwp.TypeDoubleArray)
		add(&tb.negOffset, colNegativeOffset, qwp.TypeInt)
		add(&tb.negCounts, colNegativeBucketCount, qwp.TypeDoubleArray)
		add(&tb.temporality, colTemporality, qwp.TypeSymbol)
		add(&tb.exemplars, colExemplars, qwp.TypeVarchar)
	case tableSummary:
		add(&tb.count, colCount, qwp.TypeLong)
		add(&tb.sum, colSum, qwp.TypeDouble)
		add(&tb.quantiles, colQuantiles, qwp.TypeDoubleArray)
		add(&tb.quantileValues, colQuantileValues, qwp.TypeDoubleArray)
	}
	return cols
}

// reservedColumns are the built-in column names of every table, lower-cased;
// a promoted attribute may not take one.
var reservedColumns = func() map[string]bool {
	m := map[string]bool{colDesignated: true}
	for k := range numTables {
		tb := table{kind: k}
		for _, c := range tb.columns(qwp.TypeSymbol) {
			if c.name != "" {
				m[strings.ToLower(c.name)] = true
			}
		}
	}
	return m
}()

// Upper bounds used by the row bound (see fits): a one-row frame's framing,
// and the bytes a column takes beyond its value (null flag, one bitmap byte,
// Gorilla encoding byte, fixed-width value).
const (
	frameOverhead   = qwp.HeaderSize + 2*10 // header + delta dictionary start/count varints
	columnOverhead  = 1 + 1 + 1 + 8
	symbolOverhead  = 2 * 5 // id varint in the column + length varint in the delta section
	varcharOverhead = 2 * 4 // offsets[0] and the value's end offset
	arrayOverhead   = 1 + 4 // n_dims + one dimension
)

// NewEncoder declares every table and column on enc. It fails when a
// table name is not one QuestDB accepts or when a promoted column clashes
// with a built-in one.
func NewEncoder(enc *qwp.Encoder, cfg EncoderConfig) (*Encoder, error) {
	r := &Encoder{enc: enc, promoted: cfg.Promoted, attrsVarchar: cfg.AttributesVarchar, now: cfg.Now, logger: cfg.Logger}
	if r.now == nil {
		r.now = time.Now
	}
	if r.logger == nil {
		r.logger = zap.NewNop()
	}
	attrsType := qwp.TypeSymbol
	if cfg.AttributesVarchar {
		attrsType = qwp.TypeVarchar
	}
	seen := make(map[string]tableKind, numTables)
	for k := range numTables {
		name := cfg.Tables.of(k)
		if prev, dup := seen[strings.ToLower(name)]; dup {
			return nil, fmt.Errorf("table name %q is used for both %s and %s rows; give each its own table",
				name, kindLabel(prev), kindLabel(k))
		}
		seen[strings.ToLower(name)] = k
		tb := &r.tables[k]
		tb.kind = k
		t, err := enc.Table(name)
		if err != nil {
			return nil, fmt.Errorf("%s table: %w", kindLabel(k), err)
		}
		tb.t = t
		cols := tb.columns(attrsType)
		for _, p := range cfg.Promoted {
			cols = append(cols, column{nil, p.Column, qwp.TypeSymbol})
		}
		tb.promoted = make([]qwp.Col, 0, len(cfg.Promoted))
		tb.fixed = frameOverhead + 2 + len(name) + 5 + 3
		for _, c := range cols {
			h, err := t.Column(c.name, c.typ)
			if err != nil {
				return nil, fmt.Errorf("%s table: %w", kindLabel(k), err)
			}
			if c.handle != nil {
				*c.handle = h
			} else {
				tb.promoted = append(tb.promoted, h)
			}
			tb.fixed += 2 + len(c.name) + 1 + columnOverhead
		}
	}
	n := len(cfg.Promoted)
	r.promotedScope = make([][]byte, n)
	r.promotedScopeBuf = make([][]byte, n)
	r.promotedPoint = make([][]byte, n)
	r.promotedBuf = make([][]byte, n)
	return r, nil
}

func kindLabel(k tableKind) string {
	return [numTables]string{"gauge", "sum", "histogram", "exponential histogram", "summary", "logs", "traces"}[k]
}

// FinishInto makes the encoder append each frame it finishes to *buf, gap
// bytes (zeros, for the caller to fill) after its end, and hand emit that
// tail of *buf, instead of finishing frames in a buffer of its own: a
// caller that collects frames back to back takes them without a copy. *buf
// is read each time a frame is finished, so the caller may truncate or
// replace it in between. A nil buf restores the encoder's own buffer.
func (r *Encoder) FinishInto(buf *[]byte, gap int) {
	r.out, r.outGap, r.frame = buf, gap, nil
}

// Flush emits the current frame, if it holds any rows.
func (r *Encoder) Flush(emit func(frame []byte) error) error {
	if r.enc.Rows() == 0 {
		return nil
	}
	if r.out == nil {
		r.frame = r.enc.Finish(r.frame[:0])
		return emit(r.frame)
	}
	start := len(*r.out) + r.outGap
	*r.out = r.enc.Finish(append(*r.out, make([]byte, r.outGap)...))
	return emit((*r.out)[start:])
}

// beginBatch resets the per-call state.
func (r *Encoder) beginBatch() {
	r.stats = Stats{}
	r.nowNano = r.now().UnixNano()
}

// beginResource renders the resource columns shared by the rows below it;
// tag (seriesTag or recordTag) selects their identity.
func (r *Encoder) beginResource(res pcommon.Map, tag byte) {
	r.res = res
	r.tag = tag
	r.resKey = qwp.NewSymbolKey()
	r.resJSON = r.appendAttrs(r.resJSON[:0], res)
	r.service = ""
	if v, ok := res.Get("service.name"); ok {
		var text []byte
		if text, ok = r.json.appendText(r.serviceBuf[:0], v); ok {
			r.serviceBuf = text
			if r.lastService != string(text) { // a new string only when the service changes
				r.lastService = string(text)
			}
			r.service = r.lastService
		}
	}
}

// beginScope renders the scope columns, hashes the scope identity and
// resolves the promoted values that the scope or the resource supplies.
func (r *Encoder) beginScope(scope pcommon.InstrumentationScope) {
	r.scopeKey = qwp.NewSymbolKey()
	r.scopeJSON = r.appendAttrs(r.scopeJSON[:0], scope.Attributes())
	r.scopeName = validString(scope.Name())
	r.scopeVersion = validString(scope.Version())
	r.scopeID = appendScopeIdentity(r.scopeID[:0], r.tag, r.resJSON, r.scopeName, r.scopeVersion, r.scopeJSON)
	r.scopeSeed = xxh64(0, r.scopeID)
	r.scopeBound = symbolBound(len(r.service)) + symbolBound(len(r.resJSON)) + symbolBound(len(r.scopeJSON)) +
		symbolBound(len(r.scopeName)) + symbolBound(len(r.scopeVersion))
	for i, p := range r.promoted {
		v, ok := scope.Attributes().Get(p.Key)
		if !ok {
			v, ok = r.res.Get(p.Key)
		}
		r.promotedScope[i] = nil
		if ok {
			if text, ok := r.json.appendText(r.promotedScopeBuf[i][:0], v); ok && len(text) > 0 {
				r.promotedScopeBuf[i] = text
				r.promotedScope[i] = text
			}
		}
	}
}

// setResourceScope writes the scope and resource attribute columns of a
// log or span row (service_name is set earlier, for the schema order).
func (r *Encoder) setResourceScope(tb *table) {
	if r.keyedFor != r.scopeKey || r.keyedTable != tb {
		r.beginKeyed(tb, r.scopeKey)
		r.addScopeRun(tb)
	}
	tb.t.Symbols(&r.keyed)
}

// beginKeyed empties the keyed run for a new table and key.
func (r *Encoder) beginKeyed(tb *table, key uint64) {
	r.keyed.Reset() // drop references into the previous batch
	r.keyedFor, r.keyedTable = key, tb
}

// endKeyed forgets the keyed runs at the end of a batch, so that the
// encoder keeps none of its strings reachable.
func (r *Encoder) endKeyed() {
	r.beginKeyed(nil, 0)
	r.serviceRun.Reset()
	r.serviceFor, r.serviceTable = 0, nil
	r.severityRun.Reset()
	r.severityFor, r.severityText = 0, ""
}

// setService writes service_name (NULL when the resource has none) of a
// span row through a one-value run kept for the resource.
func (r *Encoder) setService(tb *table) {
	if r.service == "" {
		return
	}
	if r.serviceFor != r.resKey || r.serviceTable != tb {
		r.serviceRun.Reset()
		r.serviceRun.AddString(tb.service, r.service)
		r.serviceFor, r.serviceTable = r.resKey, tb
	}
	tb.t.Symbols(&r.serviceRun)
}

// addScopeRun adds the scope and resource attribute columns' values
// (SYMBOL, NULL when empty) to the keyed run.
func (r *Encoder) addScopeRun(tb *table) {
	addKeyed(&r.keyed, tb.scopeName, r.scopeName)
	addKeyed(&r.keyed, tb.scopeVersion, r.scopeVersion)
	if len(r.resJSON) > 0 {
		r.keyed.Add(tb.resAttrs, r.resJSON)
	}
	if len(r.scopeJSON) > 0 {
		r.keyed.Add(tb.scopeAttrs, r.scopeJSON)
	}
}

// addKeyed adds a SYMBOL value to a run unless it is empty (the column is
// then NULL).
func addKeyed(run *qwp.SymbolRun, c qwp.Col, v string) {
	if v != "" {
		run.AddString(c, v)
	}
}

// appendAttrs renders an attribute map as JSON, or nothing when it is empty.
func (r *Encoder) appendAttrs(dst []byte, m pcommon.Map) []byte {
	if m.Len() == 0 {
		return dst
	}
	return r.json.appendMap(dst, m)
}

// appendRowAttrs is appendAttrs for the attributes of a data point or log
// record, whose keys usually repeat from one row to the next (inlined: a
// call less per row).
func (r *Encoder) appendRowAttrs(dst []byte, m pcommon.Map) []byte {
	return r.json.appendMapLayout(dst, m, &r.rowAttrs)
}

// pointPromoted resolves the promoted values of a row: the row's own
// attribute, else the scope's or resource's. It returns their share of the
// row bound (see fits).
func (r *Encoder) pointPromoted(attrs pcommon.Map) int {
	if len(r.promoted) == 0 { // inlined: most configurations promote nothing
		return 0
	}
	return r.resolvePromoted(attrs)
}

// resolvePromoted is pointPromoted for a configuration with promoted
// columns.
func (r *Encoder) resolvePromoted(attrs pcommon.Map) int {
	total := 0
	for i, p := range r.promoted {
		r.promotedPoint[i] = r.promotedScope[i]
		if v, ok := attrs.Get(p.Key); ok {
			text, ok := r.json.appendText(r.promotedBuf[i][:0], v)
			r.promotedBuf[i] = text
			r.promotedPoint[i] = nil
			if ok && len(text) > 0 {
				r.promotedPoint[i] = text
			}
		}
		if r.promotedPoint[i] != nil {
			total += len(r.promotedPoint[i]) + symbolOverhead
		}
	}
	return total
}

// setPromoted writes the promoted values resolved by pointPromoted (text
// built by appendText, so valid UTF-8).
func (r *Encoder) setPromoted(tb *table) {
	if len(tb.promoted) > 0 { // inlined: most configurations promote nothing
		r.writePromoted(tb)
	}
}

// writePromoted is setPromoted for a table with promoted columns.
func (r *Encoder) writePromoted(tb *table) {
	for i, c := range tb.promoted {
		if v := r.promotedPoint[i]; v != nil {
			tb.t.SymbolValid(c, v)
		}
	}
}

// symbolBound is the row bound share of a SYMBOL value (0 when NULL).
func symbolBound(n int) int {
	if n == 0 {
		return 0
	}
	return n + symbolOverhead
}

// fits reports whether a row fits in an otherwise empty frame. bound is the
// row bound: an upper bound of the size of a frame holding only that row,
// tb.fixed (framing, schema and every column's fixed part) plus its values'
// variable-length parts (symbolBound, varcharOverhead, arrayOverhead, 8 bytes
// per array element). A row that does not fit is skipped before any of its
// symbols reach the dictionary, where they would otherwise ride in the next
// frame's delta section whether or not the row was written.
func (r *Encoder) fits(tb *table, bound int, what string) bool {
	return bound <= r.enc.MaxFrameBytes() || r.tooLarge(tb, bound, what) // inlined: the usual row fits
}

// tooLarge skips a row that does not fit (see fits) and returns false.
func (r *Encoder) tooLarge(tb *table, bound int, what string) bool {
	r.skip(skipRowTooLarge, tb, what, zap.Int("bytes_at_most", bound), zap.Int("limit", r.enc.MaxFrameBytes()))
	return false
}

// endRow ends the row in progress. again is true when the frame was full:
// it has been emitted and the caller writes the row again.
// what names the row in the log line of a skip.
func (r *Encoder) endRow(tb *table, emit func([]byte) error, attempt int, what string) (again bool, err error) {
	if err = tb.t.EndRow(); err != nil { // inlined: the usual row ends without one
		return r.endRowError(tb, err, emit, attempt, what)
	}
	r.stats.Rows[tb.kind]++
	return false, nil
}

// endRowError is endRow for a row that EndRow refused: a full frame is
// emitted and the row written again (again); anything else is rowError's.
func (r *Encoder) endRowError(tb *table, err error, emit func([]byte) error, attempt int, what string) (again bool, _ error) {
	if errors.Is(err, qwp.ErrFrameFull) && attempt == 0 {
		return true, r.Flush(emit)
	}
	return false, r.rowError(tb, err, what)
}

// rowError handles an EndRow refusal other than a full frame: a row too
// large for any frame is skipped; anything else is a bug that fails the
// batch. (Apart from endRow so that the error target does not make every
// row allocate.)
func (r *Encoder) rowError(tb *table, err error, what string) error {
	var tooLarge *qwp.RowTooLargeError
	if errors.As(err, &tooLarge) {
		r.skip(skipRowTooLarge, tb, what, zap.Int("bytes", tooLarge.Size), zap.Int("limit", tooLarge.Limit))
		return nil
	}
	return fmt.Errorf("encoding a row of table %q: %w", tb.t.Name(), err)
}

// skip counts and logs one dropped row.
func (r *Encoder) skip(reason SkipReason, tb *table, what string, fields ...zap.Field) {
	r.stats.Skipped[reason]++
	r.logger.Warn("dropping a row the data model cannot write",
		append([]zap.Field{zap.String("reason", reason.String()), zap.String("table", tb.t.Name()), zap.String("row", what)}, fields...)...)
}

// timestampNanos converts a pdata time to TIMESTAMP_NANOS; ok is false for 0
// (unset) and for times past 2262, which TIMESTAMP_NANOS cannot hold.
func timestampNanos(ts pcommon.Timestamp) (int64, bool) {
	if ts == 0 || uint64(ts) > math.MaxInt64 {
		return 0, false
	}
	return int64(ts), true
}

// clampCount converts a uint64 count to LONG, saturating at MaxInt64.
func clampCount(n uint64) int64 {
	if n > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(n)
}

// setSymbolString writes s, or leaves the column NULL when s is empty.
func setSymbolString(t *qwp.Table, c qwp.Col, s string) {
	if s != "" {
		t.SymbolString(c, s)
	}
}

// Package datamodel turns OpenTelemetry pdata into rows of the exporter's
// QuestDB tables and holds those tables' DDL. It knows QWP (it writes through
// a qwp.Encoder) and pdata, and nothing of queues, connections or the
// collector component; the README's "Tables and columns" is the user-facing
// reference of what it writes.
//
// The tables (default names; Tables renames them):
//
//	otel_metrics_gauge          value DOUBLE, exemplars VARCHAR
//	otel_metrics_sum            value, is_monotonic BOOLEAN, temporality SYMBOL, exemplars
//	otel_metrics_histogram      count LONG, sum/min/max DOUBLE, bucket_counts and
//	                            explicit_bounds DOUBLE[], temporality, exemplars
//	otel_metrics_exp_histogram  count, sum, min, max, scale INT, zero_count LONG,
//	                            zero_threshold DOUBLE, positive_/negative_offset INT,
//	                            positive_/negative_bucket_counts DOUBLE[], temporality, exemplars
//	otel_metrics_summary        count, sum, quantiles and quantile_values DOUBLE[]
//	otel_logs                   see below
//	otel_traces                 see below
//
// Every metric table also has, with its source:
//
//	timestamp (designated)      the data point's time (TIMESTAMP_NS)
//	start_timestamp             the start time, NULL when 0 (not on gauges)
//	service_name                resource attribute service.name (SYMBOL)
//	metric_name/_unit/_description  the metric (SYMBOL)
//	scope_name, scope_version   the instrumentation scope (SYMBOL)
//	resource_attributes,
//	scope_attributes            sorted-key JSON of the resource's and scope's
//	                            attributes, NULL when empty (SYMBOL)
//	attributes                  the point's attributes as sorted-key JSON
//	                            (SYMBOL, or VARCHAR with AttributesVarchar)
//	series_id                   XXH64 of metric kind and name, resource, scope
//	                            and point attributes (LONG): the dedup key
//	flags                       the data point flags (INT)
//	<promoted>                  one SYMBOL per attributes_as_symbols key
//
// otel_logs: timestamp (record time, else observed time, else export time),
// observed_timestamp, service_name, severity_text SYMBOL, severity_number
// INT, body VARCHAR (a string as is, other kinds as JSON), trace_id and
// span_id VARCHAR (hex, NULL when empty), trace_flags INT, event_name
// SYMBOL, scope_name, scope_version, resource_attributes, scope_attributes,
// attributes VARCHAR (JSON), record_id LONG (XXH64 of the record: the dedup
// key), and the promoted columns.
//
// otel_traces: timestamp (the span's start, else its end, else export time),
// end_timestamp, duration LONG (end - start in ns, NULL when either is unset
// or the end precedes the start), service_name, span_name and span_kind
// SYMBOL, trace_id, span_id and parent_span_id VARCHAR (hex as in otel_logs,
// NULL when zero), trace_state VARCHAR, status_code SYMBOL, status_message
// VARCHAR, scope_name, scope_version, resource_attributes, scope_attributes,
// attributes VARCHAR (JSON), events and links VARCHAR (JSON arrays, times as
// integer nanoseconds), flags and dropped_{attributes,events,links}_count
// INT, span_key LONG (XXH64 of the span: the dedup key), and the promoted
// columns.
//
// Files: rows.go (the Encoder, table and column declarations, the row size
// bound), metrics.go, logs.go and traces.go (one writer per signal; traces.go
// also documents span_key), attrjson.go
// (attribute maps as sorted-key JSON), hash.go (series and record ids,
// never QuestDB's LONG NULL), intnull.go (INT values at QuestDB's INT NULL),
// sanitize.go (UTF-8 repair and promoted column names), ddl.go (the DDL).
//
// DDL writes, per table, "CREATE TABLE IF NOT EXISTS name (...)
// TIMESTAMP(timestamp) PARTITION BY DAY [TTL n UNIT] WAL DEDUP UPSERT
// KEYS(timestamp, series_id|record_id)" in the clause order of QuestDB's
// SqlParser, with every name that is a QuestDB SQL keyword
// (internal/sqlkeywords) or not a plain identifier double-quoted, and the
// ALTER TABLE statements that give an existing table the dedup keys and
// TTL. ddl_questdb_test.go runs them all against qwptest's parser.
package datamodel

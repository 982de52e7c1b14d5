// Command benchcollector measures a whole collector the way an operator sees
// it: collector CPU time and peak memory per data point or log record, with
// the QuestDB exporter side by side with the nopexporter (the receiver's
// floor) and the otlp_http exporter. `make bench-collector` builds the
// benchmark collector with ocb (bench/builder-config.yaml) and the qwpsink
// test server, then runs this command.
//
// For every round, shape and exporter configuration it starts a fresh sink
// and a fresh collector (OTLP/HTTP receiver -> one exporter, no processors),
// posts a bounded number of protobuf OTLP/HTTP requests from a number of
// concurrent clients (retrying 429 and 503 answers after their Retry-After),
// waits until the sink has received every item the collector accepted, and
// reads the collector's CPU time (utime+stime of /proc/<pid>/stat, from just
// before the first request until the drain) and its peak RSS (VmHWM of
// /proc/<pid>/status). Configurations are interleaved within each round, so
// the machine's load hits all of them alike, and the report gives medians
// and the per-round ratios questdb/nop and questdb/otlp_http.
//
// Shapes (each request carries 1,000 items):
//
//   - metrics: 1,000 gauge points of one resource (3 attributes) and one
//     scope, 10 metrics x 20 series x 5 points, 5 point attributes: 200
//     series, the same in every request (a warm SYMBOL dictionary).
//   - logs: 1,000 log records of one resource (3 attributes) and one scope,
//     a 100-byte body, 4 attributes (two of them unique per record),
//     severity and trace context.
//   - traces: the data-model span benchmark's batch (issue #13): 1,000
//     spans over 20 resources (5 attributes each; 50 spans per resource),
//     names from a set of 50, traces of 10 spans, 10 span attributes of
//     which 3 are unique per span (url.path, client.address, a request id),
//     one event with 2 attributes per span, status error on every 20th.
//   - churn: the metrics shape, but one point attribute is unique per
//     point: every point is a new series (a new SYMBOL every row).
//   - steady (not run by default): the metrics shape, but that attribute
//     cycles over 60,000 series (about 7 MiB of attribute JSON), the same
//     order every 60 requests: a working set larger than a 4 MiB SYMBOL
//     dictionary generation.
//
// Sinks: the qwpsink binary in count-only mode for questdb, an in-process
// OTLP/HTTP server that counts data points, log records and spans for otlp_http;
// nop keeps nothing, so its run ends with the last answer.
//
// Linux only (it reads /proc).
package main

// Command demo drives the `make demo` walk-through and the end-to-end check
// that CI runs against an ocb-built collector.
//
// In demo mode it starts the qwpsink test server and the collector (with
// examples/demo.yaml, store-and-forward in a local directory), posts a bulk
// load (one 2.7 MiB OTLP request of 20,000 log records, so the exporter's
// QWP messages run to its 1.8 MiB max_batch_bytes, far past 64 KiB), feeds
// the collector OTLP/HTTP metrics, logs and spans for about a minute, puts the sink into
// a 15-second outage midway, later kills the collector with SIGKILL and starts
// it again, and prints every few seconds the points sent, the rows landed per
// table and the bytes queued on disk. It ends with a verdict line:
//
//	sent N, landed N, lost 0, duplicates D
//
// and the size of the largest QWP message the sink received, and exits
// non-zero if anything accepted by the collector is missing or no message
// was over 64 KiB.
//
// In e2e mode it posts one fixed metrics, logs and traces payload and
// compares the rows that land in the sink with the expected values, then
// posts the bulk load and waits for each of its records to land once; it
// prints the largest QWP message the sink received and exits non-zero on
// any missing row, differing value or a largest message of 64 KiB or less.
//
// In image mode (make image-check) it runs the container image through podman
// or docker on the host's network: the image's user and volume, `validate`
// of its default configuration (and its refusal without POD_NAME), then the
// image as a collector on a named volume, OTLP in and qwpsink out; a stop
// during a QuestDB outage strands the slot on the volume and the image's own
// `questdb-slot inspect` counts it; the drain Job's `questdb-slot salvage`
// from the image delivers it, and a second stranding is delivered by a
// restart on the volume: every record once, the slot empty after.
//
// Everything it starts is stopped on exit, on Ctrl-C and on SIGTERM.
package main

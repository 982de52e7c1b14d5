// Command demo drives the `make demo` walk-through and the end-to-end check
// that CI runs against an ocb-built collector.
//
// In demo mode it starts the qwpsink test server and the collector (with
// examples/demo.yaml, store-and-forward in a local directory), feeds the
// collector OTLP/HTTP metrics and logs for about a minute, puts the sink into
// a 15-second outage midway, later kills the collector with SIGKILL and starts
// it again, and prints every few seconds the points sent, the rows landed per
// table and the bytes queued on disk. It ends with a verdict line:
//
//	sent N, landed N, lost 0, duplicates D
//
// and exits non-zero if anything accepted by the collector is missing.
//
// In e2e mode it posts one fixed metrics and logs payload and compares the
// rows that land in the sink with the expected values, exiting non-zero on
// any missing row or differing value.
//
// Everything it starts is stopped on exit, on Ctrl-C and on SIGTERM.
package main

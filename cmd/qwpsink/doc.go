// Command qwpsink runs the qwptest QuestDB stand-in as a process: it accepts
// QWP ingress on /write/v4 and /api/v4/write, keeps the tables in memory and
// serves them as JSON on the same port (GET /tables, GET /tables/{name}
// ?limit=N, POST /outage?seconds=N). It is for demos and manual runs of the
// exporter; it listens on loopback unless -addr says otherwise and stops on
// SIGINT or SIGTERM.
//
//	go run ./cmd/qwpsink -addr 127.0.0.1:9000
package main

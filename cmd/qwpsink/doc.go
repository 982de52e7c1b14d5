// Command qwpsink runs the qwptest QuestDB stand-in as a process: it accepts
// QWP ingress on /write/v4 and /api/v4/write, keeps the tables in memory and
// serves them as JSON on the same port (GET /tables, GET /tables/{name}
// ?limit=N, GET /stats with the frames received and the largest frame's
// size, POST /outage?seconds=N). Its periodic and final log lines give the
// rows per table and the largest frame received. GET /exec?query=<SQL> runs qwptest's
// CREATE TABLE, ALTER TABLE ... DEDUP and SELECT ... FROM tables(), with the
// same credentials as QWP, so tables created with DEDUP UPSERT KEYS make
// replays idempotent. It is for demos and manual runs of the exporter; it
// listens on loopback unless -addr says otherwise and stops on SIGINT or
// SIGTERM.
//
//	go run ./cmd/qwpsink -addr 127.0.0.1:9000
package main

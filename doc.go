// Package questdbexporter is an OpenTelemetry Collector exporter that writes
// metrics, logs and traces to QuestDB over QWP, QuestDB's columnar WebSocket ingest
// protocol, through a crash-safe store-and-forward queue.
//
// The pieces, in the order data passes through them:
//
//   - factory.go, config.go: the component (type "questdb") and its
//     configuration. Every signal of one component ID shares one instance
//     (shared.go): one writer, one queue slot, one connection.
//   - package internal/datamodel: pdata to rows of the seven tables of the
//     data model (README "Tables and columns") and their DDL.
//   - writer.go, dict.go: the group-commit writer. It encodes every batch
//     waiting at once into QWP frames, persists new SYMBOL dictionary entries
//     before the frames that use them, and appends the frames to the queue in
//     one call (one fsync in flush mode); only then do the callers return.
//   - package sfqueue: the queue, in memory or on disk.
//   - package sender: the I/O loop that streams the queue to QuestDB in order,
//     trims on acknowledgement and replays after every reconnect.
//   - tablecreator.go: on each new connection, the data model's tables are
//     created with DEDUP UPSERT KEYS through QuestDB's /exec, so a replay
//     never doubles a row.
//   - errors.go, status.go, alerts.go, telemetry.go: what receivers, the
//     collector and operators are told.
//   - slottool.go: what the operator tool cmd/questdb-slot takes from the
//     exporter (the configuration's sender options and table settings, the
//     table creator), so that a salvage sends as the exporter would.
package questdbexporter

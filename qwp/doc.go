// Package qwp implements the client side of QWP v1, QuestDB's columnar binary
// ingest protocol over WebSocket: the message encoder, the server response
// decoder, and the upgrade handshake.
//
// The package knows nothing of OpenTelemetry or of disks. A message (the
// protocol also calls it a frame or a batch) is a 12-byte header followed by
// an optional delta symbol dictionary and one or more table blocks, each with
// its column schema inline, so every message can be replayed on its own
// against any later connection once the connection's symbol dictionary has
// been registered.
//
// All multi-byte numbers are little-endian; variable-length integers are
// unsigned LEB128.
package qwp

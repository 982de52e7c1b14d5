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
//
// # Encoder
//
// An Encoder accumulates rows of any number of tables into the current
// frame and appends the finished message to a caller's buffer:
//
//	e := qwp.NewEncoder(dict, qwp.EncoderOptions{MaxFrameBytes: limit, Gorilla: true, DeltaSymbolDict: true})
//	t, _ := e.Table("otel_metrics_gauge")
//	val, _ := t.Column("value", qwp.TypeDouble)
//	ts, _ := t.Column("", qwp.TypeTimestampNanos) // designated timestamp
//	t.Double(val, 1.5)
//	t.TimestampNanos(ts, now)
//	switch err := t.EndRow(); {
//	case errors.Is(err, qwp.ErrFrameFull): // send e.Finish(buf), then write the row again
//	}
//	buf = e.Finish(buf[:0])
//
// A column not set in a row is NULL there. A column is in a frame's block
// only if some row of that frame set it, in the order columns were first
// set. Columns with a NULL use bitmap mode (null flag 1, then only the
// non-null values); columns without use null flag 0. SYMBOL values go
// through the SymbolDict as global ids; each frame's delta section carries
// the entries added since the previous frame (SymbolRange), so a caller that
// persists the dictionary stores those entries before the frame. A SYMBOL
// column that repeats its previous value within a frame reuses that value's
// id without validating or looking it up again; SymbolKeyed, given a
// NewSymbolKey key that names the value, skips even the comparison. With
// Gorilla, TIMESTAMP and TIMESTAMP_NANOS columns are delta-of-delta coded,
// or written uncompressed when a delta-of-delta leaves the int32 range;
// DATE is always plain int64.
//
// Frame-size rule: a finished frame is never larger than MaxFrameBytes
// (header included; at most the protocol's 16 MiB payload). EndRow computes
// the exact size the frame would have with the row; if that is over the
// limit it rolls the row back, leaving the frame byte-for-byte as it was,
// and returns ErrFrameFull, or *RowTooLargeError when the frame holds no
// other row, so no frame could carry it. Size reports the exact length
// Finish will append, so callers can account bytes without encoding.
// Dictionary entries registered by a rolled-back row are carried by the
// next frame that ends a row. Values a server would refuse for their
// content (bad UTF-8, malformed array shapes, oversized geohashes, names
// QuestDB rejects) fail EndRow with an error naming the column instead of
// reaching the wire.
//
// Once its buffers have grown, the encoder allocates nothing per row or per
// frame.
//
// # Catch-up
//
// After a reconnect the server's dictionary is empty. CatchUpFrames turns
// dictionary ids into FlagDeferCommit|FlagDeltaSymbolDict messages without
// tables, each within the batch-size limit, to send before replaying frames.
// A real server withholds the OK of such frames until a message without the
// flag commits the group; AppendCommit is the bare commit (no tables, no
// flags) that closes a group nothing else will close, and Deferred tells a
// sender that the frame it just sent needs one.
//
// # Responses and handshake
//
// DecodeResponse reads OK, error and durable-ack frames strictly; Status
// maps to a Category and a default Policy (terminal, retriable,
// retriable_other; abandoned for client-side data loss). The Append*
// functions encode responses for test servers. Dial performs the WebSocket
// upgrade with the QWP headers and classifies failures in an *UpgradeError
// (terminal, role reject, version mismatch, transient with Retry-After).
package qwp

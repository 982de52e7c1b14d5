// Package sfqueue is the store-and-forward (SF) substrate of the exporter: a
// queue of opaque frames (payloads) numbered by a frame sequence number
// (FSN), appended by producers, read in FSN order by one consumer through a
// Cursor, and released by cumulative Acks. It knows nothing of QWP or
// OpenTelemetry.
//
// # Modes
//
// With Options.Dir == "" the queue is memory-only: segments are RAM buffers
// (the memory ring, 128 MiB default cap) and are lost with the process. With
// a Dir it keeps its frames in the slot directory <Dir>/<SenderID>/ (10 GiB
// default cap), survives a process crash always and a power loss according
// to Options.Durability, and is replayed by the next Open of the same slot.
// Both modes have the same API and semantics.
//
// # Slot layout
//
//	<Dir>/<SenderID>/
//	    .lock                      flock(LOCK_EX) held while open
//	    .lock.pid                  PID of the holder, for *LockedError
//	    .ack-watermark             highest acked FSN (optional)
//	    .symbol-dict               persisted symbol dictionary log
//	    .failed                    a drainer gave up on this slot (reason inside)
//	    00000000000000000001.sfseg segment whose first frame is FSN 1
//	    00000000000000004097.sfseg next segment, first frame FSN 4097
//	<Dir>/<SenderID>.unreplayable-<n>/  a slot recovery set aside (kept for inspection)
//
// Segment names are the base FSN in 20 decimal digits, so lexical order is
// FSN order.
//
// # Segment and frame format
//
// All integers are little-endian. A segment file holds at most
// MaxSegmentBytes and starts with a 24-byte header:
//
//	magic u32 "SQF1" | version u32 (1) | base FSN u64 | reserved u32 | CRC32C u32 of bytes 0..19
//
// followed by frames back to back, frame i holding FSN base+i:
//
//	length u32 | payload (length bytes) | CRC32C u32 of length and payload
//
// CRC32C is Castagnoli. The CRC is the last field: a frame whose tail did
// not reach the disk fails its check, and because it covers the length an
// all-zero (preallocated, never written) region is never a valid frame.
// Frames are written with pwrite (one write per segment per batch). A frame
// must fit one segment; a larger one is refused.
//
// # Preallocation
//
// In periodic and flush durability a new segment file is preallocated to
// MaxSegmentBytes (fallocate on Linux), so a full disk is found when a
// segment is created, before any frame of a batch is written, and the file's
// size and extents become durable with the segment's first fsync rather than
// with every frame. Memory durability does not preallocate: it never fsyncs,
// so the second reason does not apply, and writing into fallocate'd
// (unwritten) extents is ext4's slower write path (BENCHMARKS.md, sfqueue).
// There a full disk surfaces as ENOSPC from the frame write instead; the
// batch is undone as when preallocation fails, and either way the append
// gets a full queue with reason DiskFull.
//
// # Side files
//
// .ack-watermark is 24 bytes: magic u32 "SQW1" | acked FSN u64 | on-disk FSN
// u64 | CRC32C u32. The on-disk FSN is the highest frame its writer knew to be
// durable (all published frames at a clean Close); recovery reports frames
// below it that it cannot find as RecoveryReport.LostFrames. It
// is replaced by write-temp, fsync, rename, fsync-directory, at most every
// 250 ms and only when the acked FSN moved, and on Close.
//
// .symbol-dict is an append-only log of records
//
//	generation u32 | id u32 | length u32 | bytes | CRC32C u32 of the record before it
//
// where each id is the next id of its generation. AddSymbols appends before
// the frames using the ids are appended, and in periodic and flush
// durability fsyncs before it returns. With Options.SymbolUse set, a
// generation is deleted once no unacknowledged frame uses it and it is not
// the newest (generations.go): acks or evictions passing its last frame
// wake the background goroutine, which writes .ack-watermark first (so a
// crash never finds unacked frames whose dictionary is gone) and then
// rewrites the file through temp + rename with the queue's lock released
// (AddSymbols meanwhile appends to the old file, a superset, and hands its
// records to the rewrite). DropSymbolGenerationsBelow does the same on
// demand.
//
// # Durability
//
//   - memory: writes reach the page cache only. Survives a process crash.
//   - periodic: a background goroutine fsyncs every SyncInterval; a power
//     loss loses up to about one or two intervals of appends (measured).
//   - flush: group commit. An append returns only after an fsync that
//     started after its write; appends arriving while an fsync runs share
//     the next one. No timer: the batch grows with load.
//
// In periodic and flush modes the previous segment is fsynced before the
// first frame is written to a new one (with the lock released, so the
// consumer keeps reading and acking; other appends wait), and the directory
// is fsynced after segments are created and after Open, so a power loss can
// only cut the newest frames, never leave a hole or lose a side file. On
// macOS, Go's File.Sync is fcntl(F_FULLFSYNC), which also empties the
// drive's write cache. A failed fsync latches a *FatalError: it is never
// retried (Linux may report a later fsync clean for data that never reached
// the disk), nothing after it is reported durable, later appends fail.
//
// # Recovery (Open in SF mode)
//
//  1. Lock the slot; a held lock is *LockedError naming the holder's PID.
//  2. Read .ack-watermark (corrupt: ignored with a warning) and
//     .symbol-dict (a torn tail is cut off).
//  3. CRC-walk every segment from its header, stop at the first short,
//     oversized or CRC-failing frame and truncate the file there (the cut
//     bytes, up to the last non-zero byte, are RecoveryReport.TornBytes). A
//     segment with a bad header or no valid frame is deleted.
//  4. A watermark past the last recovered frame is ignored with a warning.
//  5. Segments in base order must be contiguous (prev.base + prev.frames ==
//     next.base) wherever the hole would hold an FSN above the watermark,
//     and when Options.SymbolUse is set every unacked frame's symbol ids
//     must exist in .symbol-dict. Otherwise the slot is unreplayable: it is
//     renamed to <SenderID>.unreplayable-<n>, a *DataLossError is reported
//     in Recovery() and logged, and the queue starts on a fresh slot.
//     Segments wholly at or below the watermark are deleted (acked).
//  6. Frames recovery cannot find although the watermark recorded them as
//     on disk, or that sat behind an unusable first segment, are counted in
//     RecoveryReport.LostFrames and logged (nothing disappears silently).
//  7. ackedFSN = max(lowest base - 1, watermark); the next FSN follows the
//     last frame, or the watermark when no segment survives, so an FSN at or
//     below a recorded watermark is never reused. Recovered segments are
//     sealed; appends go to a new segment.
//
// A Close with everything acked deletes every segment (after saving the
// watermark), so a drained slot holds only side files.
//
// # Full queue
//
// MaxTotalBytes bounds the header and frame bytes of retained segments. At
// the cap, on_full=block waits up to AppendDeadline (never past the
// caller's deadline) for Acks to delete segments, then fails with a
// retryable *FullError saying whether the consumer is publishing or
// reconnecting; on_full=evict_oldest deletes the oldest segments, acked or
// not, counting and logging what it dropped. ENOSPC is a full queue with
// reason DiskFull. A queue with no segments admits a frame larger than the
// whole cap, so one big frame cannot wedge it.
//
// # Use
//
//	q, err := sfqueue.Open(sfqueue.Options{Dir: "/var/lib/otelcol/questdb", SenderID: "questdb-primary",
//		Durability: sfqueue.DurabilityFlush})
//	fsn, err := q.Append(ctx, frame)    // producer
//	c := q.NewCursor()                  // consumer
//	for {
//		fsn, payload, ok, err := c.Next()
//		if !ok { <-q.Published(); continue }
//		send(payload)                   // later, on the server's ack:
//		q.Ack(fsn)
//	}
package sfqueue

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
//	    .symbol-dict.0000000007    symbol dictionary of generation 7 (one file per generation)
//	    .failed                    a drainer gave up on this slot (reason inside)
//	    .handover                  the slot's exporter asks the drainer holding it to yield (package sender)
//	    .spare-segment             the next segment, prepared ahead (periodic, flush)
//	    00000000000000000001.sfseg segment whose first frame is FSN 1
//	    00000000000000004097.sfseg next segment, first frame FSN 4097
//	<Dir>/<SenderID>.unreplayable-<n>/  a slot recovery set aside (kept for inspection)
//	<Dir>/<SenderID>.removing/  a drained slot RemoveSlot is deleting (RemoveLeftovers deletes one a crash left)
//
// Segment names are the base FSN in 20 decimal digits, so lexical order is
// FSN order.
//
// A slot is private: its directory is 0700 and every file in it 0600 (lock
// files, side files, segments, .failed, and set-aside slots alike), whatever
// the umask, because frames hold log bodies and attribute values. Open makes
// a slot created by an earlier version (0755/0644) private, and this
// sender's set-aside slots with it.
//
// # Segment and frame format
//
// All integers are little-endian. A segment file holds at most
// MaxSegmentBytes and starts with a 24-byte header:
//
//	magic u32 "SQF1" | version u32 (2) | base FSN u64 | reserved u32 | CRC32C u32 of bytes 0..19
//
// followed by frames back to back, frame i holding FSN base+i. Format 2,
// the one written:
//
//	length u32 | items u32 | payload (length bytes) | CRC32C u32 of length, items and payload
//
// items is the number of items (the exporter's rows: points, log records,
// spans) the payload carries, given to AppendBatchItems; the queue never
// reads payloads, so the count travels with the frame, and an eviction can
// count what it drops (Stats.ItemsEvicted) even for frames written before a
// restart. Format 1, written by releases before it, has no item count:
//
//	length u32 | payload (length bytes) | CRC32C u32 of length and payload
//
// Format 1 segments are still read: a slot of an older release recovers
// and drains, and its new frames go to format 2 segments beside the old
// ones (recovered segments are sealed), so a slot may hold both. Evicting a
// format 1 frame counts it in Stats.FramesEvictedItemsUnknown (its items are
// unknown), not as zero items. A segment of a newer format (an intact
// header, version above 2) is not damage: Open refuses the slot with a
// *FormatError naming both versions before it takes the lock, and leaves
// every file as it is, so that the release that wrote it can still open it.
//
// CRC32C is Castagnoli. The CRC is the last field: a frame whose tail did
// not reach the disk fails its check, and because it covers the length an
// all-zero (preallocated, never written) region is never a valid frame; it
// covers the item count too, so a damaged count is a damaged frame. Frames
// are written with pwrite (one write per segment per batch; in flush
// durability one per group fsync, by the flusher). A frame must
// fit one segment; a larger one is refused.
//
// The queue keeps each segment's item sum in RAM (8 bytes a segment, no
// per-frame array): evicting a segment with no acknowledged frame costs no
// read; evicting the partly acknowledged oldest one reads the 8-byte heads
// (length | items) of its unacknowledged frames (one segment at most; one
// read gathers the heads within 64 KiB of each other, no payload is read
// past them and none CRC-checked: the eviction holds the queue's lock and
// deletes the payloads unread). A head whose length disagrees with the
// frame's place makes its frames count as of unknown items.
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
// batch is undone as when preallocation fails (what it wrote is zeroed, or
// cut off when even that is refused, and made durable before a later
// segment's frames; fsynced before the refusal returns when the batch had
// rotated, whose fsync of the earlier segment may have made its first
// frames durable), and either way the append gets a full queue with
// reason DiskFull. An undo that can neither zero nor cut latches the
// queue, and the append gets that fatal error.
//
// In periodic and flush durability the next segment is prepared ahead,
// off the append path, as .spare-segment (spare.go): the Ack that frees the
// oldest segment recycles it (rename, a group fsync for the directory, its content zeroed
// with fallocate ZERO_RANGE, which keeps the blocks, then fsync), or, when
// none was freed by the time the active segment is half full, the
// background goroutine creates and preallocates a new one. A rotation
// renames the spare to the new segment's name and writes its header. The
// spare counts against MaxTotalBytes (it is deleted before an append is
// refused or evicts for room), recovery deletes one left by a crash, Close
// deletes it, and a failure to prepare it (ENOSPC included) only means the
// next rotation creates its segment as above. Where a range cannot be
// zeroed (macOS, tmpfs) acked segments are deleted and spares are new files.
//
// A new segment's header is made durable by the segment's first fsync, not
// at the rotation: a directory fsync (the .ack-watermark's replace, a
// dictionary file's creation, or the group fsync's own, which runs beside
// the segment's) can make the name durable first, and a power loss then
// leaves a newest segment with a
// torn header, which recovery deletes as a torn creation (Recovery, 3.):
// no fsync of it had completed, so nothing in it had been confirmed. In
// flush durability a rotation makes no append wait for an fsync of its
// own, except one that finds an earlier sealed segment not yet durable.
//
// # Side files
//
// .ack-watermark is 36 bytes (format 2): magic u32 "SQW2" | durability u8
// (+1) | 3 zero bytes | acked FSN u64 | synced FSN u64 | published FSN
// u64 | CRC32C u32. The synced FSN is the highest frame completed fsyncs
// covered: recovery reports frames up to it that it cannot find as
// DATA_LOSS (RecoveryReport.Lost). The published FSN is the highest frame
// published when it was written: frames above the synced FSN and up to it
// that recovery cannot find are torn frames, the mode's loss window,
// counted (RecoveryReport.Torn). The durability is the writer's, whose
// window the next recovery applies. It is replaced by write-temp, fsync,
// rename, fsync-directory, at most every 250 ms and only when something in
// it moved, and on Close. Format 1 (24 bytes, "SQW1" or "SQWu": acked FSN
// and one on-disk FSN) is still read; a release before format 2 reads a
// format 2 file as corrupt and replays from the oldest segment
// (duplicates, never loss).
//
// .symbol-dict.<generation, 10 digits> is one dictionary generation, an
// append-only log of records
//
//	generation u32 | id u32 | length u32 | bytes | CRC32C u32 of the record before it
//
// where each id is the next id of its generation. AppendWith writes a
// batch's entries before its frames (creating the file, whose directory
// entry is fsynced with it), and in periodic and flush durability fsyncs
// them before any frame is written; when the frames then fail (ENOSPC) the
// entries are cut off again. AddSymbols, for tools, writes entries alone.
// In SF mode the entries are read from the file when asked for, not held
// in RAM: OpenSymbols streams a generation in 64 KiB chunks through its
// own file handle (a catch-up holds a chunk, never the generation; the
// writer loads its generation through it at start). A record that cannot
// be read, fails its CRC32C or breaks the id sequence is an error naming
// the file, offset, id and generation, never a generation cut short. With Options.SymbolUse set, a
// generation is deleted once no unacknowledged frame uses it and it is not
// the newest (generations.go): acks passing its last frame wake the
// background goroutine, and an eviction does it at once; either way
// .ack-watermark is written first (so a crash never finds unacked frames
// whose dictionary is gone) and then the generation's file is deleted. Slots
// written before per-generation files hold every generation in one log of
// the same records, .symbol-dict: Open moves each generation into its own
// file (temp, fsync, rename) and then deletes it; a move interrupted by a
// crash is finished by the next Open.
//
// # Durability
//
// What a caller may lose to a power loss (a process crash loses nothing
// in any mode), the rule recovery applies (rule.go, SlotScan.judge):
//
//   - flush: nothing that was answered.
//   - periodic: at most what was appended since the last completed tick.
//   - memory: at most what was appended since the last segment seal and
//     watermark save: the active segment, plus at most one sealed segment
//     still being synced.
//
// Everything inside the window that is lost is counted (RecoveryReport.Torn
// and TornFrames, by cause (TornCause): the torn tail, a torn creation, a
// segment of memory durability not synced, frames published but never
// written, and intact frames after such a cut, which a replay cannot
// reach without skipping the FSNs it lost) and
// logged at Error with its FSN range (Info in flush, where none of it was
// answered). Everything outside it that is unreadable is media damage:
// DATA_LOSS, and the slot is set aside (Recovery, below).
//
// Counted exactly, or bounded. A lost frame the slot holds a trace of (its
// torn or unsynced bytes, a segment's name, which is its first FSN,
// .ack-watermark's published FSN) is counted, each FSN once, by cause. A
// frame appended after the last .ack-watermark save whose bytes never
// reached the disk leaves no trace: after the power loss nothing says it
// existed, so it is bounded, not counted. The bound: frames appended within
// one save interval (250 ms, plus the save's own write, fsyncs and rename)
// before the power loss, and never more than the mode's window (periodic:
// one tick; memory: the active segment and one sealed). The bound assumes
// the saves succeed: while .ack-watermark cannot be written (logged at
// Error once per streak, retried every interval) it widens to the mode's
// whole window. After a lull in appends longer than the interval every lost
// frame is counted. No scheme
// without a cost per append counts them all: counting frame N after a power
// loss needs a record of N made durable before it, an fsync after N's
// append, which is flush durability's group commit. Saving the published
// FSN with each periodic tick or with memory durability's seal fsync would
// not count more: such a record covers little beyond what that fsync made
// durable anyway, and the frames appended after it are untraced again; a
// shorter save interval narrows the bound at two fsyncs per save
// (RELIABILITY.md has the figures).
//
//   - memory: writes reach the page cache only; a segment, once sealed at a
//     rotation, is fsynced by the background goroutine, off the append path
//     (a rotation waits only when the previous sealed segment's fsync is
//     still running), together with the dictionary files written since
//     their last fsync (the ids its frames use, whose defining frames may
//     be acked and deleted), and .ack-watermark then records it as synced.
//     Recovery fsyncs the dictionary files with the recovered segments,
//     in whatever mode the slot is reopened (the life before may have been
//     a memory-durability one).
//   - periodic: a background goroutine fsyncs every SyncInterval; a power
//     loss loses up to about one or two intervals of appends (measured).
//   - flush: group commit. An append returns only after an fsync that
//     started after its write; appends arriving while an fsync runs share
//     the next one. No timer: the batch grows with load. An append only
//     builds its frames in memory (a copy under the lock); a flusher
//     goroutine writes the frames of all waiting appends with one call,
//     publishes them to cursors, fsyncs, and releases the appends through
//     a channel. Before each fsync it yields to the goroutines that are
//     ready to run (the appends just released, appending again) for as
//     long as they keep joining, at most the last fsync's time and 2 ms, so
//     a steady stream shares one fsync instead of alternating two. A write
//     system call per append would serialize them under the lock for
//     longer than the fsync (BENCHMARKS.md). Appends still waiting when the
//     queue closes share Close's fsync and get its outcome: their frames
//     stay on disk, so they are not told ErrClosed.
//
// In periodic and flush modes the previous segment is fsynced before the
// first frame is written to a new one (periodic: at the rotation, with the
// lock released, so the consumer keeps reading and acking while other
// appends wait; flush: by the next group fsync, before it writes the new
// segment's frames, while appends go on building theirs, and the
// background goroutine starts that fsync at the rotation; the first append
// after a group write rotates early when a group like the last one would
// not fit, leaving at most a sixteenth of a segment unused, counted against
// MaxTotalBytes, so that the segment it seals is covered by the group fsync
// in flight and no group waits for the sealed segment's own), and the directory
// is fsynced after segments are created and after Open, so a power loss can
// only cut the newest frames, never leave a hole or lose a side file. On
// macOS, Go's File.Sync is fcntl(F_FULLFSYNC), which also empties the
// drive's write cache. A failed fsync latches a *FatalError: it is never
// retried (Linux may report a later fsync clean for data that never reached
// the disk), nothing after it is reported durable, later appends fail. So
// does a write that fails other than with ENOSPC (EIO: its outcome is
// unknown), on a segment or on a dictionary file. After the latch the
// consumer goes on: the frames already published are in the page cache, so
// the I/O loop keeps reading, sending and acking them as usual and only
// new appends are refused; the exporter reports a permanent status and
// refuses calls with a retryable error until a restart reopens the slot.
// Close then records every published frame as on disk in .ack-watermark, so
// that a recovery that does not find some of them reports them as DATA_LOSS
// (vanished) instead of starting without them in silence. ENOSPC is not
// latched: the append is undone and refused as a full queue (DiskFull,
// counted in Stats.FullErrors and DiskFullErrors; logged at Warn at most
// once a minute with the count since the last line), and appends succeed
// again once there is room. Flush durability's group write (the flusher,
// or a rotation, writes the frames appends built) finds its blocks
// reserved by preallocation, but a file system without fallocate or a
// copy-on-write one can still refuse it: an ENOSPC or EDQUOT there cuts the
// segment back to the end of its last good frame (no part of a refused
// frame stays for recovery to count torn), takes the group's FSNs and
// bytes back and fails exactly the appends waiting for that group with the
// same DiskFull refusal, counted; nothing they built was published, and
// the queue goes on. Only a failed cut latches. A failed .ack-watermark
// write is retried every 250 ms and logged at Error once per failure
// streak: it costs duplicates after a restart, never data. A failed fsync
// of the directory in its replace latches, though: the directory holds the
// segments' names too.
//
// # Recovery (Open in SF mode)
//
// Recovery first looks, then decides, then changes: nothing in the slot is
// modified until it has decided that the slot can be replayed.
//
//  0. A segment of a newer format refuses the slot (*FormatError) before
//     anything else, the lock included.
//  1. Lock the slot; a held lock is *LockedError naming the holder's PID.
//  2. Scan, read-only (ScanSlot is the same scan, exported for the slot
//     tool): .ack-watermark (corrupt: ignored with a warning, frames are
//     then replayed from the oldest segment), the valid prefix of each
//     dictionary file (walked a 64 KiB chunk at a time; recovery keeps
//     each generation's count, not its entries, unless it must move a
//     legacy .symbol-dict), and a CRC walk of every segment from its header that
//     stops at the first short, oversized or CRC-failing frame. When
//     written (non-zero) bytes follow that frame, the rest of the file is
//     searched at every offset for valid frames ("stray" frames): their
//     presence means the damage is in the middle of the written data, not
//     at a torn tail. Recovery never replays them, but in a segment before
//     the newest, strays forming one run to the end of its written data
//     held the FSNs just below the next segment's base (each segment
//     starts where the one before ended): the scan lists them as readable
//     (FSNRange.Placed, EachFrame), so a set-aside slot counts them
//     readable and the slot tool sends them. That assumes the written data
//     ends with the segment's last frame: if the segment also lost its
//     last frames whole (a second damage ending exactly at a frame
//     boundary), the strays are placed too high by that many FSNs. Their
//     contents are intact and the counts right, but the damaged range
//     names the wrong FSNs, and a salvage may send acknowledged frames
//     again (dedup keys make that harmless).
//  3. Decide, by the rule of the mode that wrote the slot (.ack-watermark
//     records it; else the opening queue's): rule.go. Acknowledged frames
//     are those at or below .ack-watermark's acked FSN, even past every
//     frame found (QuestDB has them; new FSNs resume above it); without a
//     usable watermark, the frames of a dictionary generation older than
//     the oldest one present (a generation is deleted only after the
//     watermark covered its frames). In memory durability the cut is the
//     first damage above the synced FSN in the last two segments holding
//     frames (a hole, a torn frame, an unusable header, an empty segment
//     before another); everything after it is deleted and counted as torn
//     frames. In periodic and flush durability:
//     "The newest segment"
//     is the newest one holding a valid frame (or the last file, when it
//     holds damage past an intact header and .ack-watermark recorded an
//     FSN of it as on disk): a batch creates every segment it needs
//     (headers written) before its first frame, and (periodic, flush) a
//     segment's frames are written only once the one before is durable,
//     so no frame of the segments after it reached the disk: they hold a
//     header, torn or not, and what a power loss left of unsynced writes,
//     and are deleted (what they held counted in TornBytes). When the
//     newest segment holds no frame and such segments follow it, its FSNs
//     up to the next one's base were written and lost: torn frames.
//     - The newest segment's tail: a bad frame with nothing valid after it,
//     at an FSN .ack-watermark does not record as fsynced (its synced FSN
//     at or past it: the medium damaged it after a completed
//     fsync, which is damage like any other, below), is
//     cut, and the frames it appears to hold above the watermark are
//     RecoveryReport.TornFrames from TornFirstFSN. In flush durability
//     nothing after the last completed fsync was ever answered (seed 004),
//     so the cut is logged at Info only. In periodic and memory durability
//     the cut is the mode's documented loss window: logged at Error with
//     its FSN range, and the caller counts it (torn_frames).
//     - A torn creation is a torn tail too: the newest segment with an
//     unusable header (not a newer format's) when .ack-watermark is absent
//     or intact and records no FSN of it as on disk (synced FSN below its
//     base). The header is written before any frame and every fsync of the
//     file covers it, so no fsync of the file completed: all of it is the
//     mode's loss window (a directory fsync made its name durable first).
//     It is deleted, its written bytes counted in TornBytes and the frames
//     a walk from a current-format header finds in it as torn frames
//     (possibly none). The one limit: a header the medium damaged after
//     it became durable, before .ack-watermark recorded a frame of the
//     segment as on disk, is taken for a torn creation. .ack-watermark is
//     rewritten (at most every 250 ms) when acknowledgements move, at Close,
//     and once the first fsync of the newest segment has ended, so that
//     window is the quarter second after a segment's first fsync.
//     - Frames at or below the ack watermark may be dropped silently: damage
//     whose whole FSN range is acknowledged is cut or deleted.
//     - Anything else that leaves accepted, unacknowledged frames unreadable
//     makes the slot unreplayable: a bad header (an older segment, or the
//     newest when it is not a torn creation: media damage), a bad
//     frame in an older segment, in the middle of the newest one or at an
//     FSN the watermark records as fsynced, frame 0
//     of the oldest segment, a gap or overlap between segments (prev.base +
//     prev.frames != next.base). So does an unacknowledged frame using a
//     symbol id that neither .symbol-dict's valid prefix nor the delta
//     sections of the surviving frames define (Options.SymbolDefs: the
//     dictionary is rebuilt from them first, and the rebuilt entries are
//     appended to .symbol-dict when the slot replays).
//     - Frames the watermark recorded as on disk (its synced FSN) beyond
//     everything found, not even torn, are gone: nothing is left to keep,
//     so the slot replays, and they are reported as DATA_LOSS all the same
//     (RecoveryReport.Lost, LostFrames; logged at Error).
//  4. An unreplayable slot is renamed whole, exactly as found (only
//     .lock.pid was rewritten when the lock was taken: no segment cut or
//     deleted, no .tmp removed, no dictionary tail cut), to
//     <SenderID>.unreplayable-<n>; RecoveryReport.Unreplayable is a
//     *DataLossError listing every unreadable FSN range with its file,
//     offset and cause, the readable unacked frames left there and the
//     unreadable ones counted; it is logged at Error, and the queue starts
//     on a fresh, empty slot. The readable frames of a set-aside slot are
//     never sent by the queue: they wait there for an operator and the slot
//     tool (cmd/questdb-slot, built on ScanSlot and SlotScan.EachFrame),
//     which can inspect the slot and send them. An orphan drainer
//     (Options.MarkUnreplayableFailed) leaves the slot in place instead,
//     adds .failed with the DATA_LOSS reason so that later orphan scans
//     skip it, and Open returns the *DataLossError.
//  5. A replayable slot is then repaired: interrupted *.tmp files removed,
//     torn tails truncated (and fsynced in periodic and flush), torn
//     creations, never-written and wholly acked segments deleted,
//     .symbol-dict cut to
//     its valid prefix and extended with the rebuilt entries.
//  6. ackedFSN = max(lowest base - 1, the acknowledged FSN of 3.); the
//     next FSN follows the last frame or ackedFSN, whichever is higher, so
//     an FSN at or below a recorded watermark is never reused. Recovered
//     segments are sealed; appends go to a new segment. The recovered
//     segments holding frames .ack-watermark does not record as fsynced
//     (the previous holder may have died before their fsync, or closed in
//     memory durability) are fsynced before the queue counts them durable.
//     .ack-watermark is then rewritten, before any FSN is handed out,
//     whenever it differs from what recovery decided (unusable, FSNs past
//     the last recovered frame recorded, another mode), so that it is never
//     left stale.
//
// A deleted oldest segment cannot be told from acknowledged segments that
// Ack deleted before the watermark recorded them (the watermark is written
// at most every 250 ms), so frames below the oldest segment are taken as
// acknowledged, as seed 000 says (lowest base - 1).
//
// A Close with everything acked deletes every segment (after saving the
// watermark), so a drained slot holds only side files.
//
// # Full queue
//
// MaxTotalBytes bounds the header and frame bytes of retained segments
// together with the dictionary (Stats.UsedBytes): its files in SF mode; in
// memory-only mode the RAM its entries hold (each generation's entries
// back to back in chunks) and the producer's index (Batch.IndexBytes), so
// that the cap bounds the RAM an outage costs. A batch's frames and the
// dictionary entries they define (AppendWith) are admitted together: a
// refused batch writes and counts neither. At the cap, on_full=block waits up to AppendDeadline (never past the
// caller's deadline) for Acks to delete segments, then fails with a
// retryable *FullError saying whether the consumer is publishing or
// reconnecting; on_full=evict_oldest deletes the oldest segments, acked or
// not, counting what it dropped (frames, payload bytes and items, see
// Stats), and with them the dictionary generations only they used (not the
// newest: the producer may still extend it), until the batch fits, frames
// and entries together. ENOSPC is a full queue with
// reason DiskFull. A queue with no segments admits a frame larger than the
// whole cap, so one big frame cannot wedge it. Stats.UnackedBytes is
// UsedBytes without the acknowledged frames retained segments still hold
// (the segment taking appends is deleted only once sealed), and Stats.AtCap
// holds from an append that found no room (refused, waited or evicted)
// until acknowledgements delete a segment. The queue logs no eviction: at
// the cap it evicts for nearly every append, so its owner summarises
// Stats.FramesEvicted and Stats.ItemsEvicted.
//
// # Use
//
//	q, err := sfqueue.Open(sfqueue.Options{Dir: "/var/lib/otelcol/questdb", SenderID: "questdb-primary",
//		Durability: sfqueue.DurabilityFlush})
//	fsn, err := q.AppendBatchItems(ctx, [][]byte{frame}, []uint32{rows}) // producer
//	c := q.NewCursor()                  // consumer
//	for {
//		fsn, payload, ok, err := c.Next()
//		if !ok { <-q.Published(); continue }
//		send(payload)                   // later, on the server's ack:
//		q.Ack(fsn)
//	}
//
// Next holds the frame whole in a buffer the cursor keeps. A consumer that
// forwards frames instead reads them with NextStream through a small
// buffer: the frame's CRC32C is checked before anything is handed out, and
// checked again over the bytes Stream.Read hands out, whose last piece is
// held back if they changed meanwhile.
package sfqueue

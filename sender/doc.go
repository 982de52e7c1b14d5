// Package sender is the I/O loop of the QuestDB exporter: one Sender per
// store-and-forward slot streams the slot's frames (sfqueue) to a QuestDB
// server over QWP/WebSocket (qwp), advances the slot's ack watermark from
// the server's acknowledgements, and reconnects and replays after every
// failure. It follows the store-and-forward contract (seed 000).
//
// # Goroutines
//
// Start launches one I/O goroutine that owns all connection state (the
// cursor, the wire window, the durable-ack stash, backoff, endpoint choice)
// and, per connection, one reader goroutine that only decodes responses into
// a mailbox that never blocks it. A third goroutine dispatches the error
// inbox. Close stops all of them.
//
// # State machine
//
//	           Start
//	             |
//	        Connecting ----dial ok----> Connected
//	             |                        |   |
//	        dial failed       connection lost, error frame
//	             v                        |   |
//	       Reconnecting <-----------------+   | generation switch or
//	        |   ^    |                        | evicted frames: reconnect at once
//	        +---+    +--dial ok--> Connected <+
//	   (backoff, rotate endpoints)
//
//	any state --unconfirmed durable ack, terminal error policy,
//	            poison frame, oversized frame--> Terminal
//
// Terminal stops sending for good and keeps every frame in the queue; Err
// returns the *TerminalError and the exporter fails later calls retryably.
// Transitions are reported through Options.OnState, and the reconnect state
// goes to the queue (SetConsumerState) for its full-queue error message.
//
// Reconnects wait a full-jitter exponential backoff, uniform in
// [0, min(MaxBackoff, InitialBackoff*2^(n-1))] after the n-th consecutive
// failure (100 ms and 5 s by default); an acknowledgement, or a connection
// that lived at least MaxBackoff, resets n. A 503/429 upgrade's Retry-After
// (capped at 60 s) is a minimum. A failed dial moves to the next endpoint; a
// 421 role reject or a version mismatch moves on after at most
// InitialBackoff, backing off in full only once every endpoint refused.
// A 401 or 403 (credentials refused, or a user not allowed to write) is
// not terminal: the fix is often on the server, and a stopped sender would
// need a restart after it. It is counted as a SECURITY_ERROR, reported to
// the error inbox once until a connection succeeds, and retried like a
// role reject, except that once every endpoint refused the wait is the
// credentials backoff: AuthInitialBackoff doubling to AuthMaxBackoff (30 s
// and 5 min by default), drawn from the upper half of each step.
//
// # Wire mapping
//
// The server numbers the binary messages of a connection from 0 (wireSeq)
// and acknowledges cumulatively. Each connection first registers the ids of
// the generation of its first frame that the frame uses without defining
// them, [0, its delta section's start), as C catch-up frames
// (FLAG_DEFER_COMMIT|FLAG_DELTA_SYMBOL_DICT, no rows, split to
// min(X-QWP-Max-Batch-Size, MaxBatchBytes); none for a frame whose delta
// starts at 0, as a new generation's first does; sent just before the first
// data frame, so the generation is known; read from the queue a chunk at a
// time into one frame at a time, so a catch-up holds one frame and a read
// buffer, whatever the generation's size). The frames after it define their
// own ids: each stored frame's delta section starts where the previous
// one's ended, so entries that the queued frames define are not sent twice.
// A frame whose delta starts past the ids the connection registered (the
// chain broken: entries an earlier process stored after its last frame)
// is held, and the connection recycles as at a generation switch. It
// then streams stored frames from ackedFSN+1 in strict FSN order,
// one message each, stripped of their 4-byte generation prefix. A frame
// goes from the queue to the socket in 128 KiB pieces, never whole in RAM:
// the queue checks its CRC32C before any byte of it is sent, and again over
// the bytes sent, holding back the last piece if they changed, so a damaged
// frame is never completed on the wire (sfqueue.Cursor.NextStream,
// qwp.Conn.WriteMessageFrom). So
//
//	fsn = fsnAtZero + wireSeq - C - B,   fsnAtZero = ackedFSN + 1 pinned at connect
//
// where B counts the bare commits sent before wireSeq. A real server
// withholds the OK of deferred frames until the next plain frame; an OK
// whose wireSeq < C covers no FSN. When the last frame sent is deferred
// (a stored dictionary catch-up, as slots written before the writer closed
// such groups end generations) and no frame follows it on this connection
// (the queue's end, a generation boundary, a stop), the loop sends a bare
// commit (qwp.AppendCommit: no tables, no flags), whose OK covers it: the
// loop never waits on an OK that cannot come. At most MaxInFlight frames
// after the catch-up wait for an OK (catch-up frames are not counted: their
// OK cannot come before a data frame's). New frames are picked up from
// sfqueue.Queue.Published without polling. Frames sent again after a
// reconnect count as replayed.
//
// A frame of a newer dictionary generation is held until everything sent is
// acknowledged; then the connection is recycled so the next one registers the
// new generation. (The queue deletes older generations on its own once no
// unacknowledged frame uses them; should it delete the one a connection's
// first frame needs because that frame was just evicted, the catch-up sees
// the dictionary short of the frame's ids and recycles instead of sending.) A frame larger than the
// server's advertised limit is a terminal error naming both sizes: frames on
// disk are never re-split. Before stopping for such a send-side condition the
// loop collects the acks of the frames already sent (up to 5 s), so they are
// not replayed later. A frame larger only than MaxBatchBytes (stored under a
// larger setting) goes out whole on the open connection, with no reconnect.
// If the queue evicted frames (on_full: evict_oldest)
// the FSNs jump; the connection is recycled so the mapping starts afresh.
//
// # Durable-ack trim
//
// Without DurableAck, each cumulative OK acks its FSN in the queue. With it,
// OKs are stashed with their per-table seqTxn and only durable-ack frames
// trim: 0x0E (local) for "local", 0x02 for "replicated" and for
// "local,replicated" (whose 0x0E frames then only report progress). A
// durable-ack frame raises per-table durable watermarks; every stash head
// entry whose tables are all covered pops and acks its FSN (an entry naming
// no table pops once it reaches the head). While confirmations are pending
// and nothing is being sent, a WebSocket PING goes out every
// DurableAckKeepalive. The stash starts empty on each connection; frames
// confirmed by OK but not yet durable are replayed. MaxInFlight counts OKs,
// not durable acks.
//
// # Error policy
//
// Every error frame ends the connection (the server ignores later frames on
// it). The category's policy decides what follows:
//
//	category            default          overridable
//	SCHEMA_MISMATCH     terminal         yes
//	PARSE_ERROR         terminal         yes
//	SECURITY_ERROR      terminal         yes
//	WRITE_ERROR         retriable        yes
//	INTERNAL_ERROR      retriable        yes
//	DICTIONARY_GAP      retriable        yes (the reconnect re-registers the dictionary)
//	NOT_WRITABLE        retriable_other  yes
//	UNKNOWN             retriable        no
//	PROTOCOL_VIOLATION  terminal         no
//
// retriable reconnects to the same endpoint after backoff and replays from
// ackedFSN+1; retriable_other does the same on the next endpoint, as does a
// server's CLOSE 1000 (how a demoting primary refuses writes today). When the
// same frame is rejected MaxFrameRejections times (4) with no
// acknowledgement of it in between, the sender stops with
// PROTOCOL_VIOLATION. A CLOSE 1009 (message too big) counts as a rejection
// (category UNKNOWN) of the oldest unacknowledged frame. Nothing is ever
// dropped by policy.
//
// Server errors, terminal conditions, refused upgrades that need attention
// and the queue's recovery data loss go to a bounded error inbox (drop
// oldest, counted) whose dispatcher calls Options.ErrorHandler, by default a
// zap error log of every entry.
//
// # Close and orphans
//
// Close waits up to CloseFlushTimeout for ackedFSN to reach the published
// FSN, then stops; what is left stays in the slot (SF mode) or is lost
// (memory-only mode), and the returned error says which (Options.SlotDir
// names the slot; empty means memory-only). WaitAcked blocks
// until a given FSN is acknowledged; only ctx, a terminal error or Close end
// it early. DrainOrphans adopts other senders' abandoned slots, a few at a
// time, each with its own queue, Sender and connection.
package sender

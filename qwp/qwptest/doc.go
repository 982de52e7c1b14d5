// Package qwptest is a QuestDB stand-in for tests: a strict server-side
// decoder of QWP v1 ingress messages and an in-process WebSocket server that
// answers like QuestDB does (per the project's reference summary of the
// server source, /work/shared/reference/qwp-server-behaviour.md).
//
// # Decoder
//
// Decoder validates every rule a QuestDB server applies to a message and
// returns typed values (see Column). Refusals are *StatusError carrying the
// status QuestDB answers with: PARSE_ERROR for malformed input (header,
// limits, truncation, bad UTF-8 anywhere including VARCHAR values, bad
// offsets, symbol ids past the dictionary, timestamp encodings other than
// 0/1, geohash precision outside 1..60, array dimensions outside 1..32 or
// negative), DICTIONARY_GAP for a delta whose start runs past the
// connection's dictionary. A failed message leaves the dictionary untouched.
//
// # Server
//
// NewServer listens on 127.0.0.1:0 and serves /write/v4 and /api/v4/write
// (and /exec, see below).
// Reproduced:
//   - upgrade: X-QWP-Version 1, X-QWP-Max-Batch-Size = recv buffer - 14,
//     durable-ack opt-in ("true" -> "enabled"; tier lists echoed) only when
//     configured, 401 when Options ask for credentials the request lacks,
//     then QuestDB's handshake checks (see the frame layer below);
//   - per connection: seq from 0 taken by every BINARY frame, a symbol
//     dictionary, cumulative OKs (after each batch of frames read together,
//     every 8 unacknowledged frames, when a deferred group commits, before an
//     error frame, on PING and on the client's CLOSE) carrying per-table
//     seqTxn; error frames with the failing seq, after which the connection
//     is poisoned (frames take a seq and are ignored; PINGs are answered);
//     FLAG_DEFER_COMMIT groups committed by the next frame without the flag,
//     rolled back on error or disconnect, a table committed early when
//     its deferred rows reach Options.MaxUncommittedRows; an empty frame
//     commits;
//   - header flag 0x02 (durable-ack poll): PARSE_ERROR without a negotiated
//     durable ack; otherwise the durable progress is sent and, on a
//     connection with no open deferred group, the poll's seq is committed
//     and acknowledged. A poll never commits an open FLAG_DEFER_COMMIT
//     group: it stays unacknowledged until the group's commit covers it;
//   - the WebSocket frame layer as tabled below;
//   - tables in memory (an outage or dropped connection keeps them):
//     auto-created from the first non-empty block, designated timestamp
//     stored as "timestamp" (server time when absent or NULL), new columns
//     added, QuestDB's table and column name rules (0x06 for a new table,
//     0x09 for a new column), SCHEMA_MISMATCH for incompatible types (the
//     current server marks a refused type coercion as a schema mismatch,
//     CairoException.schemaMismatch(), and answers 0x03; an older
//     QwpWalAppender raised it as a plain engine error, 0x09),
//     TIMESTAMP <-> TIMESTAMP_NANOS converted, integer and float widening
//     with range checks, VARCHAR <-> SYMBOL, array dimensions fixed by the
//     first value (a new all-NULL array column is not created); WRITE_ERROR past 10,000 distinct tables on a connection;
//   - durable acks (0x02, or 0x0E for the "local" tier) on demand
//     (EmitDurableAcks) or after every OK (Options.AutoDurable), listing
//     only tables whose durable seqTxn advanced.
//
// # SQL over /exec
//
// GET /exec?query=<SQL> (same credentials as the QWP endpoints; 503 during
// an Outage) runs one statement of QuestDB's SQL that a client uses to
// prepare its tables, parsed in QuestDB's order and answered as QuestDB's
// JSON query processor answers: 200 {"ddl":"OK"} for DDL, a dataset for
// the query, 400 {"query","error","position"} (position in characters, at
// the token refused) for a refused statement. Exec does the same without
// HTTP. FailExec makes requests fail as QuestDB answers an engine failure
// (400 with the engine's message at position 0, 403 for an authorization
// error, or 500), optionally after running the statement. Identifiers are bare (case-insensitive) or quoted
// with " or ' (a doubled quote stands for itself); a trailing ';' is
// allowed.
//
//	CREATE TABLE [IF NOT EXISTS] name (col type, ...) [TIMESTAMP(col)]
//	    [PARTITION BY NONE|YEAR|MONTH|WEEK|DAY|HOUR
//	        [TTL n HOUR[S]|DAY[S]|WEEK[S]|MONTH[S]|YEAR[S] | TTL n{H|D|W|M|Y}]
//	        [WAL | BYPASS WAL]]
//	    [DEDUP UPSERT KEYS(col, ...)]
//	ALTER TABLE name DEDUP ENABLE UPSERT KEYS(col, ...) | DEDUP DISABLE | SET TTL n unit
//	SELECT *|col, ... FROM tables()
//
// The clause order is SqlParser.parseCreateTable's: a clause out of order
// (WAL before TTL, DEDUP before WAL) is left over and refused as
// "unexpected token [X]". Table and column names that are QuestDB SQL
// keywords (SqlKeywords: order, limit, from, end, table, ...) must be
// double-quoted, as must table names holding a '.' (the CREATE TABLE
// reference) or a space. Types go by QuestDB's names: BOOLEAN, BYTE,
// SHORT/SMALLINT, CHAR, INT/INTEGER, LONG/BIGINT, FLOAT/REAL, DOUBLE, DATE,
// TIMESTAMP, TIMESTAMP_NS, SYMBOL, VARCHAR, STRING/TEXT (stored as
// VARCHAR), UUID, LONG256, BINARY, IPV4 and DOUBLE[] (more [] for more
// dimensions, which fixes the column's dimensions). A created table is
// empty, with the declared columns and designated timestamp, which the
// empty-name column of QWP blocks maps onto; the usual type checks and
// column additions apply. A table partitioned by time is WAL unless BYPASS
// WAL; QWP writes to a non-WAL table get SCHEMA_MISMATCH. QuestDB's rules
// and messages are reproduced: an existing table without IF NOT EXISTS,
// duplicate or invalid names, PARTITION BY without a designated timestamp,
// a designated column that is not a timestamp, a TTL that is not a whole
// number of partitions (PartitionBy.validateTtlGranularity), TTL or WAL on
// a table not partitioned, dedup keys on a non-WAL table, keys that omit
// the designated timestamp, repeat a column, are unknown or are arrays. IF
// NOT EXISTS leaves an existing table as it is. tables() has the columns
// table_name, designatedTimestamp, partitionBy, walEnabled and dedup, one
// row per table in name order.
//
// # Values
//
// The server stores a value as QuestDB's WAL appender does and Rows shows
// what QuestDB reads back: QuestDB copies a value into its column as it is,
// so a value equal to the column type's NULL value reads as NULL (nil), and
// the types without a NULL value store a NULL as their zero. Dedup keys
// compare the stored values, so such a value equals NULL. Read from
// questdb/questdb core/src/main/java/io/questdb/: cairo/wal/
// WalColumnarRowAppender.java at 32751a19d167 (WCRA), cutlass/line/tcp/
// QwpWalAppender.java at e8a73253e959 (QWA), cutlass/qwp/protocol/
// QwpFixedWidthColumnCursor.java and QwpGeoHashColumnCursor.java at
// 1503340d808f, cairo/MicrosTimestampDriver.java and
// NanosTimestampDriver.java at 4c8301c37b00, cutlass/qwp/server/
// QwpIngressProcessorState.java at a4b5d4d6a384, cutlass/qwp/codec/
// QwpColumnScratch.java (egress), and the nullability table of
// questdb/documentation reference/sql/datatypes.md at 0741ba6b5a4d.
//
//	value written                      QuestDB stores / answers                 QuestDB code                           qwptest test
//	INT 0x80000000 into INT            NULL (Numbers.INT_NULL)                  WCRA.putFixedColumn (copied as is)     TestSentinelsStoredAsNull
//	LONG, DATE, TIMESTAMP(_NANOS)      NULL (Numbers.LONG_NULL)                 WCRA.putFixedColumn, putTimestampColumn TestSentinelsStoredAsNull
//	0x8000000000000000 (not designated)
//	FLOAT or DOUBLE NaN                NULL                                     WCRA.putFixedColumn; datatypes.md      TestSentinelsStoredAsNull,
//	                                                                                                                   TestNaNStoredAsNull
//	FLOAT or DOUBLE +Inf, -Inf         stored as values; QWP egress returns     WCRA.putFixedColumn;                   TestSentinelsStoredAsNull,
//	                                   them (only NaN is NULL)                  QwpColumnScratch.appendColumnDouble8   TestNaNStoredAsNull
//	CHAR 0                             NULL (the zero char)                     WCRA.putFixedColumn; datatypes.md      TestSentinelsStoredAsNull
//	IPv4 0, UUID both words and        NULL                                     WCRA.putFixedColumn; datatypes.md      TestSentinelsStoredAsNull
//	LONG256 all words 0x8000...        (the decoder gives nil already)
//	GEOHASH all ones                   NULL where the wire value is as wide as  QwpGeoHashColumnCursor.readValue       TestDecodeTypedValues
//	                                   the column (1-7, 9-15, 25-31, 57-60      (zero-extends), WCRA.putGeoHashColumn  (geohash cases)
//	                                   bits); a value at other precisions
//	NULL BOOLEAN, BYTE, SHORT, or a    false, 0, 0: no NULL value               WCRA.putBooleanColumn, putFixedColumn  TestSentinelsStoredAsNull,
//	row or older rows without the                                                                                      TestNoNullTypesFillMissingRows
//	column
//	INT 0x80000000 into LONG/DOUBLE    -2147483648, a value (sign-extended)     QwpFixedWidthColumnCursor.getLong,     TestConvertedSentinels
//	                                                                            WCRA.putIntegerToNumericColumn
//	LONG -2147483648 into INT          NULL (in range, stored as INT_NULL)      WCRA.putIntegerToNumericColumn         TestConvertedSentinels
//	DOUBLE -2^63 into LONG,            NULL; 2^63 saturates to Long.MAX_VALUE   WCRA.checkDoubleToInteger              TestConvertedSentinels
//	-2^31 into INT                     and is taken
//	DOUBLE NaN, ±Inf, a fraction or    WRITE_ERROR "double value X loses        WCRA.checkDoubleToInteger,             TestValuesRefused,
//	out of range into an integer       precision..." / "integer value X out of  checkIntegerRange (non-critical        TestSchemaRefusals
//	column                             range for T..."                          CairoException -> 0x09)
//	TIMESTAMP_NANOS into TIMESTAMP     /1000 toward zero; LONG_NULL/1000 is a   WCRA.putTimestampColumnWithConversion  TestConvertedSentinels
//	                                   value
//	TIMESTAMP into TIMESTAMP_NANOS     WRITE_ERROR "timestamp overflow          WCRA.putTimestampColumnWithConversion, TestValuesRefused
//	past ±2^63 ns (LONG_NULL too)      converting micros to nanos: X"           QWA first pass
//	designated TIMESTAMP NULL value,   WRITE_ERROR "designated timestamp        WalWriter.validateDesignatedTimestamp-  TestValuesRefused,
//	< 0 or >= year 10000 (µs);         column cannot be NULL" / "before         Bounds -> MicrosTimestampDriver and    TestDesignatedTimestamp-
//	TIMESTAMP_NANOS NULL value or < 0  1970-01-01" / "beyond 9999-12-31"        NanosTimestampDriver.validateBounds0   EdgesAccepted
//	designated timestamp NULL          the server's time                        QWA serverTimestamp, WCRA              TestSentinelsStoredAsNull
//	(bitmap) or absent                                                          putTimestampColumn                     (row times), server tests
//	array with NaN elements            stored; NULL only by the bitmap          WCRA.putArrayColumn                    TestSentinelsStoredAsNull
//
// Deliberate differences: values live in memory as Go values, not column
// files; the messages name table, column and row, where QuestDB's name the
// column only. Not verified: whether QuestDB's SQL (not its QWP egress)
// reads an infinity as NULL, and how an empty (0-element) array reads back.
//
// # Dedup
//
// On a table with DEDUP UPSERT KEYS (only ever set by SQL; auto-created
// tables have none, as in QuestDB, so they keep every duplicate), a
// committed row whose designated timestamp and key values (NULL equal to
// NULL) equal those of a stored row, or of an earlier row of the same
// commit, replaces that row in place: replaying a frame leaves the table
// unchanged. ALTER ... DEDUP ENABLE leaves duplicates already stored.
// TableData.DedupKeys and TTL show a table's settings.
//
// Options.CountOnly decodes and validates every frame but keeps row counts
// only; checks that need values (array dimensions, conversion ranges,
// designated timestamp bounds) are
// skipped in that mode, and so is dedup: every row counts.
//
// Faults (frame counts are across all connections, from the call on):
// RejectFrame, DropAfter, StallAcks/ReleaseAcks, RefuseUpgrades, Outage,
// DropConnections, FailExec. Observability: Connections, Accepted, Frames,
// Tables, RowCount, Rows, Snapshot, WaitRows, and AdminHandler's JSON API.
// Setup: Exec (the /exec statements without HTTP).
//
// Typical use:
//
//	s, err := qwptest.NewServer(qwptest.Options{})
//	if err != nil { ... }
//	defer s.Close()
//	// point the client at s.URL(), write, then
//	err = s.WaitRows(ctx, "otel_metrics_gauge", 10)
//	td, _ := s.Rows("otel_metrics_gauge") // td.Columns, td.Rows[i][j] typed
//
// Not reproduced: conversions beyond those listed
// (VARCHAR parsed into other types, numbers or other values rendered into
// VARCHAR or SYMBOL, DECIMAL rescaling);
// LONG_ARRAY is accepted; seqTxn counts commits
// only, not schema changes; SQL beyond the statements above (GEOHASH and
// DECIMAL column types, SYMBOL options, INDEX, WITH, IN VOLUME, OWNED BY,
// CREATE TABLE AS/LIKE, the "public." schema prefix) and /exec's paging and
// other parameters; QuestDB's in-server retry of a busy table before it
// answers "resource is busy", its security contexts (a read-only instance,
// permissions) and engine failures such as a full disk (FailExec stands
// for their answers). Whether
// QuestDB's lexer accepts an unquoted dotted table name was not verified in
// its source; the stand-in follows the reference and refuses it.
//
// # WebSocket frame layer
//
// The server does the upgrade handshake and reads and writes RFC 6455
// frames itself (gorilla/websocket is not on its path), answering as
// QuestDB's QwpIngressUpgradeProcessor and WebSocketFrameParser do. Nothing
// is reassembled: one BINARY frame with FIN set is one message. Read from
// questdb/questdb core/src/main/java/io/questdb/cutlass/qwp/:
// server/QwpIngressUpgradeProcessor.java at 009a8bd5c1be,
// websocket/WebSocketFrameParser.java at 080483cbb3d8,
// websocket/WebSocketOpcode.java at 1503340d808f,
// websocket/WebSocketFrameWriter.java at 090b888cfc91,
// server/QwpIngressHttpProcessor.java at 11b63ed38df0 and
// server/QwpIngressProcessorState.java at 00f8f5295da9. "Fatal close"
// below is sendFatalClose: pending OKs, the CLOSE frame, FIN, then inbound
// bytes drained for up to 5 s (CLOSE_DRAIN_TIMEOUT_MICROS). "Drop" is a
// ServerDisconnectException: the pending OK (flushed by onConnectionClosed),
// then the socket closed without a CLOSE frame.
//
//	client does                       QuestDB answers                         QuestDB code                         qwptest test
//	upgrade with Origin               400 "Origin header not allowed on       QwpIngressHttpProcessor.             TestHandshakeRefusals
//	                                  QWP WebSocket"                          validateHandshake
//	no/other Upgrade, no Connection   400 with validateHandshake's reason     validateHandshake                    TestHandshakeRefusals
//	or no "upgrade" token in it,      ("Missing Upgrade header", ...)
//	no key or not 24 base64 chars
//	Sec-WebSocket-Version absent/≠13  426, Sec-WebSocket-Version: 13, empty   onHeadersReady                       TestHandshakeRefusals,
//	                                                                                                               TestUpgradeRoleAndBadVersion
//	valid upgrade                     101, Sec-WebSocket-Accept =             computeAcceptKey, writeResponse      dialRawWS (RFC 6455 example key)
//	                                  base64(SHA-1(key+GUID)), X-QWP-*
//	BINARY, FIN set, 7/16/64-bit      one message, the next seq               parse (strict mode off),             TestLengthEncodingsAccepted,
//	length, non-minimal too                                                   handleBinaryMessage                  TestGorillaClientRoundTrips
//	BINARY without FIN                fatal close 1002 "fragmented WebSocket  handleWebSocketFrame,                TestFragmentedMessageRefused,
//	                                  frames are not supported"; no seq       rejectFragmentedFrame                TestGorillaFragmentingClientRefused
//	CONTINUATION (any)                the same 1002                           rejectFragmentedFrame                TestDataFrameRefusals
//	TEXT (with or without FIN)        fatal close 1003 "text frames are not   rejectTextFrame                      TestDataFrameRefusals
//	                                  supported, QWP requires binary frames"
//	header size + length > recv       fatal close 1009 "frame payload exceeds processWebSocketFrames               TestOversizedFrameRefusedFromItsHeader,
//	buffer (any opcode)               maximum size", decided on the header,   (STATE_NEED_PAYLOAD)                 TestCloseCodes
//	                                  before the payload arrives
//	RSV bit set                       drop                                    WebSocketFrameParser.parse           TestHeaderViolationsDropTheConnection
//	opcode 0x3-0x7 or 0xB-0xF         drop                                    parse, WebSocketOpcode.isValid       TestHeaderViolationsDropTheConnection
//	unmasked frame                    drop                                    parse                                TestHeaderViolationsDropTheConnection
//	control frame without FIN         drop                                    parse                                TestHeaderViolationsDropTheConnection
//	control payload over 125 bytes    drop                                    parse                                TestHeaderViolationsDropTheConnection
//	CLOSE with a 1-byte payload       drop                                    parse                                TestHeaderViolationsDropTheConnection
//	64-bit length, top bit set        drop                                    parse                                TestHeaderViolationsDropTheConnection
//	PING                              pending OKs, then PONG with its payload handlePing                           TestPingPong, TestErrorPoisonsConnection
//	PONG                              ignored                                 handleWebSocketFrame                 TestPingPong
//	CLOSE                             pending OKs, CLOSE with the code and no handleClose,                         TestClientCloseAnswered
//	                                  reason: 1004 and 2000-2999 -> 1002; none, gracefulCloseAndDisconnect
//	                                  <1000, >4999, 1005, 1006, 1015 -> 1000;
//	                                  others echoed; the reason is not
//	                                  checked (bad UTF-8 too); then FIN
//
// Deliberate differences: QuestDB waits for the client's CLOSE echo (5 s,
// CLOSE_ECHO_WAIT_GRACE_MICROS, checkCloseEchoWaitExpiry) only after the
// CLOSE 1000 of an Enterprise role change on a durable-ack connection; the
// stand-in has no role change, so it never waits for an echo. QuestDB's
// drains run in per-dispatch budgets (8 reads, 256 KiB) and its OK is sent
// once per socket read; the stand-in drains with a deadline and batches the
// frames its reader has already parsed. QuestDB releases a partially
// received frame when the receive buffer jams ("frame payload exceeds
// receive buffer capacity"), which a frame within the limit above cannot
// cause. Newer QuestDB builds admit an allow-listed browser Origin over TLS;
// the stand-in serves plain ws:// and refuses every Origin.
package qwptest

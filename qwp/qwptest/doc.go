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
//     auto-created from the first block naming them (one without rows
//     too), designated timestamp
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
//	array with a dimension over 2^28-1 WRITE_ERROR "dimension length out of     WCRA.putArrayColumn ->                 TestArrayDimensionLengthLimit
//	(an empty one: [0, 2^28])          range [dim=D, dimLen=N, maxLen=...]"     MutableArray.setDimLen (DIM_MAX_LEN)
//
// Deliberate differences: values live in memory as Go values, not column
// files; the messages name table, column and row, where QuestDB's name the
// column only. Not verified: whether QuestDB's SQL (not its QWP egress)
// reads an infinity as NULL, and how its SQL prints an empty (0-element)
// array; the stand-in keeps one as a value with its shape (see the column
// table below).
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
// VARCHAR or SYMBOL, DECIMAL rescaling); seqTxn counts commits only, not
// schema changes; SQL beyond the statements above (GEOHASH and
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
//
// # Fidelity: authentication, messages, tables, columns, commits, /exec
//
// The tables below give, for every layer above the WebSocket frames, one row
// per refusal or answer of QuestDB's server, the class and method that
// decide it, and the test that shows the stand-in answers the same. Read
// from questdb/questdb core/src/main/java/io/questdb/:
// qwp/protocol/QwpMessageHeader.java at 1503340d808f (MH),
// QwpMessageCursor.java and QwpTableHeader.java at 06197dd0b041 (MC, TH),
// QwpConstants.java at 01604419a459 (K), QwpArrayColumnCursor.java at
// 5e62742a4d32, qwp/server/QwpIngressProcessorState.java at 00f8f5295da9
// (ST), line/tcp/QwpWalAppender.java at 03660c834c70 (QWA),
// http/StaticHttpAuthenticator.java at 7a44aa9ac522 and
// StaticHttpAuthenticatorFactory.java at 03e1c50fc734,
// http/processors/JsonQueryProcessor.java at 0044703ae766. Three files were
// read in their newest stored version through the search index, which does
// not name the commit: qwp/server/QwpTudCache.java (TC; the version whose
// QwpTableStructureAdapter marks mixed array dimensions with
// CairoException.schemaMismatch()), qwp/protocol/QwpGeoHashColumnCursor.java
// (the version that reads a null_flag byte and rowCount - nullCount values)
// and http/HttpConnectionContext.java with its RejectProcessor
// (configureSecurityContext, handleHttpUnauthorized). Rows marked [ref] were
// not re-read here and follow
// /work/shared/reference/qwp-server-behaviour.md. Status names: 0x03
// SCHEMA_MISMATCH, 0x05 PARSE_ERROR, 0x06 INTERNAL_ERROR, 0x08
// SECURITY_ERROR, 0x09 WRITE_ERROR, 0x0D DICTIONARY_GAP. ST maps the
// failures: a QwpParseException is 0x05, a CairoException marked as an
// authorization error 0x08, marked as a schema mismatch 0x03, critical 0x06,
// any other 0x09 (ST.cairoExceptionStatus; NOT_ACCEPTING_WRITES is sent as
// 0x09), anything else 0x06.
//
// Authentication (the HTTP layer, before the QWP upgrade processor; the same
// for /write/v4, /api/v4/write and /exec):
//
//	client does                       QuestDB answers                         QuestDB code                         qwptest test
//	no credentials configured         anonymous: no check                     AnonymousHttpAuthenticator           every test with Options{}
//	(http.user unset)
//	http.user/http.password set, no   401 with a text body, no                HttpConnectionContext.               TestAuth (both QWP paths and /exec)
//	Authorization header              WWW-Authenticate, before any handshake  configureSecurityContext,
//	                                  check                                   RejectProcessor.
//	                                                                          handleHttpUnauthorized
//	Authorization other than exactly  401 (the header is compared byte for    StaticHttpAuthenticator.             TestAuth
//	"Basic " + base64(user:password): byte)                                   authenticate,
//	a wrong password, "basic", two                                            StaticHttpAuthenticatorFactory
//	spaces, a Bearer token
//	Bearer token, OIDC (Enterprise)   Enterprise: accepted when valid, else   not in the open-source tree          TestAuth (Options.Token)
//	                                  401; open source: 401
//	a disabled entity (Enterprise)    403 with the message                    HttpConnectionContext                TestFaultRefuseUpgrades (Refusal)
//	                                                                          (checkEntityEnabled)
//
// Messages (header, delta dictionary):
//
//	client does                       QuestDB answers                         QuestDB code                         qwptest test
//	fewer than 12 bytes               0x05                                    MH.parse (headerTooShort)            TestDecodeRefusals "shorter than header"
//	magic other than QWP1             0x05                                    MH.validate                          TestDecodeRefusals "bad magic"
//	version byte other than 1         0x05 "message version X does not match  ST.processMessage, MH.validate       TestDecodeRefusals "version 2"
//	                                  negotiated version 1"
//	payload_length over 16 MiB        0x05                                    MH.validate                          TestDecodeRefusals
//	                                                                          (K.DEFAULT_MAX_BATCH_SIZE)
//	payload_length over the bytes     0x05                                    MC.of                                TestDecodeRefusals
//	present
//	bytes after payload_length;       ignored                                 MH, MC read only the flags they use  TestDecodeIgnoresTrailingBytesAndReservedFlags
//	reserved flag bits (0x10-0x80)
//	table_count larger than the       0x05 (truncated block)                  MC.nextTable, TH.parse               TestDecodeRefusals "table_count past the
//	blocks present                                                                                                 blocks"
//	FLAG_DELTA_SYMBOL_DICT, payload   0x05                                    MC.parseDeltaSymbolDict              TestDecodeRefusals
//	empty or delta truncated
//	delta_start past the connection's 0x0D; the frame is refused and the      MC.parseDeltaSymbolDict [ref:        TestDecodeRefusals, TestDictionaryGap
//	dictionary                        connection poisoned like any error      ST.statusForParseError]
//	delta_start inside the dictionary ids from delta_start are overwritten    MC.parseDeltaSymbolDict (setQuick)   TestDecodeDeltaRollbackAndOverwrite
//	delta_start + delta_count over    0x05                                    K.MAX_SYMBOL_DICTIONARY_SIZE (MC at  TestDecodeRefusals
//	2,000,000                                                                 06197dd0b041: 1,000,000)
//	a delta entry with bad UTF-8      0x05, the delta rolled back             [ref]                                TestDecodeRefusals,
//	                                                                                                               TestDecodeDeltaRollbackAndOverwrite
//	flag 0x02 (durable-ack poll)      0x05                                    [ref: QwpIngressUpgradeProcessor]    TestDurableAcks "not negotiated"
//	without a negotiated durable ack
//	flag 0x02 with one                durable progress sent; the poll's seq   [ref: QwpIngressUpgradeProcessor]    TestDurableAcks "poll frame ..." (3
//	                                  committed and acknowledged unless a                                          cases)
//	                                  deferred group is open
//	an empty BINARY frame, or a       commits what is uncommitted; OK         ST.processMessage (bufferPosition    TestDeferredForceCommitAtMaxUncommittedRows,
//	header with table_count 0                                                 0), commit                           TestAuth
//
// Table blocks:
//
//	client does                       QuestDB answers                         QuestDB code                         qwptest test
//	empty table name                  0x05                                    TH.parse                             TestDecodeRefusals "empty table name"
//	table name over 127 bytes         0x05                                    TH.parse (K.MAX_TABLE_NAME_LENGTH)   TestDecodeRefusals
//	table name not UTF-8              0x05                                    [ref]                                TestDecodeRefusals
//	row_count over 1,000,000          0x05                                    TH.parse (qwp.max.rows.per.table)    TestDecodeRefusals "rows over 1,000,000"
//	column_count over 2048            0x05                                    TH.parse (K.MAX_COLUMNS_PER_TABLE)   TestDecodeRefusals "columns over 2048"
//	a schema by reference             none on this wire: every block names    QwpSchema at 0284574b9e09 (older)    TestDecodeSpecExample1..3
//	                                  its columns (the spec); older servers
//	                                  had a schema-mode byte
//	a block with row_count 0          its table is looked up, created if new, ST.processMessage,                   TestEmptyBlockResolvesTable
//	                                  and meets the refusals below; no rows,  QWA.appendToWalStreaming0
//	                                  no commit
//	a table name failing              0x06 "failed to create table update     TC.getOrCreateTable (returns null),  TestSchemaRefusals (invalid table name
//	isValidTableName (forbidden       details for: X"                         ST.processMessage                    ...)
//	characters, '.' at an end or
//	doubled, outer spaces, over 127
//	characters)
//	a new table with a column name    0x06 as above                           TC.getOrCreateTable,                 TestSchemaRefusals (dotted column, empty
//	failing isValidColumnName (also                                           isValidQwpSchemaColumnName           name on a new table)
//	'.', '-', or empty on a type
//	other than TIMESTAMP(_NANOS))
//	a new table                       WAL, PARTITION BY DAY, no dedup keys;   TC.QwpTableStructureAdapter          TestTablesAndSchema,
//	                                  designated timestamp: the empty-name                                         TestEmptyBlockResolvesTable
//	                                  TIMESTAMP(_NANOS) column stored as
//	                                  "timestamp", else a TIMESTAMP
//	                                  "timestamp" appended; array columns
//	                                  without a value left out
//	a table that is not WAL           0x03 "cannot insert into non-WAL table" TC.getTableUpdateDetails             TestEmptyBlockResolvesTable,
//	                                                                                                               TestDedupTypeChecksOnCreatedTable
//	a view or materialized view       0x03 "cannot modify ..."                TC.getOrCreateTable                  not reproduced: no views
//	the 10,001st distinct table of a  0x09 "too many distinct tables, limit:  TC.getTableUpdateDetails             TestTablesPerConnectionLimit
//	connection                        10000"
//
// Columns (values and their conversions are in the values table above):
//
//	client does                       QuestDB answers                         QuestDB code                         qwptest test
//	column name over 127 bytes        0x05                                    QwpSchema (K.MAX_COLUMN_NAME_LENGTH) TestDecodeRefusals
//	type code 0x00, 0x08 or over 0x18 0x05                                    QwpColumnDef.validate [ref: older    TestDecodeRefusals "type 0x.."
//	                                                                          versions took 0x08]
//	empty name on a type other than   not a parse error: 0x06 in a new table, TC, QWA.appendToWalStreaming0        TestSchemaRefusals (empty name cases)
//	TIMESTAMP(_NANOS)                 0x09 as a new column
//	a new column whose name fails     0x09 "invalid column name"              QWA.appendToWalStreaming0            TestSchemaRefusals "dashed new column",
//	isValidColumnName                                                                                              TestArrayColumnRefusals
//	a new column                      added (outside the transaction), of the QWA.appendToWalStreaming0,           TestTablesAndSchema,
//	                                  wire type; DOUBLE_ARRAY dimensions from shouldDeferMissingArrayColumnCreation TestAllNullArrayColumnSkipped
//	                                  the first non-NULL value; no value: not
//	                                  created
//	LONG_ARRAY in a new table or as a 0x09 "long arrays are not supported,    QWA.mapQwpTypeToQuestDB              TestArrayColumnRefusals
//	new column, NULL or not           only double arrays"
//	a type the column cannot take     0x03 (this QWA: 0x09, see below)        QWA.coercionNotSupportedException,   TestSchemaRefusals "type mismatch",
//	(UUID into LONG, VARCHAR into                                             typeMismatchException                "uuid into long"
//	LONG, ...)
//	arrays of other dimensions than   0x03 "array dimensionality mismatch     TC getArrayBatchDimensionality,      TestSchemaRefusals "array dimensions
//	the column's, or mixed in one     ..." (this QWA: 0x09)                   QWA.validateArrayColumnType          change", TestEmptyArraysStored
//	block
//	an empty array (a dimension of 0: a value, not NULL; fixes a new column's QwpArrayColumnCursor.of (dimension   TestEmptyArraysStored,
//	[0], [2,0], [0,5])                dimensions                              >= 0); spec                          TestDecodeTypedValues
//	array n_dims 0 or over 32, a      0x05                                    QwpArrayColumnCursor.of              TestDecodeRefusals "array ..."
//	negative dimension, an element
//	count over 2^31-1
//	null_flag != 0                    a bitmap of ceil(rows/8) bytes, then    the column cursors;                  TestDecodeTypedValues (geohash bitmap),
//	                                  values of the non-NULL rows only, for   QwpGeoHashColumnCursor (valueCount = TestDecodeSpecExample2NullableVarchar
//	                                  every type (GEOHASH: the precision      rowCount - nullCount)
//	                                  after the bitmap)
//	a column's data truncated         0x05                                    the column cursors                   TestDecodeRefusals "truncated ..."
//	VARCHAR/BINARY offsets: offset[0] 0x05                                    QwpStringColumnCursor [ref: UTF-8]   TestDecodeRefusals "varchar ..."
//	!= 0, decreasing, past the data;
//	VARCHAR not UTF-8
//	SYMBOL id not below the           0x05                                    QwpSymbolColumnCursor                TestDecodeRefusals "symbol id ..."
//	dictionary size
//	TIMESTAMP encoding byte           0x05                                    QwpTimestampColumnCursor             TestDecodeRefusals "timestamp encoding
//	(FLAG_GORILLA) other than 0 or 1                                                                               2"
//	GEOHASH precision outside 1..60   0x05                                    QwpGeoHashColumnCursor.of            TestDecodeRefusals "geohash precision
//	                                                                                                               ..."
//
// Commits and acknowledgements:
//
//	client does                       QuestDB answers                         QuestDB code                         qwptest test
//	BINARY frames                     each takes the next seq from 0, refused [ref: QwpIngressUpgradeProcessor],   TestOKsAreCumulativeWithSeqTxn,
//	                                  ones too                                ST.nextMessageSequence               TestErrorPoisonsConnection
//	frames committed                  a cumulative OK: the highest committed  ST.recordCommittedTable,             TestOKsAreCumulativeWithSeqTxn,
//	                                  seq and, per table committed since the  writeTableSeqTxnEntries              TestOKListsEveryTableCommitted
//	                                  last OK, its latest seqTxn
//	FLAG_DEFER_COMMIT frames          rows appended, not committed; no OK     ST.markUncommittedDeferredRows,      TestDeferredGroupCommitsTogether
//	                                  covers them until a frame without the   setHighestProcessedSequence
//	                                  flag commits the group
//	an error or a disconnect inside a the group rolled back                   ST.clear (QwpTudCache.clear)         TestDeferredGroupRolledBack
//	group
//	a table's deferred rows reach     that table committed early; the frame   TC                                   TestDeferredForceCommitAtMaxUncommittedRows
//	qwp.max.uncommitted.rows          acknowledged only when nothing is       commitIfMaxUncommittedRowsReached;
//	(1,000,000)                       uncommitted and the group has no        QWA after each block
//	                                  rowless frame
//	a refused frame                   pending OK, then an error frame         ST.reject [ref: the upgrade          TestErrorPoisonsConnection,
//	                                  (status, the frame's seq, message cut   processor's poisoned state]          TestErrorMessageCutTo1024Bytes
//	                                  to 1024 bytes); later frames take a seq
//	                                  and get nothing; PINGs answered
//	a statically read-only server     0x08                                    ST.processMessage                    not reproduced (RejectFrame stands in)
//	X-QWP-Request-Durable-Ack: true   "enabled" only where durable acks are   [ref: QwpIngressHttpProcessor]       TestUpgradeHeaders
//	                                  configured (Enterprise replication),
//	                                  else ignored
//	X-QWP-Request-Durable-Ack: local, echoed, all or nothing; acks 0x0E       K.STATUS_LOCAL_DURABLE_ACK,          TestDurableAcks,
//	replicated or both                (local) or 0x02, no seq, tables whose   ST.collectDurableProgress            TestDurableAckTrailsHeldOKs
//	                                  durable seqTxn advanced
//
// /exec:
//
//	client does                       QuestDB answers                         QuestDB code                         qwptest test
//	DDL                               200 {"ddl":"OK"}                        JsonQueryProcessor.sendConfirmation  TestExecCreatesExporterTables
//	a statement the parser refuses    400 {"query","error","position"} at the JsonQueryProcessor.syntaxError,      TestExecErrors
//	                                  token refused                           sendException
//	an engine failure                 400 with the message at position 0; 403 JsonQueryProcessor.internalError     TestFaultFailExec
//	(CairoException)                  for an authorization error              [ref: the status]
//	an unexpected exception           500                                     [ref]                                TestFaultFailExec
//	missing or wrong credentials      401, as above                           HttpConnectionContext                TestAuth
//
// Deliberate differences: the messages name table, column and row and differ
// in wording from QuestDB's (the status is what a client acts on).
// Options.Token stands for an Enterprise server; open-source QuestDB has
// only Basic. The stand-in answers SCHEMA_MISMATCH for a refused type and
// for mixed array dimensions as the newest QwpTudCache marks them; the
// QwpWalAppender read here (03660c834c70) still raises both as plain engine
// errors, 0x09. LONG_ARRAY is refused with 0x09 as that QwpWalAppender does;
// QuestDB's client documentation calls the refusal terminal, so a newer
// server may mark it 0x03. A LONG_ARRAY into an existing DOUBLE[] column is
// refused (0x03); whether QuestDB's WalColumnarRowAppender.putArrayColumn
// converts it was not read. A column named twice in one block is 0x09 in the
// stand-in; QwpWalAppender.appendToWalStreaming0 (03660c834c70) has no
// duplicate check (both block columns map to the one table column), and
// what the WAL writer makes of the second write was not read. The stand-in
// answers 0x03 where QuestDB writes: an integer into a TIMESTAMP_NS column
// (WalColumnarRowAppender.putIntegerToNumericColumn, in the version the
// search index holds, commit not named), BOOLEAN into a numeric column, and
// CHAR, DATE, UUID or another fixed type into VARCHAR (QwpWalAppender
// 03660c834c70). The JsonQueryProcessor stored is
// of 2020 and answered errors with 200; its current status codes follow the
// reference. Not reproduced: the structural seqTxn a new column takes, and
// the seqTxn a table created by a block without rows may report.
package qwptest

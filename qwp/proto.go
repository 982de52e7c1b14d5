package qwp

// Message framing constants of QWP v1.
const (
	// Magic is the first four bytes of every message, "QWP1" read as a
	// little-endian uint32.
	Magic uint32 = 0x31505751
	// Version is the only protocol version this package speaks.
	Version byte = 1
	// HeaderSize is the fixed size of a message header: magic, version,
	// flags, table count (u16) and payload length (u32).
	HeaderSize = 12
	// MaxPayloadBytes is the protocol ceiling on payload_length (16 MiB).
	MaxPayloadBytes = 16 << 20
	// MaxSymbolDictSize is the number of global symbol ids a server accepts
	// on one connection.
	MaxSymbolDictSize = 2_000_000
	// MaxNameBytes bounds table and column names on the wire.
	MaxNameBytes = 127
	// MaxRowsPerBlock and MaxColumnsPerBlock are the server's block limits.
	MaxRowsPerBlock    = 1_000_000
	MaxColumnsPerBlock = 2048
)

// Message header flags.
const (
	// FlagDeferCommit appends a message's rows without committing them; the
	// next message without the flag commits the group.
	FlagDeferCommit byte = 0x01
	// FlagGorilla enables the per-column encoding byte of TIMESTAMP and
	// TIMESTAMP_NANOS columns and with it delta-of-delta compression.
	FlagGorilla byte = 0x04
	// FlagDeltaSymbolDict marks a payload that starts with a delta symbol
	// dictionary section; SYMBOL columns then carry global ids.
	FlagDeltaSymbolDict byte = 0x08
)

// ColumnType is a QWP column type code.
type ColumnType byte

// Column type codes. 0x08 (the former STRING) is unassigned.
const (
	TypeBoolean        ColumnType = 0x01
	TypeByte           ColumnType = 0x02
	TypeShort          ColumnType = 0x03
	TypeInt            ColumnType = 0x04
	TypeLong           ColumnType = 0x05
	TypeFloat          ColumnType = 0x06
	TypeDouble         ColumnType = 0x07
	TypeSymbol         ColumnType = 0x09
	TypeTimestamp      ColumnType = 0x0A
	TypeDate           ColumnType = 0x0B
	TypeUUID           ColumnType = 0x0C
	TypeLong256        ColumnType = 0x0D
	TypeGeohash        ColumnType = 0x0E
	TypeVarchar        ColumnType = 0x0F
	TypeTimestampNanos ColumnType = 0x10
	TypeDoubleArray    ColumnType = 0x11
	TypeLongArray      ColumnType = 0x12
	TypeDecimal64      ColumnType = 0x13
	TypeDecimal128     ColumnType = 0x14
	TypeDecimal256     ColumnType = 0x15
	TypeChar           ColumnType = 0x16
	TypeBinary         ColumnType = 0x17
	TypeIPv4           ColumnType = 0x18
)

var typeNames = [...]string{
	TypeBoolean: "BOOLEAN", TypeByte: "BYTE", TypeShort: "SHORT", TypeInt: "INT",
	TypeLong: "LONG", TypeFloat: "FLOAT", TypeDouble: "DOUBLE", TypeSymbol: "SYMBOL",
	TypeTimestamp: "TIMESTAMP", TypeDate: "DATE", TypeUUID: "UUID", TypeLong256: "LONG256",
	TypeGeohash: "GEOHASH", TypeVarchar: "VARCHAR", TypeTimestampNanos: "TIMESTAMP_NANOS",
	TypeDoubleArray: "DOUBLE_ARRAY", TypeLongArray: "LONG_ARRAY", TypeDecimal64: "DECIMAL64",
	TypeDecimal128: "DECIMAL128", TypeDecimal256: "DECIMAL256", TypeChar: "CHAR",
	TypeBinary: "BINARY", TypeIPv4: "IPv4",
}

// Valid reports whether t is an assigned ingress type code.
func (t ColumnType) Valid() bool {
	return int(t) < len(typeNames) && typeNames[t] != ""
}

// String returns the specification's name of the type.
func (t ColumnType) String() string {
	if t.Valid() {
		return typeNames[t]
	}
	return "UNKNOWN(0x" + hex2(byte(t)) + ")"
}

// Status is the first byte of every server response.
type Status byte

// Response status codes.
const (
	StatusOK              Status = 0x00
	StatusDurableAck      Status = 0x02 // replicated tier; no sequence field
	StatusSchemaMismatch  Status = 0x03
	StatusParseError      Status = 0x05
	StatusInternalError   Status = 0x06
	StatusSecurityError   Status = 0x08
	StatusWriteError      Status = 0x09
	StatusNotWritable     Status = 0x0C // reserved; servers close instead
	StatusDictionaryGap   Status = 0x0D
	StatusLocalDurableAck Status = 0x0E // local tier; same layout as 0x02
)

var statusNames = map[Status]string{
	StatusOK: "OK", StatusDurableAck: "DURABLE_ACK", StatusSchemaMismatch: "SCHEMA_MISMATCH",
	StatusParseError: "PARSE_ERROR", StatusInternalError: "INTERNAL_ERROR",
	StatusSecurityError: "SECURITY_ERROR", StatusWriteError: "WRITE_ERROR",
	StatusNotWritable: "NOT_WRITABLE", StatusDictionaryGap: "DICTIONARY_GAP",
	StatusLocalDurableAck: "LOCAL_DURABLE_ACK",
}

// String returns the specification's name of the status.
func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return "UNKNOWN(0x" + hex2(byte(s)) + ")"
}

func hex2(b byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[b>>4], digits[b&0x0f]})
}

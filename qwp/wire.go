package qwp

import (
	"encoding/binary"
	"math/bits"
)

// uvarintLen is the number of bytes the unsigned LEB128 form of v takes.
func uvarintLen(v uint64) int {
	return (bits.Len64(v|1) + 6) / 7
}

// appendHeader appends a message header for a payload of payloadLen bytes.
func appendHeader(dst []byte, flags byte, tableCount int, payloadLen int) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, Magic)
	dst = append(dst, Version, flags)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(tableCount))
	return binary.LittleEndian.AppendUint32(dst, uint32(payloadLen))
}

package qwptest

import (
	"encoding/binary"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// maxErrorMessage bounds the UTF-8 message of an error frame, as QuestDB
// does.
const maxErrorMessage = 1024

// okFrame is u8 0x00 | i64 seq | u16 n | n x (u16 len | name | i64 seqTxn).
func okFrame(seq int64, tables []tableTxn) []byte {
	b := []byte{byte(qwp.StatusOK)}
	b = binary.LittleEndian.AppendUint64(b, uint64(seq))
	return appendTableEntries(b, tables)
}

// durableFrame is u8 status | u16 n | entries as in an OK frame.
func durableFrame(status qwp.Status, tables []tableTxn) []byte {
	return appendTableEntries([]byte{byte(status)}, tables)
}

func appendTableEntries(b []byte, tables []tableTxn) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(len(tables)))
	for _, t := range tables {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(t.name)))
		b = append(b, t.name...)
		b = binary.LittleEndian.AppendUint64(b, uint64(t.seqTxn))
	}
	return b
}

// errorFrame is u8 status | i64 seq | u16 len | message, the message cut to
// maxErrorMessage bytes on a rune boundary.
func errorFrame(status qwp.Status, seq int64, msg string) []byte {
	if len(msg) > maxErrorMessage {
		cut := maxErrorMessage
		for cut > 0 && msg[cut]&0xC0 == 0x80 {
			cut--
		}
		msg = msg[:cut]
	}
	b := []byte{byte(status)}
	b = binary.LittleEndian.AppendUint64(b, uint64(seq))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(msg)))
	return append(b, msg...)
}

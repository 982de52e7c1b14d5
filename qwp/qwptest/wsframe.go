package qwptest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
)

// WebSocket opcodes (RFC 6455 section 5.2).
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xA
)

// WebSocket close codes the server sends (RFC 6455 section 7.4.1).
const (
	closeNormal          = 1000
	closeProtocolError   = 1002
	closeUnsupportedData = 1003
	closeMessageTooBig   = 1009
)

// QuestDB's close reasons (QwpIngressUpgradeProcessor).
const (
	reasonFragmented = "fragmented WebSocket frames are not supported"
	reasonText       = "text frames are not supported, QWP requires binary frames"
	reasonTooBig     = "frame payload exceeds maximum size"
)

// maxControlPayload is the largest payload of a control frame.
const maxControlPayload = 125

// errViolation marks a frame header QuestDB's WebSocketFrameParser refuses:
// the server drops the TCP connection without a CLOSE frame.
var errViolation = errors.New("WebSocket protocol violation")

// frameHeader is a parsed client frame header.
type frameHeader struct {
	fin     bool
	opcode  byte
	length  uint64
	size    int // header bytes, mask key included
	maskKey [4]byte
}

// readFrameHeader reads and checks one client frame header in the order of
// QuestDB's WebSocketFrameParser.parse: RSV bits, opcode, a fragmented
// control frame, the mask bit, a 64-bit length with its top bit set, a
// control payload over 125 bytes, a 1-byte CLOSE payload. Each is
// errViolation. Non-minimal length encodings are accepted, as QuestDB does
// (its strict mode is off).
func readFrameHeader(r *bufio.Reader) (frameHeader, error) {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:2]); err != nil {
		return frameHeader{}, err
	}
	h := frameHeader{fin: b[0]&0x80 != 0, opcode: b[0] & 0x0F, size: 2}
	switch {
	case b[0]&0x70 != 0:
		return h, fmt.Errorf("%w: RSV bits 0x%02x set", errViolation, b[0]&0x70)
	case !validOpcode(h.opcode):
		return h, fmt.Errorf("%w: reserved opcode 0x%x", errViolation, h.opcode)
	case isControl(h.opcode) && !h.fin:
		return h, fmt.Errorf("%w: fragmented control frame (opcode 0x%x)", errViolation, h.opcode)
	case b[1]&0x80 == 0:
		return h, fmt.Errorf("%w: unmasked client frame", errViolation)
	}
	switch n := b[1] & 0x7F; n {
	case 126:
		if _, err := io.ReadFull(r, b[:2]); err != nil {
			return h, err
		}
		h.length = uint64(binary.BigEndian.Uint16(b[:2]))
		h.size += 2
	case 127:
		if _, err := io.ReadFull(r, b[:8]); err != nil {
			return h, err
		}
		h.length = binary.BigEndian.Uint64(b[:8])
		h.size += 8
		if h.length>>63 != 0 {
			return h, fmt.Errorf("%w: 64-bit payload length with the top bit set", errViolation)
		}
	default:
		h.length = uint64(n)
	}
	switch {
	case isControl(h.opcode) && h.length > maxControlPayload:
		return h, fmt.Errorf("%w: control frame payload of %d bytes", errViolation, h.length)
	case h.opcode == opClose && h.length == 1:
		return h, fmt.Errorf("%w: 1-byte CLOSE payload", errViolation)
	}
	if _, err := io.ReadFull(r, h.maskKey[:]); err != nil {
		return h, err
	}
	h.size += 4
	return h, nil
}

// validOpcode is WebSocketOpcode.isValid: the six opcodes RFC 6455 defines.
func validOpcode(op byte) bool {
	switch op {
	case opContinuation, opText, opBinary, opClose, opPing, opPong:
		return true
	}
	return false
}

func isControl(op byte) bool { return op&0x08 != 0 }

// unmask XORs p in place with the mask key, p starting at payload offset 0.
func unmask(p []byte, key [4]byte) {
	k32 := binary.LittleEndian.Uint32(key[:])
	k64 := uint64(k32) | uint64(k32)<<32
	i := 0
	for ; i+8 <= len(p); i += 8 {
		binary.LittleEndian.PutUint64(p[i:], binary.LittleEndian.Uint64(p[i:])^k64)
	}
	for ; i < len(p); i++ {
		p[i] ^= key[i&3]
	}
}

// appendFrameHeader appends an unmasked server frame header with FIN set.
func appendFrameHeader(dst []byte, opcode byte, n int) []byte {
	dst = append(dst, 0x80|opcode)
	switch {
	case n <= maxControlPayload:
		return append(dst, byte(n))
	case n <= 0xFFFF:
		return binary.BigEndian.AppendUint16(append(dst, 126), uint16(n))
	}
	return binary.BigEndian.AppendUint64(append(dst, 127), uint64(n))
}

// writeFrame writes payload as one unmasked server frame with FIN set,
// header and payload in one writev.
func writeFrame(w io.Writer, opcode byte, payload []byte) error {
	var hdr [10]byte
	bufs := net.Buffers{appendFrameHeader(hdr[:0], opcode, len(payload)), payload}
	_, err := bufs.WriteTo(w)
	return err
}

// closePayload is a CLOSE frame payload: the code, then the reason (every
// reason the server sends fits the 123 bytes a control frame leaves).
func closePayload(code int, reason string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, uint16(code)), reason...)
}

// echoCloseCode is the code QuestDB answers a client's CLOSE with
// (QwpIngressUpgradeProcessor.handleClose, after RFC 6455 section 7.4):
// 1004 and 2000-2999 become 1002; no code (-1), codes outside 1000-4999
// and 1005, 1006, 1015 become 1000; any other code is echoed. The reason
// is neither checked nor echoed.
func echoCloseCode(code int) int {
	switch {
	case code == 1004 || (code >= 2000 && code <= 2999):
		return closeProtocolError
	case code < 1000 || code > 4999 || code == 1005 || code == 1006 || code == 1015:
		return closeNormal
	}
	return code
}

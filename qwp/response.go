package qwp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// TableTxn is one table entry of an OK or durable-ack response: the table
// and the sequencer transaction its rows reached.
type TableTxn struct {
	Name   string
	SeqTxn int64
}

// Response is a decoded server response.
type Response struct {
	Status Status
	// Seq is the server's sequence number of the message answered (OK and
	// errors); -1 on durable acks, which carry none.
	Seq int64
	// Tables holds OK and durable-ack table entries.
	Tables []TableTxn
	// Message is an error response's text.
	Message string
}

// IsDurableAck reports whether s is one of the durable-ack statuses, which
// carry table watermarks and no sequence number.
func (s Status) IsDurableAck() bool {
	return s == StatusDurableAck || s == StatusLocalDurableAck
}

// IsError reports whether s is neither OK nor a durable ack. Statuses this
// package does not know are errors: they have the error layout.
func (s Status) IsError() bool { return s != StatusOK && !s.IsDurableAck() }

// Layout sizes of responses.
const (
	okHeader      = 1 + 8 + 2 // status, seq, table count
	durableHeader = 1 + 2     // status, table count
	errorHeader   = 1 + 8 + 2 // status, seq, message length
	tableEntryMin = 2 + 8     // name length, seqTxn
)

var errEmptyResponse = errors.New("qwp: empty response")

// DecodeResponse decodes response b into r, reusing r.Tables. A response
// that is truncated, has trailing bytes or announces more entries than it
// holds is an error naming what is wrong; r is then unspecified.
func DecodeResponse(b []byte, r *Response) error {
	if len(b) == 0 {
		return errEmptyResponse
	}
	r.Status = Status(b[0])
	r.Tables = r.Tables[:0]
	r.Message = ""
	r.Seq = -1
	switch {
	case r.Status == StatusOK:
		if len(b) < okHeader {
			return truncated(r.Status, len(b), okHeader)
		}
		r.Seq = int64(binary.LittleEndian.Uint64(b[1:]))
		return decodeTables(b, okHeader, r)
	case r.Status.IsDurableAck():
		if len(b) < durableHeader {
			return truncated(r.Status, len(b), durableHeader)
		}
		return decodeTables(b, durableHeader, r)
	default:
		if len(b) < errorHeader {
			return truncated(r.Status, len(b), errorHeader)
		}
		r.Seq = int64(binary.LittleEndian.Uint64(b[1:]))
		n := int(binary.LittleEndian.Uint16(b[9:]))
		if len(b) != errorHeader+n {
			return fmt.Errorf("qwp: %s response of %d bytes announces a %d-byte message; want %d bytes in all",
				r.Status, len(b), n, errorHeader+n)
		}
		r.Message = string(b[errorHeader:])
		return nil
	}
}

func truncated(s Status, have, want int) error {
	return fmt.Errorf("qwp: %s response of %d bytes is shorter than its %d-byte header", s, have, want)
}

// decodeTables reads the table count at off-2 and the entries after it,
// which must end exactly at the end of b.
func decodeTables(b []byte, off int, r *Response) error {
	n := int(binary.LittleEndian.Uint16(b[off-2:]))
	if rest := len(b) - off; n*tableEntryMin > rest {
		return fmt.Errorf("qwp: %s response announces %d tables but has only %d bytes for them", r.Status, n, rest)
	}
	for i := 0; i < n; i++ {
		if len(b)-off < tableEntryMin {
			return fmt.Errorf("qwp: %s response: table entry %d of %d is truncated", r.Status, i, n)
		}
		l := int(binary.LittleEndian.Uint16(b[off:]))
		off += 2
		if len(b)-off < l+8 {
			return fmt.Errorf("qwp: %s response: table entry %d of %d announces a %d-byte name; only %d bytes remain",
				r.Status, i, n, l, len(b)-off-8)
		}
		name := string(b[off : off+l])
		off += l
		r.Tables = append(r.Tables, TableTxn{Name: name, SeqTxn: int64(binary.LittleEndian.Uint64(b[off:]))})
		off += 8
	}
	if off != len(b) {
		return fmt.Errorf("qwp: %s response has %d trailing bytes after %d tables", r.Status, len(b)-off, n)
	}
	return nil
}

// AppendOK appends an OK response (for test servers).
func AppendOK(dst []byte, seq int64, tables []TableTxn) ([]byte, error) {
	dst = append(dst, byte(StatusOK))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(seq))
	return appendTables(dst, tables)
}

// AppendDurableAck appends a durable-ack response of status
// StatusDurableAck or StatusLocalDurableAck (for test servers).
func AppendDurableAck(dst []byte, status Status, tables []TableTxn) ([]byte, error) {
	if !status.IsDurableAck() {
		return dst, fmt.Errorf("qwp: %s is not a durable-ack status", status)
	}
	return appendTables(append(dst, byte(status)), tables)
}

// AppendError appends an error response (for test servers). status must be
// an error status and msg at most 65535 bytes.
func AppendError(dst []byte, status Status, seq int64, msg string) ([]byte, error) {
	if !status.IsError() {
		return dst, fmt.Errorf("qwp: %s is not an error status", status)
	}
	if len(msg) > math.MaxUint16 {
		return dst, fmt.Errorf("qwp: error message of %d bytes exceeds the %d-byte field", len(msg), math.MaxUint16)
	}
	dst = append(dst, byte(status))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(seq))
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(msg)))
	return append(dst, msg...), nil
}

func appendTables(dst []byte, tables []TableTxn) ([]byte, error) {
	if len(tables) > math.MaxUint16 {
		return dst, fmt.Errorf("qwp: %d table entries exceed the %d a response can carry", len(tables), math.MaxUint16)
	}
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(tables)))
	for _, t := range tables {
		if len(t.Name) > math.MaxUint16 {
			return dst, fmt.Errorf("qwp: table name of %d bytes exceeds the %d-byte field", len(t.Name), math.MaxUint16)
		}
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(t.Name)))
		dst = append(dst, t.Name...)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(t.SeqTxn))
	}
	return dst, nil
}

package qwptest

import (
	"github.com/questdbexporter/questdbexporter/qwp"
)

// maxErrorMessage bounds the UTF-8 message of an error frame, as QuestDB
// does.
const maxErrorMessage = 1024

// Response frames are built by package qwp's encoders; their errors (more
// than 65535 table entries or name bytes) cannot arise from what this
// server stores, so a failure is logged and the frame sent as far as built.

func (c *conn) okFrame(seq int64, tables []tableTxn) []byte {
	b, err := qwp.AppendOK(nil, seq, wireTxns(tables))
	c.logErr("OK", err)
	return b
}

func (c *conn) durableFrame(status qwp.Status, tables []tableTxn) []byte {
	b, err := qwp.AppendDurableAck(nil, status, wireTxns(tables))
	c.logErr("durable ack", err)
	return b
}

// errorFrame cuts msg to maxErrorMessage bytes on a rune boundary.
func (c *conn) errorFrame(status qwp.Status, seq int64, msg string) []byte {
	if len(msg) > maxErrorMessage {
		cut := maxErrorMessage
		for cut > 0 && msg[cut]&0xC0 == 0x80 {
			cut--
		}
		msg = msg[:cut]
	}
	b, err := qwp.AppendError(nil, status, seq, msg)
	c.logErr("error frame", err)
	return b
}

func (c *conn) logErr(what string, err error) {
	if err != nil {
		c.s.logf("conn %d: encoding %s: %v", c.id, what, err)
	}
}

func wireTxns(tables []tableTxn) []qwp.TableTxn {
	out := make([]qwp.TableTxn, len(tables))
	for i, t := range tables {
		out[i] = qwp.TableTxn{Name: t.name, SeqTxn: t.seqTxn}
	}
	return out
}

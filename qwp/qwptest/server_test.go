package qwptest

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/questdbexporter/questdbexporter/qwp"
)

func TestUpgradeHeaders(t *testing.T) {
	cases := []struct {
		name        string
		opts        Options
		path        string
		request     string // X-QWP-Request-Durable-Ack
		wantDurable string
		wantBatch   string
	}{
		{"defaults", Options{}, "/write/v4", "", "", "2097138"},
		{"rust path, small buffer", Options{RecvBufferSize: 1000}, "/api/v4/write", "", "", "986"},
		{"durable not configured", Options{}, "/write/v4", "true", "", "2097138"},
		{"durable true", Options{DurableAck: true}, "/write/v4", "TRUE", "enabled", "2097138"},
		{"tier without tier support", Options{DurableAck: true}, "/write/v4", "local", "", "2097138"},
		{"tier local", Options{DurableTiers: true}, "/write/v4", "local", "local", "2097138"},
		{"tier replicated", Options{DurableTiers: true}, "/write/v4", "replicated", "replicated", "2097138"},
		{"tiers both", Options{DurableTiers: true}, "/write/v4", "local,replicated", "local,replicated", "2097138"},
		{"unknown tier", Options{DurableTiers: true, DurableAck: true}, "/write/v4", "remote", "", "2097138"},
		{"big buffer capped at 16 MiB", Options{RecvBufferSize: 64 << 20}, "/write/v4", "", "", strconv.Itoa(16 << 20)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, tc.opts)
			h := http.Header{"X-QWP-Max-Version": {"3"}, "X-QWP-Client-Id": {"test/1"}}
			if tc.request != "" {
				h.Set("X-QWP-Request-Durable-Ack", tc.request)
			}
			c, resp, err := dialPath(t, s, tc.path, h)
			require.NoError(t, err)
			assert.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
			assert.Equal(t, "1", c.header.Get("X-QWP-Version"))
			assert.Equal(t, tc.wantBatch, c.header.Get("X-QWP-Max-Batch-Size"))
			assert.Equal(t, tc.wantDurable, c.header.Get("X-QWP-Durable-Ack"))
			_, present := c.header["X-Qwp-Durable-Ack"]
			assert.Equal(t, tc.wantDurable != "", present)
			assert.Empty(t, c.header.Get("X-QuestDB-Role"))
		})
	}
}

func TestUpgradeRoleAndBadVersion(t *testing.T) {
	s := newServer(t, Options{Role: "PRIMARY"})
	c := dial(t, s, nil)
	assert.Equal(t, "PRIMARY", c.header.Get("X-QuestDB-Role"))

	req, err := http.NewRequest(http.MethodGet, "http://"+s.Addr()+"/write/v4", nil)
	require.NoError(t, err)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	req.Header.Set("Sec-WebSocket-Version", "8")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusUpgradeRequired, resp.StatusCode)
	assert.Equal(t, "13", resp.Header.Get("Sec-WebSocket-Version"))
}

func TestOKsAreCumulativeWithSeqTxn(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s, nil)
	const n = 40
	for range n {
		c.send(longRows(0, "trades", 3))
	}
	// every frame is one commit of "trades": an OK covering seq k reports
	// seqTxn k+1; no OK lets more than 8 frames go unacknowledged
	last := int64(-1)
	for last < n-1 {
		r := c.resp()
		require.Equal(t, qwp.StatusOK, r.Status)
		require.Greater(t, r.Seq, last)
		assert.LessOrEqual(t, r.Seq-last, int64(okEvery), "at most 8 frames per OK")
		require.Equal(t, []qwp.TableTxn{{Name: "trades", SeqTxn: r.Seq + 1}}, r.Tables)
		last = r.Seq
	}
	assert.Equal(t, int64(3*n), s.RowCount("TRADES"), "lookup is case-insensitive")
	assert.Equal(t, int64(n), s.Frames())
}

func TestOKListsEveryTableCommitted(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s, nil)
	p := append(blockHeader("a", 1, "v", qwp.TypeLong), wire{}.u8(0).i64(1)...)
	p = append(p, blockHeader("b", 1, "v", qwp.TypeLong)...)
	p = append(p, wire{}.u8(0).i64(2)...)
	p = append(p, blockHeader("a", 1, "v", qwp.TypeLong)...) // a second block of "a"
	p = append(p, wire{}.u8(0).i64(3)...)
	c.send(message(0, 3, p))
	r := c.resp()
	assert.Equal(t, int64(0), r.Seq)
	assert.Equal(t, []qwp.TableTxn{{Name: "a", SeqTxn: 1}, {Name: "b", SeqTxn: 1}}, r.Tables)
	td, ok := s.Rows("a")
	require.True(t, ok)
	require.Len(t, td.Rows, 2)
	assert.Equal(t, int64(1), td.Rows[0][0])
	assert.Equal(t, int64(3), td.Rows[1][0])
	assert.Equal(t, int64(2), td.RowCount)
}

func TestErrorPoisonsConnection(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s, nil)
	bad := longRows(0, "t", 1)
	bad[0] = 'X'
	c.send(longRows(0, "t", 1), bad, longRows(0, "t", 1), longRows(0, "t", 1))
	assert.Equal(t, []qwp.TableTxn{{Name: "t", SeqTxn: 1}}, c.ackedThrough(0), "the pending OK goes first")
	r := c.resp()
	assert.Equal(t, qwp.StatusParseError, r.Status)
	assert.Equal(t, int64(1), r.Seq)
	assert.Contains(t, r.Message, "magic")
	c.ping()
	c.expect("pong") // nothing for seq 2 and 3, but pings are answered
	require.NoError(t, c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second)))
	c.expect("close", websocket.CloseNormalClosure)
	assert.Equal(t, int64(1), s.RowCount("t"), "poisoned frames write nothing")
	assert.Equal(t, int64(4), s.Frames(), "poisoned frames still count")
}

func TestDictionaryGap(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s, nil)
	c.send(message(qwp.FlagDeltaSymbolDict|qwp.FlagDeferCommit, 0, wire{}.varint(0).varint(1).str("a")))
	c.send(deltaColumn(wire{}.varint(2).varint(1).str("c"), qwp.TypeSymbol, 1, wire{}.u8(0).varint(2)))
	r := c.resp()
	assert.Equal(t, qwp.StatusDictionaryGap, r.Status)
	assert.Equal(t, int64(1), r.Seq, "the catch-up frame took seq 0 and got no OK")
}

func TestSymbolsAcrossFrames(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s, nil)
	c.send(deltaColumn(wire{}.varint(0).varint(2).str("x").str("y"), qwp.TypeSymbol, 2, wire{}.u8(0).varint(1).varint(0)))
	c.send(deltaColumn(wire{}.varint(2).varint(0), qwp.TypeSymbol, 1, wire{}.u8(0).varint(1)))
	c.ackedThrough(1)
	td, _ := s.Rows("t")
	got := []any{td.Rows[0][0], td.Rows[1][0], td.Rows[2][0]}
	assert.Equal(t, []any{"y", "x", "y"}, got)

	// a new connection starts with an empty dictionary
	c2 := dial(t, s, nil)
	c2.send(deltaColumn(wire{}.varint(0).varint(0), qwp.TypeSymbol, 1, wire{}.u8(0).varint(1)))
	assert.Equal(t, qwp.StatusParseError, c2.resp().Status)
}

func TestDeferredGroupCommitsTogether(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s, nil)
	c.send(longRows(qwp.FlagDeferCommit, "t", 2), longRows(qwp.FlagDeferCommit, "u", 1))
	c.ping()
	c.expect("pong") // no OK for deferred frames
	assert.Equal(t, int64(0), s.RowCount("t"), "nothing committed yet")
	c.send(longRows(0, "t", 1))
	assert.Equal(t, []qwp.TableTxn{{Name: "t", SeqTxn: 1}, {Name: "u", SeqTxn: 1}}, c.ackedThrough(2))
	assert.Equal(t, int64(3), s.RowCount("t"))
	assert.Equal(t, int64(1), s.RowCount("u"))

	// an empty frame is a bare commit
	c.send(longRows(qwp.FlagDeferCommit, "t", 1), nil)
	assert.Equal(t, []qwp.TableTxn{{Name: "t", SeqTxn: 2}}, c.ackedThrough(4))
	c.send(nil)
	assert.Empty(t, c.ackedThrough(5), "nothing to commit: an OK with no tables")
}

func TestDeferredGroupRolledBack(t *testing.T) {
	t.Run("on disconnect", func(t *testing.T) {
		s := newServer(t, Options{})
		c := dial(t, s, nil)
		c.send(longRows(qwp.FlagDeferCommit, "t", 2))
		c.ping()
		c.expect("pong")
		c.close()
		require.Eventually(t, func() bool { return s.Connections() == 0 }, 10*time.Second, time.Millisecond)
		c2 := dial(t, s, nil)
		c2.send(nil)
		assert.Empty(t, c2.ackedThrough(0))
		assert.Equal(t, int64(0), s.RowCount("t"))
	})
	t.Run("on error", func(t *testing.T) {
		s := newServer(t, Options{})
		c := dial(t, s, nil)
		c.send(longRows(qwp.FlagDeferCommit, "t", 2), []byte{1, 2, 3})
		r := c.resp()
		assert.Equal(t, qwp.StatusParseError, r.Status)
		assert.Equal(t, int64(1), r.Seq)
		c2 := dial(t, s, nil)
		c2.send(nil)
		c2.ackedThrough(0)
		assert.Equal(t, int64(0), s.RowCount("t"))
	})
}

func TestDurableAcks(t *testing.T) {
	t.Run("on demand", func(t *testing.T) {
		s := newServer(t, Options{DurableAck: true})
		c := dial(t, s, http.Header{"X-QWP-Request-Durable-Ack": {"true"}})
		c.send(longRows(0, "t", 1), longRows(0, "u", 1))
		c.ackedThrough(1)
		s.EmitDurableAcks()
		r := c.resp()
		assert.Equal(t, qwp.StatusDurableAck, r.Status)
		assert.Equal(t, int64(-1), r.Seq)
		assert.Equal(t, []qwp.TableTxn{{Name: "t", SeqTxn: 1}, {Name: "u", SeqTxn: 1}}, r.Tables)
		c.send(longRows(0, "u", 1))
		c.ackedThrough(2)
		s.EmitDurableAcks()
		assert.Equal(t, []qwp.TableTxn{{Name: "u", SeqTxn: 2}}, c.resp().Tables, "only tables that advanced")
		s.EmitDurableAcks()
		c.ping()
		c.expect("pong") // nothing advanced: no durable ack
	})
	t.Run("automatic, local tier", func(t *testing.T) {
		s := newServer(t, Options{DurableTiers: true, AutoDurable: true})
		c := dial(t, s, http.Header{"X-QWP-Request-Durable-Ack": {"local"}})
		c.send(longRows(0, "t", 1))
		c.ackedThrough(0)
		r := c.resp()
		assert.Equal(t, qwp.StatusLocalDurableAck, r.Status)
		assert.Equal(t, []qwp.TableTxn{{Name: "t", SeqTxn: 1}}, r.Tables)
	})
	t.Run("not negotiated", func(t *testing.T) {
		s := newServer(t, Options{DurableAck: true, AutoDurable: true})
		c := dial(t, s, nil)
		c.send(longRows(0, "t", 1))
		c.ackedThrough(0)
		s.EmitDurableAcks()
		c.ping()
		c.expect("pong")
		c.send(longRows(flagDurableAckPoll, "t", 1))
		assert.Equal(t, qwp.StatusParseError, c.resp().Status, "a poll frame without durable ack")
	})
	t.Run("poll frame", func(t *testing.T) {
		s := newServer(t, Options{DurableAck: true})
		c := dial(t, s, http.Header{"X-QWP-Request-Durable-Ack": {"true"}})
		c.send(longRows(0, "t", 1))
		c.ackedThrough(0)
		s.store.makeDurable(nil) // durable, but not yet announced
		c.send(longRows(flagDurableAckPoll, "t", 1))
		c.ackedThrough(1)
		r := c.resp()
		assert.Equal(t, qwp.StatusDurableAck, r.Status)
		assert.Equal(t, []qwp.TableTxn{{Name: "t", SeqTxn: 1}}, r.Tables, "never past the durable seqTxn")
	})
	t.Run("poll frame inside a deferred group", func(t *testing.T) {
		s := newServer(t, Options{DurableAck: true})
		c := dial(t, s, http.Header{"X-QWP-Request-Durable-Ack": {"true"}})
		c.send(longRows(qwp.FlagDeferCommit, "t", 1), message(flagDurableAckPoll, 0, nil))
		c.ping()
		c.expect("pong") // no OK: the poll neither commits nor is acknowledged
		assert.Zero(t, s.RowCount("t"), "the deferred rows stay uncommitted")
		c.send(longRows(0, "t", 1))
		c.ackedThrough(2) // the group's commit covers the deferred frame and the poll
		assert.Equal(t, int64(2), s.RowCount("t"))
	})
	t.Run("header-only poll frame on a clean connection", func(t *testing.T) {
		s := newServer(t, Options{DurableAck: true})
		c := dial(t, s, http.Header{"X-QWP-Request-Durable-Ack": {"true"}})
		c.send(longRows(0, "t", 1), message(flagDurableAckPoll, 0, nil))
		c.ackedThrough(1) // the poll's own seq is acknowledged
		assert.Equal(t, int64(1), s.RowCount("t"))
	})
}

func TestCloseCodes(t *testing.T) {
	t.Run("1009 after flushing OKs", func(t *testing.T) {
		s := newServer(t, Options{RecvBufferSize: 1024})
		c := dial(t, s, nil)
		c.send(longRows(0, "t", 1), make([]byte, 1024-8+1))
		c.ackedThrough(0)
		c.expect("close", websocket.CloseMessageTooBig)
	})
	t.Run("largest frame accepted", func(t *testing.T) {
		s := newServer(t, Options{RecvBufferSize: 1024})
		c := dial(t, s, nil)
		f := longRows(0, "t", 1)
		f = append(f, make([]byte, 1024-8-len(f))...) // trailing bytes are ignored
		c.send(f)
		c.ackedThrough(0)
	})
	t.Run("1003 for TEXT", func(t *testing.T) {
		s := newServer(t, Options{})
		c := dial(t, s, nil)
		require.NoError(t, c.ws.WriteMessage(websocket.TextMessage, []byte("hello")))
		c.expect("close", websocket.CloseUnsupportedData)
	})
	t.Run("client close echoed after OKs", func(t *testing.T) {
		s := newServer(t, Options{})
		c := dial(t, s, nil)
		c.send(longRows(0, "t", 1))
		require.NoError(t, c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, ""), time.Now().Add(time.Second)))
		c.ackedThrough(0)
		c.expect("close", websocket.CloseGoingAway)
	})
}

func TestFaultRejectFrame(t *testing.T) {
	s := newServer(t, Options{})
	require.Error(t, s.RejectFrame(1, qwp.StatusOK, "not an error"))
	require.NoError(t, s.RejectFrame(2, qwp.StatusWriteError, "disk full"))
	c := dial(t, s, nil)
	c.send(longRows(0, "t", 1), longRows(0, "t", 1))
	c.ackedThrough(0)
	r := c.resp()
	assert.Equal(t, qwp.Response{Status: qwp.StatusWriteError, Seq: 1, Message: "disk full"}, r)
	assert.Equal(t, int64(1), s.RowCount("t"))
	c2 := dial(t, s, nil)
	c2.send(longRows(0, "t", 1))
	c2.ackedThrough(0) // the fault fired once
}

func TestFaultDropAfter(t *testing.T) {
	for _, flush := range []bool{false, true} {
		t.Run("flush="+strconv.FormatBool(flush), func(t *testing.T) {
			s := newServer(t, Options{})
			s.DropAfter(2, flush)
			c := dial(t, s, nil)
			c.send(longRows(0, "t", 1))
			c.ackedThrough(0)
			c.send(longRows(0, "t", 1))
			if flush {
				c.ackedThrough(1)
			}
			c.expect("gone") // without flush, the OK of seq 1 is lost
			assert.Equal(t, int64(2), s.RowCount("t"), "the frame was processed before the drop")
		})
	}
}

func TestFaultStallAcks(t *testing.T) {
	s := newServer(t, Options{})
	s.StallAcks()
	c := dial(t, s, nil)
	bad := longRows(0, "t", 1)
	bad[4] = 9
	c.send(longRows(0, "t", 1), longRows(0, "t", 1), bad)
	c.ping()
	c.expect("pong")
	require.NoError(t, s.WaitRows(context.Background(), "t", 2))
	s.ReleaseAcks()
	r := c.resp()
	assert.Equal(t, int64(1), r.Seq, "one cumulative OK")
	assert.Equal(t, []qwp.TableTxn{{Name: "t", SeqTxn: 2}}, r.Tables)
	r = c.resp()
	assert.Equal(t, qwp.StatusParseError, r.Status)
	assert.Equal(t, int64(2), r.Seq)
}

func TestFaultRefuseUpgrades(t *testing.T) {
	cases := []struct {
		r      Refusal
		header string
		want   string
	}{
		{Refusal{Status: 401, Message: "bad credentials"}, "", ""},
		{Refusal{Status: 403}, "", ""},
		{Refusal{Status: 421, Role: "REPLICA"}, "X-QuestDB-Role", "REPLICA"},
		{Refusal{Status: 503, RetryAfter: "2"}, "Retry-After", "2"},
		{Refusal{Status: 429, RetryAfter: "1"}, "Retry-After", "1"},
	}
	for _, tc := range cases {
		t.Run(strconv.Itoa(tc.r.Status), func(t *testing.T) {
			s := newServer(t, Options{})
			s.RefuseUpgrades(2, tc.r)
			for range 2 {
				_, resp, err := dialPath(t, s, "/write/v4", nil)
				require.ErrorIs(t, err, websocket.ErrBadHandshake)
				assert.Equal(t, tc.r.Status, resp.StatusCode)
				if tc.header != "" {
					assert.Equal(t, tc.want, resp.Header.Get(tc.header))
				}
				resp.Body.Close()
			}
			c := dial(t, s, nil) // the third attempt upgrades
			c.send(nil)
			c.ackedThrough(0)
		})
	}
}

func TestFaultOutageEnds(t *testing.T) {
	s := newServer(t, Options{})
	s.Outage(50 * time.Millisecond)
	require.Eventually(t, func() bool {
		c, resp, err := dialPath(t, s, "/write/v4", nil)
		if err != nil {
			resp.Body.Close()
			return false
		}
		c.close()
		return true
	}, 10*time.Second, 10*time.Millisecond, "upgrades succeed again after the outage")
}

func TestFaultOutageKeepsTables(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s, nil)
	c.send(longRows(0, "t", 5), longRows(qwp.FlagDeferCommit, "t", 3))
	c.ackedThrough(0)
	s.Outage(time.Hour)
	c.expect("gone")
	_, resp, err := dialPath(t, s, "/write/v4", nil)
	require.Error(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	resp.Body.Close()
	s.Outage(0) // ends it
	c2 := dial(t, s, nil)
	assert.Equal(t, int64(5), s.RowCount("t"), "committed rows survive, the deferred ones do not")
	c2.send(longRows(0, "t", 1))
	assert.Equal(t, []qwp.TableTxn{{Name: "t", SeqTxn: 2}}, c2.ackedThrough(0), "seq restarts at 0, seqTxn continues")
	assert.Equal(t, int64(2), s.Accepted())
}

func TestTablesAndSchema(t *testing.T) {
	now := time.Unix(1_700_000_000, 123_456_789)
	s := newServer(t, Options{Now: func() time.Time { return now }})
	c := dial(t, s, nil)
	// designated TIMESTAMP_NANOS plus a value; then one block without a timestamp
	p := append(blockHeader("m", 2, "v", qwp.TypeDouble, "", qwp.TypeTimestampNanos), wire{}.u8(0).f64(1).f64(2).u8(1, 0x02).i64(5_000)...)
	c.send(message(0, 1, p))
	// a new column, the designated timestamp as micros under its stored name
	p = append(blockHeader("M", 1, "v", qwp.TypeFloat, "extra", qwp.TypeVarchar, "timestamp", qwp.TypeTimestamp), wire{}.u8(0).u32(0x40400000).u8(0).u32(0).u32(2).u8('h', 'i').u8(0).i64(7)...)
	c.send(message(0, 1, p))
	c.ackedThrough(1)
	td, ok := s.Rows("m")
	require.True(t, ok)
	assert.Equal(t, []ColumnInfo{{"v", qwp.TypeDouble}, {"timestamp", qwp.TypeTimestampNanos}, {"extra", qwp.TypeVarchar}}, td.Columns)
	assert.Equal(t, [][]any{
		{1.0, int64(5_000), nil},
		{2.0, now.UnixNano(), nil}, // NULL designated timestamp: server time
		{3.0, int64(7_000), "hi"},  // FLOAT widened, micros converted to nanos
	}, td.Rows)
	assert.Equal(t, int64(2), td.SeqTxn)

	// no designated timestamp at all: a TIMESTAMP column is appended
	c.send(longRows(0, "plain", 1))
	c.ackedThrough(2)
	td, _ = s.Rows("plain")
	assert.Equal(t, []ColumnInfo{{"v", qwp.TypeLong}, {"timestamp", qwp.TypeTimestamp}}, td.Columns)
	assert.Equal(t, [][]any{{int64(0), now.UnixMicro()}}, td.Rows)
	assert.Equal(t, map[string]int64{"m": 3, "plain": 1}, s.Tables())
	assert.Equal(t, []string{"m", "plain"}, s.TableNames())
	assert.Len(t, s.Snapshot(), 2)
	_, ok = s.Rows("missing")
	assert.False(t, ok)
}

func TestSchemaRefusals(t *testing.T) {
	cases := []struct {
		name  string
		frame []byte
		want  qwp.Status
	}{
		{"type mismatch", message(0, 1, append(blockHeader("base", 1, "v", qwp.TypeVarchar), wire{}.u8(0).u32(0).u32(0)...)), qwp.StatusSchemaMismatch},
		{"uuid into long", message(0, 1, append(blockHeader("base", 1, "v", qwp.TypeUUID), wire{}.u8(0).u64(1).u64(1)...)), qwp.StatusSchemaMismatch},
		{"fraction into long", message(0, 1, append(blockHeader("base", 1, "v", qwp.TypeDouble), wire{}.u8(0).f64(1.5)...)), qwp.StatusWriteError},
		{"long into byte out of range", message(0, 1, append(blockHeader("small", 1, "b", qwp.TypeLong), wire{}.u8(0).i64(300)...)), qwp.StatusWriteError},
		{"invalid table name", longRows(0, "a/b", 1), qwp.StatusInternalError},
		{"table name with double dot", longRows(0, "a..b", 1), qwp.StatusInternalError},
		{"table name with trailing space", longRows(0, "ab ", 1), qwp.StatusInternalError},
		{"table name with control char", longRows(0, "a\x01", 1), qwp.StatusInternalError},
		{"dotted column on a new table", message(0, 1, append(blockHeader("fresh", 1, "a.b", qwp.TypeLong), wire{}.u8(0).i64(1)...)), qwp.StatusInternalError},
		{"dashed new column", message(0, 1, append(blockHeader("base", 1, "a-b", qwp.TypeLong), wire{}.u8(0).i64(1)...)), qwp.StatusWriteError},
		{"duplicate column", message(0, 1, append(blockHeader("base", 1, "v", qwp.TypeLong, "V", qwp.TypeLong), wire{}.u8(0).i64(1).u8(0).i64(1)...)), qwp.StatusWriteError},
		{"array dimensions change", message(0, 1, append(blockHeader("arr", 1, "a", qwp.TypeDoubleArray), wire{}.u8(0).u8(2).u32(0).u32(0)...)), qwp.StatusSchemaMismatch},
		{"non-timestamp named timestamp", message(0, 1, append(blockHeader("ts", 1, "timestamp", qwp.TypeLong), wire{}.u8(0).i64(1)...)), qwp.StatusSchemaMismatch},
		// an empty name is not a parse error (QwpSchema takes 0-127 bytes):
		// QwpTudCache refuses it in a new table, QwpWalAppender as a new column
		{"empty name on LONG in a new table", message(0, 1, append(blockHeader("fresh", 1, "", qwp.TypeLong), wire{}.u8(0).i64(1)...)), qwp.StatusInternalError},
		{"empty name on DATE as a new column", message(0, 1, append(blockHeader("base", 1, "", qwp.TypeDate), wire{}.u8(0).i64(1)...)), qwp.StatusWriteError},
		// a block without rows still resolves its table
		{"invalid table name, no rows", message(0, 1, append(blockHeader("a/b", 0, "v", qwp.TypeLong), 0)), qwp.StatusInternalError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, Options{})
			c := dial(t, s, nil)
			c.send(longRows(0, "base", 1))
			c.send(message(0, 1, append(blockHeader("small", 1, "b", qwp.TypeByte), wire{}.u8(0, 1)...)))
			c.send(message(0, 1, append(blockHeader("arr", 1, "a", qwp.TypeDoubleArray), wire{}.u8(0).u8(1).u32(0)...)))
			c.ackedThrough(2)
			c.send(tc.frame)
			r := c.resp()
			assert.Equal(t, tc.want, r.Status, r.Message)
			assert.Equal(t, int64(3), r.Seq)
		})
	}
}

func TestConversionsAccepted(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s, nil)
	c.send(message(0, 1, append(blockHeader("x", 1, "d", qwp.TypeDouble, "i", qwp.TypeInt, "", qwp.TypeTimestamp), wire{}.u8(0).f64(0.5).u8(0).u32(1).u8(0).i64(10)...)))
	c.send(message(0, 1, append(blockHeader("x", 1, "d", qwp.TypeByte, "i", qwp.TypeDouble, "", qwp.TypeTimestampNanos), wire{}.u8(0, 0xFE).u8(0).f64(4).u8(0).i64(20_999)...)))
	c.send(message(0, 1, append(blockHeader("txt", 1, "s", qwp.TypeVarchar, "v", qwp.TypeSymbol), wire{}.u8(0).u32(0).u32(1).u8('a').u8(0).varint(1).str("b").varint(0)...)))
	c.send(message(0, 1, append(blockHeader("txt", 1, "s", qwp.TypeSymbol, "v", qwp.TypeVarchar), wire{}.u8(0).varint(1).str("c").varint(0).u8(0).u32(0).u32(1).u8('d')...)))
	c.ackedThrough(3)
	td, _ := s.Rows("x")
	assert.Equal(t, [][]any{{0.5, int32(1), int64(10)}, {-2.0, int32(4), int64(20)}}, td.Rows)
	td, _ = s.Rows("txt")
	assert.Equal(t, []ColumnInfo{{"s", qwp.TypeVarchar}, {"v", qwp.TypeSymbol}, {"timestamp", qwp.TypeTimestamp}}, td.Columns)
	assert.Equal(t, []any{"c", "d"}, td.Rows[1][:2])
}

func TestCountOnly(t *testing.T) {
	s := newServer(t, Options{CountOnly: true})
	c := dial(t, s, nil)
	c.send(specExample3(t), specExample1(t))
	c.ackedThrough(1)
	td, ok := s.Rows("sensors")
	require.True(t, ok)
	assert.Equal(t, int64(4), td.RowCount)
	assert.Empty(t, td.Rows)
	bad := oneColumn(0, qwp.TypeVarchar, 1, wire{}.u8(0).u32(0).u32(1).u8(0xFF))
	c.send(bad)
	assert.Equal(t, qwp.StatusParseError, c.resp().Status, "count-only still validates")
}

func TestWaitRows(t *testing.T) {
	s := newServer(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := s.WaitRows(ctx, "t", 1)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), `"t" has 0 of 1 rows`)

	c := dial(t, s, nil)
	done := make(chan error, 1)
	go func() { done <- s.WaitRows(context.Background(), "T", 4) }()
	c.send(longRows(0, "t", 2), longRows(0, "t", 2))
	require.NoError(t, <-done)
}

func TestCloseDropsConnections(t *testing.T) {
	s, err := NewServer(Options{})
	require.NoError(t, err)
	c := dial(t, s, nil)
	c.send(longRows(qwp.FlagDeferCommit, "t", 1))
	c.ping()
	c.expect("pong")
	assert.Equal(t, 1, s.Connections())
	require.NoError(t, s.Close())
	c.expect("gone")
	assert.Equal(t, 0, s.Connections())
	require.NoError(t, s.Close(), "Close is idempotent")
	_, _, err = dialPath(t, s, "/write/v4", nil)
	require.Error(t, err)
	c.close()
	goleak.VerifyNone(t) // nothing of the server is left running
}

func TestNewServerErrors(t *testing.T) {
	_, err := NewServer(Options{RecvBufferSize: 14})
	require.ErrorContains(t, err, "RecvBufferSize 14")
	_, err = NewServer(Options{Addr: "256.0.0.1:0"})
	require.ErrorContains(t, err, "256.0.0.1:0")
}

func TestErrorMessageCutTo1024Bytes(t *testing.T) {
	s := newServer(t, Options{})
	long := strings.Repeat("é", 700) // 1400 bytes of 2-byte runes
	require.NoError(t, s.RejectFrame(1, qwp.StatusInternalError, "x"+long))
	c := dial(t, s, nil)
	c.send(longRows(0, "t", 1))
	r := c.resp()
	assert.Equal(t, qwp.StatusInternalError, r.Status)
	assert.Len(t, r.Message, 1023, "cut before the rune that would cross 1024 bytes")
	assert.True(t, utf8.ValidString(r.Message))
}

func TestFramesOver64KiB(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s, nil)
	assert.Zero(t, s.MaxFrameBytes())
	small, big := longRows(0, "big", 10), longRows(0, "big", 10_000) // ~80 KB: a 14-byte WebSocket header
	c.send(small, big, small)
	c.ackedThrough(2)
	assert.Equal(t, int64(10_020), s.RowCount("big"))
	assert.Equal(t, int64(len(big)), s.MaxFrameBytes(), "the largest frame's payload")

	rec := adminDo(t, s.AdminHandler(), http.MethodGet, "/stats")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.JSONEq(t, fmt.Sprintf(`{"frames":3,"max_frame_bytes":%d}`, len(big)), rec.Body.String())
}

func TestDurableAckTrailsHeldOKs(t *testing.T) {
	s := newServer(t, Options{DurableAck: true})
	c := dial(t, s, http.Header{"X-QWP-Request-Durable-Ack": {"true"}})
	other := dial(t, s, nil)
	other.send(longRows(0, "t", 1)) // seqTxn 1 comes from another connection
	other.ackedThrough(0)
	s.StallAcks()
	c.send(longRows(0, "t", 1))
	require.NoError(t, s.WaitRows(context.Background(), "t", 2))
	s.EmitDurableAcks()
	c.ping()
	c.expect("pong") // stalled: neither the OK nor the durable ack
	s.ReleaseAcks()
	r := c.resp()
	assert.Equal(t, qwp.Response{Status: qwp.StatusOK, Seq: 0, Tables: []qwp.TableTxn{{Name: "t", SeqTxn: 2}}}, r)
	r = c.resp()
	assert.Equal(t, qwp.StatusDurableAck, r.Status, "the durable ack follows the OK")
	assert.Equal(t, []qwp.TableTxn{{Name: "t", SeqTxn: 2}}, r.Tables)
}

func TestTablesPerConnectionLimit(t *testing.T) {
	s := newServer(t, Options{CountOnly: true})
	c := dial(t, s, nil)
	var p wire
	for i := range maxTablesPerConn {
		p = append(p, blockHeader("t"+strconv.Itoa(i), 1, "v", qwp.TypeByte)...)
		p = p.u8(0, 1)
	}
	c.send(message(0, maxTablesPerConn, p))
	c.ackedThrough(0)
	c.send(longRows(0, "t9999", 1)) // a table already written is fine
	c.ackedThrough(1)
	c.send(longRows(0, "one_too_many", 1))
	r := c.resp()
	assert.Equal(t, qwp.StatusWriteError, r.Status)
	assert.Contains(t, r.Message, "limit is 10000")
	assert.Len(t, s.Tables(), maxTablesPerConn, "the refused table was not created")
	c2 := dial(t, s, nil) // the limit is per connection
	c2.send(longRows(0, "one_too_many", 1))
	c2.ackedThrough(0)
}

func TestDeferredForceCommitAtMaxUncommittedRows(t *testing.T) {
	t.Run("acked once nothing is uncommitted", func(t *testing.T) {
		s := newServer(t, Options{MaxUncommittedRows: 5})
		c := dial(t, s, nil)
		c.send(longRows(qwp.FlagDeferCommit, "t", 3), longRows(qwp.FlagDeferCommit, "t", 3))
		assert.Equal(t, []qwp.TableTxn{{Name: "t", SeqTxn: 1}}, c.ackedThrough(1), "6 rows reached the limit of 5")
		assert.Equal(t, int64(6), s.RowCount("t"))
		c.send(longRows(qwp.FlagDeferCommit, "t", 2))
		c.ping()
		c.expect("pong") // 2 rows below the limit: uncommitted, no OK
		c.close()
		require.Eventually(t, func() bool { return s.Connections() == 0 }, 10*time.Second, time.Millisecond)
		assert.Equal(t, int64(6), s.RowCount("t"), "the rest of the group is rolled back")
	})
	t.Run("other tables keep the frame uncovered", func(t *testing.T) {
		s := newServer(t, Options{MaxUncommittedRows: 5})
		c := dial(t, s, nil)
		c.send(longRows(qwp.FlagDeferCommit, "small", 1), longRows(qwp.FlagDeferCommit, "big", 5))
		c.ping()
		c.expect("pong")
		assert.Equal(t, int64(5), s.RowCount("big"), "big was committed early")
		assert.Equal(t, int64(0), s.RowCount("small"))
		c.send(nil)
		assert.Equal(t, []qwp.TableTxn{{Name: "big", SeqTxn: 1}, {Name: "small", SeqTxn: 1}}, c.ackedThrough(2))
	})
	t.Run("a catch-up frame keeps the group uncovered", func(t *testing.T) {
		s := newServer(t, Options{MaxUncommittedRows: 5})
		c := dial(t, s, nil)
		c.send(message(qwp.FlagDeltaSymbolDict|qwp.FlagDeferCommit, 0, wire{}.varint(0).varint(1).str("a")))
		c.send(longRows(qwp.FlagDeferCommit, "t", 5))
		c.ping()
		c.expect("pong")
		assert.Equal(t, int64(5), s.RowCount("t"))
		c.send(nil)
		assert.Equal(t, []qwp.TableTxn{{Name: "t", SeqTxn: 1}}, c.ackedThrough(2))
	})
}

func TestAllNullArrayColumnSkipped(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s, nil)
	// a new table and then a new column, each with an all-NULL array
	c.send(message(0, 1, append(blockHeader("a", 2, "v", qwp.TypeLong, "arr", qwp.TypeDoubleArray), wire{}.u8(0).i64(1).i64(2).u8(1, 0x03)...)))
	c.send(message(0, 1, append(blockHeader("a", 1, "v", qwp.TypeLong, "arr2", qwp.TypeDoubleArray), wire{}.u8(0).i64(3).u8(1, 0x01)...)))
	c.send(message(0, 1, append(blockHeader("a", 1, "arr", qwp.TypeDoubleArray), wire{}.u8(0).u8(1).u32(1).f64(0.5)...)))
	c.ackedThrough(2)
	td, _ := s.Rows("a")
	assert.Equal(t, []ColumnInfo{{"v", qwp.TypeLong}, {"timestamp", qwp.TypeTimestamp}, {"arr", qwp.TypeDoubleArray}}, td.Columns)
	assert.Equal(t, Array{Shape: []int32{1}, Doubles: []float64{0.5}}, td.Rows[3][2])
	assert.Nil(t, td.Rows[0][2])
}

// TestEmptyBlockResolvesTable: QwpIngressProcessorState.processMessage
// looks up (and creates) every block's table before QwpWalAppender skips a
// block without rows, so such a block creates a table and meets the table
// refusals.
func TestEmptyBlockResolvesTable(t *testing.T) {
	s := newServer(t, Options{})
	require.NoError(t, s.Exec("CREATE TABLE nw (ts TIMESTAMP, v LONG) TIMESTAMP(ts) PARTITION BY DAY BYPASS WAL"))
	c := dial(t, s, nil)
	c.send(message(0, 1, append(blockHeader("made", 0, "v", qwp.TypeLong, "s", qwp.TypeVarchar, "a", qwp.TypeDoubleArray), wire{}.u8(0).u8(0).u32(0).u8(0)...)))
	assert.Empty(t, c.ackedThrough(0), "no rows, no commit")
	td, ok := s.Rows("made")
	require.True(t, ok, "the table was created")
	assert.Equal(t, []ColumnInfo{{"v", qwp.TypeLong}, {"s", qwp.TypeVarchar}, {"timestamp", qwp.TypeTimestamp}}, td.Columns,
		"an array column without values is left out, as with all-NULL values")
	assert.Zero(t, td.RowCount)
	c.send(message(0, 1, append(blockHeader("nw", 0, "v", qwp.TypeLong), 0)))
	r := c.resp()
	assert.Equal(t, qwp.StatusSchemaMismatch, r.Status, r.Message)
}

// TestEmptyArraysStored: a zero-element array (a dimension of 0) is a
// value, not NULL, and fixes a new column's dimensions like any other; the
// spec's "NULL and empty arrays are distinct values", QwpArrayColumnCursor
// taking any dimension >= 0 and QwpTudCache sizing a new column from the
// first non-NULL value's n_dims.
func TestEmptyArraysStored(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s, nil)
	// rows: [] (shape [0]), NULL, [1.5]
	c.send(message(0, 1, append(blockHeader("one", 3, "a", qwp.TypeDoubleArray), wire{}.u8(1, 0x02).u8(1).u32(0).u8(1).u32(1).f64(1.5)...)))
	// a new column of nothing but empty 2-D arrays, shapes [2,0] and [0,5]
	c.send(message(0, 1, append(blockHeader("two", 2, "a", qwp.TypeDoubleArray), wire{}.u8(0).u8(2).u32(2).u32(0).u8(2).u32(0).u32(5)...)))
	c.ackedThrough(1)
	td, _ := s.Rows("one")
	assert.Equal(t, []ColumnInfo{{"a", qwp.TypeDoubleArray}, {"timestamp", qwp.TypeTimestamp}}, td.Columns)
	assert.Equal(t, Array{Shape: []int32{0}, Doubles: []float64{}}, td.Rows[0][0])
	assert.Nil(t, td.Rows[1][0])
	assert.Equal(t, Array{Shape: []int32{1}, Doubles: []float64{1.5}}, td.Rows[2][0])
	td, _ = s.Rows("two")
	require.Len(t, td.Columns, 2, "a column of empty arrays is created")
	assert.Equal(t, Array{Shape: []int32{2, 0}, Doubles: []float64{}}, td.Rows[0][0])
	assert.Equal(t, Array{Shape: []int32{0, 5}, Doubles: []float64{}}, td.Rows[1][0])
	// the empty arrays fixed the column at 2 dimensions
	c.send(message(0, 1, append(blockHeader("two", 1, "a", qwp.TypeDoubleArray), wire{}.u8(0).u8(1).u32(0)...)))
	r := c.resp()
	assert.Equal(t, qwp.StatusSchemaMismatch, r.Status, r.Message)
}

func TestArrayColumnRefusals(t *testing.T) {
	allNullLongs := func(table, col string) []byte {
		return message(0, 1, append(blockHeader(table, 1, "v", qwp.TypeLong, col, qwp.TypeLongArray), wire{}.u8(0).i64(1).u8(1, 0x01)...))
	}
	cases := []struct {
		name  string
		frame []byte
		want  qwp.Status
		msg   string
	}{
		{"LONG_ARRAY in a new table", message(0, 1, append(blockHeader("fresh", 1, "la", qwp.TypeLongArray), wire{}.u8(0).u8(1).u32(1).i64(7)...)),
			qwp.StatusWriteError, "long arrays are not supported, only double arrays"},
		{"all-NULL LONG_ARRAY in a new table", allNullLongs("fresh", "la"), qwp.StatusWriteError, "long arrays are not supported"},
		{"all-NULL LONG_ARRAY as a new column", allNullLongs("base", "la"), qwp.StatusWriteError, "long arrays are not supported"},
		{"empty LONG_ARRAY as a new column", message(0, 1, append(blockHeader("base", 1, "la", qwp.TypeLongArray), wire{}.u8(0).u8(1).u32(0)...)),
			qwp.StatusWriteError, "long arrays are not supported"},
		// names are checked before types, as in QwpTudCache.getOrCreateTable
		{"LONG_ARRAY and a bad name in a new table", message(0, 1, append(blockHeader("fresh", 1, "a-b", qwp.TypeLong, "la", qwp.TypeLongArray), wire{}.u8(0).i64(1).u8(1, 0x01)...)),
			qwp.StatusInternalError, "failed to create table update details"},
		// an all-NULL array column is not created, but its name is still checked
		{"all-NULL DOUBLE_ARRAY with a bad new name", message(0, 1, append(blockHeader("base", 1, "v", qwp.TypeLong, "a-b", qwp.TypeDoubleArray), wire{}.u8(0).i64(1).u8(1, 0x01)...)),
			qwp.StatusWriteError, `new column name "a-b"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, Options{})
			c := dial(t, s, nil)
			c.send(longRows(0, "base", 1))
			c.ackedThrough(0)
			c.send(tc.frame)
			r := c.resp()
			assert.Equal(t, tc.want, r.Status, r.Message)
			assert.Contains(t, r.Message, tc.msg)
			assert.Equal(t, []string{"base"}, s.TableNames(), "no table was created")
			td, _ := s.Rows("base")
			assert.Len(t, td.Columns, 2, "no column was added")
		})
	}
}

func TestLogf(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	s := newServer(t, Options{Logf: func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, fmt.Sprintf(format, args...))
	}})
	c := dial(t, s, http.Header{"X-QWP-Client-Id": {"logger/1"}})
	c.send([]byte("junk-junk-junk"))
	assert.Equal(t, qwp.StatusParseError, c.resp().Status)
	c.close()
	require.Eventually(t, func() bool { return s.Connections() == 0 }, 10*time.Second, time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(lines, "\n")
	assert.Contains(t, all, `conn 1: open from 127.0.0.1:`)
	assert.Contains(t, all, `client "logger/1"`)
	assert.Contains(t, all, "conn 1: frame 0 refused with PARSE_ERROR: magic")
	assert.Contains(t, all, "conn 1: closed after 1 frames")
}

// QuestDB's NULL of a DOUBLE or FLOAT column is NaN, so a NaN arrives as
// NULL; infinities are values and stay.
func TestNaNStoredAsNull(t *testing.T) {
	s := newServer(t, Options{})
	c := dial(t, s, nil)
	c.send(message(0, 1, append(blockHeader("n", 3, "d", qwp.TypeDouble, "f", qwp.TypeFloat, "", qwp.TypeTimestamp),
		wire{}.u8(0).f64(math.NaN()).f64(math.Inf(1)).f64(2.5).
			u8(0).u32(math.Float32bits(float32(math.NaN()))).u32(math.Float32bits(1.5)).u32(math.Float32bits(float32(math.Inf(-1)))).
			u8(0).i64(1).i64(2).i64(3)...)))
	c.ackedThrough(0)
	td, _ := s.Rows("n")
	assert.Equal(t, [][]any{
		{nil, nil, int64(1)},
		{math.Inf(1), float32(1.5), int64(2)},
		{2.5, float32(math.Inf(-1)), int64(3)},
	}, td.Rows)
}

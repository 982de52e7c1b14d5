package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/questdbexporter/questdbexporter/qwp"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// syncBuffer is a concurrency-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var listenLine = regexp.MustCompile(`listening on (\S+)`)

func TestRunBadFlags(t *testing.T) {
	var out syncBuffer
	assert.Equal(t, 2, run(context.Background(), []string{"-nope"}, &out))
	assert.Contains(t, out.String(), "flag provided but not defined: -nope")
}

func TestRunCannotListen(t *testing.T) {
	var out syncBuffer
	assert.Equal(t, 1, run(context.Background(), []string{"-addr", "256.1.1.1:0"}, &out))
	assert.Contains(t, out.String(), "256.1.1.1:0")
}

// frame is one QWP message with rows LONG rows of table name.
func frame(t *testing.T, name string, rows int) []byte {
	t.Helper()
	e := qwp.NewEncoder(nil, qwp.EncoderOptions{})
	tb, err := e.Table(name)
	require.NoError(t, err)
	c, err := tb.Column("v", qwp.TypeLong)
	require.NoError(t, err)
	for i := range rows {
		tb.Long(c, int64(i))
		require.NoError(t, tb.EndRow())
	}
	return e.Finish(nil)
}

// ingest sends one frame over QWP and waits for its OK.
func ingest(t *testing.T, addr string, msg []byte) {
	t.Helper()
	ws, resp, err := websocket.DefaultDialer.Dial("ws://"+addr+"/api/v4/write", nil)
	require.NoError(t, err)
	defer ws.Close()
	assert.Equal(t, "1", resp.Header.Get("X-QWP-Version"))
	require.NoError(t, ws.WriteMessage(websocket.BinaryMessage, msg))
	_, b, err := ws.ReadMessage()
	require.NoError(t, err)
	var r qwp.Response
	require.NoError(t, qwp.DecodeResponse(b, &r))
	require.Equal(t, qwp.StatusOK, r.Status, r.Message)
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
}

func TestRunServesAndStops(t *testing.T) {
	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-summary-every", "5ms"}, &out) }()
	var addr string
	require.Eventually(t, func() bool {
		m := listenLine.FindStringSubmatch(out.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	}, 10*time.Second, 5*time.Millisecond)
	f := frame(t, "demo", 3)
	ingest(t, addr, f)
	var tables map[string]int64
	getJSON(t, "http://"+addr+"/tables", &tables)
	assert.Equal(t, map[string]int64{"demo": 3}, tables)
	var stats map[string]int64
	getJSON(t, "http://"+addr+"/stats", &stats)
	assert.Equal(t, map[string]int64{"frames": 1, "max_frame_bytes": int64(len(f))}, stats)
	// QuestDB's /exec is served on the same port
	var ddl map[string]string
	getJSON(t, "http://"+addr+"/exec?query="+url.QueryEscape(
		"CREATE TABLE IF NOT EXISTS keyed (ts TIMESTAMP_NS, k LONG) TIMESTAMP(ts) PARTITION BY DAY WAL DEDUP UPSERT KEYS(ts, k)"), &ddl)
	assert.Equal(t, map[string]string{"ddl": "OK"}, ddl)
	var tablesReply struct{ Dataset [][]any }
	getJSON(t, "http://"+addr+"/exec?query="+url.QueryEscape("SELECT table_name, dedup FROM tables()"), &tablesReply)
	assert.Equal(t, [][]any{{"demo", false}, {"keyed", true}}, tablesReply.Dataset)
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "rows: demo=3") }, 10*time.Second, 5*time.Millisecond)
	cancel()
	assert.Equal(t, 0, <-done)
	assert.Contains(t, out.String(), fmt.Sprintf("stopping: rows: demo=3 keyed=0; largest frame %d bytes", len(f)))
	assert.Contains(t, out.String(), "conn 1: open from")
}

func TestSummary(t *testing.T) {
	assert.Equal(t, "no tables", summary(nil))
	assert.Equal(t, "rows: a=1 b=20", summary(map[string]int64{"b": 20, "a": 1}))
}

// TestBinaryEndToEnd builds the command, runs it, ingests, queries and
// stops it with SIGINT.
func TestBinaryEndToEnd(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "qwpsink")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())

	cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var addr string
	for addr == "" {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "qwpsink exited before listening")
			if m := listenLine.FindStringSubmatch(l); m != nil {
				addr = m[1]
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatal("qwpsink did not report its address")
		}
	}
	ingest(t, addr, frame(t, "e2e", 2))
	var tables map[string]int64
	getJSON(t, "http://"+addr+"/tables", &tables)
	assert.Equal(t, map[string]int64{"e2e": 2}, tables)
	var td struct {
		Columns []struct{ Name, Type string }
		Rows    [][]any
	}
	getJSON(t, "http://"+addr+"/tables/e2e?limit=1", &td)
	require.Len(t, td.Rows, 1)
	assert.Equal(t, float64(0), td.Rows[0][0])
	assert.Equal(t, "LONG", td.Columns[0].Type)

	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	var rest []string
	for l := range lines {
		rest = append(rest, l)
	}
	require.NoError(t, cmd.Wait(), "exit code 0 after SIGINT")
	assert.Contains(t, strings.Join(rest, "\n"), "stopping: rows: e2e=2")
}

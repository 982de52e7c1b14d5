package questdbexporter

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gorilla/websocket"

	"github.com/questdbexporter/questdbexporter/internal/metadatatest"
	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
	"github.com/questdbexporter/questdbexporter/sender"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// fragmentRefusingServer stands for QuestDB facing a client that splits
// large messages into frames: it acknowledges every message up to over
// bytes and answers a larger one as QuestDB answers a fragment, with CLOSE
// 1002 "fragmented WebSocket frames are not supported", then drains what
// the client still sends until it hangs up.
type fragmentRefusingServer struct {
	over   int
	closes atomic.Int64
	srv    *httptest.Server
	wg     sync.WaitGroup
}

const fragmentReason = "fragmented WebSocket frames are not supported"

func newFragmentRefusingServer(t *testing.T, over int) *fragmentRefusingServer {
	t.Helper()
	fs := &fragmentRefusingServer{over: over}
	fs.srv = httptest.NewServer(http.HandlerFunc(fs.serve))
	t.Cleanup(func() {
		fs.srv.CloseClientConnections()
		fs.srv.Close()
		fs.wg.Wait()
	})
	return fs
}

func (fs *fragmentRefusingServer) addr() string { return fs.srv.Listener.Addr().String() }

func (fs *fragmentRefusingServer) serve(w http.ResponseWriter, r *http.Request) {
	fs.wg.Add(1)
	defer fs.wg.Done()
	ws, err := (&websocket.Upgrader{}).Upgrade(w, r, http.Header{qwp.HeaderVersion: {"1"}})
	if err != nil {
		return
	}
	defer ws.Close()
	ws.SetReadLimit(qwp.MaxMessageBytes)
	for seq := int64(0); ; seq++ {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			return
		}
		if len(msg) > fs.over {
			fs.closes.Add(1)
			_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseProtocolError, fragmentReason), time.Now().Add(time.Second))
			_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
			for {
				if _, _, err := ws.NextReader(); err != nil {
					return
				}
			}
		}
		if qwp.Deferred(msg) {
			continue // QuestDB withholds the OK until a frame commits the group
		}
		ok, _ := qwp.AppendOK(nil, seq, nil)
		if err := ws.WriteMessage(websocket.BinaryMessage, ok); err != nil {
			return
		}
	}
}

// TestExporterFragmentCloseIsPoisonFrame runs a real exporter, in SF mode,
// against a server that closes the connection with 1002 on every message
// over 64 KiB (what QuestDB does to a message gorilla split into frames):
// after max_frame_rejections the sender stops with PROTOCOL_VIOLATION,
// loudly (one error log per close with its code and reason, server_errors
// and sender_stopped, a permanent-error component status) and the frames
// stay on disk. The same slot, replayed to a conforming server, lands every
// row: nothing was lost and the large frames go out whole.
func TestExporterFragmentCloseIsPoisonFrame(t *testing.T) {
	const over = 64 << 10
	dir := t.TempDir()
	fs := newFragmentRefusingServer(t, over)
	cfg := testConfig(t, fs.addr())
	cfg.SFDir, cfg.SenderID = dir, "frag"
	cfg.CreateTables = false // the refusing server has no /exec
	cfg.MaxFrameRejections = 3
	e, tt, logs, host := startObserved(t, cfg)
	shut := false
	defer func() {
		if !shut {
			_ = e.Shutdown(context.Background())
		}
	}()

	// Small batches are acknowledged; the 4,000-point one makes a frame
	// well over 64 KiB.
	sizes := []int{10, 10, 4000, 10}
	base := 0
	for _, n := range sizes {
		if err := e.consumeMetrics(context.Background(), gaugeBatch(base, n)); err != nil {
			t.Fatal(err)
		}
		base += n
	}
	waitFor(t, func() bool { return e.sender.Err() != nil })
	var te *sender.TerminalError
	if !errors.As(e.sender.Err(), &te) || te.Category != qwp.CategoryProtocolViolation {
		t.Fatalf("sender error %v, want a PROTOCOL_VIOLATION terminal error", e.sender.Err())
	}
	if !strings.Contains(te.Error(), "1002") || !strings.Contains(te.Error(), fragmentReason) {
		t.Fatalf("terminal error %q does not name the close code and reason", te)
	}
	if n := fs.closes.Load(); n != int64(cfg.MaxFrameRejections) {
		for _, l := range logs.All() {
			t.Log(l.Message, l.ContextMap())
		}
		t.Fatalf("the server closed %d connections, want max_frame_rejections (%d): no endless replay", n, cfg.MaxFrameRejections)
	}
	if acked, published := e.queue.AckedFSN(), e.queue.PublishedFSN(); acked != te.FSN-1 || published <= acked {
		t.Fatalf("acked %d published %d, poison FSN %d: want the frames before it acknowledged and the rest kept", acked, published, te.FSN)
	}
	waitFor(t, func() bool {
		ev := host.last()
		return ev != nil && ev.Status() == componentstatus.StatusPermanentError
	})
	waitFor(t, func() bool {
		return logs.FilterMessage("questdb sender error").FilterLevelExact(zapcore.ErrorLevel).
			FilterFieldKey("error").Len() >= cfg.MaxFrameRejections
	})
	closeLogs := 0
	for _, l := range logs.FilterLevelExact(zapcore.ErrorLevel).All() {
		if err, _ := l.ContextMap()["error"].(string); strings.Contains(err, "close 1002") && strings.Contains(err, fragmentReason) && !strings.Contains(err, "PROTOCOL_VIOLATION") {
			closeLogs++
		}
	}
	if closeLogs != cfg.MaxFrameRejections {
		t.Fatalf("%d error logs name the close 1002 and its reason, want one per close (%d): %v", closeLogs, cfg.MaxFrameRejections, logs.All())
	}
	if n, _ := metricTotal(t, tt, "otelcol_exporter_questdb_server_errors", attribute.String("category", "unknown")); n != float64(cfg.MaxFrameRejections) {
		t.Fatalf("server_errors{category=unknown} = %v, want %d", n, cfg.MaxFrameRejections)
	}
	if n, _ := metricTotal(t, tt, "otelcol_exporter_questdb_sender_stopped"); n != 1 {
		t.Fatalf("sender_stopped = %v, want 1", n)
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Logf("shutdown: %v", err) // names the frames left in the slot
	}
	shut = true
	scan, err := sfqueue.ScanSlot(filepath.Join(dir, "frag"))
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, seg := range scan.Segments {
		for i := range seg.Frames {
			if seg.Base+uint64(i) >= te.FSN {
				kept++
			}
		}
	}
	if !scan.WatermarkOK || scan.Watermark.Acked != te.FSN-1 || kept < 2 {
		t.Fatalf("slot on disk: watermark %+v (ok %v), %d frames from FSN %d on; want acked %d and the refused frame and the one after it kept",
			scan.Watermark, scan.WatermarkOK, kept, te.FSN, te.FSN-1)
	}

	// The same slot against a conforming server: every row the refusing
	// server did not acknowledge (it stores nothing) lands, once.
	firstKept := sizes[0] + sizes[1]
	srv := newServer(t, qwptest.Options{})
	cfg2 := testConfig(t, srv.Addr())
	cfg2.SFDir, cfg2.SenderID = dir, "frag"
	r := startExporter(t, cfg2, newStatusHost())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.WaitRows(ctx, "otel_metrics_gauge", int64(base-firstKept)); err != nil {
		t.Fatal(err)
	}
	ids := serverIDs(t, srv, "otel_metrics_gauge")
	if len(ids) != base-firstKept {
		t.Fatalf("%d distinct rows, want %d", len(ids), base-firstKept)
	}
	for id := firstKept; id < base; id++ {
		if ids[id] != 1 {
			t.Fatalf("row %d stored %d times, want once", id, ids[id])
		}
	}
	if r.sender.Err() != nil {
		t.Fatal(r.sender.Err())
	}
}

// TestExporterLargeFramesLandOnConformingServer is the load of
// TestExporterFragmentCloseIsPoisonFrame against a conforming server: every
// row lands, the large frame included.
func TestExporterLargeFramesLandOnConformingServer(t *testing.T) {
	srv := newServer(t, qwptest.Options{})
	cfg := testConfig(t, srv.Addr())
	cfg.SFDir, cfg.SenderID = t.TempDir(), "frag"
	e := startExporter(t, cfg, newStatusHost())
	base := 0
	for _, n := range []int{10, 10, 4000, 10} {
		if err := e.consumeMetrics(context.Background(), gaugeBatch(base, n)); err != nil {
			t.Fatal(err)
		}
		base += n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.WaitRows(ctx, "otel_metrics_gauge", int64(base)); err != nil {
		t.Fatal(err)
	}
	ids := serverIDs(t, srv, "otel_metrics_gauge")
	for id := range base {
		if ids[id] != 1 {
			t.Fatalf("row %d stored %d times, want once", id, ids[id])
		}
	}
	if err := e.sender.Err(); err != nil {
		t.Fatal(err)
	}
}

// startObserved builds and starts an instance for cfg with telemetry, logs
// (Info and up) and component status a test can read; the caller shuts it
// down.
func startObserved(t *testing.T, cfg *Config) (*questdbExporter, *componenttest.Telemetry, *observer.ObservedLogs, *statusHost) {
	t.Helper()
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	set := metadatatest.NewSettings(tt)
	core, logs := observer.New(zapcore.InfoLevel)
	set.Logger = zap.New(core)
	host := newStatusHost()
	inst, err := newInstance(cfg, set)
	if err != nil {
		t.Fatal(err)
	}
	e := inst.(*questdbExporter)
	if err := e.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	return e, tt, logs, host
}

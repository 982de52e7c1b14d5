package questdbexporter

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/questdbexporter/questdbexporter/internal/metadata"
	"github.com/questdbexporter/questdbexporter/sender"
)

// TestOTLPReceiverBackpressure wires a real OTLP receiver (HTTP and gRPC on
// 127.0.0.1) to the exporter with a tiny memory queue that nothing drains
// (the QuestDB endpoint refuses connections) under on_full: block. Once the
// queue is full, OTLP/HTTP must answer 429 with Retry-After and OTLP/gRPC
// ResourceExhausted with RetryInfo, both saying the wire is reconnecting:
// the source keeps its data and comes back later.
func TestOTLPReceiverBackpressure(t *testing.T) {
	reg := newRegistry(newInstance)
	f := newFactory(reg)
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.Endpoints = []string{closedPort(t)}
	cfg.SFDir = ""
	cfg.MaxBatchBytes = minMaxBatchBytes
	cfg.SFMaxSegmentBytes = minMaxBatchBytes + segmentOverheadBytes
	cfg.SFMaxTotalBytes = 2 * cfg.SFMaxSegmentBytes
	cfg.SFAppendDeadline = 20 * time.Millisecond
	cfg.OnFull = "block"
	cfg.CloseFlushTimeout = 0
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	set := exportertest.NewNopSettings(metadata.Type)
	exp := startMetricsExporter(t, f, set, cfg)
	inst := reg.entries[set.ID].inst.(*questdbExporter)
	waitFor(t, func() bool {
		inst.status.mu.Lock()
		defer inst.status.mu.Unlock()
		return inst.status.conn.Kind == sender.Reconnecting
	})

	httpAddr, grpcAddr := freeAddr(t), freeAddr(t)
	rf := otlpreceiver.NewFactory()
	rcfg := rf.CreateDefaultConfig().(*otlpreceiver.Config)
	rcfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = httpAddr
	rcfg.Protocols.GRPC.GetOrInsertDefault().NetAddr.Endpoint = grpcAddr
	rcv, err := rf.CreateMetrics(ctx, receivertest.NewNopSettings(component.MustNewType("otlp")), rcfg, exp)
	if err != nil {
		t.Fatal(err)
	}
	if err := rcv.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := rcv.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()

	post := func(base int) *http.Response {
		body, err := pmetricotlp.NewExportRequestFromMetrics(gaugeBatch(base, 500)).MarshalProto()
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post("http://"+httpAddr+"/v1/metrics", "application/x-protobuf", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var refused *http.Response
	for i := 0; i < 50 && refused == nil; i++ {
		resp := post(i * 1000)
		switch resp.StatusCode {
		case http.StatusOK:
			resp.Body.Close()
		case http.StatusTooManyRequests:
			refused = resp
		default:
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			t.Fatalf("POST %d: HTTP %d %q, want 200 until the queue is full, then 429", i, resp.StatusCode, b)
		}
	}
	if refused == nil {
		t.Fatal("the queue never filled: no 429 after 50 requests")
	}
	body, _ := io.ReadAll(refused.Body)
	refused.Body.Close()
	ra, err := strconv.Atoi(refused.Header.Get("Retry-After"))
	if err != nil || ra < 1 {
		t.Fatalf("429 with Retry-After %q, want a positive number of seconds", refused.Header.Get("Retry-After"))
	}
	if !strings.Contains(string(body), "reconnecting") || !strings.Contains(string(body), "attempts since") {
		t.Fatalf("429 body %q does not say the wire is reconnecting (attempts, outage start)", body)
	}

	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pmetricotlp.NewGRPCClient(conn)
	for i := 0; i < 50 && err == nil; i++ {
		_, err = client.Export(ctx, pmetricotlp.NewExportRequestFromMetrics(gaugeBatch(1_000_000+i*1000, 500)))
	}
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("gRPC export into a full queue: %v, want ResourceExhausted", err)
	}
	var info *errdetails.RetryInfo
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			info = ri
		}
	}
	if info == nil || info.GetRetryDelay().AsDuration() <= 0 {
		t.Fatalf("ResourceExhausted without a positive RetryInfo: details %v", st.Details())
	}
	if !strings.Contains(st.Message(), "reconnecting") {
		t.Fatalf("gRPC status message %q does not say the wire is reconnecting", st.Message())
	}
}

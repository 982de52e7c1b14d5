package main

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"testing"
)

func post(t *testing.T, url, encoding string, body []byte) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestOTLPSinkCountsItems(t *testing.T) {
	s, err := newOTLPSink()
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	defer http.DefaultClient.CloseIdleConnections()
	metrics, err := newMetricsPayload(0).marshal(0)
	if err != nil {
		t.Fatal(err)
	}
	logs, err := newLogsPayload().marshal(0)
	if err != nil {
		t.Fatal(err)
	}
	traces, err := newTracesPayload().marshal(0)
	if err != nil {
		t.Fatal(err)
	}
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	if _, err := zw.Write(metrics); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.addr
	if code := post(t, base+"/v1/metrics", "gzip", zipped.Bytes()); code != http.StatusOK {
		t.Fatalf("gzip metrics: %d", code)
	}
	if code := post(t, base+"/v1/logs", "", logs); code != http.StatusOK {
		t.Fatalf("logs: %d", code)
	}
	if code := post(t, base+"/v1/traces", "", traces); code != http.StatusOK {
		t.Fatalf("traces: %d", code)
	}
	if got := s.received(); got != 3*itemsPerRequest {
		t.Fatalf("received %d items, want %d", got, 3*itemsPerRequest)
	}
	// What it cannot read is refused and counted, never counted as items.
	if code := post(t, base+"/v1/metrics", "zstd", metrics); code != http.StatusBadRequest {
		t.Fatalf("zstd: %d, want 400", code)
	}
	if code := post(t, base+"/v1/logs", "gzip", logs); code != http.StatusBadRequest {
		t.Fatalf("logs not gzipped, marked gzip: %d, want 400", code)
	}
	if code := post(t, base+"/v1/metrics", "", []byte{0xff, 0xff, 0xff}); code != http.StatusBadRequest {
		t.Fatalf("garbage: %d, want 400", code)
	}
	if code := post(t, base+"/v1/traces", "", []byte{0xff, 0xff, 0xff}); code != http.StatusBadRequest {
		t.Fatalf("garbage traces: %d, want 400", code)
	}
	if got, errs := s.received(), s.errors.Load(); got != 3*itemsPerRequest || errs != 4 {
		t.Fatalf("after bad requests: %d items, %d errors; want %d, 4", got, errs, 3*itemsPerRequest)
	}
}

package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	def := 70 * time.Millisecond
	for h, want := range map[string]time.Duration{
		"":                              def,
		"3":                             3 * time.Second,
		"0":                             0,
		"-1":                            def,
		"soon":                          def,
		"Tue, 01 Dec 2026 12:00:05 GMT": 5 * time.Second,
		"Tue, 01 Dec 2026 11:59:00 GMT": 0, // already past
	} {
		if got := retryAfter(h, now, def); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", h, got, want)
		}
	}
}

// fixedPayload is a payload of one fixed byte.
type fixedPayload struct{}

func (fixedPayload) marshal(int64) ([]byte, error) { return []byte("x"), nil }
func (fixedPayload) path() string                  { return "/v1/metrics" }

// serve answers each request with the status that answer returns for the
// n-th request (from 1).
func serve(t *testing.T, answer func(n int64, w http.ResponseWriter) int) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(answer(n.Add(1), w))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestGeneratorRetriesAndCounts(t *testing.T) {
	srv, n := serve(t, func(n int64, w http.ResponseWriter) int {
		switch n {
		case 1:
			w.Header().Set("Retry-After", "0")
			return http.StatusTooManyRequests
		case 2:
			return http.StatusServiceUnavailable // no Retry-After: backoff
		default:
			return http.StatusOK
		}
	})
	g := &generator{endpoint: srv.URL, hc: srv.Client(), requests: 5, concurrency: 1, newPayload: func() payload { return fixedPayload{} }}
	res, err := g.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := loadResult{requests: 5, accepted: 5 * itemsPerRequest, retries: 2}
	if res != want {
		t.Fatalf("result %+v, want %+v", res, want)
	}
	if n.Load() != 7 {
		t.Fatalf("server saw %d requests, want 7 (5 + 2 retries)", n.Load())
	}
}

func TestGeneratorHonoursRetryAfter(t *testing.T) {
	srv, _ := serve(t, func(n int64, w http.ResponseWriter) int {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			return http.StatusTooManyRequests
		}
		return http.StatusOK
	})
	g := &generator{endpoint: srv.URL, hc: srv.Client(), requests: 1, concurrency: 1, newPayload: func() payload { return fixedPayload{} }}
	start := time.Now()
	res, err := g.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("retried after %v, before the 1 s Retry-After", waited)
	}
	if res.accepted != itemsPerRequest || res.retries != 1 {
		t.Fatalf("result %+v", res)
	}
}

func TestGeneratorCountsRefusals(t *testing.T) {
	srv, _ := serve(t, func(n int64, _ http.ResponseWriter) int {
		if n%2 == 0 {
			return http.StatusBadRequest
		}
		return http.StatusOK
	})
	g := &generator{endpoint: srv.URL, hc: srv.Client(), requests: 10, concurrency: 3, newPayload: func() payload { return fixedPayload{} }}
	res, err := g.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.requests != 5 || res.rejected != 5 || res.accepted != 5*itemsPerRequest || res.retries != 0 {
		t.Fatalf("result %+v, want 5 accepted and 5 refused requests", res)
	}
}

func TestGeneratorGivesUpWithTheContext(t *testing.T) {
	srv, _ := serve(t, func(int64, http.ResponseWriter) int { return http.StatusServiceUnavailable })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	g := &generator{endpoint: srv.URL, hc: srv.Client(), requests: 1, concurrency: 1, newPayload: func() payload { return fixedPayload{} },
		maxBackoff: 20 * time.Millisecond}
	res, err := g.run(ctx)
	if err == nil {
		t.Fatal("a request never accepted returned no error")
	}
	if res.accepted != 0 || res.retries == 0 {
		t.Fatalf("result %+v", res)
	}
}

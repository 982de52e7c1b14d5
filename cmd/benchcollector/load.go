package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// loadResult is what the clients of one run did.
type loadResult struct {
	requests int64 // requests the collector accepted (2xx)
	accepted int64 // items in those requests
	rejected int64 // requests refused with a status that is not retryable
	retries  int64 // 429/503 answers and transport errors, each retried
}

// generator posts a bounded number of requests from a number of concurrent
// clients, the way an OTLP/HTTP exporter does: protobuf bodies, 429 and 503
// retried after the Retry-After the collector asks for (or a capped backoff
// without one).
type generator struct {
	endpoint    string // http://host:port
	hc          *http.Client
	requests    int64
	concurrency int
	newPayload  func() payload
	maxBackoff  time.Duration // backoff cap without Retry-After; 0 means 2 s
}

// run sends the requests and returns when every one is answered, refused or
// ctx ends (the first error then).
func (g *generator) run(ctx context.Context) (loadResult, error) {
	var (
		next     atomic.Int64
		res      loadResult
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	for range g.concurrency {
		p := g.newPayload()
		wg.Go(func() {
			var mine loadResult
			err := func() error {
				for {
					i := next.Add(1) - 1
					if i >= g.requests {
						return nil
					}
					body, err := p.marshal(i)
					if err != nil {
						return err
					}
					if err := g.post(ctx, p.path(), body, &mine); err != nil {
						return err
					}
				}
			}()
			mu.Lock()
			defer mu.Unlock()
			res.requests += mine.requests
			res.accepted += mine.accepted
			res.rejected += mine.rejected
			res.retries += mine.retries
			if err != nil && firstErr == nil {
				firstErr = err
			}
		})
	}
	wg.Wait()
	return res, firstErr
}

// post sends one request until the collector accepts or refuses it for good,
// and accounts for it in res.
func (g *generator) post(ctx context.Context, path string, body []byte, res *loadResult) error {
	backoff := 50 * time.Millisecond
	maxBackoff := g.maxBackoff
	if maxBackoff == 0 {
		maxBackoff = 2 * time.Second
	}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.endpoint+path, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-protobuf")
		wait := backoff
		resp, err := g.hc.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			switch {
			case resp.StatusCode/100 == 2:
				res.requests++
				res.accepted += itemsPerRequest
				return nil
			case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
				wait = retryAfter(resp.Header.Get("Retry-After"), time.Now(), backoff)
			default:
				res.rejected++
				return nil
			}
		} else if ctx.Err() != nil {
			return ctx.Err()
		}
		res.retries++
		select {
		case <-ctx.Done():
			return fmt.Errorf("request to %s still not accepted: %w", path, ctx.Err())
		case <-time.After(wait):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// retryAfter is the wait a Retry-After header asks for (delay-seconds or an
// HTTP-date, RFC 9110 10.2.3), or def when it is absent or unreadable.
func retryAfter(h string, now time.Time, def time.Duration) time.Duration {
	if h == "" {
		return def
	}
	if s, err := strconv.Atoi(h); err == nil {
		if s < 0 {
			return def
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0)
	}
	return def
}

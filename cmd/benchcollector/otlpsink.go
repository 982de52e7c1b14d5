package main

import (
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// otlpSink is the otlp_http exporter's destination: an OTLP/HTTP server
// that decodes every protobuf request (gzip or uncompressed) and counts the
// data points, log records and spans in it.
type otlpSink struct {
	srv    *http.Server
	addr   string
	items  atomic.Int64
	errors atomic.Int64 // requests it could not decode (answered 400)
	done   chan struct{}
}

// newOTLPSink listens on a free loopback port and serves until close.
func newOTLPSink() (*otlpSink, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &otlpSink{addr: l.Addr().String(), done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/metrics", s.handle(func(b []byte) (int, []byte, error) {
		req := pmetricotlp.NewExportRequest()
		if err := req.UnmarshalProto(b); err != nil {
			return 0, nil, err
		}
		resp, err := pmetricotlp.NewExportResponse().MarshalProto()
		return req.Metrics().DataPointCount(), resp, err
	}))
	mux.HandleFunc("POST /v1/logs", s.handle(func(b []byte) (int, []byte, error) {
		req := plogotlp.NewExportRequest()
		if err := req.UnmarshalProto(b); err != nil {
			return 0, nil, err
		}
		resp, err := plogotlp.NewExportResponse().MarshalProto()
		return req.Logs().LogRecordCount(), resp, err
	}))
	mux.HandleFunc("POST /v1/traces", s.handle(func(b []byte) (int, []byte, error) {
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(b); err != nil {
			return 0, nil, err
		}
		resp, err := ptraceotlp.NewExportResponse().MarshalProto()
		return req.Traces().SpanCount(), resp, err
	}))
	s.srv = &http.Server{Handler: mux}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(l)
	}()
	return s, nil
}

// handle decodes a request body with decode (which returns the items in it
// and the response body) and counts the items.
func (s *otlpSink) handle(decode func([]byte) (int, []byte, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n, resp, err := readAndDecode(r, decode)
		if err != nil {
			s.errors.Add(1)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.items.Add(int64(n))
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(resp)
	}
}

func readAndDecode(r *http.Request, decode func([]byte) (int, []byte, error)) (int, []byte, error) {
	var body io.Reader = r.Body
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return 0, nil, err
		}
		defer zr.Close()
		body = zr
	default:
		return 0, nil, fmt.Errorf("content encoding %q not supported by the sink (use gzip or none)", enc)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return 0, nil, err
	}
	return decode(b)
}

// received is the number of items decoded so far.
func (s *otlpSink) received() int64 { return s.items.Load() }

func (s *otlpSink) close() error {
	err := s.srv.Close()
	<-s.done
	return err
}

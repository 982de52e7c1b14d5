package questdbexporter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/sender"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

func TestReceiverError(t *testing.T) {
	outage := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		err       error
		code      codes.Code
		retry     time.Duration // 0: no RetryInfo expected
		permanent bool
		contains  []string
	}{
		{name: "full while publishing", err: &sfqueue.FullError{Reason: sfqueue.Publishing, Used: 10, Cap: 10},
			code: codes.ResourceExhausted, retry: retryAfterPublishing, contains: []string{"publishing"}},
		{name: "full while reconnecting", err: fmt.Errorf("wrapped: %w", &sfqueue.FullError{Reason: sfqueue.Reconnecting, Attempts: 7, OutageStart: outage}),
			code: codes.ResourceExhausted, retry: retryAfterReconnect, contains: []string{"reconnecting", "7 attempts", "2026-11-30T12:00:00Z"}},
		{name: "disk full", err: &sfqueue.FullError{Reason: sfqueue.DiskFull},
			code: codes.ResourceExhausted, retry: retryAfterReconnect, contains: []string{"no space"}},
		{name: "terminal sender", err: &sender.TerminalError{Category: qwp.CategorySecurityError, Err: errors.New("401 on upgrade")},
			code: codes.Unavailable, retry: retryAfterUnavailable, contains: []string{"SECURITY_ERROR", "401 on upgrade"}},
		{name: "fatal queue", err: &sfqueue.FatalError{Op: "fsync x", Err: errors.New("EIO")},
			code: codes.Unavailable, retry: retryAfterUnavailable, contains: []string{"EIO"}},
		{name: "closed queue", err: sfqueue.ErrClosed, code: codes.Unavailable, retry: retryAfterUnavailable},
		{name: "writer closed", err: errWriterClosed, code: codes.Unavailable, retry: retryAfterUnavailable},
		{name: "caller deadline", err: fmt.Errorf("gave up: %w", context.DeadlineExceeded), code: codes.DeadlineExceeded},
		{name: "unknown", err: errors.New("something odd"), code: codes.Unavailable, retry: retryAfterUnavailable, contains: []string{"something odd"}},
		{name: "permanent passes through", err: consumererror.NewPermanent(errors.New("bad batch")), code: codes.Unknown, permanent: true},
		{name: "frame larger than a segment", err: &sfqueue.FrameTooLargeError{FrameBytes: 10, SegmentBytes: 5}, code: codes.Unknown, permanent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := receiverError(tt.err)
			if consumererror.IsPermanent(got) != tt.permanent {
				t.Fatalf("permanent = %v, want %v (%v)", consumererror.IsPermanent(got), tt.permanent, got)
			}
			if tt.permanent {
				return
			}
			st, ok := status.FromError(got)
			if !ok || st.Code() != tt.code {
				t.Fatalf("%v: code %v, want %v", got, st.Code(), tt.code)
			}
			var retry time.Duration
			for _, d := range st.Details() {
				if ri, ok := d.(*errdetails.RetryInfo); ok {
					retry = ri.GetRetryDelay().AsDuration()
				}
			}
			if retry != tt.retry {
				t.Fatalf("RetryInfo %v, want %v", retry, tt.retry)
			}
			for _, s := range tt.contains {
				if !strings.Contains(st.Message(), s) {
					t.Fatalf("message %q does not contain %q", st.Message(), s)
				}
			}
		})
	}
	if receiverError(nil) != nil {
		t.Fatal("nil error mapped to non-nil")
	}
}

package questdbexporter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/questdbexporter/questdbexporter/sender"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// Retry delays the exporter asks receivers' clients to wait (RetryInfo,
// which the OTLP receiver turns into Retry-After). A queue that is draining
// frees room within seconds; an outage or a stopped sender needs longer.
const (
	retryAfterPublishing  = time.Second
	retryAfterReconnect   = 5 * time.Second
	retryAfterUnavailable = 10 * time.Second
)

// errNotStarted and errShutDown answer a consume call outside Start and
// Shutdown.
var (
	errNotStarted = errors.New("questdb exporter: not started")
	errShutDown   = errors.New("questdb exporter: shut down")
)

// receiverError maps an error of the write path onto what the collector's
// receivers understand. The data was not stored, so the source must keep it
// and come back: every condition that can clear by itself is a gRPC status
// with RetryInfo (OTLP/gRPC: the code and RetryInfo as they are; OTLP/HTTP:
// 429 or 503 with Retry-After). Never consumererror.NewPermanent for those:
// a receiver drops permanent failures.
//
//   - a full queue under on_full: block: ResourceExhausted (HTTP 429), the
//     message saying whether the wire is publishing or reconnecting;
//   - a stopped sender (terminal server error, refused authentication), a
//     closed or failed queue, a shut-down exporter: Unavailable (HTTP 503);
//   - the caller's own deadline: DeadlineExceeded, also retryable;
//   - a batch that cannot be converted (already permanent) passes through.
func receiverError(err error) error {
	if err == nil {
		return nil
	}
	var full *sfqueue.FullError
	var term *sender.TerminalError
	var fatal *sfqueue.FatalError
	var tooLarge *sfqueue.FrameTooLargeError
	switch {
	case consumererror.IsPermanent(err):
		return err
	case errors.As(err, &tooLarge):
		// max_batch_bytes against sf_max_segment_bytes: a configuration
		// error that retrying cannot fix.
		return consumererror.NewPermanent(err)
	case errors.As(err, &full):
		delay := retryAfterPublishing
		if full.Reason != sfqueue.Publishing {
			delay = retryAfterReconnect
		}
		return retryStatus(codes.ResourceExhausted, delay, "questdb exporter: %v; retry after %v", err, delay)
	case errors.As(err, &term):
		return retryStatus(codes.Unavailable, retryAfterUnavailable,
			"questdb exporter: the sender stopped (%v, %v); data is kept in the queue, fix the cause and restart the collector", term.Category, err)
	case errors.As(err, &fatal):
		return retryStatus(codes.Unavailable, retryAfterUnavailable, "questdb exporter: the queue stopped after an I/O failure: %v", err)
	case errors.Is(err, sfqueue.ErrClosed), errors.Is(err, errWriterClosed), errors.Is(err, errShutDown), errors.Is(err, errNotStarted):
		return retryStatus(codes.Unavailable, retryAfterUnavailable, "questdb exporter: not accepting data: %v", err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return retryStatus(codes.Unavailable, retryAfterUnavailable, "questdb exporter: %v", err)
}

// reportedOnce tells the errors of the write path that the exporter already
// reports once per condition — a full queue (the level alert and the
// component status), a stopped sender (its error log and status), a queue
// latched by an I/O failure (its error log), the exporter shutting down, a
// caller that gave up — from those nothing else logs. A refused request is
// not logged per request (see helperSettings).
func reportedOnce(err error) bool {
	var full *sfqueue.FullError
	var term *sender.TerminalError
	var fatal *sfqueue.FatalError
	return errors.As(err, &full) || errors.As(err, &term) || errors.As(err, &fatal) ||
		errors.Is(err, sfqueue.ErrClosed) || errors.Is(err, errWriterClosed) || errors.Is(err, errShutDown) ||
		errors.Is(err, errNotStarted) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// logLimiter lets a line through at most once per interval and counts the
// ones it held back. Safe for concurrent use.
type logLimiter struct {
	interval time.Duration
	mu       sync.Mutex
	last     time.Time
	held     int
}

// allow reports whether a line may be logged at now, and how many were held
// back since the last one.
func (l *logLimiter) allow(now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < l.interval {
		l.held++
		return false, 0
	}
	held := l.held
	l.last, l.held = now, 0
	return true, held
}

// retryStatus is a gRPC status error carrying RetryInfo.
func retryStatus(code codes.Code, delay time.Duration, format string, args ...any) error {
	st := status.New(code, fmt.Sprintf(format, args...))
	withInfo, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)})
	if err != nil {
		return st.Err()
	}
	return withInfo.Err()
}

package sender

import (
	"math/rand/v2"
	"time"
)

// backoff computes reconnect delays: capped exponential growth with full
// jitter, so that many senders recovering from one outage spread their
// attempts instead of arriving together.
type backoff struct {
	initial, max time.Duration
	failures     int // consecutive failures since the last progress
	rand         func(n int64) int64
}

func newBackoff(initial, max time.Duration) *backoff {
	return &backoff{initial: initial, max: max, rand: rand.Int64N}
}

// MinDelay is the shortest delay between two connection attempts, whatever
// the options say: a zero or nanosecond backoff (a bare integer in YAML is
// nanoseconds) would otherwise retry thousands of times a second.
const MinDelay = time.Millisecond

// next records one more failure and returns the delay before the next
// attempt: a uniform draw from [0, min(max, initial*2^(failures-1))], and
// never below MinDelay.
func (b *backoff) next() time.Duration {
	ceiling := b.ceiling()
	if ceiling <= 0 {
		return MinDelay
	}
	return max(time.Duration(b.rand(int64(ceiling)+1)), MinDelay)
}

// nextLong records one more failure and returns a delay drawn from the
// upper half, [c/2, c] with c = min(max, initial*2^(failures-1)): for
// refusals that a retry soon cannot cure (credentials), where a full-jitter
// draw near zero would only knock again at once.
func (b *backoff) nextLong() time.Duration {
	ceiling := b.ceiling()
	if ceiling <= 0 {
		return MinDelay
	}
	half := ceiling / 2
	return max(half+time.Duration(b.rand(int64(ceiling-half)+1)), MinDelay)
}

// ceiling records one more failure and returns the cap of the next draw.
func (b *backoff) ceiling() time.Duration {
	b.failures++
	ceiling := b.max
	// Past 2^30 the shift would overflow long before any sane cap.
	if shift := b.failures - 1; shift < 30 {
		if d := b.initial << shift; d > 0 && d < ceiling {
			ceiling = d
		}
	}
	return ceiling
}

// jitter is a uniform draw from [0, d], never below MinDelay.
func (b *backoff) jitter(d time.Duration) time.Duration {
	return max(time.Duration(b.rand(int64(max(d, 0))+1)), MinDelay)
}

// reset forgets earlier failures after the connection made progress.
func (b *backoff) reset() { b.failures = 0 }

// retryAfterDelay is the delay an upgrade's Retry-After asks for, capped so
// that a misconfigured proxy cannot park the sender for hours. It never
// shortens the jittered backoff: the server's request is a minimum.
func retryAfterDelay(retryAfter, limit, jittered time.Duration) time.Duration {
	if retryAfter > limit {
		retryAfter = limit
	}
	return max(retryAfter, jittered)
}

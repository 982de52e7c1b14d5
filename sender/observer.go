package sender

import (
	"time"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// Observer receives the sender's telemetry; the exporter forwards it to its
// metrics. Methods are called from the sender's goroutines and must not block.
// Embed NopObserver to implement only some of them.
type Observer interface {
	FramesSent(n int)     // stored frames written to a connection
	FramesReplayed(n int) // of those, frames already sent on an earlier connection
	FramesAcked(n int)    // frames released from the queue by (durable) acks
	AckLatency(d time.Duration)
	InFlight(n int) // data frames sent and not yet confirmed by an OK
	ReconnectAttempt()
	ReconnectSuccess()
	ServerError(c qwp.Category)
	DictionarySize(entries int) // dictionary ids the latest connection's catch-up registered
	DrainerStarted()
	DrainerSucceeded()
	DrainerFailed()
}

// NopObserver ignores everything.
type NopObserver struct{}

var _ Observer = NopObserver{}

func (NopObserver) FramesSent(int)           {}
func (NopObserver) FramesReplayed(int)       {}
func (NopObserver) FramesAcked(int)          {}
func (NopObserver) AckLatency(time.Duration) {}
func (NopObserver) InFlight(int)             {}
func (NopObserver) ReconnectAttempt()        {}
func (NopObserver) ReconnectSuccess()        {}
func (NopObserver) ServerError(qwp.Category) {}
func (NopObserver) DictionarySize(int)       {}
func (NopObserver) DrainerStarted()          {}
func (NopObserver) DrainerSucceeded()        {}
func (NopObserver) DrainerFailed()           {}

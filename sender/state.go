package sender

import (
	"time"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// StateKind is the phase of the sender's connection.
type StateKind int

// Connection phases, reported through Options.OnState.
const (
	// Connecting: the first connection attempt since Start is under way.
	Connecting StateKind = iota
	// Connected: a connection is up and frames flow.
	Connected
	// Reconnecting: the connection was lost (or never made) and the loop is
	// backing off between attempts.
	Reconnecting
	// Terminal: the sender stopped sending for good; every unacknowledged
	// frame stays in the queue. Err says why.
	Terminal
)

func (k StateKind) String() string {
	switch k {
	case Connecting:
		return "connecting"
	case Connected:
		return "connected"
	case Reconnecting:
		return "reconnecting"
	case Terminal:
		return "terminal"
	}
	return "unknown"
}

// State is one transition of the connection, for component status reporting.
type State struct {
	Kind     StateKind
	Reason   string    // why the state was entered, for humans
	Endpoint string    // the endpoint involved, if any
	Attempts int       // failed attempts since the connection was last healthy
	Since    time.Time // when the current outage (or connection) began
	Err      error     // the failure behind Reconnecting or Terminal
}

// EventKind classifies an error-inbox entry.
type EventKind int

// Kinds of error-inbox entries.
const (
	// EventServerError: the server answered a frame with an error status.
	EventServerError EventKind = iota
	// EventConnect: an upgrade was refused in a way that needs attention
	// (authentication, role, version, unconfirmed durable ack).
	EventConnect
	// EventTerminal: the sender stopped; its frames stay queued.
	EventTerminal
	// EventDataLoss: the queue's recovery set an unreplayable slot aside.
	EventDataLoss
)

func (k EventKind) String() string {
	switch k {
	case EventServerError:
		return "server_error"
	case EventConnect:
		return "connect_error"
	case EventTerminal:
		return "terminal"
	case EventDataLoss:
		return "data_loss"
	}
	return "unknown"
}

// Event is one entry of the error inbox.
type Event struct {
	Time     time.Time
	Kind     EventKind
	Category qwp.Category // for server errors, terminal errors and data loss
	Status   qwp.Status   // the server's status byte of a server error
	Policy   qwp.Policy   // the policy applied to a server error
	FSN      uint64       // the rejected frame; 0 when none or a dictionary frame
	Endpoint string
	Err      error
}

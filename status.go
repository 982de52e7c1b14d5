package questdbexporter

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"

	"github.com/questdbexporter/questdbexporter/sender"
)

// statusReporter turns the sender's connection state and the queue level
// into component status events (componentstatus.ReportStatus through the
// host), reporting only changes.
//
// The collector's status model has no "degraded but doing its job": a
// component is OK, in a RecoverableError, or in a PermanentError, which can
// only be left by stopping (the collector's status FSM). The exporter keeps
// accepting data through every condition it can ride out, so those are
// RecoverableError, however long they last; PermanentError means it stopped
// doing its job until a person acts and restarts it. Health checks should
// not probe on either (README, Probes and the health check): a restart
// does not end an outage.
//
//   - PermanentError once the queue latched an I/O failure (a failed fsync
//     or write): nothing new is accepted until a restart reopens the slot;
//   - PermanentError while the sender is terminal (a server error whose
//     policy is terminal, an unconfirmed durable ack): it will not recover
//     without a fix and a restart;
//   - RecoverableError while the queue is full (new data is refused or the
//     oldest evicted) or the sender is reconnecting (an outage, or refused
//     credentials, which the sender retries), naming the condition;
//   - RecoverableError while set-aside slots (DATA_LOSS) are present under
//     sf_dir, naming them (with the outage, during a reconnect):
//     recoverable, not permanent, so that health checks do not restart a
//     collector that is working; it clears once an operator removed them;
//   - RecoverableError while connected but a table lacks the dedup keys
//     the exporter wants (QuestDB refused its CREATE TABLE, or it exists
//     without them): rows flow, replays can duplicate them;
//   - OK while connected, the tables have their keys and the queue has room.
//
// Safe for concurrent use: the sender's OnState and the monitor both feed it.
type statusReporter struct {
	host component.Host

	mu       sync.Mutex
	conn     sender.State
	haveConn bool
	full     bool
	evict    bool
	ddl      error    // what the last table check found wrong, nil when nothing
	aside    []string // set-aside slots under sf_dir
	fatal    error    // the queue's latched I/O failure
	last     string   // the condition last reported
}

func newStatusReporter(host component.Host, evict bool) *statusReporter {
	return &statusReporter{host: host, evict: evict}
}

// connState records a sender state transition.
func (r *statusReporter) connState(s sender.State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conn, r.haveConn = s, true
	r.reportLocked()
}

// queueLevel records the queue level after a monitor sample.
func (r *statusReporter) queueLevel(l queueLevel) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.full = l == levelFull
	r.reportLocked()
}

// queueFatal records the queue's latched I/O failure (nil: none).
func (r *statusReporter) queueFatal(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fatal = err
	r.reportLocked()
}

// setAside records the set-aside slots found under sf_dir.
func (r *statusReporter) setAside(names []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.aside = names
	r.reportLocked()
}

// ddlOutcome records what the table creator found on a connection: nil
// when every table has its dedup keys.
func (r *statusReporter) ddlOutcome(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ddl = err
	r.reportLocked()
}

// reportLocked computes the current event and reports it when the
// condition changed.
func (r *statusReporter) reportLocked() {
	ev, key := r.eventLocked()
	if ev == nil || key == r.last {
		return
	}
	r.last = key
	componentstatus.ReportStatus(r.host, ev)
}

func (r *statusReporter) eventLocked() (*componentstatus.Event, string) {
	c := r.conn
	if r.haveConn && c.Kind == sender.Terminal {
		err := c.Err
		if err == nil {
			err = errors.New(c.Reason)
		}
		return componentstatus.NewPermanentErrorEvent(fmt.Errorf("questdb exporter stopped sending (data is kept in the queue): %w", err)), "terminal"
	}
	if r.fatal != nil {
		return componentstatus.NewPermanentErrorEvent(fmt.Errorf(
			"questdb exporter: the store-and-forward queue stopped after an I/O failure; frames already queued are still sent, new data is refused until a restart reopens the slot: %w", r.fatal)), "fatal"
	}
	if r.full {
		what := "refusing new data (on_full: block)"
		if r.evict {
			what = "evicting the oldest data (on_full: evict_oldest)"
		}
		return componentstatus.NewRecoverableErrorEvent(fmt.Errorf("questdb exporter queue full: %s", what)), "full"
	}
	var aside, asideKey string
	if len(r.aside) > 0 {
		names := strings.Join(r.aside, ", ")
		aside = fmt.Sprintf("DATA_LOSS: %d set-aside slot(s) under sf_dir hold data that will never be sent (%s); inspect and salvage them with questdb-slot, then remove them",
			len(r.aside), names)
		asideKey = "aside " + names
	}
	if r.haveConn && c.Kind == sender.Reconnecting {
		// One event per outage, stamped when it began: a health check's
		// recovery_duration counts from that event's time, so re-reporting
		// each attempt would keep an endless outage healthy. The attempts
		// so far are otelcol_exporter_questdb_reconnect_attempts. Set-aside
		// slots are named too: either alone would hide the other.
		cause := c.Reason
		if c.Err != nil {
			cause = c.Err.Error()
		}
		msg := fmt.Sprintf("questdb exporter cannot reach QuestDB since %s (reconnecting; data is queued): %s",
			c.Since.UTC().Format(time.RFC3339), cause)
		if aside != "" {
			msg += "; and " + aside
		}
		return componentstatus.NewRecoverableErrorEvent(errors.New(msg)), fmt.Sprintf("reconnecting %d %s", c.Since.UnixNano(), asideKey)
	}
	if aside != "" {
		return componentstatus.NewRecoverableErrorEvent(errors.New("questdb exporter: " + aside)), asideKey
	}
	if !r.haveConn {
		return nil, ""
	}
	switch c.Kind {
	case sender.Connected:
		if r.ddl != nil {
			return componentstatus.NewRecoverableErrorEvent(fmt.Errorf(
				"questdb exporter: tables without dedup keys, replays can duplicate rows (see the README, Table creation): %w", r.ddl)), "ddl " + r.ddl.Error()
		}
		return componentstatus.NewEvent(componentstatus.StatusOK), "ok"
	}
	return nil, ""
}

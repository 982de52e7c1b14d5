package questdbexporter

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componentstatus"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/sender"
)

func TestStatusReporter(t *testing.T) {
	outage := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	reconnecting := func(attempts int) sender.State {
		return sender.State{Kind: sender.Reconnecting, Endpoint: "ws://db:9000/write/v4", Attempts: attempts,
			Since: outage, Reason: "connection refused", Err: errors.New("dial tcp: connection refused")}
	}
	type step struct {
		conn   *sender.State
		level  *queueLevel
		aside  []string               // set-aside slots found (nil: not this step)
		want   componentstatus.Status // StatusNone: nothing reported
		substr string
	}
	st := func(s sender.State) *sender.State { return &s }
	lv := func(l queueLevel) *queueLevel { return &l }
	tests := []struct {
		name  string
		evict bool
		steps []step
	}{
		{
			name: "connect, outage reported once, recovery",
			steps: []step{
				{conn: st(sender.State{Kind: sender.Connecting}), want: componentstatus.StatusNone},
				{conn: st(sender.State{Kind: sender.Connected}), want: componentstatus.StatusOK},
				{level: lv(levelOK), want: componentstatus.StatusNone},
				{conn: st(reconnecting(1)), want: componentstatus.StatusRecoverableError, substr: "cannot reach QuestDB since 2026-11-30T09:00:00Z (reconnecting; data is queued): dial tcp: connection refused"},
				{conn: st(reconnecting(2)), want: componentstatus.StatusNone},
				{conn: st(sender.State{Kind: sender.Connected}), want: componentstatus.StatusOK},
			},
		},
		{
			name: "queue full overrides a healthy connection while it lasts",
			steps: []step{
				{conn: st(sender.State{Kind: sender.Connected}), want: componentstatus.StatusOK},
				{level: lv(levelHigh), want: componentstatus.StatusNone},
				{level: lv(levelFull), want: componentstatus.StatusRecoverableError, substr: "queue full: refusing new data"},
				{level: lv(levelFull), want: componentstatus.StatusNone},
				{level: lv(levelHigh), want: componentstatus.StatusOK},
			},
		},
		{
			name: "set-aside slots are a recoverable DATA_LOSS until removed, named with an outage",
			steps: []step{
				{conn: st(sender.State{Kind: sender.Connected}), want: componentstatus.StatusOK},
				{aside: []string{}, want: componentstatus.StatusNone},
				{aside: []string{"q.unreplayable-1"}, want: componentstatus.StatusRecoverableError, substr: "DATA_LOSS: 1 set-aside slot(s) under sf_dir hold data that will never be sent (q.unreplayable-1)"},
				{aside: []string{"q.unreplayable-1"}, want: componentstatus.StatusNone},
				{aside: []string{"q.unreplayable-1", "orphan"}, want: componentstatus.StatusRecoverableError, substr: "2 set-aside slot(s)"},
				// An outage is reported with the slots, and neither hides the other.
				{conn: st(reconnecting(1)), want: componentstatus.StatusRecoverableError, substr: "cannot reach QuestDB since 2026-11-30T09:00:00Z (reconnecting; data is queued): dial tcp: connection refused; and DATA_LOSS: 2 set-aside slot(s)"},
				{conn: st(reconnecting(2)), want: componentstatus.StatusNone},
				{conn: st(sender.State{Kind: sender.Connected}), want: componentstatus.StatusRecoverableError, substr: "questdb exporter: DATA_LOSS: 2 set-aside slot(s) under sf_dir"},
				{aside: []string{}, want: componentstatus.StatusOK},
			},
		},
		{
			name:  "evict_oldest wording",
			evict: true,
			steps: []step{
				{level: lv(levelFull), want: componentstatus.StatusRecoverableError, substr: "evicting the oldest data"},
			},
		},
		{
			name: "terminal is permanent and states the sender's cause once",
			steps: []step{
				{conn: st(sender.State{Kind: sender.Terminal, Endpoint: "ws://db:9000/write/v4", Reason: "refused credentials",
					Err: &sender.TerminalError{Category: qwp.CategorySecurityError, Err: errors.New("refused credentials")}}),
					want: componentstatus.StatusPermanentError, substr: "stopped sending (data is kept in the queue): refused credentials"},
				{level: lv(levelFull), want: componentstatus.StatusNone},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host := newStatusHost()
			r := newStatusReporter(host, tt.evict)
			for i, s := range tt.steps {
				before := len(host.events)
				if s.conn != nil {
					r.connState(*s.conn)
				} else if s.aside != nil {
					r.setAside(s.aside)
				} else {
					r.queueLevel(*s.level)
				}
				if s.want == componentstatus.StatusNone {
					if len(host.events) != before {
						t.Fatalf("step %d: reported %v, want nothing", i, host.last().Status())
					}
					continue
				}
				if len(host.events) != before+1 {
					t.Fatalf("step %d: %d events reported, want 1", i, len(host.events)-before)
				}
				ev := host.last()
				if ev.Status() != s.want {
					t.Fatalf("step %d: status %v, want %v", i, ev.Status(), s.want)
				}
				if s.substr != "" && (ev.Err() == nil || !strings.Contains(ev.Err().Error(), s.substr)) {
					t.Fatalf("step %d: error %v does not contain %q", i, ev.Err(), s.substr)
				}
				// One statement of the cause: the state's Reason and Err
				// say the same thing, and the text carries it once.
				for _, cause := range []string{"connection refused", "refused credentials"} {
					if ev.Err() != nil && strings.Count(ev.Err().Error(), cause) > 1 {
						t.Fatalf("step %d: %q states its cause more than once", i, ev.Err())
					}
				}
			}
		})
	}
}

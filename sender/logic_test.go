package sender

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/questdbexporter/questdbexporter/qwp"
)

func TestBackoffFullJitterCapped(t *testing.T) {
	b := newBackoff(100*time.Millisecond, time.Second)
	var ceilings []int64
	b.rand = func(n int64) int64 { ceilings = append(ceilings, n-1); return n - 1 }
	for range 7 {
		b.next()
	}
	want := []int64{100, 200, 400, 800, 1000, 1000, 1000}
	for i, c := range ceilings {
		if time.Duration(c) != time.Duration(want[i])*time.Millisecond {
			t.Fatalf("attempt %d: ceiling %v, want %dms", i+1, time.Duration(c), want[i])
		}
	}
	b.reset()
	if d := b.next(); d != 100*time.Millisecond {
		t.Fatalf("after reset: ceiling %v, want 100ms", d)
	}
	// Many failures must neither overflow nor exceed the cap.
	b.rand = func(n int64) int64 { return n - 1 }
	for range 100 {
		if d := b.next(); d > time.Second || d < 0 {
			t.Fatalf("delay %v outside [0, 1s]", d)
		}
	}
}

func TestBackoffDrawIsUniformBelowCeiling(t *testing.T) {
	b := newBackoff(100*time.Millisecond, 5*time.Second)
	for range 1000 {
		b.reset()
		if d := b.next(); d < MinDelay || d > 100*time.Millisecond {
			t.Fatalf("first delay %v outside [1ms, 100ms]", d)
		}
	}
}

// TestBackoffFloor: a nanosecond or zero backoff still waits MinDelay
// between attempts, so a misconfigured sender cannot spin.
func TestBackoffFloor(t *testing.T) {
	for _, initial := range []time.Duration{0, 5, time.Microsecond} {
		b := newBackoff(initial, initial)
		for range 50 {
			if d := b.next(); d != MinDelay {
				t.Fatalf("initial %v: delay %v, want the %v floor", initial, d, MinDelay)
			}
			if d := b.jitter(initial); d != MinDelay {
				t.Fatalf("initial %v: jitter %v, want the %v floor", initial, d, MinDelay)
			}
		}
	}
}

func TestRetryAfterDelay(t *testing.T) {
	for _, tc := range []struct{ retryAfter, jittered, want time.Duration }{
		{2 * time.Second, 50 * time.Millisecond, 2 * time.Second},
		{2 * time.Minute, time.Second, time.Minute}, // capped
		{10 * time.Millisecond, time.Second, time.Second},
	} {
		if got := retryAfterDelay(tc.retryAfter, time.Minute, tc.jittered); got != tc.want {
			t.Errorf("retryAfterDelay(%v, 1m, %v) = %v, want %v", tc.retryAfter, tc.jittered, got, tc.want)
		}
	}
}

func TestWindowMapping(t *testing.T) {
	now := time.Unix(1000, 0)
	w := newWindow(11, 4) // ackedFSN 10
	w.sendCatchUp()
	w.sendCatchUp() // C = 2
	if got := w.sendData(now); got != 11 {
		t.Fatalf("first data frame FSN %d, want 11", got)
	}
	w.sendData(now.Add(time.Millisecond))
	w.sendData(now.Add(2 * time.Millisecond)) // wire 2,3,4 -> FSN 11,12,13
	if w.inFlight() != 3 {
		t.Fatalf("inFlight %d, want 3 (catch-up frames excluded)", w.inFlight())
	}
	// An OK covering only catch-up frames releases no FSN.
	if fsn, _, err := w.ok(1, now); err != nil || fsn != 0 {
		t.Fatalf("ok(1) = %d, %v; want 0, nil", fsn, err)
	}
	fsn, lat, err := w.ok(3, now.Add(10*time.Millisecond))
	if err != nil || fsn != 12 || lat != 9*time.Millisecond {
		t.Fatalf("ok(3) = %d, %v, %v; want 12, 9ms, nil", fsn, lat, err)
	}
	if w.inFlight() != 1 {
		t.Fatalf("inFlight %d after ok(3), want 1", w.inFlight())
	}
	if f, isData, err := w.rejected(4); err != nil || !isData || f != 13 {
		t.Fatalf("rejected(4) = %d, %v, %v; want 13, true, nil", f, isData, err)
	}
	if _, isData, err := w.rejected(0); err != nil || isData {
		t.Fatalf("rejected(0) = %v, %v; want a catch-up frame", isData, err)
	}
	for _, bad := range []func() error{
		func() error { _, _, err := w.ok(5, now); return err },   // never sent
		func() error { _, _, err := w.ok(2, now); return err },   // goes back
		func() error { _, _, err := w.rejected(9); return err },  // never sent
		func() error { _, _, err := w.rejected(-1); return err }, // negative
	} {
		if err := bad(); err == nil {
			t.Fatal("a response naming an impossible wire sequence was accepted")
		}
	}
}

func TestWindowWithoutCatchUp(t *testing.T) {
	w := newWindow(1, 2)
	now := time.Now()
	for i := range 5 {
		if f := w.sendData(now); f != uint64(i+1) {
			t.Fatalf("frame %d got FSN %d", i, f)
		}
		if _, _, err := w.ok(int64(i), now); err != nil {
			t.Fatal(err)
		}
	}
	if w.nextFSN() != 6 || w.inFlight() != 0 {
		t.Fatalf("nextFSN %d inFlight %d; want 6, 0", w.nextFSN(), w.inFlight())
	}
}

func tt(pairs ...any) []qwp.TableTxn {
	var r []qwp.TableTxn
	for i := 0; i < len(pairs); i += 2 {
		r = append(r, qwp.TableTxn{Name: pairs[i].(string), SeqTxn: int64(pairs[i+1].(int))})
	}
	return r
}

func TestDurableStash(t *testing.T) {
	d := newDurableStash()
	d.add(3, tt("a", 1))
	d.add(5, tt("a", 2, "B", 1))
	d.add(6, nil) // commits nothing: durable once everything before is
	d.add(8, tt("b", 2))
	if got := d.take(); got != 0 {
		t.Fatalf("take before any durable ack = %d, want 0", got)
	}
	d.durableAck(tt("A", 1))
	if got := d.take(); got != 3 {
		t.Fatalf("after a:1 take = %d, want 3", got)
	}
	d.durableAck(tt("a", 2)) // b not durable yet: entry 5 waits, and 6 behind it
	if got := d.take(); got != 0 {
		t.Fatalf("after a:2 take = %d, want 0", got)
	}
	d.durableAck(tt("b", 1))
	if got := d.take(); got != 6 {
		t.Fatalf("after b:1 take = %d, want 6 (5 and the empty 6 pop)", got)
	}
	if !d.pending() {
		t.Fatal("entry 8 should still be pending")
	}
	d.durableAck(tt("b", 5))
	if got := d.take(); got != 8 || d.pending() {
		t.Fatalf("after b:5 take = %d pending %v; want 8, false", got, d.pending())
	}
	// Watermarks never go back.
	d.durableAck(tt("b", 1))
	d.add(9, tt("b", 4))
	if got := d.take(); got != 9 {
		t.Fatalf("entry already covered by an earlier watermark: take = %d, want 9", got)
	}
}

func TestInboxDropsOldest(t *testing.T) {
	b := newInbox(3)
	for i := range 5 {
		b.put(Event{FSN: uint64(i)})
	}
	got := b.takeAll(nil)
	if len(got) != 3 || got[0].FSN != 2 || got[2].FSN != 4 {
		t.Fatalf("inbox kept %v, want FSNs 2,3,4", got)
	}
	if b.dropped.Load() != 2 {
		t.Fatalf("dropped %d, want 2", b.dropped.Load())
	}
}

func TestInboxDispatchDeliversEverythingBeforeStop(t *testing.T) {
	b := newInbox(8)
	stop := make(chan struct{})
	done := make(chan struct{})
	var got []uint64
	var drops uint64
	go func() {
		defer close(done)
		b.dispatch(stop, func(e Event) { got = append(got, e.FSN) }, func(n uint64) { drops += n })
	}()
	for i := range 20 {
		b.put(Event{FSN: uint64(i)})
	}
	close(stop)
	<-done
	if uint64(len(got))+drops != 20 {
		t.Fatalf("delivered %d + dropped %d != 20 put", len(got), drops)
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("delivery out of order: %v", got)
		}
	}
	if got[len(got)-1] != 19 {
		t.Fatalf("the newest entry was not delivered: %v", got)
	}
}

func TestOptionsValidation(t *testing.T) {
	ok := Options{Endpoints: []string{"ws://127.0.0.1:1/write/v4"}}
	for _, tc := range []struct {
		name string
		mod  func(*Options)
		want string // substring of the error; "" = valid
	}{
		{"defaults", func(*Options) {}, ""},
		{"no endpoints", func(o *Options) { o.Endpoints = nil }, "Endpoints is empty"},
		{"http endpoint", func(o *Options) { o.Endpoints = []string{"http://x/write/v4"} }, `"http://x/write/v4" must start with ws://`},
		{"durable ack", func(o *Options) { o.DurableAck = "on" }, `DurableAck "on"`},
		{"override ok", func(o *Options) {
			o.Policies = map[qwp.Category]qwp.Policy{qwp.CategorySchemaMismatch: qwp.PolicyRetriable}
		}, ""},
		{"forced protocol violation", func(o *Options) {
			o.Policies = map[qwp.Category]qwp.Policy{qwp.CategoryProtocolViolation: qwp.PolicyRetriable}
		}, "PROTOCOL_VIOLATION is forced to terminal"},
		{"forced unknown", func(o *Options) {
			o.Policies = map[qwp.Category]qwp.Policy{qwp.CategoryUnknown: qwp.PolicyTerminal}
		}, "UNKNOWN is forced to retriable"},
		{"abandoned", func(o *Options) {
			o.Policies = map[qwp.Category]qwp.Policy{qwp.CategoryWriteError: qwp.PolicyAbandoned}
		}, "policy abandoned for WRITE_ERROR"},
		{"negative in-flight", func(o *Options) { o.MaxInFlight = -1 }, "MaxInFlight -1 is negative"},
		{"backoff order", func(o *Options) { o.InitialBackoff = time.Second; o.MaxBackoff = time.Millisecond }, "MaxBackoff 1ms is below InitialBackoff 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			tc.mod(&o)
			got, err := o.withDefaults()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got.MaxInFlight != DefaultMaxInFlight || got.MaxFrameRejections != 4 || got.DurableAckKeepalive != 200*time.Millisecond {
					t.Fatalf("defaults not applied: %+v", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestPolicyResolution(t *testing.T) {
	o, err := Options{Endpoints: []string{"ws://h/write/v4"}, Policies: map[qwp.Category]qwp.Policy{
		qwp.CategoryWriteError: qwp.PolicyTerminal,
	}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	for c, want := range map[qwp.Category]qwp.Policy{
		qwp.CategoryWriteError:        qwp.PolicyTerminal, // overridden
		qwp.CategorySchemaMismatch:    qwp.PolicyTerminal,
		qwp.CategoryInternalError:     qwp.PolicyRetriable,
		qwp.CategoryDictionaryGap:     qwp.PolicyRetriable,
		qwp.CategoryNotWritable:       qwp.PolicyRetriableOther,
		qwp.CategoryUnknown:           qwp.PolicyRetriable,
		qwp.CategoryProtocolViolation: qwp.PolicyTerminal,
	} {
		if got := o.policy(c); got != want {
			t.Errorf("policy(%v) = %v, want %v", c, got, want)
		}
	}
}

func TestTerminalErrorUnwraps(t *testing.T) {
	base := errors.New("boom")
	var err error = &TerminalError{Category: qwp.CategoryParseError, Err: base}
	if !errors.Is(err, base) || err.Error() != "boom" {
		t.Fatalf("TerminalError does not wrap its cause: %v", err)
	}
}

func TestWindowBareCommits(t *testing.T) {
	now := time.Unix(1000, 0)
	w := newWindow(21, 8)
	w.sendCatchUp() // wire 0
	w.sendData(now) // wire 1: FSN 21
	w.sendData(now) // wire 2: FSN 22 (deferred)
	w.sendCommit()  // wire 3
	if got := w.sendData(now.Add(time.Millisecond)); got != 23 {
		t.Fatalf("data frame after a commit got FSN %d, want 23", got)
	}
	if w.nextFSN() != 24 || w.inFlight() != 4 {
		t.Fatalf("nextFSN %d inFlight %d; want 24, 4 (the commit awaits its OK too)", w.nextFSN(), w.inFlight())
	}
	if f, isData, err := w.rejected(3); err != nil || isData || f != 0 {
		t.Fatalf("rejected(3) = %d, %v, %v; want the commit (no FSN)", f, isData, err)
	}
	if f, isData, err := w.rejected(4); err != nil || !isData || f != 23 {
		t.Fatalf("rejected(4) = %d, %v, %v; want FSN 23", f, isData, err)
	}
	// The commit's OK covers the deferred frame before it.
	if fsn, _, err := w.ok(3, now); err != nil || fsn != 22 {
		t.Fatalf("ok(3) = %d, %v; want 22", fsn, err)
	}
	if fsn, _, err := w.ok(3, now); err != nil || fsn != 0 {
		t.Fatalf("a repeated ok(3) = %d, %v; want nothing new", fsn, err)
	}
	if _, _, err := w.rejected(2); err == nil {
		t.Fatal("a rejection of an acknowledged frame was accepted")
	}
	w.sendCommit() // wire 5, after FSN 23
	if got := w.sendData(now); got != 24 {
		t.Fatalf("data frame after a second commit got FSN %d, want 24", got)
	}
	if fsn, lat, err := w.ok(5, now.Add(3*time.Millisecond)); err != nil || fsn != 23 || lat != 2*time.Millisecond {
		t.Fatalf("ok(5) = %d, %v, %v; want 23, 2ms", fsn, lat, err)
	}
	// An OK of a commit that covers no new data frame releases nothing.
	w.sendCommit() // wire 7
	if fsn, _, err := w.ok(6, now); err != nil || fsn != 24 {
		t.Fatalf("ok(6) = %d, %v; want 24", fsn, err)
	}
	if fsn, _, err := w.ok(7, now); err != nil || fsn != 0 {
		t.Fatalf("ok(7) = %d, %v; want 0", fsn, err)
	}
	if w.inFlight() != 0 || w.nextFSN() != 25 {
		t.Fatalf("inFlight %d nextFSN %d; want 0, 25", w.inFlight(), w.nextFSN())
	}
}

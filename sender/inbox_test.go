package sender

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
)

// The default error handler logs every inbox entry at error level: silence
// would hide data loss.
func TestDefaultHandlerLogsEveryError(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	srv := newServer(t, qwptest.Options{})
	if err := srv.RejectFrame(2, qwp.StatusWriteError, "table suspended"); err != nil {
		t.Fatal(err)
	}
	q := memQueue(t)
	newFeeder(t, q, false).frames(3, 1)
	o := testOptions(nil, srv.URL())
	o.Logger = zap.New(core)
	s := startSender(t, q, o)
	waitAll(t, s, q)
	waitFor(t, "the error log", func() bool {
		for _, e := range logs.FilterLevelExact(zapcore.ErrorLevel).All() {
			if strings.Contains(e.ContextMap()["error"].(string), "table suspended") {
				return true
			}
		}
		return false
	})
}

func TestInboxOverflowIsCountedAndLogged(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	q := memQueue(t)
	entered, block := make(chan struct{}, 8), make(chan struct{})
	var delivered []uint64
	o := testOptions(nil, "ws://127.0.0.1:1/write/v4")
	o.Logger = zap.New(core)
	o.ErrorInboxCapacity = 2
	o.ErrorHandler = func(e Event) {
		entered <- struct{}{}
		<-block
		delivered = append(delivered, e.FSN)
	}
	s, err := New(q, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	s.box.put(Event{FSN: 1})
	<-entered // the handler holds entry 1; entries 2-4 overflow a 2-entry inbox by one
	for fsn := uint64(2); fsn <= 4; fsn++ {
		s.box.put(Event{FSN: fsn})
	}
	if s.DroppedErrors() != 1 {
		t.Fatalf("DroppedErrors = %d, want 1", s.DroppedErrors())
	}
	close(block)
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(delivered) != 3 || delivered[0] != 1 || delivered[1] != 3 || delivered[2] != 4 {
		t.Fatalf("delivered %v, want [1 3 4] (the oldest queued entry dropped)", delivered)
	}
	if n := logs.FilterMessage("error inbox overflowed; oldest entries dropped").Len(); n != 1 {
		t.Fatalf("%d overflow warnings, want 1", n)
	}
}

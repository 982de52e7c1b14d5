package qwptest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/gorilla/websocket"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
)

// A test starts a server, lets the code under test write to s.URL(), and
// asserts on the typed rows.
func ExampleServer() {
	s, err := qwptest.NewServer(qwptest.Options{})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	// the code under test: one frame of two rows
	e := qwp.NewEncoder(qwp.NewMemDict(), qwp.EncoderOptions{Gorilla: true, DeltaSymbolDict: true})
	tb, _ := e.Table("cpu")
	host, _ := tb.Column("host", qwp.TypeSymbol)
	load, _ := tb.Column("load", qwp.TypeDouble)
	ts, _ := tb.Column("", qwp.TypeTimestampNanos)
	for i, h := range []string{"a", "b"} {
		tb.SymbolString(host, h)
		tb.Double(load, 0.5*float64(i+1))
		tb.TimestampNanos(ts, 1_700_000_000_000_000_000+int64(i))
		_ = tb.EndRow()
	}
	ws, _, err := websocket.DefaultDialer.Dial(s.URL(), nil)
	if err != nil {
		panic(err)
	}
	defer ws.Close()
	_ = ws.WriteMessage(websocket.BinaryMessage, e.Finish(nil))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitRows(ctx, "cpu", 2); err != nil {
		panic(err)
	}
	td, _ := s.Rows("cpu")
	fmt.Println(td.Columns)
	for _, row := range td.Rows {
		fmt.Println(row...)
	}
	// Output:
	// [{host SYMBOL} {load DOUBLE} {timestamp TIMESTAMP_NANOS}]
	// a 0.5 1700000000000000000
	// b 1 1700000000000000001
}

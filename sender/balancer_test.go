package sender

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
)

// balancer is a TCP load balancer: its i-th connection goes to targets[i],
// the last target once they run out. Behind one address, the client sees
// the servers apart only by what their 101 says.
type balancer struct {
	ln      net.Listener
	targets []string
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []net.Conn
}

func newBalancer(t *testing.T, targets ...string) *balancer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &balancer{ln: ln, targets: targets}
	b.wg.Add(1)
	go b.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		b.mu.Lock()
		for _, c := range b.conns {
			_ = c.Close()
		}
		b.mu.Unlock()
		b.wg.Wait()
	})
	return b
}

func (b *balancer) URL() string { return "ws://" + b.ln.Addr().String() + "/write/v4" }

func (b *balancer) serve() {
	defer b.wg.Done()
	for i := 0; ; i++ {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", b.targets[min(i, len(b.targets)-1)])
		if err != nil {
			_ = c.Close()
			continue
		}
		b.mu.Lock()
		b.conns = append(b.conns, c, up)
		b.mu.Unlock()
		b.wg.Add(2)
		for _, pair := range [][2]net.Conn{{up, c}, {c, up}} {
			go func() {
				defer b.wg.Done()
				_, _ = io.Copy(pair[0], pair[1])
				_ = pair[0].Close()
				_ = pair[1].Close()
			}()
		}
	}
}

// TestOnConnectAfterRecycleToAnotherServer: behind one load balancer
// address, the connection replacing one recycled at a generation switch
// reaches another server, which announces another X-QWP-Max-Batch-Size.
// The hook runs for it (the tables may not exist there), and each server's
// frames decode against the dictionary its connection registered.
func TestOnConnectAfterRecycleToAnotherServer(t *testing.T) {
	a := newServer(t, qwptest.Options{})
	b := newServer(t, qwptest.Options{RecvBufferSize: 1 << 20})
	lb := newBalancer(t, a.Addr(), b.Addr())
	q := memQueue(t)
	f := newFeeder(t, q, true)
	f.frames(3, 5)
	f.newGeneration()
	f.frames(3, 5)
	var calls atomic.Int64
	o := testOptions(nil, lb.URL())
	o.OnConnect = func(context.Context, string) error {
		calls.Add(1)
		return nil
	}
	s := startSender(t, q, o)
	waitAll(t, s, q)
	if a.Accepted() != 1 || b.Accepted() != 1 {
		t.Fatalf("connections: %d to the first server, %d to the second; want one each (a recycle at the generation switch)", a.Accepted(), b.Accepted())
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("OnConnect ran %d times; want twice: the recycled connection's replacement reached another server", n)
	}
}

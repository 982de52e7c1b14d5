package sender

import (
	"sync"
	"sync/atomic"
)

// inbox is the bounded error inbox: producers never block, overflow drops the
// oldest entry (the newest is the most informative) and counts it, and one
// dispatcher goroutine hands entries to the handler in order.
type inbox struct {
	mu      sync.Mutex
	ring    []Event
	head, n int
	wake    chan struct{}
	dropped atomic.Uint64
}

func newInbox(capacity int) *inbox {
	return &inbox{ring: make([]Event, capacity), wake: make(chan struct{}, 1)}
}

// put enqueues e, evicting the oldest entry when full.
func (b *inbox) put(e Event) {
	b.mu.Lock()
	if b.n == len(b.ring) {
		b.ring[b.head] = Event{}
		b.head = (b.head + 1) % len(b.ring)
		b.n--
		b.dropped.Add(1)
	}
	b.ring[(b.head+b.n)%len(b.ring)] = e
	b.n++
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// takeAll moves every queued entry into dst.
func (b *inbox) takeAll(dst []Event) []Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ; b.n > 0; b.n-- {
		dst = append(dst, b.ring[b.head])
		b.ring[b.head] = Event{}
		b.head = (b.head + 1) % len(b.ring)
	}
	return dst
}

// dispatch delivers entries to handle until stop closes, then delivers what
// is left so that nothing queued before Close goes unreported. onDrop is told
// how many entries overflow discarded since its last call.
func (b *inbox) dispatch(stop <-chan struct{}, handle func(Event), onDrop func(n uint64)) {
	var batch []Event
	var reportedDrops uint64
	deliver := func() {
		batch = b.takeAll(batch[:0])
		if d := b.dropped.Load(); d > reportedDrops {
			onDrop(d - reportedDrops)
			reportedDrops = d
		}
		for _, e := range batch {
			handle(e)
		}
		clear(batch)
	}
	for {
		select {
		case <-b.wake:
			deliver()
		case <-stop:
			deliver()
			return
		}
	}
}

package sender

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/questdbexporter/questdbexporter/qwp"
)

// Defaults applied by New to zero-valued Options fields.
const (
	DefaultMaxInFlight         = 128
	DefaultMaxBatchBytes       = 1_887_436 // 1.8 MiB, below a default server's 2 MiB buffer
	DefaultInitialBackoff      = 100 * time.Millisecond
	DefaultMaxBackoff          = 5 * time.Second
	DefaultRetryAfterCap       = 60 * time.Second
	DefaultMaxFrameRejections  = 4
	DefaultDurableAckKeepalive = 200 * time.Millisecond
	DefaultCloseFlushTimeout   = 5 * time.Second
	DefaultOutageLogInterval   = 5 * time.Minute
	DefaultErrorInboxCapacity  = 256
	DefaultHandshakeTimeout    = 10 * time.Second
	DefaultAuthInitialBackoff  = 30 * time.Second
	DefaultAuthMaxBackoff      = 5 * time.Minute
	// writeTimeout bounds one WebSocket write so a peer that stopped
	// reading cannot hold the loop (or Close) forever.
	writeTimeout = 30 * time.Second
)

// Options configures a Sender. Only Endpoints is required.
type Options struct {
	// Endpoints are ws:// or wss:// URLs of the server's ingress path
	// (/write/v4), tried in order and rotated on failure.
	Endpoints []string
	// TLS, credentials and ClientID are passed to every upgrade request.
	TLS                       *tls.Config
	Username, Password, Token string
	ClientID                  string
	// HandshakeTimeout bounds one connection attempt (0 = 10 s).
	HandshakeTimeout time.Duration

	// DurableAck is request_durable_ack: "", "local", "replicated" or
	// "local,replicated". When set, trim waits for durable-ack frames.
	DurableAck string
	// DurableAckKeepalive is the PING interval while durable confirmations
	// are pending and nothing is being sent (0 = 200 ms).
	DurableAckKeepalive time.Duration

	// MaxInFlight caps data frames sent and not yet confirmed by an OK
	// (0 = 128).
	MaxInFlight int
	// MaxBatchBytes is the configured frame limit, at most
	// qwp.MaxMessageBytes; dictionary catch-up frames are split to the
	// smaller of it and the server's advertised X-QWP-Max-Batch-Size (0 =
	// 1.8 MiB). Every message leaves as one WebSocket frame. A stored frame
	// larger than it (written under a larger setting) is sent whole when the
	// server's limit allows, and refused otherwise; never split.
	MaxBatchBytes int

	// InitialBackoff and MaxBackoff shape the reconnect delay: full jitter
	// over initial*2^n, capped (0 = 100 ms and 5 s). RetryAfterCap caps an
	// upgrade's Retry-After (0 = 60 s).
	InitialBackoff, MaxBackoff, RetryAfterCap time.Duration
	// AuthInitialBackoff and AuthMaxBackoff shape the wait after every
	// endpoint refused the credentials (HTTP 401 or 403 on the upgrade):
	// doubling from the initial value to the cap, each wait drawn from its
	// upper half (0 = 30 s and 5 min). The sender keeps trying, so a fix
	// on the server side (a user created, a grant, a token renewed) needs
	// no restart; credentials changed in the configuration need one.
	AuthInitialBackoff, AuthMaxBackoff time.Duration
	// OutageLogInterval is how often an outage is logged again while it
	// lasts, with its length, attempts, last error and the backlog (0 =
	// 5 min): the first failure is logged at once and each attempt only at
	// debug level, so without it a long outage is silent in the log.
	OutageLogInterval time.Duration

	// MaxFrameRejections is how often the same frame may be rejected with no
	// acknowledgement of it in between before the sender gives up with
	// PROTOCOL_VIOLATION (0 = 4).
	MaxFrameRejections int
	// Policies overrides the contract's default policy of server error
	// categories. PROTOCOL_VIOLATION (terminal), UNKNOWN (retriable) and
	// DATA_LOSS are forced and cannot be overridden.
	Policies map[qwp.Category]qwp.Policy

	// SlotDir is the queue's slot directory, "" in memory-only mode; Close
	// names it when it leaves frames behind (they are lost without one).
	SlotDir string
	// CloseFlushTimeout bounds how long Close waits for every published
	// frame to be acknowledged (0 = 5 s; negative = do not wait).
	CloseFlushTimeout time.Duration

	// ErrorInboxCapacity bounds the error inbox (0 = 256); overflow drops
	// the oldest entry and counts it.
	ErrorInboxCapacity int
	// ErrorHandler receives every inbox entry on the dispatcher goroutine;
	// nil logs each one at error level.
	ErrorHandler func(Event)
	// OnConnect, when set, runs on the I/O goroutine after every successful
	// upgrade and before any frame is sent on that connection (the exporter
	// creates its tables there), except on a connection that replaces one
	// the sender recycled on purpose (a dictionary generation switch, a
	// broken chain of delta sections, evicted frames) and reaches the same
	// server the hook already ran for: the same endpoint, the same peer
	// address, the same 101 headers (QuestDB sends no identity of its own,
	// so servers behind one load-balancer address, configured alike, look
	// the same). It must bound its own duration; ctx ends when the sender
	// closes. An error means "not now": the connection is
	// closed unused and the sender reconnects after its backoff, as for any
	// lost connection, so the hook runs again before the frames go out.
	OnConnect func(ctx context.Context, endpoint string) error
	// OnState is called on the I/O goroutine at every connection state
	// transition; it must not block.
	OnState func(State)
	// Observer receives telemetry; nil = NopObserver.
	Observer Observer
	// Logger is the sender's logger; nil = no logging.
	Logger *zap.Logger
}

var durableAckValues = []string{qwp.DurableAckNone, qwp.DurableAckLocal, qwp.DurableAckReplicated, qwp.DurableAckLocalReplicated}

// withDefaults fills zero fields and refuses invalid values, naming the
// field and the rule.
func (o Options) withDefaults() (Options, error) {
	var errs []error
	if len(o.Endpoints) == 0 {
		errs = append(errs, errors.New("sender: Endpoints is empty: at least one ws:// or wss:// URL is required"))
	}
	for _, e := range o.Endpoints {
		if !strings.HasPrefix(e, "ws://") && !strings.HasPrefix(e, "wss://") {
			errs = append(errs, fmt.Errorf("sender: endpoint %q must start with ws:// or wss://", e))
		}
	}
	valid := false
	for _, v := range durableAckValues {
		valid = valid || o.DurableAck == v
	}
	if !valid {
		errs = append(errs, fmt.Errorf("sender: DurableAck %q is not one of \"\", local, replicated, local,replicated", o.DurableAck))
	}
	for c, p := range o.Policies {
		switch {
		case !c.Overridable():
			errs = append(errs, fmt.Errorf("sender: the policy of %v is forced to %v and cannot be overridden with %v", c, c.DefaultPolicy(), p))
		case p != qwp.PolicyTerminal && p != qwp.PolicyRetriable && p != qwp.PolicyRetriableOther:
			errs = append(errs, fmt.Errorf("sender: policy %v for %v is not one of terminal, retriable, retriable_other", p, c))
		}
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"HandshakeTimeout", &o.HandshakeTimeout, DefaultHandshakeTimeout},
		{"DurableAckKeepalive", &o.DurableAckKeepalive, DefaultDurableAckKeepalive},
		{"InitialBackoff", &o.InitialBackoff, DefaultInitialBackoff},
		{"MaxBackoff", &o.MaxBackoff, DefaultMaxBackoff},
		{"RetryAfterCap", &o.RetryAfterCap, DefaultRetryAfterCap},
		{"OutageLogInterval", &o.OutageLogInterval, DefaultOutageLogInterval},
		{"AuthInitialBackoff", &o.AuthInitialBackoff, DefaultAuthInitialBackoff},
		{"AuthMaxBackoff", &o.AuthMaxBackoff, DefaultAuthMaxBackoff},
	} {
		if *d.v < 0 {
			errs = append(errs, fmt.Errorf("sender: %s %v is negative", d.name, *d.v))
		} else if *d.v == 0 {
			*d.v = d.def
		}
	}
	if o.MaxBackoff < o.InitialBackoff {
		errs = append(errs, fmt.Errorf("sender: MaxBackoff %v is below InitialBackoff %v", o.MaxBackoff, o.InitialBackoff))
	}
	if o.AuthMaxBackoff < o.AuthInitialBackoff {
		errs = append(errs, fmt.Errorf("sender: AuthMaxBackoff %v is below AuthInitialBackoff %v", o.AuthMaxBackoff, o.AuthInitialBackoff))
	}
	// Below MinDelay a keepalive would spin; the backoffs are floored where
	// each delay is drawn.
	o.DurableAckKeepalive = max(o.DurableAckKeepalive, MinDelay)
	if o.CloseFlushTimeout == 0 {
		o.CloseFlushTimeout = DefaultCloseFlushTimeout
	}
	for _, n := range []struct {
		name string
		v    *int
		def  int
	}{
		{"MaxInFlight", &o.MaxInFlight, DefaultMaxInFlight},
		{"MaxBatchBytes", &o.MaxBatchBytes, DefaultMaxBatchBytes},
		{"MaxFrameRejections", &o.MaxFrameRejections, DefaultMaxFrameRejections},
		{"ErrorInboxCapacity", &o.ErrorInboxCapacity, DefaultErrorInboxCapacity},
	} {
		if *n.v < 0 {
			errs = append(errs, fmt.Errorf("sender: %s %d is negative", n.name, *n.v))
		} else if *n.v == 0 {
			*n.v = n.def
		}
	}
	if o.MaxBatchBytes > qwp.MaxMessageBytes {
		errs = append(errs, fmt.Errorf("sender: MaxBatchBytes %d is above %d, the largest message a QuestDB server accepts", o.MaxBatchBytes, qwp.MaxMessageBytes))
	}
	if o.Observer == nil {
		o.Observer = NopObserver{}
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o, errors.Join(errs...)
}

// policy is the policy applied to a server error of category c.
func (o *Options) policy(c qwp.Category) qwp.Policy {
	if p, ok := o.Policies[c]; ok && c.Overridable() {
		return p
	}
	return c.DefaultPolicy()
}

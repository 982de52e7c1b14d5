package questdbexporter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configtls"
	"go.uber.org/zap"

	"github.com/questdbexporter/questdbexporter/internal/datamodel"
	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// Config is the exporter's configuration. YAML keys follow QuestDB's
// connect-string names where one exists (sf_dir, sender_id, sf_durability,
// request_durable_ack, ...); durations are Go durations ("5s") instead of
// the connect string's *_millis integers. Defaults are in createDefaultConfig.
type Config struct {
	// Endpoints are tried in order on every (re)connect: host:port, or
	// ws:// / wss:// URLs. A bare host:port, or a URL without a path, means
	// the ingest path /write/v4.
	Endpoints []string `mapstructure:"endpoints"`
	// TLS, when the section is present, makes bare host:port endpoints use
	// wss://. wss:// endpoints use TLS with these settings, or the system's
	// roots when the section is absent.
	TLS configoptional.Optional[configtls.ClientConfig] `mapstructure:"tls"`
	// Username and Password send HTTP basic auth on the upgrade request;
	// Token sends a bearer token instead. One or the other, not both.
	Username configopaque.String `mapstructure:"username"`
	Password configopaque.String `mapstructure:"password"`
	Token    configopaque.String `mapstructure:"token"`

	// SFDir is the parent of the store-and-forward slot <sf_dir>/<sender_id>/.
	// "" selects memory-only mode.
	SFDir string `mapstructure:"sf_dir"`
	// SenderID names the slot; "" derives it from the component ID.
	SenderID string `mapstructure:"sender_id"`
	// SFMaxTotalBytes caps the queue; 0 is the mode's default (10 GiB on
	// disk, 128 MiB in memory).
	SFMaxTotalBytes ByteSize `mapstructure:"sf_max_total_bytes"`
	// SFMaxSegmentBytes is the size of one segment; a frame must fit in one.
	SFMaxSegmentBytes ByteSize `mapstructure:"sf_max_segment_bytes"`
	// SFDurability is memory, periodic or flush.
	SFDurability     string        `mapstructure:"sf_durability"`
	SFSyncInterval   time.Duration `mapstructure:"sf_sync_interval"`
	SFAppendDeadline time.Duration `mapstructure:"sf_append_deadline"`
	// OnFull is block or evict_oldest.
	OnFull string `mapstructure:"on_full"`

	// MaxBatchBytes bounds one QWP message; keep it below the server's
	// limit (2 MiB by default).
	MaxBatchBytes ByteSize `mapstructure:"max_batch_bytes"`
	// MaxInFlight bounds the frames sent and not yet acknowledged.
	MaxInFlight             int           `mapstructure:"max_in_flight"`
	ReconnectInitialBackoff time.Duration `mapstructure:"reconnect_initial_backoff"`
	ReconnectMaxBackoff     time.Duration `mapstructure:"reconnect_max_backoff"`
	// CloseFlushTimeout is how long Shutdown waits for acknowledgements;
	// 0 does not wait.
	CloseFlushTimeout time.Duration `mapstructure:"close_flush_timeout"`
	// RequestDurableAck is "" (or off), on (= replicated), local,
	// replicated or local,replicated.
	RequestDurableAck           string        `mapstructure:"request_durable_ack"`
	DurableAckKeepaliveInterval time.Duration `mapstructure:"durable_ack_keepalive_interval"`
	// MaxFrameRejections turns repeated rejections of one frame into
	// PROTOCOL_VIOLATION.
	MaxFrameRejections int `mapstructure:"max_frame_rejections"`

	// OnServerError is auto (each category's default policy) or a policy
	// for every overridable category; the per-category keys override it.
	OnServerError   string `mapstructure:"on_server_error"`
	OnSchemaError   string `mapstructure:"on_schema_error"`
	OnParseError    string `mapstructure:"on_parse_error"`
	OnInternalError string `mapstructure:"on_internal_error"`
	OnSecurityError string `mapstructure:"on_security_error"`
	OnWriteError    string `mapstructure:"on_write_error"`

	ErrorInboxCapacity    int  `mapstructure:"error_inbox_capacity"`
	DrainOrphans          bool `mapstructure:"drain_orphans"`
	MaxBackgroundDrainers int  `mapstructure:"max_background_drainers"`
	// WaitForAck makes ConsumeMetrics/Logs/Traces return only once the
	// server has acknowledged the frames they produced.
	WaitForAck bool `mapstructure:"wait_for_ack"`
	// SymbolDictMaxEntries is the size at which the writer starts a new
	// SYMBOL dictionary generation.
	SymbolDictMaxEntries int `mapstructure:"symbol_dict_max_entries"`
	// SymbolDictMaxBytes bounds the symbol text of one generation; 0 means
	// min(16 MiB, sf_max_total_bytes / 4). It bounds the writer's
	// dictionary in RAM, a generation's file and the catch-up a connection
	// may send. A generation starts smaller (4 MiB, or this if less) and
	// grows towards it only while its symbols recur.
	SymbolDictMaxBytes ByteSize `mapstructure:"symbol_dict_max_bytes"`

	Tables TablesConfig `mapstructure:"tables"`
	// AttributesAsSymbols lists attribute keys written to SYMBOL columns of
	// their own (host.name -> host_name) besides the attributes JSON.
	AttributesAsSymbols []string `mapstructure:"attributes_as_symbols"`
	// MetricAttributesType is the column type of a metric point's
	// attributes JSON: symbol or varchar.
	MetricAttributesType string `mapstructure:"metric_attributes_type"`
	// CreateTables makes the exporter create its seven tables, with DEDUP
	// UPSERT KEYS, over QuestDB's HTTP /exec on every new connection (not
	// on one replacing a connection the sender recycled itself that
	// reaches the same server), so a
	// replay after a reconnect or restart never doubles a row. Off leaves
	// the tables to QWP's auto-create, which gives them no dedup keys.
	CreateTables bool `mapstructure:"create_tables"`
	// TTL ("30d", "2w", "48h", "6M", "1y"; "" for none) is appended to the
	// created tables as QuestDB's TTL clause.
	TTL string `mapstructure:"ttl"`

	// emptyCredentials lists the credential keys the configuration sets
	// to nothing (an unset ${env:VAR}), for the warning at start.
	emptyCredentials []string

	// prevent unkeyed literal initialization
	_ struct{}
}

// TablesConfig names the table each signal is written to.
type TablesConfig struct {
	Gauge                string `mapstructure:"gauge"`
	Sum                  string `mapstructure:"sum"`
	Histogram            string `mapstructure:"histogram"`
	ExponentialHistogram string `mapstructure:"exponential_histogram"`
	Summary              string `mapstructure:"summary"`
	Logs                 string `mapstructure:"logs"`
	Traces               string `mapstructure:"traces"`
}

// Limits and defaults that Validate and createDefaultConfig share.
const (
	defaultSFDir          = "/var/lib/otelcol/questdb"
	defaultEndpoint       = "localhost:9000"
	defaultPort           = "9000"
	ingestPath            = "/write/v4"
	minMaxBatchBytes      = 64 << 10
	maxMaxBatchBytes      = 16 << 20
	defaultMaxBatchBytes  = 1887436 // 0.9 * 2 MiB: below a default server's limit, with room for framing
	minSegmentBytes       = 256
	maxSegmentBytes       = 1 << 30
	segmentOverheadBytes  = 64 // segment header + frame length, row count and CRC + 4-byte dictionary generation, rounded up
	maxInFlightLimit      = 10000
	maxDrainersLimit      = 64
	minErrorInboxCapacity = 16 // the connect-string minimum
	maxErrorInboxCapacity = 1 << 20
	maxSymbolDictEntries  = 2000000 // the server refuses ids past this per connection
	// symbolDictCapShare: a generation's symbol bytes are at most
	// 1/symbolDictCapShare of sf_max_total_bytes (SF mode), and of the
	// queue's half of it in memory-only mode (memoryGCShare), where the
	// default is half that again: the generation being written costs
	// up to about three times its text in RAM (its MemDict's text and index,
	// and the queue's copy), all counted in the cap (README, Sizing).
	symbolDictCapShare = 4
	// memoryGCShare: in memory-only mode sf_max_total_bytes bounds RAM, and
	// the queue holds frames, dictionary and the encoder's index up to
	// 1/memoryGCShare of it; the rest is the Go collector's headroom (with
	// the default GOGC=100 the heap grows to twice what is live before a
	// collection).
	memoryGCShare = 2
	// memorySegmentReserve: in memory-only mode the queue's share leaves
	// room for buffers the queue holds beyond the bytes it counts: the
	// segment taking appends grows its buffer by doubling (up to a
	// segment), and the write buffer keeps a batch's frames (measured:
	// without the reserve RSS rose 89.7 MiB over a 64 MiB cap with 4 MiB
	// segments, when an eviction still read a whole segment into the write
	// buffer; with it 69.6 MiB, bound 80).
	memorySegmentReserve = 2
	// defaultSymbolDictMaxBytes is symbol_dict_max_bytes when unset (and the
	// cap allows it): see the README's sizing section.
	defaultSymbolDictMaxBytes ByteSize = 16 << 20
	// defaultSymbolDictStartBytes is the working limit a generation starts at
	// (symbolDictStartBytes()), doubling towards symbol_dict_max_bytes
	// while its symbols recur (genDict, Growth). 4 MiB: under series churn,
	// where nothing recurs, the generation being written is most of the
	// live heap, and full 16 MiB generations took the collector's peak RSS
	// to 80-83 MB against 57-61 with 4 MiB ones (nop: 41; 8 MiB: 63-70,
	// over the 64 MB target; BENCHMARKS.md, issue #25), while a working set
	// of up to 16 MiB of symbol text still ends in one generation.
	defaultSymbolDictStartBytes ByteSize = 4 << 20
	maxSenderIDBytes                     = 127
)

// memoryModeMaxTotalBytes and sfModeMaxTotalBytes are what
// sf_max_total_bytes: 0 means in each mode.
const (
	sfModeMaxTotalBytes     ByteSize = 10 << 30
	memoryModeMaxTotalBytes ByteSize = 128 << 20
)

// Validate refuses every value the exporter cannot run with; each message
// names the key, the value and what is allowed. It also checks what the
// start would find missing on this machine (validateFiles).
func (c *Config) Validate() error {
	return errors.Join(c.validateValues(), c.validateFiles())
}

// validateValues applies the rules that depend on the values alone.
func (c *Config) validateValues() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(c.validateEndpoints())
	add(c.validateAuth())
	add(c.validateQueue())
	add(c.validateWire())
	add(c.validateErrorPolicies())
	add(c.validateDataModel())
	return errors.Join(errs...)
}

// validateFiles checks, on this machine, what the start would otherwise
// find missing: sf_dir (or, for a missing one, where it would be created;
// as file_storage checks its directory at validation) and the tls
// section's files.
func (c *Config) validateFiles() error {
	if c.SFDir == "" {
		return c.validateTLSFiles()
	}
	return errors.Join(checkSFDir(c.SFDir, c.isDefaultSFDir()), c.validateTLSFiles())
}

// validateTLSFiles loads the tls section the way a connection does, so a
// missing or unreadable ca_file, cert_file or key_file is named before the
// first connection fails.
func (c *Config) validateTLSFiles() error {
	if t := c.TLS.Get(); t != nil && !t.Insecure {
		if _, err := t.LoadTLSConfig(context.Background()); err != nil {
			return fmt.Errorf("tls: %w", err)
		}
	}
	return nil
}

func (c *Config) validateEndpoints() error {
	if len(c.Endpoints) == 0 {
		return errors.New("endpoints: at least one host:port or ws:// / wss:// URL is required")
	}
	if t := c.TLS.Get(); t != nil && t.Insecure {
		return errors.New("tls::insecure: true is not supported; to connect without TLS remove the tls section and use ws:// or host:port endpoints")
	}
	seen := make(map[string]int, len(c.Endpoints))
	for i, ep := range c.Endpoints {
		u, err := c.endpointURL(ep)
		if err != nil {
			return fmt.Errorf("endpoints[%d]: %w", i, err)
		}
		if j, dup := seen[u]; dup {
			return fmt.Errorf("endpoints[%d]: %q is the same endpoint as endpoints[%d]", i, ep, j)
		}
		seen[u] = i
	}
	return nil
}

// endpointURL normalises one endpoint to the URL the exporter dials.
func (c *Config) endpointURL(ep string) (string, error) {
	if ep == "" {
		return "", errors.New("empty endpoint; use host:port or a ws:// / wss:// URL")
	}
	tlsSection := c.TLS.HasValue()
	if host := hostPort(ep); strings.Count(host, ":") >= 2 && !strings.HasPrefix(host, "[") {
		return "", fmt.Errorf("%q holds an IPv6 address without brackets, so the port cannot be told from the address; write it in brackets, such as [::1]:9000 (or [::1] for port %s)", ep, defaultPort)
	}
	if !strings.Contains(ep, "://") {
		scheme := "ws"
		if tlsSection {
			scheme = "wss"
		}
		ep = scheme + "://" + ep
	}
	u, err := url.Parse(ep)
	if err != nil {
		return "", fmt.Errorf("%q is not a valid URL: %w", ep, err)
	}
	switch u.Scheme {
	case "ws":
		if tlsSection {
			return "", fmt.Errorf("%q is plain ws:// but the tls section is set; use wss:// or remove tls", ep)
		}
	case "wss":
	default:
		return "", fmt.Errorf("%q has scheme %q; allowed: ws, wss (or a bare host:port)", ep, u.Scheme)
	}
	if u.User != nil {
		return "", fmt.Errorf("%q carries credentials; use username/password or token instead", ep)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q has a query or fragment; only scheme, host, port and path are allowed", ep)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return "", fmt.Errorf("%q has no host", ep)
	}
	if strings.HasSuffix(u.Host, ":") {
		return "", fmt.Errorf("%q has an empty port; allowed: 1..65535, or omit it for %s", ep, defaultPort)
	}
	if port == "" {
		port = defaultPort
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%q has port %q; allowed: 1..65535", ep, port)
	}
	path := u.EscapedPath()
	if path == "" || path == "/" {
		path = ingestPath
	}
	return u.Scheme + "://" + net.JoinHostPort(host, port) + path, nil
}

// hostPort is the host[:port] part of an endpoint, with or without a
// scheme, path or user information.
func hostPort(ep string) string {
	if _, rest, ok := strings.Cut(ep, "://"); ok {
		ep = rest
	}
	if i := strings.IndexAny(ep, "/?#"); i >= 0 {
		ep = ep[:i]
	}
	if i := strings.LastIndex(ep, "@"); i >= 0 {
		ep = ep[i+1:]
	}
	return ep
}

// endpointURLs returns the validated endpoints as the URLs to dial, in
// order. Call only after Validate.
func (c *Config) endpointURLs() []string {
	out := make([]string, 0, len(c.Endpoints))
	for _, ep := range c.Endpoints {
		u, err := c.endpointURL(ep)
		if err != nil {
			panic("questdbexporter: endpointURLs on an unvalidated config: " + err.Error())
		}
		out = append(out, u)
	}
	return out
}

// plaintextCredentialURLs lists where credentials would travel unencrypted
// to a host other than loopback: each ws:// endpoint (a bare host:port
// without a tls section is one) and, with create_tables, its DDL's
// http:// /exec URL. Empty without credentials. Call only after Validate.
func (c *Config) plaintextCredentialURLs() []string {
	if c.Token == "" && c.Username == "" {
		return nil
	}
	var out []string
	for _, ep := range c.endpointURLs() {
		u, err := url.Parse(ep)
		if err != nil || u.Scheme != "ws" || isLoopback(u.Hostname()) {
			continue
		}
		out = append(out, ep)
		if c.CreateTables {
			if x, err := execURL(ep); err == nil {
				out = append(out, x)
			}
		}
	}
	return out
}

// isLoopback reports whether host names this machine: traffic to it does
// not cross a network.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tlsSettings is the TLS configuration for wss:// endpoints: the tls section
// when present, else the defaults (system roots, verification on).
func (c *Config) tlsSettings() configtls.ClientConfig {
	if t := c.TLS.Get(); t != nil {
		return *t
	}
	return configtls.NewDefaultClientConfig()
}

func (c *Config) validateAuth() error {
	switch {
	case c.Token != "" && (c.Username != "" || c.Password != ""):
		return errors.New("token: set either token or username/password, not both")
	case c.Username != "" && c.Password == "":
		return errors.New("password: username is set without password; basic auth needs both")
	case c.Password != "" && c.Username == "":
		return errors.New("username: password is set without username; basic auth needs both")
	}
	return nil
}

func (c *Config) validateQueue() error {
	var errs []error
	if c.SenderID != "" {
		errs = append(errs, validSenderID(c.SenderID))
	}
	durability, err := sfqueue.ParseDurability(c.SFDurability)
	if err != nil {
		errs = append(errs, fmt.Errorf("sf_durability: %q is not one of memory, periodic, flush", c.SFDurability))
	} else if durability != sfqueue.DurabilityMemory && c.SFDir == "" {
		errs = append(errs, fmt.Errorf("sf_durability: %q needs a disk queue; set sf_dir or use memory", c.SFDurability))
	}
	if _, err := sfqueue.ParseOnFull(c.OnFull); err != nil {
		errs = append(errs, fmt.Errorf("on_full: %q is not one of block, evict_oldest", c.OnFull))
	}
	switch {
	case c.SFMaxTotalBytes < 0:
		errs = append(errs, fmt.Errorf("sf_max_total_bytes: %d is negative; use 0 for the default or a size such as 10GiB", c.SFMaxTotalBytes))
	case c.SFMaxSegmentBytes < minSegmentBytes || c.SFMaxSegmentBytes > maxSegmentBytes:
		errs = append(errs, fmt.Errorf("sf_max_segment_bytes: %v is outside %v..%v", c.SFMaxSegmentBytes, ByteSize(minSegmentBytes), ByteSize(maxSegmentBytes)))
	case c.SFMaxSegmentBytes > c.effectiveMaxTotalBytes() && c.SFMaxTotalBytes != 0:
		errs = append(errs, c.capTooSmall())
	case c.SFMaxSegmentBytes > c.effectiveMaxTotalBytes():
		errs = append(errs, fmt.Errorf("sf_max_segment_bytes: %v is larger than sf_max_total_bytes (%v); it must be <= the total cap", c.SFMaxSegmentBytes, c.effectiveMaxTotalBytes()))
	case c.SFMaxSegmentBytes < c.MaxBatchBytes+segmentOverheadBytes:
		errs = append(errs, fmt.Errorf("sf_max_segment_bytes: %v cannot hold one frame of max_batch_bytes (%v); it must be >= max_batch_bytes + %d", c.SFMaxSegmentBytes, c.MaxBatchBytes, segmentOverheadBytes))
	}
	switch limit := c.symbolDictLimit(); {
	case c.SymbolDictMaxBytes < 0:
		errs = append(errs, fmt.Errorf("symbol_dict_max_bytes: %d is negative; use 0 for the default or a size such as 16MiB", c.SymbolDictMaxBytes))
	case c.SymbolDictMaxBytes > limit && c.SFDir == "":
		errs = append(errs, fmt.Errorf("symbol_dict_max_bytes: %v is more than an eighth of sf_max_total_bytes (%v) in memory-only mode; it must be <= %v, so that the generation being written (about three times its text in RAM) leaves the cap to frames", c.SymbolDictMaxBytes, c.effectiveMaxTotalBytes(), limit))
	case c.SymbolDictMaxBytes > limit:
		errs = append(errs, fmt.Errorf("symbol_dict_max_bytes: %v is more than a quarter of sf_max_total_bytes (%v); it must be <= %v, so that a generation's dictionary leaves the cap to frames", c.SymbolDictMaxBytes, c.effectiveMaxTotalBytes(), limit))
	}
	errs = append(errs,
		atLeastFloor("sf_sync_interval", c.SFSyncInterval),
		zeroOrAtLeastFloor("sf_append_deadline", c.SFAppendDeadline))
	if c.DrainOrphans && c.SFDir == "" {
		errs = append(errs, errors.New("drain_orphans: true needs sf_dir; memory-only mode has no orphaned slots"))
	}
	errs = append(errs, inRange("max_background_drainers", c.MaxBackgroundDrainers, 1, maxDrainersLimit))
	return errors.Join(errs...)
}

// capTooSmall explains a sf_max_total_bytes below one segment: the
// smallest cap is one segment, and a segment must hold one frame of
// max_batch_bytes, so the three keys go down together.
func (c *Config) capTooSmall() error {
	smallestSegment := c.MaxBatchBytes + segmentOverheadBytes
	return fmt.Errorf("sf_max_total_bytes: %v is below the smallest cap for these settings, %v (one segment, sf_max_segment_bytes); "+
		"for a smaller cap lower sf_max_segment_bytes with it, down to max_batch_bytes + %d (%v with max_batch_bytes %v), "+
		"and max_batch_bytes too for a cap below that: the smallest cap of all is %v (max_batch_bytes: %v, sf_max_segment_bytes: %v)",
		c.SFMaxTotalBytes, c.SFMaxSegmentBytes, segmentOverheadBytes, smallestSegment, c.MaxBatchBytes,
		ByteSize(minMaxBatchBytes+segmentOverheadBytes), ByteSize(minMaxBatchBytes), ByteSize(minMaxBatchBytes+segmentOverheadBytes))
}

func (c *Config) validateWire() error {
	var errs []error
	if c.MaxBatchBytes < minMaxBatchBytes || c.MaxBatchBytes > maxMaxBatchBytes {
		errs = append(errs, fmt.Errorf("max_batch_bytes: %v is outside %v..%v", c.MaxBatchBytes, ByteSize(minMaxBatchBytes), ByteSize(maxMaxBatchBytes)))
	}
	errs = append(errs,
		inRange("max_in_flight", c.MaxInFlight, 1, maxInFlightLimit),
		atLeastFloor("reconnect_initial_backoff", c.ReconnectInitialBackoff),
		atLeastFloor("reconnect_max_backoff", c.ReconnectMaxBackoff),
		zeroOrAtLeastFloor("close_flush_timeout", c.CloseFlushTimeout),
		zeroOrAtLeastFloor("durable_ack_keepalive_interval", c.DurableAckKeepaliveInterval),
		inRange("error_inbox_capacity", c.ErrorInboxCapacity, minErrorInboxCapacity, maxErrorInboxCapacity),
		inRange("symbol_dict_max_entries", c.SymbolDictMaxEntries, 1, maxSymbolDictEntries))
	if c.ReconnectMaxBackoff < c.ReconnectInitialBackoff {
		errs = append(errs, fmt.Errorf("reconnect_max_backoff: %v is below reconnect_initial_backoff (%v); it must be >= it", c.ReconnectMaxBackoff, c.ReconnectInitialBackoff))
	}
	if c.MaxFrameRejections < 1 {
		errs = append(errs, fmt.Errorf("max_frame_rejections: %d is below 1", c.MaxFrameRejections))
	}
	if _, err := parseDurableAck(c.RequestDurableAck); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// durableAck is request_durable_ack as the handshake's request value:
// "", "local", "replicated" or "local,replicated". Call only after Validate.
func (c *Config) durableAck() string {
	v, _ := parseDurableAck(c.RequestDurableAck)
	return v
}

func parseDurableAck(s string) (string, error) {
	switch s {
	case "", "off":
		return "", nil
	case "on", "replicated":
		return "replicated", nil
	case "local", "local,replicated":
		return s, nil
	}
	return "", fmt.Errorf("request_durable_ack: %q is not one of off, on, local, replicated, local,replicated", s)
}

// categoryKeys maps the per-category override keys to their categories.
var categoryKeys = []struct {
	key      string
	category qwp.Category
	value    func(*Config) string
}{
	{"on_schema_error", qwp.CategorySchemaMismatch, func(c *Config) string { return c.OnSchemaError }},
	{"on_parse_error", qwp.CategoryParseError, func(c *Config) string { return c.OnParseError }},
	{"on_internal_error", qwp.CategoryInternalError, func(c *Config) string { return c.OnInternalError }},
	{"on_security_error", qwp.CategorySecurityError, func(c *Config) string { return c.OnSecurityError }},
	{"on_write_error", qwp.CategoryWriteError, func(c *Config) string { return c.OnWriteError }},
}

func (c *Config) validateErrorPolicies() error {
	var errs []error
	if c.OnServerError != "auto" {
		if _, err := qwp.ParsePolicy(c.OnServerError); err != nil {
			errs = append(errs, fmt.Errorf("on_server_error: %q is not one of auto, terminal, retriable, retriable_other", c.OnServerError))
		}
	}
	for _, k := range categoryKeys {
		if v := k.value(c); v != "" {
			if _, err := qwp.ParsePolicy(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %q is not one of terminal, retriable, retriable_other (or empty to inherit on_server_error)", k.key, v))
			}
		}
	}
	return errors.Join(errs...)
}

// errorPolicy is the policy for an error category: the category's own key,
// else on_server_error unless it is auto, else the category's default.
// Forced categories (UNKNOWN, PROTOCOL_VIOLATION, DATA_LOSS) always keep
// their default. Call only after Validate.
func (c *Config) errorPolicy(cat qwp.Category) qwp.Policy {
	if !cat.Overridable() {
		return cat.DefaultPolicy()
	}
	for _, k := range categoryKeys {
		if k.category == cat {
			if v := k.value(c); v != "" {
				p, _ := qwp.ParsePolicy(v)
				return p
			}
		}
	}
	if c.OnServerError != "auto" {
		p, _ := qwp.ParsePolicy(c.OnServerError)
		return p
	}
	return cat.DefaultPolicy()
}

func (c *Config) validateDataModel() error {
	var errs []error
	seen := make(map[string]string, 6)
	// The encoder applies QuestDB's table-name rules; asking it here turns
	// a bad name into a config error instead of a failed Start.
	names := qwp.NewEncoder(nil, qwp.EncoderOptions{})
	for _, t := range c.tableKeys() {
		if _, err := names.Table(t.name); err != nil {
			errs = append(errs, fmt.Errorf("tables::%s: %w", t.key, err))
			continue
		}
		folded := strings.ToLower(t.name) // QuestDB table names are case-insensitive
		if prev, dup := seen[folded]; dup {
			errs = append(errs, fmt.Errorf("tables::%s: %q is also the table of tables::%s; each signal needs its own table", t.key, t.name, prev))
			continue
		}
		seen[folded] = t.key
	}
	if _, err := datamodel.PromotedColumns(c.AttributesAsSymbols); err != nil {
		errs = append(errs, err)
	}
	if c.MetricAttributesType != "symbol" && c.MetricAttributesType != "varchar" {
		errs = append(errs, fmt.Errorf("metric_attributes_type: %q is not one of symbol, varchar", c.MetricAttributesType))
	}
	// The DDL generator's own check, so the rule lives in one place; its
	// message starts with ttl "<value>".
	if err := datamodel.CheckTTL(c.TTL); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// tableKeys lists the configured table names with their YAML keys.
func (c *Config) tableKeys() []struct{ key, name string } {
	t := c.Tables
	return []struct{ key, name string }{
		{"gauge", t.Gauge}, {"sum", t.Sum}, {"histogram", t.Histogram},
		{"exponential_histogram", t.ExponentialHistogram}, {"summary", t.Summary}, {"logs", t.Logs},
		{"traces", t.Traces},
	}
}

// promotedColumns returns attributes_as_symbols with each key's sanitised
// column name. Call only after Validate.
func (c *Config) promotedColumns() []datamodel.PromotedColumn {
	cols, err := datamodel.PromotedColumns(c.AttributesAsSymbols)
	if err != nil {
		panic("questdbexporter: promotedColumns on an unvalidated config: " + err.Error())
	}
	return cols
}

// queueOptions maps the queue keys onto sfqueue.Options for the slot
// senderID. Call only after Validate.
func (c *Config) queueOptions(senderID string, logger *zap.Logger) sfqueue.Options {
	durability, _ := sfqueue.ParseDurability(c.SFDurability)
	onFull, _ := sfqueue.ParseOnFull(c.OnFull)
	return sfqueue.Options{
		Dir:                c.SFDir,
		SenderID:           senderID,
		MaxTotalBytes:      int64(c.queueBytes()),
		MaxSegmentBytes:    int64(c.SFMaxSegmentBytes),
		Durability:         durability,
		SyncInterval:       c.SFSyncInterval,
		OnFull:             onFull,
		AppendDeadline:     c.SFAppendDeadline,
		SymbolUse:          payloadSymbolUse,
		SymbolDefs:         payloadSymbolDefs,
		Logger:             logger,
		CallerLogsDataLoss: true, // reportUnreplayable
	}
}

// rowEncoderConfig maps the data-model keys onto the row encoder's
// configuration. Call only after Validate.
func (c *Config) rowEncoderConfig(logger *zap.Logger) datamodel.EncoderConfig {
	t := c.Tables
	return datamodel.EncoderConfig{
		Tables: datamodel.Tables{
			Gauge: t.Gauge, Sum: t.Sum, Histogram: t.Histogram,
			ExponentialHistogram: t.ExponentialHistogram, Summary: t.Summary, Logs: t.Logs, Traces: t.Traces,
		},
		Promoted:          c.promotedColumns(),
		AttributesVarchar: c.MetricAttributesType == "varchar",
		Logger:            logger,
	}
}

// effectiveMaxTotalBytes is sf_max_total_bytes with 0 replaced by the mode's
// default.
func (c *Config) effectiveMaxTotalBytes() ByteSize {
	switch {
	case c.SFMaxTotalBytes != 0:
		return c.SFMaxTotalBytes
	case c.SFDir == "":
		return memoryModeMaxTotalBytes
	}
	return sfModeMaxTotalBytes
}

// queueBytes is the queue's cap: sf_max_total_bytes, or in memory-only mode
// the share of it that is not GC headroom, less memorySegmentReserve
// segments for the queue's buffers it does not count (never below a
// quarter of the cap).
func (c *Config) queueBytes() ByteSize {
	total := c.effectiveMaxTotalBytes()
	if c.SFDir == "" {
		return max(total/memoryGCShare-memorySegmentReserve*c.SFMaxSegmentBytes, total/4)
	}
	return total
}

// symbolDictLimit is the largest symbol_dict_max_bytes: a quarter of
// sf_max_total_bytes, an eighth in memory-only mode.
func (c *Config) symbolDictLimit() ByteSize {
	if c.SFDir == "" {
		return c.effectiveMaxTotalBytes() / memoryGCShare / symbolDictCapShare
	}
	return c.effectiveMaxTotalBytes() / symbolDictCapShare
}

// effectiveSymbolDictMaxBytes is symbol_dict_max_bytes with 0 replaced by
// min(16 MiB, the limit), and half the limit in memory-only mode.
func (c *Config) effectiveSymbolDictMaxBytes() ByteSize {
	if c.SymbolDictMaxBytes != 0 {
		return c.SymbolDictMaxBytes
	}
	if c.SFDir == "" {
		return min(defaultSymbolDictMaxBytes, c.symbolDictLimit()/2)
	}
	return min(defaultSymbolDictMaxBytes, c.symbolDictLimit())
}

// symbolDictStartBytes is the working limit a dictionary generation starts
// at: 4 MiB, or symbol_dict_max_bytes if smaller.
func (c *Config) symbolDictStartBytes() ByteSize {
	return min(defaultSymbolDictStartBytes, c.effectiveSymbolDictMaxBytes())
}

// senderID is the slot name: sender_id when set, else derived from the
// component ID ("questdb" -> "questdb", "questdb/primary" ->
// "questdb-primary"), with every character outside letters, digits, '_'
// and '-' in the name replaced by '_'.
func (c *Config) senderID(id component.ID) string {
	if c.SenderID != "" {
		return c.SenderID
	}
	s := id.Type().String()
	if name := id.Name(); name != "" {
		s += "-" + strings.Map(func(r rune) rune {
			if isSenderIDRune(r) {
				return r
			}
			return '_'
		}, name)
	}
	if len(s) > maxSenderIDBytes {
		s = s[:maxSenderIDBytes]
	}
	return s
}

func isSenderIDRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
}

// validSenderID applies the connect string's rule: letters, digits, '_' and
// '-' only (no path separator, no '.', no space), so the slot directory is
// exactly <sf_dir>/<sender_id>.
func validSenderID(s string) error {
	if len(s) > maxSenderIDBytes {
		return fmt.Errorf("sender_id: %q is %d bytes; the limit is %d", s, len(s), maxSenderIDBytes)
	}
	for _, r := range s {
		if !isSenderIDRune(r) {
			return fmt.Errorf("sender_id: %q contains %q; allowed: letters, digits, '_' and '-'", s, r)
		}
	}
	return nil
}

// minInterval is the floor of every interval, backoff and timeout: below it
// a loop would spin (the sender and the queue enforce it again at run time).
const minInterval = time.Millisecond

func atLeastFloor(key string, d time.Duration) error {
	if d < minInterval {
		return fmt.Errorf("%s: %v is below %v; use a duration such as 5s or 250ms", key, d, minInterval)
	}
	return nil
}

func zeroOrAtLeastFloor(key string, d time.Duration) error {
	if d != 0 && d < minInterval {
		return fmt.Errorf("%s: %v is neither 0 nor at least %v; use 0 or a duration such as 5s or 250ms", key, d, minInterval)
	}
	return nil
}

func inRange(key string, v, lo, hi int) error {
	if v < lo || v > hi {
		return fmt.Errorf("%s: %d is outside %d..%d", key, v, lo, hi)
	}
	return nil
}

package questdbexporter

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.uber.org/zap"

	"github.com/questdbexporter/questdbexporter/internal/datamodel"
	"github.com/questdbexporter/questdbexporter/internal/metadata"
	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// defaultConfig is the default configuration with sf_dir in a temporary
// directory: Validate checks sf_dir on this machine, and the tests must
// not depend on whether the default /var/lib/otelcol/questdb could be
// created here (TestConfigDefaults checks the default itself).
func defaultConfig(t *testing.T) *Config {
	t.Helper()
	cfg, ok := createDefaultConfig().(*Config)
	require.True(t, ok)
	cfg.SFDir = filepath.Join(t.TempDir(), "questdb")
	return cfg
}

func TestConfigLoad(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)

	full := defaultConfig(t)
	tls := configtls.NewDefaultClientConfig()
	tls.CAFile = filepath.Join("testdata", "questdb-ca.pem")
	tls.ServerName = "questdb.example.com"
	full.Endpoints = []string{"questdb-a:9000", "wss://questdb-b.example.com:443", "wss://questdb-c.example.com/custom/ingest"}
	full.TLS = configoptional.Some(tls)
	full.Username, full.Password = "ingest", "s3cret"
	full.SFDir = filepath.Join("testdata", "slots")
	full.SenderID = "edge-7"
	full.SFMaxTotalBytes = 2 << 30
	full.SFMaxSegmentBytes = 8 << 20
	full.SFDurability = "flush"
	full.SFSyncInterval = time.Second
	full.SFAppendDeadline = 2 * time.Second
	full.OnFull = "evict_oldest"
	full.MaxBatchBytes = 1 << 20
	full.MaxInFlight = 64
	full.ReconnectInitialBackoff = 50 * time.Millisecond
	full.ReconnectMaxBackoff = 10 * time.Second
	full.CloseFlushTimeout = 0
	full.RequestDurableAck = "local,replicated"
	full.DurableAckKeepaliveInterval = 100 * time.Millisecond
	full.MaxFrameRejections = 8
	full.OnServerError = "retriable"
	full.OnSchemaError, full.OnParseError, full.OnInternalError = "terminal", "terminal", "retriable_other"
	full.OnSecurityError, full.OnWriteError = "terminal", "retriable"
	full.ErrorInboxCapacity = 1024
	full.DrainOrphans = true
	full.MaxBackgroundDrainers = 2
	full.WaitForAck = true
	full.SymbolDictMaxEntries = 250000
	full.Tables = TablesConfig{
		Gauge: "gauges", Sum: "sums", Histogram: "histograms",
		ExponentialHistogram: "exp_histograms", Summary: "summaries", Logs: "logs", Traces: "spans",
	}
	full.AttributesAsSymbols = []string{"host.name", "k8s.pod.name"}
	full.MetricAttributesType = "varchar"
	full.CreateTables = false
	full.TTL = "30d"

	tests := []struct {
		id   component.ID
		want *Config
	}{
		{component.NewID(metadata.Type), createDefaultConfig().(*Config)},
		{component.NewIDWithName(metadata.Type, "full"), full},
	}
	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			cfg := createDefaultConfig()
			sub, err := cm.Sub(tt.id.String())
			require.NoError(t, err)
			require.NoError(t, sub.Unmarshal(cfg))
			assert.Equal(t, tt.want, cfg)
			// The default sf_dir is checked by TestConfigSFDirCheckedAtValidate.
			if cfg.(*Config).isDefaultSFDir() {
				cfg.(*Config).SFDir = t.TempDir()
			}
			require.NoError(t, confmap.Validate(cfg))
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	assert.Equal(t, "/var/lib/otelcol/questdb", createDefaultConfig().(*Config).SFDir)
	cfg := defaultConfig(t)
	require.NoError(t, cfg.Validate())
	assert.Equal(t, []string{"localhost:9000"}, cfg.Endpoints)
	assert.Equal(t, ByteSize(1887436), cfg.MaxBatchBytes)
	assert.Equal(t, ByteSize(4<<20), cfg.SFMaxSegmentBytes)
	assert.Equal(t, 1000000, cfg.SymbolDictMaxEntries)
	assert.False(t, cfg.TLS.HasValue(), "no tls section by default")
	assert.Equal(t, []string{"ws://localhost:9000/write/v4"}, cfg.endpointURLs())
	assert.Equal(t, ByteSize(10<<30), cfg.effectiveMaxTotalBytes())
	assert.True(t, cfg.CreateTables, "tables are created with dedup keys by default")
	assert.Empty(t, cfg.TTL, "no TTL by default")
}

// TestConfigValidateErrors has one case per rule; each message must name
// the key it is about.
func TestConfigValidateErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		key    string // must appear in the message
		also   string // and this, when set (the allowed values, the other key)
	}{
		{"no endpoints", func(c *Config) { c.Endpoints = nil }, "endpoints", "host:port"},
		{"empty endpoint", func(c *Config) { c.Endpoints = []string{""} }, "endpoints[0]", "host:port"},
		{"http scheme", func(c *Config) { c.Endpoints = []string{"http://q:9000"} }, "endpoints[0]", "ws, wss"},
		{"bad port", func(c *Config) { c.Endpoints = []string{"q:70000"} }, "endpoints[0]", "1..65535"},
		{"port not a number", func(c *Config) { c.Endpoints = []string{"ws://q:abc"} }, "endpoints[0]", ""},
		{"empty port", func(c *Config) { c.Endpoints = []string{"q:"} }, "endpoints[0]", "empty port"},
		{"no host", func(c *Config) { c.Endpoints = []string{"ws://:9000"} }, "endpoints[0]", "no host"},
		{"credentials in URL", func(c *Config) { c.Endpoints = []string{"ws://u:p@q:9000"} }, "endpoints[0]", "username/password"},
		{"query in URL", func(c *Config) { c.Endpoints = []string{"ws://q:9000/write/v4?x=1"} }, "endpoints[0]", "query"},
		{"bare IPv6", func(c *Config) { c.Endpoints = []string{"::1"} }, "endpoints[0]", "[::1]:9000"},
		{"bare IPv6 with port", func(c *Config) { c.Endpoints = []string{"fe80::1:9000"} }, "endpoints[0]", "brackets"},
		{"bare IPv6 in a URL", func(c *Config) { c.Endpoints = []string{"ws://::1/write/v4"} }, "endpoints[0]", "[::1]:9000"},
		{"duplicate endpoint", func(c *Config) { c.Endpoints = []string{"q:9000", "ws://q:9000/write/v4"} }, "endpoints[1]", "endpoints[0]"},
		{"ws with tls section", func(c *Config) {
			c.Endpoints = []string{"ws://q:9000"}
			c.TLS = configoptional.Some(configtls.NewDefaultClientConfig())
		}, "endpoints[0]", "wss://"},
		{"tls insecure", func(c *Config) {
			tls := configtls.NewDefaultClientConfig()
			tls.Insecure = true
			c.TLS = configoptional.Some(tls)
		}, "tls::insecure", "ws://"},
		{"token and username", func(c *Config) { c.Token, c.Username, c.Password = "t", "u", "p" }, "token", "not both"},
		{"username without password", func(c *Config) { c.Username = "u" }, "password", "both"},
		{"password without username", func(c *Config) { c.Password = "p" }, "username", "both"},
		{"sender_id with dot", func(c *Config) { c.SenderID = "a.b" }, "sender_id", "letters, digits"},
		{"sender_id with slash", func(c *Config) { c.SenderID = "a/b" }, "sender_id", "letters, digits"},
		{"sender_id too long", func(c *Config) { c.SenderID = strings.Repeat("a", 128) }, "sender_id", "127"},
		{"bad durability", func(c *Config) { c.SFDurability = "always" }, "sf_durability", "memory, periodic, flush"},
		{"flush without sf_dir", func(c *Config) { c.SFDir, c.SFDurability = "", "flush" }, "sf_durability", "sf_dir"},
		{"periodic without sf_dir", func(c *Config) { c.SFDir, c.SFDurability = "", "periodic" }, "sf_durability", "sf_dir"},
		{"bad on_full", func(c *Config) { c.OnFull = "drop" }, "on_full", "block, evict_oldest"},
		{"negative total", func(c *Config) { c.SFMaxTotalBytes = -1 }, "sf_max_total_bytes", "negative"},
		{"segment too small", func(c *Config) { c.SFMaxSegmentBytes = 100 }, "sf_max_segment_bytes", "256..1GiB"},
		{"segment too large", func(c *Config) { c.SFMaxSegmentBytes = 2 << 30 }, "sf_max_segment_bytes", "256..1GiB"},
		{"total below one segment", func(c *Config) { c.SFMaxTotalBytes, c.SFMaxSegmentBytes = 4<<20, 8<<20 }, "sf_max_total_bytes", "smallest cap for these settings, 8MiB"},
		// The user set only the cap: the message blames it, not the
		// segment size left at its default, and names the smallest caps.
		{"total below the default segment", func(c *Config) { c.SFMaxTotalBytes = 1 << 20 }, "sf_max_total_bytes", "smallest cap of all is 65600 (max_batch_bytes: 64KiB, sf_max_segment_bytes: 65600)"},
		{"segment over memory default total", func(c *Config) { c.SFDir, c.SFMaxSegmentBytes = "", 256<<20 }, "sf_max_segment_bytes", "128MiB"},
		{"segment below a frame", func(c *Config) { c.SFMaxSegmentBytes = 1 << 20 }, "sf_max_segment_bytes", "max_batch_bytes"},
		{"zero sync interval", func(c *Config) { c.SFSyncInterval = 0 }, "sf_sync_interval", "below 1ms"},
		{"nanosecond sync interval", func(c *Config) { c.SFSyncInterval = 5 }, "sf_sync_interval", "below 1ms"},
		{"negative append deadline", func(c *Config) { c.SFAppendDeadline = -time.Second }, "sf_append_deadline", "neither 0 nor at least 1ms"},
		{"nanosecond append deadline", func(c *Config) { c.SFAppendDeadline = 5 }, "sf_append_deadline", "neither 0 nor at least 1ms"},
		{"drain_orphans in memory", func(c *Config) { c.SFDir, c.DrainOrphans = "", true }, "drain_orphans", "sf_dir"},
		{"no drainers", func(c *Config) { c.MaxBackgroundDrainers = 0 }, "max_background_drainers", "1..64"},
		{"too many drainers", func(c *Config) { c.MaxBackgroundDrainers = 65 }, "max_background_drainers", "1..64"},
		{"batch too small", func(c *Config) { c.MaxBatchBytes = 1000 }, "max_batch_bytes", "64KiB..16MiB"},
		{"batch too large", func(c *Config) { c.MaxBatchBytes = 17 << 20 }, "max_batch_bytes", "64KiB..16MiB"},
		{"no in-flight", func(c *Config) { c.MaxInFlight = 0 }, "max_in_flight", "1..10000"},
		{"too much in flight", func(c *Config) { c.MaxInFlight = 10001 }, "max_in_flight", "1..10000"},
		{"zero initial backoff", func(c *Config) { c.ReconnectInitialBackoff = 0 }, "reconnect_initial_backoff", "below 1ms"},
		{"nanosecond backoffs", func(c *Config) { c.ReconnectInitialBackoff, c.ReconnectMaxBackoff = 5, 5 }, "reconnect_max_backoff", "below 1ms"},
		{"max below initial backoff", func(c *Config) { c.ReconnectMaxBackoff = 10 * time.Millisecond }, "reconnect_max_backoff", "reconnect_initial_backoff"},
		{"negative close timeout", func(c *Config) { c.CloseFlushTimeout = -time.Second }, "close_flush_timeout", "neither 0 nor at least 1ms"},
		{"nanosecond close timeout", func(c *Config) { c.CloseFlushTimeout = 5 }, "close_flush_timeout", "neither 0 nor at least 1ms"},
		{"negative keepalive", func(c *Config) { c.DurableAckKeepaliveInterval = -time.Millisecond }, "durable_ack_keepalive_interval", "neither 0 nor at least 1ms"},
		{"bad durable ack", func(c *Config) { c.RequestDurableAck = "yes" }, "request_durable_ack", "local,replicated"},
		{"zero rejections", func(c *Config) { c.MaxFrameRejections = 0 }, "max_frame_rejections", "1"},
		{"bad on_server_error", func(c *Config) { c.OnServerError = "drop" }, "on_server_error", "auto, terminal"},
		{"empty on_server_error", func(c *Config) { c.OnServerError = "" }, "on_server_error", "auto, terminal"},
		{"bad on_schema_error", func(c *Config) { c.OnSchemaError = "auto" }, "on_schema_error", "retriable_other"},
		{"bad on_parse_error", func(c *Config) { c.OnParseError = "x" }, "on_parse_error", "terminal"},
		{"bad on_internal_error", func(c *Config) { c.OnInternalError = "x" }, "on_internal_error", "terminal"},
		{"bad on_security_error", func(c *Config) { c.OnSecurityError = "x" }, "on_security_error", "terminal"},
		{"bad on_write_error", func(c *Config) { c.OnWriteError = "abandoned" }, "on_write_error", "terminal"},
		{"small inbox", func(c *Config) { c.ErrorInboxCapacity = 15 }, "error_inbox_capacity", "16.."},
		{"no symbol entries", func(c *Config) { c.SymbolDictMaxEntries = 0 }, "symbol_dict_max_entries", "1..2000000"},
		{"too many symbol entries", func(c *Config) { c.SymbolDictMaxEntries = 2000001 }, "symbol_dict_max_entries", "1..2000000"},
		{"negative symbol bytes", func(c *Config) { c.SymbolDictMaxBytes = -1 }, "symbol_dict_max_bytes", "negative"},
		{"symbol bytes above a quarter of the cap", func(c *Config) {
			c.SFMaxTotalBytes, c.SFMaxSegmentBytes, c.SymbolDictMaxBytes = 64<<20, 4<<20, 16<<20+1
		}, "symbol_dict_max_bytes", "quarter of sf_max_total_bytes"},
		{"symbol bytes above an eighth of the cap in memory-only mode", func(c *Config) {
			c.SFDir, c.SFMaxTotalBytes, c.SFMaxSegmentBytes, c.SymbolDictMaxBytes = "", 64<<20, 4<<20, 8<<20+1
		}, "symbol_dict_max_bytes", "eighth of sf_max_total_bytes"},
		{"empty table", func(c *Config) { c.Tables.Gauge = "" }, "tables::gauge", ""},
		{"table with slash", func(c *Config) { c.Tables.Sum = "a/b" }, "tables::sum", "/"},
		{"table with colon", func(c *Config) { c.Tables.Histogram = "a:b" }, "tables::histogram", ":"},
		{"table with double dot", func(c *Config) { c.Tables.ExponentialHistogram = "a..b" }, "tables::exponential_histogram", ".."},
		{"table with trailing dot", func(c *Config) { c.Tables.Summary = "a." }, "tables::summary", "'.'"},
		{"table with leading space", func(c *Config) { c.Tables.Logs = " logs" }, "tables::logs", "space"},
		{"table with control char", func(c *Config) { c.Tables.Logs = "lo\x01gs" }, "tables::logs", "control"},
		{"table with BOM", func(c *Config) { c.Tables.Logs = "lo\ufeffgs" }, "tables::logs", "control"},
		{"table name too long", func(c *Config) { c.Tables.Logs = strings.Repeat("t", 128) }, "tables::logs", "127"},
		{"tables not distinct", func(c *Config) { c.Tables.Sum = "OTEL_METRICS_GAUGE" }, "tables::sum", "tables::gauge"},
		{"traces table empty", func(c *Config) { c.Tables.Traces = "" }, "tables::traces", "0 bytes"},
		{"traces table shared with logs", func(c *Config) { c.Tables.Traces = "otel_logs" }, "tables::traces", "tables::logs"},
		{"promoted collides with built-in", func(c *Config) { c.AttributesAsSymbols = []string{"service.name"} }, "attributes_as_symbols", "service_name"},
		{"promoted collides with timestamp", func(c *Config) { c.AttributesAsSymbols = []string{"timestamp"} }, "attributes_as_symbols", "timestamp"},
		{"promoted keys collide", func(c *Config) { c.AttributesAsSymbols = []string{"host.name", "host-name"} }, "attributes_as_symbols", "host.name"},
		{"promoted empty key", func(c *Config) { c.AttributesAsSymbols = []string{""} }, "attributes_as_symbols", "empty"},
		{"bad attributes type", func(c *Config) { c.MetricAttributesType = "json" }, "metric_attributes_type", "symbol, varchar"},
		{"ttl unit", func(c *Config) { c.TTL = "30x" }, `ttl "30x"`, "h, d, w, M, y"},
		{"ttl without count", func(c *Config) { c.TTL = "d" }, `ttl "d"`, "positive whole number"},
		{"ttl zero", func(c *Config) { c.TTL = "0d" }, `ttl "0d"`, "positive whole number"},
		{"ttl hours not whole days", func(c *Config) { c.TTL = "36h" }, `ttl "36h"`, "multiple of 24"},
		{"ttl with a space", func(c *Config) { c.TTL = "30 d" }, `ttl "30 d"`, "positive whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaultConfig(t)
			tt.mutate(cfg)
			err := cfg.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.key+":")
			assert.Contains(t, err.Error(), tt.also)
		})
	}
}

func TestConfigValidateAccepts(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
	}{
		{"memory-only", func(c *Config) { c.SFDir = "" }},
		{"token", func(c *Config) { c.Token = "tok" }},
		{"basic auth", func(c *Config) { c.Username, c.Password = "u", "p" }},
		{"tls with bare endpoints", func(c *Config) {
			c.TLS = configoptional.Some(configtls.NewDefaultClientConfig())
			c.Endpoints = []string{"a:9000", "wss://b"}
		}},
		{"ipv6", func(c *Config) { c.Endpoints = []string{"[::1]:9000", "ws://[::1]:9001/write/v4"} }},
		{"zero timeouts", func(c *Config) { c.CloseFlushTimeout, c.DurableAckKeepaliveInterval, c.SFAppendDeadline = 0, 0, 0 }},
		{"durable ack on", func(c *Config) { c.RequestDurableAck = "on" }},
		{"durable ack off", func(c *Config) { c.RequestDurableAck = "off" }},
		{"bounds", func(c *Config) {
			c.MaxInFlight, c.MaxBackgroundDrainers, c.SymbolDictMaxEntries = 10000, 64, 2000000
			c.MaxBatchBytes, c.SFMaxSegmentBytes = 16<<20, 32<<20
		}},
		{"segment equals total", func(c *Config) { c.SFMaxTotalBytes, c.SFMaxSegmentBytes = 4<<20, 4<<20 }},
		{"table with single dots", func(c *Config) { c.Tables.Logs = "otel.logs.v1" }},
		{"promoted keys", func(c *Config) {
			c.AttributesAsSymbols = []string{"host.name", "k8s.namespace.name", "deployment.environment"}
		}},
		{"ttl units", func(c *Config) { c.TTL = "48h" }},
		{"ttl weeks", func(c *Config) { c.TTL = "2w" }},
		{"ttl months", func(c *Config) { c.TTL = "6M" }},
		{"ttl years without create_tables", func(c *Config) { c.TTL, c.CreateTables = "1y", false }},
		// Names QuestDB's SQL needs quoted: the DDL quotes them, Validate
		// refuses none.
		{"keyword and spaced table names", func(c *Config) { c.Tables.Logs, c.Tables.Gauge, c.Tables.Sum = "order", "my gauges", "FROM" }},
		{"keyword promoted keys", func(c *Config) { c.AttributesAsSymbols = []string{"order", "limit", "from", "end"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaultConfig(t)
			tt.mutate(cfg)
			require.NoError(t, cfg.Validate())
		})
	}
}

func TestConfigEndpointURLs(t *testing.T) {
	withTLS := configoptional.Some(configtls.NewDefaultClientConfig())
	tests := []struct {
		endpoint string
		tls      bool
		want     string
	}{
		{"localhost:9000", false, "ws://localhost:9000/write/v4"},
		{"localhost", false, "ws://localhost:9000/write/v4"},
		{"localhost:9000", true, "wss://localhost:9000/write/v4"},
		{"ws://q:9100", false, "ws://q:9100/write/v4"},
		{"ws://q:9100/", false, "ws://q:9100/write/v4"},
		{"wss://q", false, "wss://q:9000/write/v4"},
		{"wss://q/proxy/qwp", true, "wss://q:9000/proxy/qwp"},
		{"[::1]:9000", false, "ws://[::1]:9000/write/v4"},
		{"[::1]", false, "ws://[::1]:9000/write/v4"},
		{"ws://[fe80::1]:9100", false, "ws://[fe80::1]:9100/write/v4"},
	}
	for _, tt := range tests {
		t.Run(tt.endpoint, func(t *testing.T) {
			cfg := defaultConfig(t)
			cfg.Endpoints = []string{tt.endpoint}
			if tt.tls {
				cfg.TLS = withTLS
			}
			require.NoError(t, cfg.Validate())
			assert.Equal(t, []string{tt.want}, cfg.endpointURLs())
		})
	}
}

func TestConfigTLSSettings(t *testing.T) {
	cfg := defaultConfig(t)
	assert.Equal(t, configtls.NewDefaultClientConfig(), cfg.tlsSettings(), "wss:// without a tls section uses the defaults")
	tls := configtls.NewDefaultClientConfig()
	tls.CAFile = "/ca.pem"
	cfg.TLS = configoptional.Some(tls)
	assert.Equal(t, tls, cfg.tlsSettings())
}

func TestConfigSenderID(t *testing.T) {
	typ := metadata.Type
	tests := []struct {
		id       component.ID
		explicit string
		want     string
	}{
		{component.NewID(typ), "", "questdb"},
		{component.NewIDWithName(typ, "primary"), "", "questdb-primary"},
		{component.NewIDWithName(typ, "eu.west 1"), "", "questdb-eu_west_1"},
		{component.NewIDWithName(typ, "a/b"), "", "questdb-a_b"},
		{component.NewIDWithName(typ, strings.Repeat("n", 200)), "", "questdb-" + strings.Repeat("n", 119)},
		{component.NewIDWithName(typ, "primary"), "edge-7", "edge-7"},
	}
	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			cfg := defaultConfig(t)
			cfg.SenderID = tt.explicit
			got := cfg.senderID(tt.id)
			assert.Equal(t, tt.want, got)
			assert.NoError(t, validSenderID(got), "a derived sender_id must itself be valid")
		})
	}
}

func TestConfigEffectiveMaxTotalBytes(t *testing.T) {
	tests := []struct {
		dir  string
		set  ByteSize
		want ByteSize
	}{
		{"/d", 0, 10 << 30},
		{"", 0, 128 << 20},
		{"/d", 1 << 30, 1 << 30},
		{"", 1 << 30, 1 << 30},
	}
	for _, tt := range tests {
		cfg := defaultConfig(t)
		cfg.SFDir, cfg.SFMaxTotalBytes = tt.dir, tt.set
		assert.Equal(t, tt.want, cfg.effectiveMaxTotalBytes(), "sf_dir %q, sf_max_total_bytes %v", tt.dir, tt.set)
	}
}

func TestConfigDurableAck(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "off": "", "on": "replicated", "replicated": "replicated",
		"local": "local", "local,replicated": "local,replicated",
	} {
		cfg := defaultConfig(t)
		cfg.RequestDurableAck = in
		require.NoError(t, cfg.Validate())
		assert.Equal(t, want, cfg.durableAck(), "request_durable_ack %q", in)
	}
}

func TestConfigErrorPolicy(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		cat    qwp.Category
		want   qwp.Policy
	}{
		{"auto uses the default", func(*Config) {}, qwp.CategorySchemaMismatch, qwp.PolicyTerminal},
		{"auto write error", func(*Config) {}, qwp.CategoryWriteError, qwp.PolicyRetriable},
		{"auto not writable", func(*Config) {}, qwp.CategoryNotWritable, qwp.PolicyRetriableOther},
		{"on_server_error applies", func(c *Config) { c.OnServerError = "retriable" }, qwp.CategoryParseError, qwp.PolicyRetriable},
		{"on_server_error covers dictionary gap", func(c *Config) { c.OnServerError = "terminal" }, qwp.CategoryDictionaryGap, qwp.PolicyTerminal},
		{"category key wins", func(c *Config) { c.OnServerError, c.OnSchemaError = "retriable", "terminal" }, qwp.CategorySchemaMismatch, qwp.PolicyTerminal},
		{"category key over auto", func(c *Config) { c.OnWriteError = "retriable_other" }, qwp.CategoryWriteError, qwp.PolicyRetriableOther},
		{"parse key", func(c *Config) { c.OnParseError = "retriable" }, qwp.CategoryParseError, qwp.PolicyRetriable},
		{"internal key", func(c *Config) { c.OnInternalError = "terminal" }, qwp.CategoryInternalError, qwp.PolicyTerminal},
		{"security key", func(c *Config) { c.OnSecurityError = "retriable" }, qwp.CategorySecurityError, qwp.PolicyRetriable},
		{"unknown is forced", func(c *Config) { c.OnServerError = "terminal" }, qwp.CategoryUnknown, qwp.PolicyRetriable},
		{"protocol violation is forced", func(c *Config) { c.OnServerError = "retriable" }, qwp.CategoryProtocolViolation, qwp.PolicyTerminal},
		{"data loss is forced", func(c *Config) { c.OnServerError = "retriable" }, qwp.CategoryDataLoss, qwp.PolicyAbandoned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaultConfig(t)
			tt.mutate(cfg)
			require.NoError(t, cfg.Validate())
			assert.Equal(t, tt.want, cfg.errorPolicy(tt.cat))
		})
	}
}

func TestConfigQueueOptions(t *testing.T) {
	cfg := defaultConfig(t)
	cfg.SFDir = "/d"
	cfg.SFDurability = "periodic"
	cfg.OnFull = "evict_oldest"
	cfg.SFSyncInterval = 3 * time.Second
	cfg.SFAppendDeadline = 4 * time.Second
	require.NoError(t, cfg.Validate())
	logger := zap.NewNop()
	o := cfg.queueOptions("questdb-x", logger)
	assert.Equal(t, "/d", o.Dir)
	assert.Equal(t, "questdb-x", o.SenderID)
	assert.Equal(t, int64(10<<30), o.MaxTotalBytes)
	assert.Equal(t, int64(4<<20), o.MaxSegmentBytes)
	assert.Equal(t, sfqueue.DurabilityPeriodic, o.Durability)
	assert.Equal(t, sfqueue.OnFullEvictOldest, o.OnFull)
	assert.Equal(t, 3*time.Second, o.SyncInterval)
	assert.Equal(t, 4*time.Second, o.AppendDeadline)
	assert.NotNil(t, o.SymbolUse)
	assert.Same(t, logger, o.Logger)
}

func TestConfigRowEncoderConfig(t *testing.T) {
	cfg := defaultConfig(t)
	cfg.Tables.Logs = "my_logs"
	cfg.Tables.Traces = "my_spans"
	cfg.AttributesAsSymbols = []string{"host.name"}
	cfg.MetricAttributesType = "varchar"
	require.NoError(t, cfg.Validate())
	rc := cfg.rowEncoderConfig(zap.NewNop())
	assert.Equal(t, "my_logs", rc.Tables.Logs)
	assert.Equal(t, "my_spans", rc.Tables.Traces)
	assert.Equal(t, "otel_metrics_exp_histogram", rc.Tables.ExponentialHistogram)
	assert.Equal(t, []datamodel.PromotedColumn{{Key: "host.name", Column: "host_name"}}, rc.Promoted)
	assert.Equal(t, cfg.promotedColumns(), rc.Promoted)
	assert.True(t, rc.AttributesVarchar)

	cfg.MetricAttributesType = "symbol"
	assert.False(t, cfg.rowEncoderConfig(nil).AttributesVarchar)
}

// TestConfigUnmarshalRefusesUnitlessNumbers: in YAML, a bare number for a
// duration would be nanoseconds and a fractional size would be truncated;
// both are refused while loading, naming each key, before Validate runs.
func TestConfigUnmarshalRefusesUnitlessNumbers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	yaml := `reconnect_initial_backoff: 5
reconnect_max_backoff: 5
sf_sync_interval: 5
close_flush_timeout: 5
sf_append_deadline: 2.5
durable_ack_keepalive_interval: 200
sf_max_total_bytes: 0.5
max_batch_bytes: 1048576.0
`
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o600))
	cm, err := confmaptest.LoadConf(path)
	require.NoError(t, err)
	err = cm.Unmarshal(defaultConfig(t))
	require.Error(t, err)
	for _, key := range []string{"reconnect_initial_backoff", "reconnect_max_backoff", "sf_sync_interval", "close_flush_timeout",
		"sf_append_deadline", "durable_ack_keepalive_interval"} {
		assert.Contains(t, err.Error(), key+": ")
	}
	assert.Contains(t, err.Error(), "a bare number would be nanoseconds; write a duration such as 5s")
	assert.Contains(t, err.Error(), "sf_max_total_bytes: 0.5 is not a whole number of bytes")
	assert.NotContains(t, err.Error(), "max_batch_bytes", "a whole number written as a float is a size")

	// The same keys with units load.
	ok := confmap.NewFromStringMap(map[string]any{
		"reconnect_initial_backoff": "5ms", "reconnect_max_backoff": "5s", "sf_sync_interval": "1s",
		"close_flush_timeout": "0s", "sf_append_deadline": "2500ms", "sf_max_total_bytes": "512MiB", "max_batch_bytes": 1048576,
	})
	cfg := defaultConfig(t)
	require.NoError(t, ok.Unmarshal(cfg))
	assert.Equal(t, 5*time.Millisecond, cfg.ReconnectInitialBackoff)
	assert.Equal(t, 2500*time.Millisecond, cfg.SFAppendDeadline)
	assert.Equal(t, ByteSize(512<<20), cfg.SFMaxTotalBytes)
	assert.Equal(t, ByteSize(1<<20), cfg.MaxBatchBytes)
}

func TestSymbolDictMaxBytesDefault(t *testing.T) {
	cfg := defaultConfig(t)
	if got := cfg.effectiveSymbolDictMaxBytes(); got != 16<<20 {
		t.Fatalf("default symbol_dict_max_bytes %v, want 16MiB", got)
	}
	if got := cfg.symbolDictStartBytes(); got != 4<<20 {
		t.Fatalf("a generation starts at %v, want 4MiB", got)
	}
	cfg.SFMaxTotalBytes, cfg.SFMaxSegmentBytes = 8<<20, 4<<20
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := cfg.effectiveSymbolDictMaxBytes(); got != 2<<20 {
		t.Fatalf("symbol_dict_max_bytes under an 8 MiB cap is %v, want a quarter of it (2MiB)", got)
	}
	if got := cfg.symbolDictStartBytes(); got != 2<<20 {
		t.Fatalf("under a 2 MiB symbol_dict_max_bytes a generation starts at %v, want the cap", got)
	}
	cfg.SymbolDictMaxBytes = 1 << 20
	if got := cfg.effectiveSymbolDictMaxBytes(); got != 1<<20 {
		t.Fatalf("explicit symbol_dict_max_bytes became %v", got)
	}
}

// In memory-only mode sf_max_total_bytes bounds RAM: the queue gets half of
// it less two segments (the rest is GC headroom and the queue's buffers),
// and a generation defaults to a sixteenth of it, at most an eighth.
func TestMemoryModeCapShares(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.SFDir = ""
	if got, want := cfg.queueOptions("s", nil).MaxTotalBytes, int64(64<<20-2*4<<20); got != want {
		t.Fatalf("memory-only queue cap under the default 128 MiB: %d, want %d (half, less two segments)", got, want)
	}
	cfg.SFMaxTotalBytes = 16 << 20
	if got, want := cfg.queueOptions("s", nil).MaxTotalBytes, int64(4<<20); got != want {
		t.Fatalf("memory-only queue cap under 16 MiB with 4 MiB segments: %d, want a quarter, %d", got, want)
	}
	cfg.SFMaxTotalBytes = 0
	if got := cfg.effectiveSymbolDictMaxBytes(); got != 8<<20 {
		t.Fatalf("memory-only default symbol_dict_max_bytes %v, want 8MiB", got)
	}
	cfg.SFMaxTotalBytes = 64 << 20
	if got := cfg.effectiveSymbolDictMaxBytes(); got != 4<<20 {
		t.Fatalf("memory-only default symbol_dict_max_bytes under 64 MiB %v, want 4MiB", got)
	}
	cfg.SymbolDictMaxBytes = 8 << 20
	if err := cfg.Validate(); err != nil {
		t.Fatalf("an eighth of the cap: %v", err)
	}
	cfg.SFDir = "/var/lib/x"
	if got, want := cfg.queueOptions("s", nil).MaxTotalBytes, int64(64<<20); got != want {
		t.Fatalf("SF queue cap: %d, want sf_max_total_bytes %d", got, want)
	}
}

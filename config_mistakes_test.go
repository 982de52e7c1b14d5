package questdbexporter

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.uber.org/zap"
)

// loadYAML unmarshals one exporter section written as YAML over the
// defaults, as the collector does: the decode-stage errors are returned.
func loadYAML(t *testing.T, yaml string) (*Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o600))
	cm, err := confmaptest.LoadConf(path)
	require.NoError(t, err)
	cfg := createDefaultConfig().(*Config)
	return cfg, cm.Unmarshal(cfg)
}

// TestConfigDecodeErrorsSayWhatToWrite: a value of the wrong YAML type for
// one of the exporter's keys is refused while loading with the key and
// what to write instead, not with the decoder's "unconvertible type".
func TestConfigDecodeErrorsSayWhatToWrite(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"request_durable_ack: true", "request_durable_ack: true is a boolean; write on, off, local, replicated or local,replicated (request_durable_ack: on)"},
		{"request_durable_ack: false", "request_durable_ack: false is a boolean; write on, off"},
		{"ttl: 30", "ttl: 30 is a number; write a whole number and a unit h, d, w, M or y (ttl: 30d)"},
		{"reconnect_max_backoff: 5 seconds", `reconnect_max_backoff: "5 seconds" is not a duration; write a number and a unit ns, us, ms, s, m or h without a space (reconnect_max_backoff: 5s)`},
		{"sf_durability: 1", "sf_durability: 1 is a number; write memory, periodic or flush"},
		{"on_full: true", "on_full: true is a boolean; write block or evict_oldest"},
		{"drain_orphans: yes please", `drain_orphans: "yes please" is not a boolean; write true or false`},
		{"max_in_flight: lots", `max_in_flight: "lots" is not a whole number; write one such as 128`},
		{"max_in_flight: 1.5", `max_in_flight: 1.5 is not a whole number; write one such as 128`},
		{"error_inbox_capacity: 16.25", `error_inbox_capacity: 16.25 is not a whole number; write one such as 256`},
		// Whole, but beyond an int: the conversion would wrap them.
		{"max_in_flight: .inf", `max_in_flight: +Inf is not a whole number an int holds; write one such as 128`},
		{"max_in_flight: -.inf", `max_in_flight: -Inf is not a whole number an int holds; write one such as 128`},
		{"error_inbox_capacity: 1e20", `error_inbox_capacity: 1e+20 is not a whole number an int holds; write one such as 256`},
		{"error_inbox_capacity: 9223372036854775808.0", `error_inbox_capacity: 9.223372036854776e+18 is not a whole number an int holds; write one such as 256`},
		{"max_in_flight: .nan", `max_in_flight: NaN is not a whole number; write one such as 128`},
		{"sender_id: 7", `sender_id: 7 is a number; write it as text in quotes (sender_id: "7")`},
		{"create_tables: 1", `create_tables: 1 is not a boolean; write true or false`},
	} {
		t.Run(tc.yaml, func(t *testing.T) {
			_, err := loadYAML(t, tc.yaml)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "unconvertible", "the decoder's own message is replaced")
		})
	}
	cfg, err := loadYAML(t, "request_durable_ack: on\nttl: 30d\nreconnect_max_backoff: 5s\ndrain_orphans: true\nsf_dir: \"\"\nmax_in_flight: 64.0\n")
	require.NoError(t, err, "what the hints say to write loads")
	assert.Equal(t, 64, cfg.MaxInFlight, "a whole number written with a fraction of 0 is that number")
	assert.Equal(t, "on", cfg.RequestDurableAck)
	assert.Equal(t, "30d", cfg.TTL)
}

// TestConfigRefusesExporterhelperKeys: sending_queue, retry_on_failure and
// timeout, which most exporters take, are refused with the sf_* and other
// keys that do their job here.
func TestConfigRefusesExporterhelperKeys(t *testing.T) {
	for key, want := range map[string][]string{
		"sending_queue":    {"sf_dir", "sf_max_total_bytes", "sf_durability", "on_full"},
		"retry_on_failure": {"reconnect_initial_backoff", "reconnect_max_backoff", "never drops"},
		"timeout":          {"sf_append_deadline", "close_flush_timeout"},
	} {
		t.Run(key, func(t *testing.T) {
			_, err := loadYAML(t, key+":\n  enabled: true\n")
			require.Error(t, err)
			assert.Contains(t, err.Error(), key+": ")
			for _, w := range want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "invalid keys", "the generic unknown-key message is replaced")
		})
	}
}

// TestConfigEmptySenderIDRefused: sender_id: ${env:POD_NAME} with the
// variable unset expands to nothing; the exporter used to fall back to the
// component ID, so every pod of a fleet took the same slot name. It is
// refused, naming the likely cause. (The env provider yields null for an
// unset variable and "" for an empty one: both are covered.)
func TestConfigEmptySenderIDRefused(t *testing.T) {
	for name, v := range map[string]any{"unset variable": nil, "empty variable": ""} {
		t.Run(name, func(t *testing.T) {
			err := confmap.NewFromStringMap(map[string]any{"sender_id": v}).Unmarshal(createDefaultConfig().(*Config))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "sender_id: empty")
			assert.Contains(t, err.Error(), "${env:POD_NAME}")
		})
	}
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, confmap.NewFromStringMap(map[string]any{"sender_id": "pod-7"}).Unmarshal(cfg))
	assert.Equal(t, "pod-7", cfg.SenderID)
}

// TestConfigEmptyCredentialRecorded: a credential key present but empty
// after expansion (token: ${env:QUESTDB_TOKEN} with the variable unset) is
// remembered, so the start can warn naming the key.
func TestConfigEmptyCredentialRecorded(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, confmap.NewFromStringMap(map[string]any{"token": nil}).Unmarshal(cfg))
	assert.Equal(t, []string{"token"}, cfg.emptyCredentials)
	cfg = createDefaultConfig().(*Config)
	require.NoError(t, confmap.NewFromStringMap(map[string]any{"username": "", "password": ""}).Unmarshal(cfg))
	assert.Equal(t, []string{"username", "password"}, cfg.emptyCredentials)
	cfg = createDefaultConfig().(*Config)
	require.NoError(t, confmap.NewFromStringMap(map[string]any{"token": "t0k"}).Unmarshal(cfg))
	assert.Empty(t, cfg.emptyCredentials)
}

// TestConfigSFDirCheckedAtValidate: what would fail the start on this
// machine is refused by Validate (so by `otelcol validate`) with what to
// create: an explicit sf_dir whose parent is missing, a sf_dir that is a
// file; the default sf_dir is created with its parents at start, and is
// refused only where it cannot be.
func TestConfigSFDirCheckedAtValidate(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	for _, tc := range []struct {
		dir  string
		want string // "" = accepted
	}{
		{filepath.Join(base, "questdb"), ""},
		{base, ""},
		{filepath.Join(base, "otelcl", "questdb"), "create " + filepath.Join(base, "otelcl")},
		{file, "is not a directory"},
		{filepath.Join(file, "questdb"), "is not a directory"},
	} {
		err := checkSFDir(tc.dir, false)
		if tc.want == "" {
			assert.NoError(t, err, tc.dir)
			continue
		}
		if assert.Error(t, err, tc.dir) {
			assert.Contains(t, err.Error(), "sf_dir: ")
			assert.Contains(t, err.Error(), tc.want)
		}
	}
	// The default: missing parents are created at start, so Validate only
	// needs the nearest existing ancestor to be a directory it can write.
	require.NoError(t, checkSFDir(filepath.Join(base, "var", "lib", "otelcol", "questdb"), true))
	err := checkSFDir(filepath.Join(file, "otelcol", "questdb"), true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not a directory")

	cfg := createDefaultConfig().(*Config)
	cfg.SFDir = filepath.Join(base, "typo", "questdb")
	require.ErrorContains(t, cfg.Validate(), "sf_dir: ")
}

// TestPrepareDefaultSFDirCreatesParents: on a fresh machine the README's
// minimal configuration starts: the default sf_dir is created with its
// parents (0700 for sf_dir itself); an explicit one still needs its parent.
func TestPrepareDefaultSFDirCreatesParents(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "var", "lib", "otelcol", "questdb")
	require.NoError(t, prepareSFDir(dir, true, zap.NewNop()))
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	require.Error(t, prepareSFDir(filepath.Join(base, "typo", "questdb"), false, zap.NewNop()))
}

// TestConfigTLSFilesCheckedAtValidate: a missing or unreadable ca_file,
// cert_file or key_file is refused by Validate, naming the file, not at
// the first connection.
func TestConfigTLSFilesCheckedAtValidate(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "ca.pem")
	cfg := createDefaultConfig().(*Config)
	cfg.SFDir = ""
	tls := configtls.NewDefaultClientConfig()
	tls.CAFile = missing
	cfg.TLS = configoptional.Some(tls)
	err := cfg.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tls: ")
	assert.Contains(t, err.Error(), missing)

	tls.CAFile = filepath.Join("testdata", "questdb-ca.pem")
	cfg.TLS = configoptional.Some(tls)
	require.NoError(t, cfg.Validate())
	require.True(t, strings.HasSuffix(tls.CAFile, ".pem"))
}

package questdbexporter

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/questdbexporter/questdbexporter/internal/metadata"
)

func TestPlaintextCredentialURLs(t *testing.T) {
	for _, tc := range []struct {
		name      string
		endpoints []string
		user      string
		token     string
		tls       bool
		ddl       bool
		want      []string
	}{
		{"ws with basic auth, DDL on", []string{"ws://db.example:9000"}, "u", "", false, true,
			[]string{"ws://db.example:9000/write/v4", "http://db.example:9000/exec"}},
		{"bare host:port with a token, DDL off", []string{"db.example:9000"}, "", "t", false, false,
			[]string{"ws://db.example:9000/write/v4"}},
		{"loopback only", []string{"ws://127.0.0.1:9000", "localhost:9000", "[::1]:9000"}, "u", "", false, true, nil},
		{"wss", []string{"wss://db.example:9000"}, "u", "", false, true, nil},
		{"bare host:port with a tls section", []string{"db.example:9000"}, "u", "", true, true, nil},
		{"no credentials", []string{"ws://db.example:9000"}, "", "", false, true, nil},
		{"one of two endpoints", []string{"wss://a.example:9000", "b.example:9000"}, "u", "", false, false,
			[]string{"ws://b.example:9000/write/v4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			cfg.Endpoints, cfg.CreateTables, cfg.SFDir = tc.endpoints, tc.ddl, ""
			if tc.user != "" {
				cfg.Username, cfg.Password = configopaque.String(tc.user), "p"
			}
			cfg.Token = configopaque.String(tc.token)
			if tc.tls {
				cfg.TLS = configoptional.Some(configtls.NewDefaultClientConfig())
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			if got := cfg.plaintextCredentialURLs(); !slices.Equal(got, tc.want) {
				t.Fatalf("plaintextCredentialURLs = %q, want %q", got, tc.want)
			}
		})
	}
}

// The warning is logged once, at start, naming the DDL's http:// too.
func TestPlaintextCredentialsWarnedOnceAtStart(t *testing.T) {
	cfg := testConfig(t, "ws://db.invalid:9000")
	cfg.Username, cfg.Password = "u", "p"
	set := exportertest.NewNopSettings(metadata.Type)
	core, logs := observer.New(zapcore.InfoLevel)
	set.Logger = zap.New(core)
	startExporterWith(t, cfg, set)
	warns := logs.FilterMessageSnippet("credentials (username/password or token) go unencrypted").All()
	if len(warns) != 1 || warns[0].Level != zapcore.WarnLevel {
		t.Fatalf("%d credential warnings, want one at warn: %v", len(warns), warns)
	}
	got, _ := warns[0].ContextMap()["unencrypted"].([]any)
	if len(got) != 2 || got[0] != "ws://db.invalid:9000/write/v4" || got[1] != "http://db.invalid:9000/exec" {
		t.Fatalf("warning names %v, want the ws:// endpoint and the DDL's http:// /exec", got)
	}
}

// TestEmptyCredentialWarnedAtStart: token: ${env:QUESTDB_TOKEN} with the
// variable unset starts (the server may not need it) but warns once,
// naming the key; a configuration without credential keys does not warn.
func TestEmptyCredentialWarnedAtStart(t *testing.T) {
	for _, tc := range []struct {
		raw  map[string]any
		warn bool
	}{
		{map[string]any{"token": nil}, true},
		{map[string]any{"username": "", "password": ""}, true},
		{map[string]any{}, false},
	} {
		cfg := testConfig(t, closedPort(t))
		if err := confmap.NewFromStringMap(tc.raw).Unmarshal(cfg); err != nil {
			t.Fatal(err)
		}
		set := exportertest.NewNopSettings(metadata.Type)
		core, logs := observer.New(zapcore.InfoLevel)
		set.Logger = zap.New(core)
		startExporterWith(t, cfg, set)
		warns := logs.FilterMessageSnippet("credential keys are set but empty").All()
		switch {
		case !tc.warn && len(warns) != 0:
			t.Errorf("%v: warned %v", tc.raw, warns)
		case tc.warn && (len(warns) != 1 || warns[0].Level != zapcore.WarnLevel):
			t.Errorf("%v: %d warnings, want one at warn: %v", tc.raw, len(warns), warns)
		case tc.warn:
			keys := fmt.Sprint(warns[0].ContextMap()["empty_keys"])
			for k := range tc.raw {
				if !strings.Contains(keys, k) {
					t.Errorf("%v: the warning names %s, not %s", tc.raw, keys, k)
				}
			}
		}
	}
}

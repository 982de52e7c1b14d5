package questdbexporter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
)

func TestByteSizeUnmarshalText(t *testing.T) {
	tests := []struct {
		in   string
		want ByteSize
	}{
		{"0", 0},
		{"1887436", 1887436},
		{"512b", 512},
		{"512B", 512},
		{"64k", 64 << 10},
		{"64kb", 64 << 10},
		{"64Ki", 64 << 10},
		{"64KiB", 64 << 10},
		{"4m", 4 << 20},
		{"4MB", 4 << 20},
		{"4MiB", 4 << 20},
		{"4 MiB", 4 << 20},
		{" 10GiB ", 10 << 30},
		{"10g", 10 << 30},
		{"10gi", 10 << 30},
		{"1t", 1 << 40},
		{"1TiB", 1 << 40},
		{"8388607TiB", 8388607 << 40},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var b ByteSize
			require.NoError(t, b.UnmarshalText([]byte(tt.in)))
			assert.Equal(t, tt.want, b)
		})
	}
}

func TestByteSizeUnmarshalTextErrors(t *testing.T) {
	for _, in := range []string{"", "MiB", "1.5MiB", "-1", "-1KiB", "10 mebibytes", "1e6", "0x10", "8388608TiB", "99999999999999999999"} {
		t.Run(in, func(t *testing.T) {
			var b ByteSize
			err := b.UnmarshalText([]byte(in))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "size")
		})
	}
}

func TestByteSizeStringRoundTrip(t *testing.T) {
	tests := []struct {
		b    ByteSize
		want string
	}{
		{0, "0"},
		{1887436, "1887436"},
		{64 << 10, "64KiB"},
		{1536 << 10, "1536KiB"},
		{4 << 20, "4MiB"},
		{10 << 30, "10GiB"},
		{3 << 40, "3TiB"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.b.String())
		text, err := tt.b.MarshalText()
		require.NoError(t, err)
		var back ByteSize
		require.NoError(t, back.UnmarshalText(text))
		assert.Equal(t, tt.b, back)
	}
}

// TestByteSizeFromConfmap checks both YAML forms through the collector's
// decoder: an integer (bytes) and a string with a suffix.
func TestByteSizeFromConfmap(t *testing.T) {
	var cfg struct {
		Int    ByteSize `mapstructure:"int"`
		Suffix ByteSize `mapstructure:"suffix"`
		Digits ByteSize `mapstructure:"digits"`
	}
	conf := confmap.NewFromStringMap(map[string]any{"int": 4096, "suffix": "2MiB", "digits": "1024"})
	require.NoError(t, conf.Unmarshal(&cfg))
	assert.Equal(t, ByteSize(4096), cfg.Int)
	assert.Equal(t, ByteSize(2<<20), cfg.Suffix)
	assert.Equal(t, ByteSize(1024), cfg.Digits)

	bad := confmap.NewFromStringMap(map[string]any{"suffix": "2 parsecs"})
	err := bad.Unmarshal(&cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "2 parsecs")
}

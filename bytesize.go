package questdbexporter

import (
	"fmt"
	"strconv"
	"strings"
)

// ByteSize is a size in bytes. In YAML it is a plain integer (bytes) or a
// number with a 1024-based suffix, case-insensitive: k, kb, ki, kib (KiB);
// m, mb, mi, mib (MiB); g, gb, gi, gib (GiB); t, tb, ti, tib (TiB); b for
// bytes. "4MiB", "4m" and "4194304" are the same size. The k/m/g/t and
// kb/mb/gb/tb forms are QuestDB's connect-string suffixes, which are 1024-based
// too; decimal (1000-based) units are not offered.
type ByteSize int64

var byteSuffixes = []struct {
	names []string
	shift uint
}{
	{[]string{"kib", "ki", "kb", "k"}, 10},
	{[]string{"mib", "mi", "mb", "m"}, 20},
	{[]string{"gib", "gi", "gb", "g"}, 30},
	{[]string{"tib", "ti", "tb", "t"}, 40},
	{[]string{"b"}, 0},
}

// UnmarshalText parses a size such as "1887436", "64KiB" or "10gb".
func (b *ByteSize) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	num, shift := splitSizeSuffix(strings.ToLower(s))
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return fmt.Errorf("size %q is not a whole number of bytes with an optional suffix (KiB, MiB, GiB, TiB; also k/kb, m/mb, g/gb, t/tb)", s)
	}
	if n < 0 {
		return fmt.Errorf("size %q is negative", s)
	}
	if n > (1<<63-1)>>shift {
		return fmt.Errorf("size %q does not fit in 64 bits", s)
	}
	*b = ByteSize(n << shift)
	return nil
}

// splitSizeSuffix separates a lower-cased size into its number and the
// suffix's power of two (0 without a suffix).
func splitSizeSuffix(lower string) (string, uint) {
	for _, suf := range byteSuffixes {
		for _, name := range suf.names {
			if num, ok := strings.CutSuffix(lower, name); ok {
				return strings.TrimSpace(num), suf.shift
			}
		}
	}
	return lower, 0
}

// MarshalText writes the size in the form String returns, which
// UnmarshalText reads back.
func (b ByteSize) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// String is the size with the largest binary suffix that divides it
// exactly ("4MiB", "1887436"), for messages and round trips.
func (b ByteSize) String() string {
	for _, u := range []struct {
		name  string
		shift uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if b != 0 && b%(1<<u.shift) == 0 {
			return strconv.FormatInt(int64(b)>>u.shift, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

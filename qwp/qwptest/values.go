package qwptest

import (
	"fmt"
	"math/big"
	"strings"
)

// UUID is a decoded UUID value: the low and high 64 bits as on the wire.
type UUID struct{ Lo, Hi uint64 }

// Long256 is a decoded LONG256 value, least significant word first.
type Long256 [4]uint64

// Array is a decoded DOUBLE_ARRAY or LONG_ARRAY value. Shape has at least
// one dimension; a zero in Shape makes an empty, non-null array. Exactly one
// of Doubles and Longs is used, by column type; both are empty for an empty
// array.
type Array struct {
	Shape   []int32
	Doubles []float64
	Longs   []int64
}

// Decimal is a decoded DECIMAL64/128/256 value: Unscaled / 10^Scale.
type Decimal struct {
	Unscaled *big.Int
	Scale    int
}

// String renders the decimal in plain notation, e.g. "-12.345".
func (d Decimal) String() string {
	s := d.Unscaled.String()
	if d.Scale <= 0 {
		return s
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	if len(s) <= d.Scale {
		s = strings.Repeat("0", d.Scale-len(s)+1) + s
	}
	s = s[:len(s)-d.Scale] + "." + s[len(s)-d.Scale:]
	if neg {
		s = "-" + s
	}
	return s
}

// String renders the UUID in the canonical 8-4-4-4-12 form, high bits first.
func (u UUID) String() string {
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x",
		u.Hi>>32, (u.Hi>>16)&0xffff, u.Hi&0xffff, u.Lo>>48, u.Lo&0xffffffffffff)
}

// String renders the value as 0x-prefixed hex, most significant word first.
func (l Long256) String() string {
	return fmt.Sprintf("0x%016x%016x%016x%016x", l[3], l[2], l[1], l[0])
}

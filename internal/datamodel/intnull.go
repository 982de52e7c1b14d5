package datamodel

import "math"

// QuestDB stores math.MinInt32 in an INT column as NULL, as it stores
// math.MinInt64 in a LONG (see keyID). Each INT column the data model fills
// takes one of two rules:
//
//   - Quantities (severity_number, an exponential histogram's scale and
//     bucket offsets) go through intQuantity: math.MinInt32 becomes
//     math.MinInt32+1, the nearest value a row can hold. No valid value
//     moves: severity numbers are 0..24 and scales -10..20, and at every
//     valid scale the buckets at offsets math.MinInt32 and math.MinInt32+1
//     both lie below the smallest float64.
//   - Flags words (flags on metric points and spans, trace_flags on log
//     records) keep their 32 bits, so 0x80000000 - bit 31 alone, reserved
//     in every OTel flags field - reads back as NULL: no other value would
//     say it, and a made-up bit would say something false.
//
// The dropped_*_count columns are clamped to 0..math.MaxInt32 (clampInt32)
// and never reach the NULL value. Neither rule makes QuestDB refuse a row:
// an INT holding the NULL value is stored, it only reads as NULL.

// intQuantity is v as an INT column's value that never reads back as NULL.
func intQuantity(v int32) int32 {
	if v == math.MinInt32 {
		return math.MinInt32 + 1
	}
	return v
}

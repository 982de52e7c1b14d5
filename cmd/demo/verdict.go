package main

import (
	"encoding/json"
	"fmt"
	"strings"
)

// verdict compares what the generator had accepted with what landed.
type verdict struct {
	Sent, Landed, Lost, Duplicates int64
	// Detail, when set, is the per-signal breakdown.
	Detail string
}

func (v verdict) String() string {
	s := fmt.Sprintf("sent %d, landed %d, lost %d, duplicates %d", v.Sent, v.Landed, v.Lost, v.Duplicates)
	if v.Detail != "" {
		s += " (" + v.Detail + ")"
	}
	return s
}

// combine sums the verdicts of the signals and names each in Detail as
// "<name> landed/sent".
func combine(names []string, parts ...verdict) verdict {
	var v verdict
	var detail []string
	for i, p := range parts {
		v.Sent += p.Sent
		v.Landed += p.Landed
		v.Lost += p.Lost
		v.Duplicates += p.Duplicates
		detail = append(detail, fmt.Sprintf("%s %d/%d", names[i], p.Landed, p.Sent))
	}
	v.Detail = strings.Join(detail, ", ")
	return v
}

// countSeq checks gauge or span rows for the seq ids 0..sent-1. Every row
// carries its point's or span's `seq` attribute in the attributes JSON
// column.
func countSeq(t *tableRows, sent int64) (verdict, error) {
	col := t.column("attributes")
	if len(t.Rows) == 0 {
		return tally(nil, sent), nil
	}
	if col < 0 {
		return verdict{}, fmt.Errorf("table has no attributes column (columns: %v)", t.Columns)
	}
	seen := make(map[int64]int, len(t.Rows))
	for i, row := range t.Rows {
		s, ok := row[col].(string)
		if !ok {
			return verdict{}, fmt.Errorf("row %d: attributes is %T, want a JSON string", i, row[col])
		}
		var attrs struct {
			Seq *int64 `json:"seq"`
		}
		if err := json.Unmarshal([]byte(s), &attrs); err != nil || attrs.Seq == nil {
			return verdict{}, fmt.Errorf("row %d: attributes %q carry no seq", i, s)
		}
		seen[*attrs.Seq]++
	}
	return tally(seen, sent), nil
}

// countLogs checks the log rows for the bodies "demo log seq=0..sent-1".
func countLogs(t *tableRows, sent int64) (verdict, error) {
	col := t.column("body")
	if len(t.Rows) == 0 {
		return tally(nil, sent), nil
	}
	if col < 0 {
		return verdict{}, fmt.Errorf("table has no body column")
	}
	seen := make(map[int64]int, len(t.Rows))
	for i, row := range t.Rows {
		s, _ := row[col].(string)
		var n int64
		if _, err := fmt.Sscanf(strings.TrimPrefix(s, "demo log "), "seq=%d", &n); err != nil {
			return verdict{}, fmt.Errorf("row %d: body %q is not a demo log", i, s)
		}
		seen[n]++
	}
	return tally(seen, sent), nil
}

func tally(seen map[int64]int, sent int64) verdict {
	v := verdict{Sent: sent}
	for id, n := range seen {
		if id >= 0 && id < sent {
			v.Landed++
		}
		v.Duplicates += int64(n - 1)
	}
	v.Lost = sent - v.Landed
	return v
}

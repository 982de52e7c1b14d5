package qwp

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// must unwraps an Append* result in tests whose inputs are valid.
func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestDecodeResponseKinds(t *testing.T) {
	tables := []TableTxn{{"otel_logs", 7}, {"ünï", -1}, {"", 1 << 40}}
	for _, tc := range []struct {
		what string
		b    []byte
		want Response
	}{
		{"OK with tables", must(AppendOK(nil, 42, tables)), Response{Status: StatusOK, Seq: 42, Tables: tables}},
		{"OK without tables", must(AppendOK(nil, 0, nil)), Response{Status: StatusOK, Seq: 0}},
		{"durable ack", must(AppendDurableAck(nil, StatusDurableAck, tables[:1])), Response{Status: StatusDurableAck, Seq: -1, Tables: tables[:1]}},
		{"local durable ack", must(AppendDurableAck(nil, StatusLocalDurableAck, nil)), Response{Status: StatusLocalDurableAck, Seq: -1}},
	} {
		var r Response
		if err := DecodeResponse(tc.b, &r); err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		if !reflect.DeepEqual(r, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.what, r, tc.want)
		}
	}
	// Every error status, known and unknown, has the error layout.
	for s := 0; s < 256; s++ {
		st := Status(s)
		if !st.IsError() {
			continue
		}
		b := must(AppendError(nil, st, 9, "boom: "+st.String()))
		var r Response
		if err := DecodeResponse(b, &r); err != nil {
			t.Fatalf("status %s: %v", st, err)
		}
		if r.Status != st || r.Seq != 9 || r.Message != "boom: "+st.String() || len(r.Tables) != 0 {
			t.Fatalf("status %s: %+v", st, r)
		}
	}
}

// TestDecodeResponseExactBytes pins the layouts to hand-written bytes.
func TestDecodeResponseExactBytes(t *testing.T) {
	ok := []byte{0x00, 5, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 0, 'a', 'b', 3, 0, 0, 0, 0, 0, 0, 0}
	errFrame := []byte{0x03, 6, 0, 0, 0, 0, 0, 0, 0, 2, 0, 'n', 'o'}
	ack := []byte{0x02, 1, 0, 1, 0, 'x', 9, 0, 0, 0, 0, 0, 0, 0}
	var r Response
	if err := DecodeResponse(ok, &r); err != nil || r.Seq != 5 || r.Tables[0] != (TableTxn{"ab", 3}) {
		t.Fatalf("OK: %v %+v", err, r)
	}
	if b, _ := AppendOK(nil, 5, []TableTxn{{"ab", 3}}); !bytes.Equal(b, ok) {
		t.Fatalf("AppendOK = %x, want %x", b, ok)
	}
	if err := DecodeResponse(errFrame, &r); err != nil || r.Status != StatusSchemaMismatch || r.Seq != 6 || r.Message != "no" {
		t.Fatalf("error: %v %+v", err, r)
	}
	if b, _ := AppendError(nil, StatusSchemaMismatch, 6, "no"); !bytes.Equal(b, errFrame) {
		t.Fatalf("AppendError = %x, want %x", b, errFrame)
	}
	if err := DecodeResponse(ack, &r); err != nil || r.Seq != -1 || r.Tables[0] != (TableTxn{"x", 9}) {
		t.Fatalf("durable ack: %v %+v", err, r)
	}
	if b, _ := AppendDurableAck(nil, StatusDurableAck, []TableTxn{{"x", 9}}); !bytes.Equal(b, ack) {
		t.Fatalf("AppendDurableAck = %x, want %x", b, ack)
	}
}

// TestDecodeResponseTruncated: every proper prefix of every kind of
// response is an error, as is any trailing byte.
func TestDecodeResponseTruncated(t *testing.T) {
	full := [][]byte{
		must(AppendOK(nil, 1, []TableTxn{{"t1", 1}, {"table_two", 2}})),
		must(AppendDurableAck(nil, StatusDurableAck, []TableTxn{{"t", 5}})),
		must(AppendDurableAck(nil, StatusLocalDurableAck, []TableTxn{{"t", 5}})),
		must(AppendError(nil, StatusWriteError, 3, "table is suspended")),
		must(AppendError(nil, Status(0x7f), 3, "")),
	}
	for _, b := range full {
		var r Response
		for n := 0; n < len(b); n++ {
			if err := DecodeResponse(b[:n], &r); err == nil {
				t.Fatalf("%x cut to %d bytes decoded as %+v", b, n, r)
			}
		}
		if err := DecodeResponse(append(append([]byte{}, b...), 0), &r); err == nil || !strings.Contains(err.Error(), "byte") {
			t.Fatalf("%x with a trailing byte: err %v", b, err)
		}
	}
}

func TestDecodeResponseMalformed(t *testing.T) {
	for _, tc := range []struct {
		what string
		b    []byte
		want string
	}{
		{"empty", nil, "empty"},
		{"OK announces more tables than bytes", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 1, 0}, "announces 65535 tables"},
		{"durable ack count without entries", []byte{2, 1, 0}, "announces 1 tables"},
		{"name longer than the rest", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0xff, 0, 'a', 0, 0, 0, 0, 0, 0, 0, 0}, "255-byte name"},
		{"error message longer than the rest", []byte{5, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 'x'}, "announces a 9-byte message"},
	} {
		var r Response
		err := DecodeResponse(tc.b, &r)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.what, err, tc.want)
		}
	}
}

func TestDecodeResponseReusesTables(t *testing.T) {
	b := must(AppendOK(nil, 1, []TableTxn{{"a", 1}, {"b", 2}}))
	r := Response{Tables: make([]TableTxn, 0, 8)}
	if err := DecodeResponse(b, &r); err != nil {
		t.Fatal(err)
	}
	if cap(r.Tables) != 8 {
		t.Fatalf("Tables reallocated: cap %d", cap(r.Tables))
	}
}

func TestAppendResponseErrors(t *testing.T) {
	long := strings.Repeat("x", 1<<16)
	for _, tc := range []struct {
		what string
		err  error
		want string
	}{
		{"error with OK status", second(AppendError(nil, StatusOK, 0, "")), "not an error status"},
		{"error with durable status", second(AppendError(nil, StatusLocalDurableAck, 0, "")), "not an error status"},
		{"error message too long", second(AppendError(nil, StatusParseError, 0, long)), "65536 bytes"},
		{"durable ack with OK status", second(AppendDurableAck(nil, StatusOK, nil)), "not a durable-ack"},
		{"table name too long", second(AppendOK(nil, 0, []TableTxn{{Name: long}})), "table name of 65536"},
		{"too many tables", second(AppendOK(nil, 0, make([]TableTxn, 1<<16))), "65536 table entries"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.what, tc.err, tc.want)
		}
	}
}

func TestCategoriesAndPolicies(t *testing.T) {
	for _, tc := range []struct {
		status      Status
		cat         Category
		policy      Policy
		overridable bool
	}{
		{StatusSchemaMismatch, CategorySchemaMismatch, PolicyTerminal, true},
		{StatusParseError, CategoryParseError, PolicyTerminal, true},
		{StatusSecurityError, CategorySecurityError, PolicyTerminal, true},
		{StatusWriteError, CategoryWriteError, PolicyRetriable, true},
		{StatusInternalError, CategoryInternalError, PolicyRetriable, true},
		{StatusDictionaryGap, CategoryDictionaryGap, PolicyRetriable, true},
		{StatusNotWritable, CategoryNotWritable, PolicyRetriableOther, true},
		{Status(0x0A), CategoryUnknown, PolicyRetriable, false}, // egress-only CANCELLED
		{Status(0x0B), CategoryUnknown, PolicyRetriable, false},
		{Status(0xff), CategoryUnknown, PolicyRetriable, false},
		{StatusOK, CategoryNone, 0, false},
		{StatusDurableAck, CategoryNone, 0, false},
		{StatusLocalDurableAck, CategoryNone, 0, false},
	} {
		c := tc.status.Category()
		if c != tc.cat || c.DefaultPolicy() != tc.policy || c.Overridable() != tc.overridable {
			t.Errorf("%s: category %s policy %s overridable %v; want %s %s %v",
				tc.status, c, c.DefaultPolicy(), c.Overridable(), tc.cat, tc.policy, tc.overridable)
		}
	}
	if CategoryProtocolViolation.DefaultPolicy() != PolicyTerminal || CategoryProtocolViolation.Overridable() {
		t.Error("PROTOCOL_VIOLATION must be terminal and forced")
	}
	if CategoryDataLoss.DefaultPolicy() != PolicyAbandoned || CategoryDataLoss.Overridable() {
		t.Error("DATA_LOSS must be abandoned and not overridable")
	}
	for c := CategoryNone; c <= CategoryDataLoss; c++ {
		if strings.HasPrefix(c.String(), "Category(") {
			t.Errorf("category %d has no name", int(c))
		}
	}
	if Category(99).String() != "Category(99)" || Policy(99).String() != "Policy(99)" {
		t.Error("out-of-range names")
	}
}

func TestParsePolicy(t *testing.T) {
	for s, want := range map[string]Policy{"terminal": PolicyTerminal, "retriable": PolicyRetriable, "retriable_other": PolicyRetriableOther} {
		if p, err := ParsePolicy(s); err != nil || p != want || p.String() != s {
			t.Errorf("ParsePolicy(%q) = %v, %v", s, p, err)
		}
	}
	for _, s := range []string{"", "abandoned", "Terminal", "retry", "retriable-other"} {
		if _, err := ParsePolicy(s); err == nil || !strings.Contains(err.Error(), "terminal, retriable, retriable_other") {
			t.Errorf("ParsePolicy(%q): err %v, want the valid choices listed", s, err)
		}
	}
}

// FuzzDecodeResponse: decoding never panics, and a decoded response encodes
// back to the same bytes.
func FuzzDecodeResponse(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Response
		if err := DecodeResponse(b, &r); err != nil {
			return
		}
		var re []byte
		var err error
		switch {
		case r.Status == StatusOK:
			re, err = AppendOK(nil, r.Seq, r.Tables)
		case r.Status.IsDurableAck():
			if r.Seq != -1 {
				t.Fatalf("durable ack with seq %d", r.Seq)
			}
			re, err = AppendDurableAck(nil, r.Status, r.Tables)
		default:
			re, err = AppendError(nil, r.Status, r.Seq, r.Message)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(re, b) {
			t.Fatalf("re-encoded %x, decoded from %x", re, b)
		}
	})
}

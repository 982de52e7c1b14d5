package datamodel

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

func TestHashXXH64ReferenceVectors(t *testing.T) {
	// Published values and values of the reference implementation (computed
	// once with it, outside this module): every tail path and the 32-byte
	// stripe loop, seeded and unseeded.
	tests := []struct {
		seed uint64
		in   []byte
		want uint64
	}{
		{0, nil, 0xef46db3751d8e999},
		{0, []byte("abc"), 0x44bc2cf5ad770999},
		{1, []byte("abc"), 0xbea9ca8199328908},
		{0, []byte("Nobody inspects the spammish repetition"), 0xfbcea83c8a378bf1},
	}
	const seed = 0x0123456789abcdef
	for _, v := range []struct {
		n    int
		want uint64
	}{
		{1, 0x20f9f4e3fba1be06}, {3, 0x76b77199119d7dd}, {4, 0x27a7e5587a8a5c2e}, {7, 0xcff13e1a810bec27},
		{8, 0x841e06da64a07ce8}, {31, 0x6ba872e910fbce5c}, {32, 0x25cc07da699894a9}, {33, 0xbf84912d4dea9670},
		{63, 0x737629700e723da5}, {64, 0xfded24eb11992703}, {100, 0xfe1fce732c97c212},
	} {
		b := make([]byte, v.n)
		for i := range b {
			b[i] = byte(i*7 + 3)
		}
		tests = append(tests, struct {
			seed uint64
			in   []byte
			want uint64
		}{seed, b, v.want})
	}
	for _, tc := range tests {
		if got := xxh64(tc.seed, tc.in); got != tc.want {
			t.Errorf("xxh64(%#x, %d bytes) = %#x, want %#x", tc.seed, len(tc.in), got, tc.want)
		}
	}
}

func TestHashFieldsAreLengthPrefixed(t *testing.T) {
	a := appendScopeIdentity(nil, seriesTag, []byte("ab"), "c", "", nil)
	b := appendScopeIdentity(nil, seriesTag, []byte("a"), "bc", "", nil)
	if string(a) == string(b) || xxh64(0, a) == xxh64(0, b) {
		t.Fatal("moving a byte between adjacent fields does not change the identity")
	}
	// Tags keep series and record identities apart.
	if string(appendScopeIdentity(nil, seriesTag, nil, "", "", nil)) == string(appendScopeIdentity(nil, recordTag, nil, "", "", nil)) {
		t.Fatal("series and record scope identities coincide")
	}
}

// Recorded once from the documented encoding; see the tests below.
const pinnedSeriesID = int64(0x45241251c6154276)

var pinnedRecordIDs = [2]int64{0x1cc494b8f5e22222, 0x1c5827db85143a06}

// The ids below are stored data: if this test fails, the identity encoding
// changed, and every DEDUP key written before the change no longer matches.
// Change them only together with a documented migration.
func TestHashSeriesIDPinned(t *testing.T) {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "checkout")
	rm.Resource().Attributes().PutStr("host.name", "h1")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("io.test")
	sm.Scope().SetVersion("1.0")
	sm.Scope().Attributes().PutBool("lib", true)
	m := sm.Metrics().AppendEmpty()
	m.SetName("http.server.duration")
	m.SetUnit("ms") // not part of the identity
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(1)
	dp.Attributes().PutStr("route", "/a")
	dp.Attributes().PutInt("code", 200)

	h := newHarness(t, 0, EncoderConfig{})
	h.metrics(md)
	got := h.oneRow("otel_metrics_gauge")["series_id"]
	want := wantSeriesID(`{"host.name":"h1","service.name":"checkout"}`, "io.test", "1.0", `{"lib":true}`,
		kindGauge, "http.server.duration", `{"code":200,"route":"/a"}`)
	if got != want {
		t.Fatalf("series_id = %v, want %v from the documented encoding", got, want)
	}
	if want != pinnedSeriesID {
		t.Fatalf("series_id = %#x, pinned %#x: the identity encoding changed", want, pinnedSeriesID)
	}

	// Another kind with the same name and attributes is another series.
	m.SetEmptySum().DataPoints().AppendEmpty().Attributes().FromRaw(map[string]any{"route": "/a", "code": 200})
	h2 := newHarness(t, 0, EncoderConfig{})
	h2.metrics(md)
	if h2.oneRow("otel_metrics_sum")["series_id"] == got {
		t.Fatal("a sum and a gauge of the same name share a series_id")
	}
}

func TestHashRecordIDPinned(t *testing.T) {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "checkout")
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("logger")
	lr := sl.LogRecords().AppendEmpty()
	lr.SetTimestamp(1_700_000_000_000_000_000)
	lr.SetSeverityNumber(plog.SeverityNumberInfo)
	lr.SetSeverityText("INFO")
	lr.Body().SetStr("hello")
	lr.Attributes().PutStr("user", "u1")
	lr.SetTraceID(pcommon.TraceID{1, 2, 3})
	lr.SetSpanID(pcommon.SpanID{4, 5})
	lr.SetFlags(1)
	lr.SetEventName("login")
	lr.CopyTo(sl.LogRecords().AppendEmpty()) // a genuine repeat

	h := newHarness(t, 0, EncoderConfig{})
	h.logs(ld)
	rows := h.table("otel_logs").rows
	key := xxh64(xxh64(0, canon(recordTag, `{"service.name":"checkout"}`, "logger", "", "")), canon(
		uint64(1_700_000_000_000_000_000), uint64(0), uint32(9), "INFO", byte(pcommon.ValueTypeStr), "hello",
		`{"user":"u1"}`, []byte{1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, []byte{4, 5, 0, 0, 0, 0, 0, 0},
		uint32(1), "login", uint32(0)))
	for ordinal, row := range rows {
		want := int64(xxh64(key, canon(uint32(ordinal))))
		if row["record_id"] != want {
			t.Fatalf("record_id of copy %d = %v, want %v from the documented encoding", ordinal, row["record_id"], want)
		}
		if want != pinnedRecordIDs[ordinal] {
			t.Fatalf("record_id of copy %d = %#x, pinned %#x: the identity encoding changed", ordinal, want, pinnedRecordIDs[ordinal])
		}
	}
	if len(rows) != 2 || rows[0]["record_id"] == rows[1]["record_id"] {
		t.Fatalf("two identical records must give two rows with distinct ids: %v", rows)
	}
}

// TestOrdinalsLikeAMap: ordinals counts like a map[uint64]uint32 through
// growth, keys that share their low bits (one probe chain), key 0, and
// resets of batches large and small (the table shrinks after a big one).
func TestOrdinalsLikeAMap(t *testing.T) {
	var o ordinals
	rng := rand.New(rand.NewPCG(1, 2))
	for batch, n := range []int{10, 5000, 3, 0, 200, 7000, 1} {
		o.reset()
		want := map[uint64]uint32{}
		for i := range n {
			var key uint64
			switch i % 4 {
			case 0:
				key = rng.Uint64()
			case 1:
				key = uint64(rng.IntN(50)) << 32 // same low bits: one long chain
			case 2:
				key = uint64(rng.IntN(3)) // 0, 1, 2
			default:
				key = uint64(rng.IntN(n + 1))
			}
			if got := o.next(key); got != want[key] {
				t.Fatalf("batch %d, record %d: ordinal of %#x is %d, want %d", batch, i, key, got, want[key])
			}
			want[key]++
		}
		if 2*o.used > len(o.slots) && len(o.slots) > 0 {
			t.Fatalf("batch %d: %d keys in %d slots: more than half full", batch, o.used, len(o.slots))
		}
	}
}

// TestRecordIDIsXXH64OfTheOrdinal: recordID's unrolled four-byte XXH64
// equals the general xxh64 over the ordinal's little-endian bytes.
func TestRecordIDIsXXH64OfTheOrdinal(t *testing.T) {
	for _, key := range []uint64{0, 1, 0x9E3779B185EBCA87, ^uint64(0), 0x0123456789abcdef} {
		for _, ordinal := range []uint32{0, 1, 2, 255, 256, 1 << 31, ^uint32(0)} {
			var b [4]byte
			binary.LittleEndian.PutUint32(b[:], ordinal)
			if got, want := recordID(key, ordinal), int64(xxh64(key, b[:])); got != want {
				t.Fatalf("recordID(%#x, %d) = %#x, want %#x", key, ordinal, got, want)
			}
		}
	}
}

// TestRecordIdentityEncoding: appendRecordIdentity appends exactly the
// documented encoding after whatever dst holds, at every capacity, and
// returns the attributes JSON within it, also when the JSON's length takes
// two or three bytes (the JSON is rendered in place and moved up).
func TestRecordIdentityEncoding(t *testing.T) {
	f := recordFields{
		time: 0x0102030405060708, observed: 0x1112131415161718, severityNumber: 0x21222324,
		severityText: "WARN", bodyKind: pcommon.ValueTypeStr, body: []byte("a body"),
		traceID: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		spanID:  [8]byte{17, 18, 19, 20, 21, 22, 23, 24}, flags: 0x31323334, eventName: "ev", dropped: 0x41424344,
	}
	var r Encoder
	for _, value := range []string{"", "v", strings.Repeat("x", 119), strings.Repeat("x", 120), strings.Repeat("y", 20_000)} {
		f.attributes = pcommon.NewMap()
		json := ""
		if value != "" {
			f.attributes.PutStr("k", value)
			json = `{"k":"` + value + `"}`
		}
		want := canon(f.time, f.observed, f.severityNumber, f.severityText, byte(f.bodyKind), string(f.body),
			json, f.traceID[:], f.spanID[:], f.flags, f.eventName, f.dropped)
		for _, prefix := range []string{"", "p", "a longer prefix of some bytes"} {
			for _, extra := range []int{0, 1, 19, 20, 40, 100, 1000} {
				dst := append(make([]byte, 0, len(prefix)+extra), prefix...)
				got, attrs := r.appendRecordIdentity(dst, &f)
				if !bytes.Equal(got, append([]byte(prefix), want...)) {
					t.Fatalf("%d-byte value, prefix %q, cap +%d: got %x, want %x", len(value), prefix, extra, got, append([]byte(prefix), want...))
				}
				if string(attrs) != json || (json == "") != (attrs == nil) {
					t.Fatalf("%d-byte value: attributes %q, want %q", len(value), attrs, json)
				}
			}
		}
	}
}

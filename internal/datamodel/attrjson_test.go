package datamodel

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestAttrJSONValues(t *testing.T) {
	tests := []struct {
		name string
		set  func(v pcommon.Value)
		want string
	}{
		{"empty", func(pcommon.Value) {}, `null`},
		{"string", func(v pcommon.Value) { v.SetStr("a b") }, `"a b"`},
		{"empty string", func(v pcommon.Value) { v.SetStr("") }, `""`},
		{"escapes", func(v pcommon.Value) { v.SetStr("q\"b\\n\nr\rt\tc\x01\x1f<>&\x7f") }, `"q\"b\\n\nr\rt\tc\u0001\u001f<>&` + "\x7f" + `"`},
		{"unicode kept", func(v pcommon.Value) { v.SetStr("żółw 🐢 \u2028") }, `"żółw 🐢 ` + "\u2028" + `"`},
		{"invalid utf8 one per byte", func(v pcommon.Value) { v.SetStr("a\xff\xfeb\xe2\x82") }, `"a` + "\uFFFD\uFFFD" + `b` + "\uFFFD\uFFFD" + `"`},
		{"surrogate half", func(v pcommon.Value) { v.SetStr("\xed\xa0\x80") }, `"` + "\uFFFD\uFFFD\uFFFD" + `"`},
		{"plain, 8-byte chunk and a tail", func(v pcommon.Value) { v.SetStr("abcdefghij") }, `"abcdefghij"`},
		{"escape in the tail after a chunk", func(v pcommon.Value) { v.SetStr("abcdefghi\"j") }, `"abcdefghi\"j"`},
		{"control in the tail after a chunk", func(v pcommon.Value) { v.SetStr("/api/v1/x\n") }, `"/api/v1/x\n"`},
		{"invalid utf8 in the tail after chunks", func(v pcommon.Value) { v.SetStr("0123456789abcdef\xff") }, `"0123456789abcdef` + "\uFFFD" + `"`},
		{"int", func(v pcommon.Value) { v.SetInt(-42) }, `-42`},
		{"int max", func(v pcommon.Value) { v.SetInt(math.MaxInt64) }, `9223372036854775807`},
		{"double", func(v pcommon.Value) { v.SetDouble(1.5) }, `1.5`},
		{"double whole", func(v pcommon.Value) { v.SetDouble(3) }, `3.0`},
		{"double negative zero", func(v pcommon.Value) { v.SetDouble(math.Copysign(0, -1)) }, `-0.0`},
		{"double small", func(v pcommon.Value) { v.SetDouble(1e-7) }, `1e-7`},
		{"double large", func(v pcommon.Value) { v.SetDouble(1e21) }, `1e+21`},
		{"double below large", func(v pcommon.Value) { v.SetDouble(1e20) }, `100000000000000000000.0`},
		{"double exp 3 digits", func(v pcommon.Value) { v.SetDouble(1.5e-300) }, `1.5e-300`},
		{"NaN", func(v pcommon.Value) { v.SetDouble(math.NaN()) }, `"NaN"`},
		{"+Inf", func(v pcommon.Value) { v.SetDouble(math.Inf(1)) }, `"+Inf"`},
		{"-Inf", func(v pcommon.Value) { v.SetDouble(math.Inf(-1)) }, `"-Inf"`},
		{"true", func(v pcommon.Value) { v.SetBool(true) }, `true`},
		{"false", func(v pcommon.Value) { v.SetBool(false) }, `false`},
		{"bytes", func(v pcommon.Value) { v.SetEmptyBytes().FromRaw([]byte("hi!?")) }, `"aGkhPw=="`},
		{"empty bytes", func(v pcommon.Value) { v.SetEmptyBytes() }, `""`},
		{"empty map", func(v pcommon.Value) { v.SetEmptyMap() }, `{}`},
		{"empty slice", func(v pcommon.Value) { v.SetEmptySlice() }, `[]`},
		{"slice keeps order", func(v pcommon.Value) {
			s := v.SetEmptySlice()
			s.AppendEmpty().SetStr("z")
			s.AppendEmpty().SetInt(1)
			s.AppendEmpty()
			s.AppendEmpty().SetEmptyMap().PutBool("b", true)
		}, `["z",1,null,{"b":true}]`},
		{"nested map sorted", func(v pcommon.Value) {
			m := v.SetEmptyMap()
			m.PutStr("z", "last")
			inner := m.PutEmptyMap("m")
			inner.PutInt("y", 2)
			inner.PutInt("x", 1)
			deeper := inner.PutEmptySlice("s").AppendEmpty().SetEmptyMap()
			deeper.PutStr("d", "4")
			deeper.PutStr("c", "3")
			m.PutStr("a", "first")
		}, `{"a":"first","m":{"s":[{"c":"3","d":"4"}],"x":1,"y":2},"z":"last"}`},
	}
	var w jsonWriter
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := pcommon.NewValueEmpty()
			tc.set(v)
			got := string(w.appendValue([]byte("prefix:"), v))
			if got != "prefix:"+tc.want {
				t.Fatalf("got %s, want prefix:%s", got, tc.want)
			}
			if !json.Valid([]byte(tc.want)) || !utf8.ValidString(tc.want) {
				t.Fatalf("%s is not valid JSON / UTF-8", tc.want)
			}
			if len(w.kvs) != 0 {
				t.Fatalf("sort stack not unwound: %d entries left", len(w.kvs))
			}
		})
	}
}

func TestAttrJSONMapSortedAndDeterministic(t *testing.T) {
	// Same content inserted in different orders renders identically.
	a := pcommon.NewMap()
	a.PutStr("service.name", "api")
	a.PutInt("b", 2)
	a.PutStr("a\x00", "nul key")
	a.PutStr("A", "upper sorts first")
	a.PutStr("é", "non-ascii sorts by bytes")
	b := pcommon.NewMap()
	b.PutStr("é", "non-ascii sorts by bytes")
	b.PutStr("A", "upper sorts first")
	b.PutStr("a\x00", "nul key")
	b.PutInt("b", 2)
	b.PutStr("service.name", "api")
	var w jsonWriter
	ga := string(w.appendMap(nil, a))
	gb := string(w.appendMap(nil, b))
	want := `{"A":"upper sorts first","a\u0000":"nul key","b":2,"service.name":"api","é":"non-ascii sorts by bytes"}`
	if ga != want || gb != want {
		t.Fatalf("got\n%s\n%s\nwant\n%s", ga, gb, want)
	}
	var decoded map[string]any
	if err := json.Unmarshal([]byte(ga), &decoded); err != nil || len(decoded) != 5 {
		t.Fatalf("not a 5-key JSON object: %v %v", decoded, err)
	}
}

func TestAttrJSONDuplicateKeyFirstWins(t *testing.T) {
	// pdata decoded from the wire can hold a key twice (pcommon's Put* never
	// creates one, so the entries are placed on the stack directly); Map.Get
	// returns the first, and so does the JSON, keeping its keys unique.
	kvs := []keyValue{{"k", pcommon.NewValueStr("first")}, {"k", pcommon.NewValueStr("second")}, {"a", pcommon.NewValueInt(1)}}
	var w jsonWriter
	w.kvs = append(w.kvs, kvs...)
	got := string(w.renderSorted(nil, 0))
	if got != `{"a":1,"k":"first"}` {
		t.Fatalf("got %s", got)
	}
}

func TestAttrJSONTextForm(t *testing.T) {
	tests := []struct {
		name   string
		set    func(v pcommon.Value)
		want   string
		wantOK bool
	}{
		{"empty is null", func(pcommon.Value) {}, "", false},
		{"string as is", func(v pcommon.Value) { v.SetStr(`say "hi"`) }, `say "hi"`, true},
		{"string repaired", func(v pcommon.Value) { v.SetStr("x\xc3") }, "x\uFFFD", true},
		{"int", func(v pcommon.Value) { v.SetInt(7) }, `7`, true},
		{"bool", func(v pcommon.Value) { v.SetBool(true) }, `true`, true},
		{"double", func(v pcommon.Value) { v.SetDouble(2) }, `2.0`, true},
		{"bytes quoted base64", func(v pcommon.Value) { v.SetEmptyBytes().FromRaw([]byte{0, 1}) }, `"AAE="`, true},
		{"map json", func(v pcommon.Value) { v.SetEmptyMap().PutStr("k", "v") }, `{"k":"v"}`, true},
	}
	var w jsonWriter
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := pcommon.NewValueEmpty()
			tc.set(v)
			got, ok := w.appendText(nil, v)
			if string(got) != tc.want || ok != tc.wantOK {
				t.Fatalf("got %q %v, want %q %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestAttrJSONNoAllocSteadyState(t *testing.T) {
	m := pcommon.NewMap()
	m.PutStr("http.method", "GET")
	m.PutStr("http.route", "/api/v1/items")
	m.PutInt("http.status_code", 200)
	m.PutDouble("ratio", 0.25)
	m.PutBool("ok", true)
	m.PutEmptyMap("nested").PutStr("x", "y")
	m.PutEmptyBytes("raw").FromRaw([]byte("abc"))
	var w jsonWriter
	buf := w.appendMap(nil, m)
	allocs := testing.AllocsPerRun(100, func() {
		buf = w.appendMap(buf[:0], m)
	})
	if allocs != 0 {
		t.Fatalf("appendMap allocates %.1f times per call in steady state", allocs)
	}
}

// FuzzAttrJSON: for any key and string value, the rendered object is valid
// JSON and valid UTF-8, decodes back to the UTF-8-repaired key and value,
// and is the same when rendered through a key layout.
func FuzzAttrJSON(f *testing.F) {
	for _, seed := range [][2]string{
		{"k", "v"}, {"", ""}, {"q\"", "\\"}, {"ctl\x00\x1f", "\x7f\n\r\t\b\f"}, {"żółw", "🐢"},
		{"bad\xff", "\xed\xa0\x80"}, {"01234567", "abcdefgh\"ijklmnop"}, {"\u2028", "<&>"},
	} {
		f.Add(seed[0], seed[1])
	}
	var w jsonWriter
	var l keyLayout // kept across inputs: rebuilt for each new key
	f.Fuzz(func(t *testing.T, key, value string) {
		m := pcommon.NewMap()
		m.PutStr(key, value)
		out := w.appendMap(nil, m)
		if viaLayout := w.appendMapLayout(nil, m, &l); string(viaLayout) != string(out) {
			t.Fatalf("through a key layout %q, directly %q", viaLayout, out)
		}
		if !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("invalid JSON or UTF-8: %q", out)
		}
		var decoded map[string]string
		if err := json.Unmarshal(out, &decoded); err != nil {
			t.Fatal(err)
		}
		if got, ok := decoded[validString(key)]; !ok || got != validString(value) || len(decoded) != 1 {
			t.Fatalf("%q decodes to %q, want {%q: %q}", out, decoded, validString(key), validString(value))
		}
	})
}

// TestAttrJSONKeyLayout renders a sequence of maps through one keyLayout,
// as the rows of a batch are, and checks each against the general path:
// the layout must be rebuilt whenever the keys or their order change, and
// keep the first of repeated keys.
func TestAttrJSONKeyLayout(t *testing.T) {
	str := pcommon.NewValueStr
	nested := pcommon.NewValueMap()
	nested.Map().PutStr("z", "1")
	nested.Map().PutEmptyMap("a").PutInt("y", 2)
	abc := []keyValue{{"b", str("1")}, {"a", str("2")}, {"c", pcommon.NewValueInt(3)}}
	tests := []struct {
		name string
		maps [][]keyValue
	}{
		{"same keys, same order", [][]keyValue{abc, {{"b", str("x")}, {"a", str("y")}, {"c", str("z")}}}},
		{"same keys, another order", [][]keyValue{abc, {{"a", str("x")}, {"b", str("y")}, {"c", str("z")}}}},
		{"one key renamed", [][]keyValue{abc, {{"b", str("1")}, {"a", str("2")}, {"d", str("3")}}}},
		{"fewer keys, then more", [][]keyValue{abc, {{"b", str("1")}, {"a", str("2")}}, abc, append(abc[:3:3], keyValue{"0", str("")})}},
		{"empty map between", [][]keyValue{abc, {}, abc}},
		{"repeated key, first wins", [][]keyValue{
			{{"k", str("first")}, {"k", str("second")}, {"a", str("1")}},
			{{"k", str("first")}, {"k", str("second")}, {"a", str("1")}},
			{{"k", str("only")}, {"a", str("1")}},
		}},
		{"keys that need escaping", [][]keyValue{
			{{"q\"", str("1")}, {"bad\xff", str("2")}, {"ctl\n", str("3")}},
			{{"q\"", str("4")}, {"bad\xff", str("5")}, {"ctl\n", str("6")}},
		}},
		{"nested maps grow the stack", [][]keyValue{
			{{"m", nested}, {"a", str("1")}},
			{{"m", nested}, {"a", str("2")}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var w, ref jsonWriter
			var l keyLayout
			for i, kvs := range tc.maps {
				w.kvs = append(w.kvs, kvs...)
				got := string(w.renderLayout([]byte("p:"), 0, &l))
				ref.kvs = append(ref.kvs, kvs...)
				want := "p:" + string(ref.renderSorted(nil, 0))
				if got != want {
					t.Fatalf("map %d: got %s, want %s", i, got, want)
				}
				if len(w.kvs) != 0 {
					t.Fatalf("map %d: stack not unwound: %d entries left", i, len(w.kvs))
				}
			}
		})
	}
}

// TestAttrJSONKeyLayoutNoAlloc: once grown, neither reusing nor rebuilding
// a layout allocates, so alternating key sets stay allocation-free.
func TestAttrJSONKeyLayoutNoAlloc(t *testing.T) {
	a, b := pcommon.NewMap(), pcommon.NewMap()
	a.PutStr("http.route", "/api")
	a.PutInt("status", 200)
	b.PutStr("db.system", "postgresql")
	b.PutStr("db.operation", "SELECT")
	b.PutBool("ok", true)
	var w jsonWriter
	var l keyLayout
	buf := w.appendMapLayout(nil, b, &l)
	for _, tc := range []struct {
		name string
		maps []pcommon.Map
	}{{"same keys", []pcommon.Map{a, a}}, {"alternating keys", []pcommon.Map{a, b}}} {
		allocs := testing.AllocsPerRun(100, func() {
			for _, m := range tc.maps {
				buf = w.appendMapLayout(buf[:0], m, &l)
			}
		})
		if allocs != 0 {
			t.Fatalf("%s: appendMapLayout allocates %.1f times per call in steady state", tc.name, allocs)
		}
	}
}

// TestAppendIntIsStrconv: the small-number path agrees with strconv around
// each of its boundaries.
func TestAppendIntIsStrconv(t *testing.T) {
	for _, v := range []int64{math.MinInt64, -1000, -1, 0, 1, 9, 10, 99, 100, 200, 503, 999, 1000, 1001, math.MaxInt64} {
		if got, want := string(appendInt([]byte("x"), v)), "x"+strconv.FormatInt(v, 10); got != want {
			t.Fatalf("appendInt(%d) = %s, want %s", v, got, want)
		}
	}
}

// TestJSONStringEveryPosition puts each byte that needs attention at every
// position of plain strings of 0 to 24 bytes: the word, overlapping-word
// and 32-bit-halves checks of appendJSONStringBody must send every one of
// them to the general path, which this compares against.
func TestJSONStringEveryPosition(t *testing.T) {
	specials := []string{`"`, `\`, "\n", "\x01", "\x1f", "\x7f", "\xff", "é", "\xe2\x82"}
	for n := 0; n <= 24; n++ {
		plain := []byte("abcdefghijklmnopqrstuvwxyz"[:n])
		if got, want := appendJSONStringBody(nil, string(plain)), appendJSONStringFrom(nil, string(plain), 0); string(got) != string(want) {
			t.Fatalf("plain %q: %q, want %q", plain, got, want)
		}
		for p := 0; p < n; p++ {
			for _, sp := range specials {
				s := string(plain[:p]) + sp + string(plain[p+1:])
				if got, want := appendJSONStringBody(nil, s), appendJSONStringFrom(nil, s, 0); string(got) != string(want) {
					t.Fatalf("%q: %q, want %q", s, got, want)
				}
			}
		}
	}
}

// TestPlain8EveryByte: plain8 agrees with jsonPlain for every byte value at
// every position of a word of plain bytes, and refuses any word holding a
// byte at or above 0x80 whatever the other bytes (the carries of its sums
// must not hide one).
func TestPlain8EveryByte(t *testing.T) {
	for pos := range 8 {
		for b := range 256 {
			for _, fill := range []byte{'a', ' ', '~', '!', 0x7f} {
				w := [8]byte{fill, fill, fill, fill, fill, fill, fill, fill}
				w[pos] = byte(b)
				if got := plain8(binary.LittleEndian.Uint64(w[:])); got != jsonPlain[b] {
					t.Fatalf("byte %#x at %d among %q: plain8 %v, want %v", b, pos, fill, got, jsonPlain[b])
				}
				for other := range 8 {
					if other != pos {
						w2 := w
						w2[other] = 0x80 | byte(b)
						if plain8(binary.LittleEndian.Uint64(w2[:])) {
							t.Fatalf("word %x with a high byte at %d: plain8 true", w2, other)
						}
					}
				}
			}
		}
	}
}

// TestKeyLayoutKeyEveryByte: the layout's key check (two words for keys of
// 4 to 16 bytes, memequal for others) must see a change of any one byte of
// a key of any length, and a key one byte longer or shorter.
func TestKeyLayoutKeyEveryByte(t *testing.T) {
	const letters = "abcdefghijklmnopqrstuvwxyz"
	var w jsonWriter
	var l keyLayout
	for n := 1; n <= 20; n++ {
		base := letters[:n]
		var others []string
		for p := range n {
			others = append(others, base[:p]+"X"+base[p+1:])
		}
		others = append(others, letters[:n+1], base[:n-1]+"", base)
		for _, other := range others {
			if other == "" {
				continue
			}
			for _, k := range []string{base, other} {
				m := pcommon.NewMap()
				m.PutStr(k, "v")
				m.PutInt("zz", 1)
				if got, want := string(w.appendMapLayout(nil, m, &l)), string(w.appendMap(nil, m)); got != want {
					t.Fatalf("key %q after %q: %s, want %s", k, base, got, want)
				}
			}
		}
	}
}

package qwp

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestMemDict(t *testing.T) {
	d := NewMemDict()
	for i, s := range []string{"a", "b", "", "a", "b", "c"} {
		id := d.ID([]byte(s))
		want := map[string]uint32{"a": 0, "b": 1, "": 2, "c": 3}[s]
		if id != want {
			t.Fatalf("call %d: ID(%q) = %d, want %d", i, s, id, want)
		}
	}
	if d.Len() != 4 || string(d.Entry(3)) != "c" || string(d.Entry(2)) != "" {
		t.Fatalf("Len %d Entry(3) %q", d.Len(), d.Entry(3))
	}
	buf := []byte("zz")
	d.ID(buf)
	buf[0] = 'q' // ID must not retain the caller's bytes
	if string(d.Entry(4)) != "zz" {
		t.Fatalf("entry changed with the caller's buffer: %q", d.Entry(4))
	}
	if allocs := testing.AllocsPerRun(100, func() { d.ID([]byte("a")) }); allocs != 0 {
		t.Fatalf("looking up a known symbol allocates %v times", allocs)
	}
}

func dictOf(entries ...string) *MemDict {
	d := NewMemDict()
	for _, e := range entries {
		d.ID([]byte(e))
	}
	return d
}

func TestCatchUpFrames(t *testing.T) {
	var entries []string
	for i := 0; i < 300; i++ {
		entries = append(entries, fmt.Sprintf("symbol-%d-%s", i, strings.Repeat("x", i%17)))
	}
	d := dictOf(entries...)
	for _, tc := range []struct {
		from, to, limit int
		minFrames       int
	}{
		{0, 300, 0, 1}, {0, 300, 200, 30}, {5, 150, 64, 40}, {299, 300, 50, 1}, {0, 0, 100, 0},
	} {
		var got []string
		next, frames := tc.from, 0
		err := CatchUpFrames(d, tc.from, tc.to, tc.limit, func(f []byte) error {
			frames++
			if tc.limit > 0 && len(f) > tc.limit {
				return fmt.Errorf("frame of %d bytes over %d", len(f), tc.limit)
			}
			m, err := decodeMessage(f)
			if err != nil {
				return err
			}
			if m.flags != FlagDeferCommit|FlagDeltaSymbolDict || len(m.tables) != 0 || f[6] != 0 || f[7] != 0 {
				return fmt.Errorf("flags %#x tables %d", m.flags, len(m.tables))
			}
			if m.dictStart != next || len(m.dict) == 0 {
				return fmt.Errorf("frame starts at %d with %d entries, want start %d", m.dictStart, len(m.dict), next)
			}
			start, end, err := DeltaDictRange(f)
			if err != nil || start != m.dictStart || end != start+len(m.dict) {
				return fmt.Errorf("DeltaDictRange = %d, %d, %v", start, end, err)
			}
			for _, e := range m.dict {
				got = append(got, string(e))
			}
			next += len(m.dict)
			return nil
		})
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(entries[tc.from:tc.to]) || frames < tc.minFrames {
			t.Fatalf("%+v: %d frames, entries %d..%d not reproduced", tc, frames, tc.from, tc.to)
		}
	}
}

// TestCatchUpFramesFillLimit: each frame but the last is full, in the sense
// that the next entry would not have fitted.
func TestCatchUpFramesFillLimit(t *testing.T) {
	d := dictOf("aaaa", "bbbb", "cccc", "dddd", "eeee")
	var sizes []int
	// header 12 + start 1 + count 1 + 2 entries of 5 bytes = 24.
	if err := CatchUpFrames(d, 0, 5, 24, func(f []byte) error { sizes = append(sizes, len(f)); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(sizes) != "[24 24 19]" {
		t.Fatalf("frame sizes %v, want [24 24 19]", sizes)
	}
}

func TestCatchUpFramesErrors(t *testing.T) {
	d := dictOf("small", strings.Repeat("L", 100))
	boom := errors.New("boom")
	for _, tc := range []struct {
		what      string
		from, to  int
		limit     int
		emit      func([]byte) error
		want      string
		wantIsErr error
	}{
		{"entry too large", 0, 2, 60, nil, "symbol id 1 (100 bytes) does not fit in a 60-byte", nil},
		{"emit error", 0, 2, 0, func([]byte) error { return boom }, "", boom},
		{"range past end", 0, 3, 0, nil, "[0, 3) is not within the dictionary's 2", nil},
		{"negative from", -1, 1, 0, nil, "not within", nil},
		{"reversed", 2, 1, 0, nil, "not within", nil},
	} {
		emit := tc.emit
		if emit == nil {
			emit = func([]byte) error { return nil }
		}
		err := CatchUpFrames(d, tc.from, tc.to, tc.limit, emit)
		if err == nil || (tc.wantIsErr != nil && !errors.Is(err, tc.wantIsErr)) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.what, err, tc.want)
		}
	}
}

func TestDeltaDictRange(t *testing.T) {
	dict := NewMemDict()
	dict.ID([]byte("known"))
	e := NewEncoder(dict, EncoderOptions{DeltaSymbolDict: true})
	tb := mustTable(t, e, "t")
	s := mustCol(t, tb, "s", TypeSymbol)
	tb.SymbolString(s, "known")
	tb.SymbolString(s, "new")
	mustEndRow(t, tb)
	withDict := e.Finish(nil)
	plain := readGolden(t, "example1.bin")
	for _, tc := range []struct {
		what       string
		msg        []byte
		start, end int
		err        string
	}{
		{"frame with one new entry", withDict, 1, 2, ""},
		{"no delta flag", plain, 0, 0, ""},
		{"short", withDict[:11], 0, 0, "shorter than the 12-byte header"},
		{"bad magic", append([]byte{0}, withDict[1:]...), 0, 0, "magic"},
		{"payload cut", withDict[:20], 0, 0, "exceeds"},
		{"dict header cut", fixLen(withDict[:HeaderSize+1]), 0, 0, "truncated"},
		{"empty payload", fixLen(withDict[:HeaderSize]), 0, 0, "truncated"},
		{"range over the limit", fixLen(append(append([]byte{}, withDict[:HeaderSize]...), 0x80, 0x89, 0x7a, 0x01)), 0, 0, "exceeds 2000000"},
	} {
		start, end, err := DeltaDictRange(tc.msg)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.what, err, tc.err)
			}
			continue
		}
		if err != nil || start != tc.start || end != tc.end {
			t.Errorf("%s: %d, %d, %v; want %d, %d", tc.what, start, end, err, tc.start, tc.end)
		}
	}
}

// TestDeltaDictRangeHead: the range read from a message's first bytes and
// its length is the whole message's; a payload_length past the stated
// length is refused as it is for a whole message.
func TestDeltaDictRangeHead(t *testing.T) {
	dict := NewMemDict()
	for i := range 300 {
		dict.ID([]byte(fmt.Sprintf("known %d", i)))
	}
	e := NewEncoder(dict, EncoderOptions{DeltaSymbolDict: true})
	tb := mustTable(t, e, "t")
	s := mustCol(t, tb, "s", TypeSymbol)
	for i := range 200 {
		tb.SymbolString(s, fmt.Sprintf("new %d", i))
		mustEndRow(t, tb)
	}
	msg := e.Finish(nil)
	start, end, err := DeltaDictRange(msg)
	if err != nil || start != 300 || end != 500 {
		t.Fatalf("DeltaDictRange = %d, %d, %v; want 300, 500", start, end, err)
	}
	for _, n := range []int{HeaderSize + 20, 60, len(msg)} {
		if s, e, err := DeltaDictRangeHead(msg[:n], len(msg)); err != nil || s != start || e != end {
			t.Errorf("head of %d bytes: %d, %d, %v; want %d, %d", n, s, e, err, start, end)
		}
	}
	if _, _, err := DeltaDictRangeHead(msg[:60], 59); err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Errorf("a message shorter than its payload_length: err %v, want it refused", err)
	}
}

// fixLen sets payload_length to the bytes present.
func fixLen(msg []byte) []byte {
	out := append([]byte{}, msg...)
	n := len(out) - HeaderSize
	out[8], out[9], out[10], out[11] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
	return out
}

func TestDeltaDictEntries(t *testing.T) {
	dict := NewMemDict()
	dict.ID([]byte("known"))
	e := NewEncoder(dict, EncoderOptions{DeltaSymbolDict: true})
	tb := mustTable(t, e, "t")
	s := mustCol(t, tb, "s", TypeSymbol)
	tb.SymbolString(s, "known")
	tb.SymbolString(s, "new")
	mustEndRow(t, tb)
	tb.SymbolString(s, "newer")
	mustEndRow(t, tb)
	msg := e.Finish(nil)
	start, entries, err := DeltaDictEntries(msg)
	if err != nil || start != 1 || len(entries) != 2 || string(entries[0]) != "new" || string(entries[1]) != "newer" {
		t.Fatalf("DeltaDictEntries = %d, %q, %v; want 1, [new newer]", start, entries, err)
	}
	if _, entries, err := DeltaDictEntries(readGolden(t, "example1.bin")); err != nil || entries != nil {
		t.Fatalf("message without a delta section: %q, %v", entries, err)
	}
	// The section says two entries, but the payload ends inside the first.
	cut := fixLen(msg[:HeaderSize+4])
	if _, _, err := DeltaDictEntries(cut); err == nil || !strings.Contains(err.Error(), "runs past") {
		t.Fatalf("cut entry: err %v", err)
	}
}

func TestAppendCommitAndDeferred(t *testing.T) {
	c := AppendCommit([]byte("prefix"))
	if string(c[:6]) != "prefix" || len(c) != 6+HeaderSize {
		t.Fatalf("AppendCommit wrote %d bytes after the prefix, want the %d-byte header", len(c)-6, HeaderSize)
	}
	m, err := decodeMessage(c[6:])
	if err != nil {
		t.Fatal(err)
	}
	if m.flags != 0 || len(m.tables) != 0 {
		t.Fatalf("bare commit has flags %#x and %d tables, want none", m.flags, len(m.tables))
	}
	if Deferred(c[6:]) {
		t.Fatal("a bare commit reported as deferred")
	}
	var catchUp []byte
	if err := CatchUpFrames(dictOf("a"), 0, 1, 0, func(f []byte) error { catchUp = append(catchUp, f...); return nil }); err != nil {
		t.Fatal(err)
	}
	if !Deferred(catchUp) {
		t.Fatal("a catch-up frame not reported as deferred")
	}
	if Deferred(catchUp[:5]) {
		t.Fatal("a message shorter than the header reported as deferred")
	}
}

// TestCatchUpEncoderHoldsOneFrame: entries given one at a time come out in
// frames as soon as the next entry would not fit, so the encoder holds at
// most one frame whatever the dictionary's size, and the caller may reuse
// the entry's buffer.
func TestCatchUpEncoderHoldsOneFrame(t *testing.T) {
	const from, n, limit = 7, 5000, 300
	var got []string
	e := NewCatchUpEncoder(from, limit, func(f []byte) error {
		m, err := decodeMessage(f)
		if err != nil {
			return err
		}
		if len(f) > limit || m.dictStart != from+len(got) || m.flags != FlagDeferCommit|FlagDeltaSymbolDict {
			return fmt.Errorf("frame of %d bytes starts at id %d with flags %#x, want at most %d bytes from id %d", len(f), m.dictStart, m.flags, limit, from+len(got))
		}
		for _, s := range m.dict {
			got = append(got, string(s))
		}
		return nil
	})
	buf := make([]byte, 0, 64)
	for i := range n {
		buf = fmt.Appendf(buf[:0], "entry-%d-%s", i, strings.Repeat("y", i%23))
		if err := e.Add(buf); err != nil {
			t.Fatal(err)
		}
		if pending := len(e.buf) - catchUpGap; pending > limit || cap(e.buf) > catchUpGap+limit || len(got)+e.count != i+1 {
			t.Fatalf("after entry %d: %d bytes pending in a buffer of %d, %d entries emitted and %d pending", i, pending, cap(e.buf), len(got), e.count)
		}
	}
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("%d entries emitted, want %d", len(got), n)
	}
	for i, s := range got {
		if want := fmt.Sprintf("entry-%d-%s", i, strings.Repeat("y", i%23)); s != want {
			t.Fatalf("entry %d = %q, want %q", i, s, want)
		}
	}
	if err := e.Flush(); err != nil || len(got) != n {
		t.Fatalf("a second Flush: %v, %d entries", err, len(got))
	}
}

// A dictionary of many entries keeps every id: lookups after the table grew
// and the text spread over chunks (entries of every length up to past a
// chunk, empty ones too) find the first id, and every entry read before
// later insertions still reads the same.
func TestMemDictMany(t *testing.T) {
	d := NewMemDict()
	n := 60000
	if testing.Short() {
		n = 20000
	}
	sym := func(i int) []byte {
		s := fmt.Sprintf("%d-", i)
		return []byte(s + strings.Repeat("x", (i*7919)%(dictChunkMax/64)))
	}
	big := []byte(strings.Repeat("b", dictChunkMax+10))
	var early [][]byte
	for i := range n {
		if id := d.ID(sym(i)); id != uint32(i) {
			t.Fatalf("entry %d got id %d", i, id)
		}
		if i < 100 {
			early = append(early, d.Entry(i))
		}
	}
	for _, s := range [][]byte{{}, big} {
		id := d.ID(s)
		if id != uint32(d.Len()-1) || !bytes.Equal(d.Entry(int(id)), s) || d.ID(s) != id {
			t.Fatalf("entry of %d bytes: id %d of %d, stored %d bytes", len(s), id, d.Len(), len(d.Entry(int(id))))
		}
	}
	for i := range n {
		if id := d.ID(sym(i)); id != uint32(i) || !bytes.Equal(d.Entry(i), sym(i)) {
			t.Fatalf("entry %d: id %d on a second lookup, Entry %.20q", i, id, d.Entry(i))
		}
	}
	for i, e := range early {
		if !bytes.Equal(e, sym(i)) || cap(e) != len(e) {
			t.Fatalf("entry %d read early now reads %.20q (cap %d)", i, e, cap(e))
		}
	}
	if d.Len() != n+2 {
		t.Fatalf("Len %d, want %d", d.Len(), n+2)
	}
	text := 0
	for id := range d.Len() {
		text += len(d.Entry(id))
	}
	if d.TextBytes() != text {
		t.Fatalf("TextBytes %d, the entries hold %d bytes", d.TextBytes(), text)
	}
}

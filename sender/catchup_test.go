package sender

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/questdbexporter/questdbexporter/qwp"
	"github.com/questdbexporter/questdbexporter/qwp/qwptest"
)

// TestCatchUpStopsOnADamagedDictionaryRecord: a dictionary record damaged
// after the slot was opened is found while the catch-up streams the
// generation from disk. The sender stops with an error naming the file and
// the record's offset, no data frame goes out, and every frame stays queued.
func TestCatchUpStopsOnADamagedDictionaryRecord(t *testing.T) {
	dir := t.TempDir()
	q := sfQueue(t, dir, "s")
	t.Cleanup(func() { _ = q.Close() }) // after the sender's Close
	f := newFeeder(t, q, true)
	f.frames(3, 10)
	// Flip a byte of the third record (ids 0 and 1 are "g0-s0", "g0-s1":
	// records of 12 + 5 + 4 bytes).
	path := filepath.Join(dir, "s", fmt.Sprintf(".symbol-dict.%010d", 0))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const third = 2 * (12 + 5 + 4)
	data[third+12] ^= 0xff
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, qwptest.Options{})
	s := startSender(t, q, testOptions(nil, srv.URL()))
	te := waitTerminal(t, s)
	if want := fmt.Sprintf("%s: record at offset %d", path, third); te.Category != qwp.CategoryNone || te.FSN != 1 || !strings.Contains(te.Error(), want) {
		t.Fatalf("terminal %v (category %v, FSN %d); want one naming FSN 1 and %q", te, te.Category, te.FSN, want)
	}
	if rows := srv.RowCount(testTable); rows != 0 || q.AckedFSN() != 0 {
		t.Fatalf("%d rows on the server, %d frames acknowledged; want none", rows, q.AckedFSN())
	}
}

package sfqueue

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envLockHolder); dir != "" {
		os.Exit(lockHolderChild(dir))
	}
	goleak.VerifyTestMain(m)
}

// iterations returns short under -short and long otherwise, or with
// QDB_LONG=1 (the long variants: QDB_LONG=1 go test ./sfqueue).
func iterations(short, long int) int {
	if testing.Short() && os.Getenv("QDB_LONG") != "1" {
		return short
	}
	return long
}

// testPayload is self-describing: id u64 | size u32 | bytes derived from id,
// so a recovered payload can be checked on its own.
func testPayload(id uint64, size int) []byte {
	if size < 12 {
		size = 12
	}
	p := make([]byte, size)
	binary.LittleEndian.PutUint64(p, id)
	binary.LittleEndian.PutUint32(p[8:], uint32(size))
	x := id*0x9E3779B97F4A7C15 | 1
	for i := 12; i < size; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		p[i] = byte(x)
	}
	return p
}

// checkTestPayload verifies a payload made by testPayload and returns its id.
func checkTestPayload(p []byte) (uint64, error) {
	if len(p) < 12 {
		return 0, fmt.Errorf("payload of %d bytes is shorter than its 12-byte header", len(p))
	}
	id := binary.LittleEndian.Uint64(p)
	if want := testPayload(id, int(binary.LittleEndian.Uint32(p[8:]))); !bytes.Equal(p, want) {
		return id, fmt.Errorf("payload id %d does not match its generator", id)
	}
	return id, nil
}

type modeCase struct {
	name string
	opts func(t *testing.T) Options
}

// bothModes runs a case in memory-only mode and in SF mode on a temp dir.
var bothModes = []modeCase{
	{"memory", func(t *testing.T) Options { return Options{} }},
	{"sf", func(t *testing.T) Options { return Options{Dir: t.TempDir(), SenderID: "s1"} }},
}

func mustOpen(t *testing.T, o Options) *Queue {
	t.Helper()
	q, err := Open(o)
	if err != nil {
		t.Fatalf("Open(%+v): %v", o, err)
	}
	return q
}

func mustAppend(t *testing.T, q *Queue, p []byte) uint64 {
	t.Helper()
	fsn, err := q.Append(context.Background(), p)
	if err != nil {
		t.Fatalf("Append(%d bytes): %v", len(p), err)
	}
	return fsn
}

type frame struct {
	fsn     uint64
	payload []byte
}

// drain reads every frame from the cursor's position to PublishedFSN.
func drain(t *testing.T, c *Cursor) []frame {
	t.Helper()
	var out []frame
	for {
		fsn, p, ok, err := c.Next()
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if !ok {
			return out
		}
		out = append(out, frame{fsn, bytes.Clone(p)})
	}
}

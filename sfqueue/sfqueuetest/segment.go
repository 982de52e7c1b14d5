package sfqueuetest

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"testing"
)

// SetSegmentVersion rewrites the format version in the header of the
// segment file at path, with a header CRC that matches again, so that the
// segment reads as one another release wrote (sfqueue/doc.go: magic,
// version, base FSN, reserved, CRC32C of the 20 bytes before it).
func SetSegmentVersion(t testing.TB, path string, version uint32) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := make([]byte, 24)
	if _, err := f.ReadAt(h, 0); err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(h[4:], version)
	binary.LittleEndian.PutUint32(h[20:], crc32.Checksum(h[:20], crc32.MakeTable(crc32.Castagnoli)))
	if _, err := f.WriteAt(h, 0); err != nil {
		t.Fatal(err)
	}
}

// FlipBit flips the lowest bit of the byte at off of the file at path: a
// stored frame damaged behind the queue's back.
func FlipBit(t testing.TB, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{b[0] ^ 0x01}, off); err != nil {
		t.Fatal(err)
	}
}

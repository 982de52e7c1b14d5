package main

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/questdbexporter/questdbexporter/sfqueue"
)

// TestSlotErrors checks the refusals of both commands: each names the path
// and what is wrong with it.
func TestSlotErrors(t *testing.T) {
	parent := t.TempDir()
	file := filepath.Join(parent, "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(parent, "empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	// A slot whose segment says format version 3 (newer than this tool's
	// 2), with an intact header.
	newer := filepath.Join(parent, "newer")
	if err := os.Mkdir(newer, 0o700); err != nil {
		t.Fatal(err)
	}
	h := make([]byte, 24)
	binary.LittleEndian.PutUint32(h, 0x31465153)
	binary.LittleEndian.PutUint32(h[4:], sfqueue.FormatVersion+1)
	binary.LittleEndian.PutUint64(h[8:], 1)
	binary.LittleEndian.PutUint32(h[20:], crc32.Checksum(h[:20], crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(filepath.Join(newer, "00000000000000000001.sfseg"), h, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path, want string
	}{
		{"missing path", filepath.Join(parent, "nope"), "nope does not exist"},
		{"not a directory", file, "a-file is not a directory"},
		{"not a slot", empty, "empty is not a slot: it holds no segment"},
		{"newer format", newer, "has format version 3, newer than the version 2 this questdb-slot reads"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, args := range [][]string{
				{"inspect", c.path},
				{"salvage", c.path, "--endpoint", "ws://127.0.0.1:1"},
			} {
				code, out, errOut := runTool(t, args...)
				if code != 1 || out != "" {
					t.Errorf("%v: exit %d, stdout %q; want 1 and nothing", args, code, out)
				}
				mustContain(t, errOut, c.want)
			}
		})
	}
	for _, args := range [][]string{{}, {"inspect"}, {"frobnicate", parent}, {"salvage"}, {"salvage", parent},
		// --accept-loss only with --delete, and never negative: the
		// operator would believe a deletion ordered.
		{"salvage", parent, "--endpoint", "ws://127.0.0.1:1", "--accept-loss=1"},
		{"salvage", parent, "--endpoint", "ws://127.0.0.1:1", "--delete", "--accept-loss=-2"},
		// -1 is the flag's default, but typed it is a negative count too.
		{"salvage", parent, "--endpoint", "ws://127.0.0.1:1", "--delete", "--accept-loss=-1"},
		{"salvage", parent, "--endpoint", "ws://127.0.0.1:1", "--delete", "--accept-loss", "-1"},
	} {
		code, _, errOut := runTool(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)", args, code)
		}
		if strings.Contains(strings.Join(args, " "), "--accept-loss") && !strings.Contains(errOut, "--accept-loss") {
			t.Errorf("%v: stderr %q does not name --accept-loss", args, errOut)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBadFlagsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"-shapes", "metrics,profiles"},
		{"-exporters", "nop,kafka"},
		{"-rounds", "0"},
		{"-concurrency", "0"},
		{"-no-such-flag"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, stderr.String())
		}
	}
}

func TestMissingCollectorFails(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"-collector", t.TempDir() + "/no-such-collector", "-exporters", "nop", "-shapes", "metrics", "-rounds", "1", "-requests", "1"}
	if code := run(context.Background(), args, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(stderr.String(), "no-such-collector") {
		t.Fatalf("stderr does not name the missing binary: %q", stderr.String())
	}
}

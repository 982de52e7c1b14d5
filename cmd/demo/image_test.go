package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestContainerRunArgsPutFlagsBeforeTheImage: the engine's flags, the
// volume and the environment go before the image name, the collector's or
// questdb-slot's arguments after it (after it they would reach the program).
func TestContainerRunArgsPutFlagsBeforeTheImage(t *testing.T) {
	c := &container{engine: []string{"podman", "--runtime", "runc"}, runFlags: []string{"--ulimit", "nofile=1:1"}, image: "img", volume: "vol"}
	got := c.runArgs("n", imageSlotTool, []string{"A=1"}, "inspect", "/x")
	want := []string{"run", "--rm", "--network=host", "-v", "vol:" + imageSlotDir, "--name", "n",
		"--entrypoint", imageSlotTool, "-e", "A=1", "--ulimit", "nofile=1:1", "img", "inspect", "/x"}
	if !slices.Equal(got, want) {
		t.Fatalf("runArgs:\n got %q\nwant %q", got, want)
	}
	if args := c.cmd(context.Background(), "info").Args; !slices.Equal(args, []string{"podman", "--runtime", "runc", "info"}) {
		t.Fatalf("cmd args %q: the engine's global flags belong before the command", args)
	}
}

// TestCheckImageConfigRefusesAnotherUserOrVolume runs checkImageConfig
// against a stand-in engine printing what `image inspect` would.
func TestCheckImageConfigRefusesAnotherUserOrVolume(t *testing.T) {
	for _, tc := range []struct {
		inspect string
		ok      bool
	}{
		{imageUser + " " + imageSlotDir + " ", true},
		{"65532:65532 " + imageSlotDir + " ", false},        // distroless's nonroot, not the manifests' runAsUser
		{imageUser + " ", false},                            // no volume: the slot would live in the container
		{imageUser + " " + imageSlotDir + " /data ", false}, // a second volume the manifests do not mount
	} {
		engine := filepath.Join(t.TempDir(), "engine")
		if err := os.WriteFile(engine, []byte("#!/bin/sh\necho '"+tc.inspect+"'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		err := checkImageConfig(context.Background(), &container{engine: []string{engine}, image: "img"})
		if (err == nil) != tc.ok {
			t.Errorf("inspect %q: err %v, want ok %v", tc.inspect, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), imageUser) {
			t.Errorf("inspect %q: %v does not say what the image must be", tc.inspect, err)
		}
	}
}

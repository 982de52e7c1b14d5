package main

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestStopWithinNamesAProcessThatOutlivesItsGrace: the fleet's stand-in for
// terminationGracePeriodSeconds fails the run when a gateway needs the
// kubelet's SIGKILL, and passes one that exits on SIGTERM.
func TestStopWithinNamesAProcessThatOutlivesItsGrace(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	var ps procs
	defer ps.stopAll(time.Second)
	log := filepath.Join(t.TempDir(), "p.log")
	stubborn, err := ps.start("stubborn", log, nil, sh, "-c", `trap "" TERM; while :; do sleep 0.1; done`)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // let the shell install its trap
	if err := stopWithin(stubborn, 500*time.Millisecond); err == nil {
		t.Fatal("a process ignoring SIGTERM passed")
	}
	if !stubborn.exited() {
		t.Fatal("the process outliving its grace was not killed")
	}
	polite, err := ps.start("polite", log, nil, sh, "-c", "exec sleep 30")
	if err != nil {
		t.Fatal(err)
	}
	if err := stopWithin(polite, 5*time.Second); err != nil {
		t.Fatalf("a process exiting on SIGTERM: %v", err)
	}
}

func TestGatewayListIsTheResolversYAMLList(t *testing.T) {
	f := &fleet{gws: []*gateway{{grpcPort: 1}, {grpcPort: 2}, {grpcPort: 3}}}
	if got, want := f.gatewayList(2), "[127.0.0.1:1, 127.0.0.1:2]"; got != want {
		t.Fatalf("gatewayList(2) = %q, want %q", got, want)
	}
}

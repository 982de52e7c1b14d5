package sfqueue

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// envLockHolder makes the test binary a child that holds a slot: it opens
// <dir>/held, prints "locked", and closes when its stdin reaches EOF.
const envLockHolder = "SFQUEUE_TEST_LOCK_HOLDER_DIR"

func lockHolderChild(dir string) int {
	q, err := Open(Options{Dir: dir, SenderID: "held"})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin)
	if err := q.Close(); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	return 0
}

func TestSecondOpenInProcessIsLocked(t *testing.T) {
	o := Options{Dir: t.TempDir(), SenderID: "s"}
	q := mustOpen(t, o)
	_, err := Open(o)
	var le *LockedError
	if !errors.As(err, &le) || le.PID != os.Getpid() {
		t.Fatalf("second Open: %v; want *LockedError naming PID %d", err, os.Getpid())
	}
	if !strings.Contains(err.Error(), fmt.Sprint(os.Getpid())) {
		t.Fatalf("error %q does not name the holder's PID", err)
	}
	q.Close()
	q2 := mustOpen(t, o) // released by Close
	q2.Close()
}

func TestSecondOpenFromAnotherProcessIsLocked(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envLockHolder+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		t.Fatalf("child said %q, %v", line, err)
	}
	_, err = Open(Options{Dir: dir, SenderID: "held"})
	var le *LockedError
	if !errors.As(err, &le) || le.PID != cmd.Process.Pid {
		t.Fatalf("Open of a slot held by child %d: %v", cmd.Process.Pid, err)
	}
	if orphans, err := ListOrphans(dir, nil); err != nil || len(orphans) != 0 {
		t.Fatalf("ListOrphans listed a locked slot: %v %v", orphans, err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	q := mustOpen(t, Options{Dir: dir, SenderID: "held"})
	q.Close()
}

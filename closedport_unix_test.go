//go:build unix

package questdbexporter

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// closedPort returns a loopback address that refuses connections for the
// whole test: a socket bound to it but never listening holds the port, so
// no other test process (go test ./... runs packages in parallel) can take
// it and answer a minute-long "QuestDB is down" test's dials.
func closedPort(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}

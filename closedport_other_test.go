//go:build !unix

package questdbexporter

import "testing"

// closedPort returns a loopback address nothing listens on (another
// process may take it later; the unix variant holds it).
func closedPort(t testing.TB) string { return freeAddr(t) }

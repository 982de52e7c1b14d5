//go:build tools

// Package tools pins the code generators this repository runs (`make
// generate`). It is a module of its own so that mdatagen's dependencies never
// enter the exporter's go.mod; the build tag keeps it out of every build.
package tools

import (
	_ "go.opentelemetry.io/collector/cmd/mdatagen"
)

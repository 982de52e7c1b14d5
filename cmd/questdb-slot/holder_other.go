//go:build !linux && !darwin

package main

// lockHolder cannot probe a lock here: the exporter supports Linux and macOS
// only.
func lockHolder(dir string, recordedPID int) holder {
	return holder{pid: recordedPID, how: "unknown on this platform"}
}

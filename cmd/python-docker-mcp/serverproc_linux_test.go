package main

import (
	"os/exec"
	"syscall"
)

// serverCommand is a command of the server binary that ends with this test
// binary: SIGTERM when it dies (as when Go's test timeout ends it), so a
// server never outlives its test, nor do its sandboxes: on SIGTERM a server
// removes them.
func serverCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(binary, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	return cmd
}

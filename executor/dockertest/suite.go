package dockertest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

// OwnLabel selects what this test process created: the executor labels
// its sandboxes and package volumes with the pid of the process that
// started them.
func OwnLabel() string {
	return backend.LabelPID + "=" + strconv.Itoa(os.Getpid())
}

// Main runs m's tests, then fails the suite when a container or package
// volume this test process started is still there (and removes it). A
// package's TestMain calls it.
func Main(m *testing.M) {
	code := m.Run()
	if d := Reachable(); d != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var left []string
		if list, err := d.Containers(ctx, false, OwnLabel()); err == nil {
			for _, c := range list {
				left = append(left, c.ID[:12])
			}
		}
		if len(left) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: %d sandbox container(s) left after the suite: %v\n", len(left), left)
			for _, id := range left {
				d.Remove(ctx, id)
			}
			code = 1
		}
		if vols, _ := d.Volumes(ctx, OwnLabel()); len(vols) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: %d package volume(s) left after the suite: %v\n", len(vols), vols)
			for _, v := range vols {
				d.RemoveVolume(ctx, v)
			}
			code = 1
		}
		cancel()
		d.Close()
	}
	os.Exit(code)
}

// Sandboxes counts items; the holders of network namespaces and the
// container that fills the interpreter tree volume only when holders is
// set.
func Sandboxes(items []Container, holders bool) int {
	n := 0
	for _, c := range items {
		if k := c.Labels[backend.LabelKind]; holders || (k != backend.KindNetwork && k != backend.KindTree) {
			n++
		}
	}
	return n
}

// Ours counts this process's sandboxes, optionally only those with
// label=value.
func Ours(t testing.TB, d *Daemon, label string) int {
	t.Helper()
	labels := []string{OwnLabel()}
	if label != "" {
		labels = append(labels, label)
	}
	list, err := d.Containers(context.Background(), false, labels...)
	if err != nil {
		t.Fatal(err)
	}
	// The holders of network namespaces are not sandboxes: they are
	// counted only when asked for by kind (Close removes them; Main checks
	// that nothing of the process is left). Nor is the container that
	// fills the interpreter tree volume, created and removed at once.
	return Sandboxes(list, label == backend.LabelKind+"="+backend.KindNetwork)
}

// Settled waits up to 10 s for this process's sandboxes (with
// label=value, if given) to be removed, and returns how many are left.
// Transient sandboxes are removed in the background right after their
// call.
func Settled(t testing.TB, d *Daemon, label string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := Ours(t, d, label)
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
}

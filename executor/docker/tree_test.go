package docker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor"
)

// With a pool, the executor has its sandboxes mount the image's
// interpreter tree (/usr) read-only from a volume, filled once per image
// and shared by servers: it outlives Close, and the next executor mounts
// it without filling it again.
func TestTreeVolume(t *testing.T) {
	e, cli := poolExec(t, 2)
	lib := waitTree(t, e)
	if !strings.HasSuffix(lib, "-usr") {
		t.Fatalf("tree volume %q, want one over /usr", lib)
	}
	for range 3 { // the sandboxes made before the volume are used up
		wantStatus(t, transient(t, e, executor.Request{Code: "print(1)"}), "ok")
	}
	waitPoolFull(t, e)
	code := `import os, sys
opts = [l.split()[5] for l in open("/proc/self/mountinfo") if l.split()[4] == "/usr"]
try:
    open("/usr/lib/planted.py", "w")
    wrote = True
except OSError:
    wrote = False
import json, email.parser
print(sys.executable, opts[-1].split(",")[0] if opts else "not a mount", wrote, os.path.exists("/usr/.python-docker-mcp-tree"))`
	res := transient(t, e, executor.Request{Code: code, Imports: gated(t, code)})
	wantStatus(t, res, "ok")
	if want := "/usr/bin/python3 ro False True\n"; res.Stdout != want {
		t.Errorf("a pooled sandbox's /usr (interpreter, mount option, written, marker): %q, want %q", res.Stdout, want)
	}
	before, err := cli.VolumeCreated(context.Background(), lib)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	e2, _ := poolExec(t, 1)
	lib2 := waitTree(t, e2)
	after, err := cli.VolumeCreated(context.Background(), lib2)
	if err != nil {
		t.Fatalf("volume %s gone after Close: %v", lib, err)
	}
	if lib2 != lib || after != before {
		t.Errorf("the next executor mounts %s created %s, want the same volume %s created %s", lib2, after, lib, before)
	}
}

// waitTree waits up to two minutes (a first fill copies 700 MB) for e's
// tree volume.
func waitTree(t *testing.T, e *executor.Executor) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for dockerOf(t, e).TreeVolume() == "" {
		if time.Now().After(deadline) {
			t.Fatal("no interpreter tree volume after two minutes")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return dockerOf(t, e).TreeVolume()
}

// A tree volume that is gone (Docker mounts an empty one in its place)
// costs no call: the sandbox that fails to start is retried without it,
// and the executor stops mounting it.
func TestTreeVolumeGone(t *testing.T) {
	name := "python-docker-mcp-tree-gone-" + randomHex(4)
	e, cli := newExec(t, nil)
	t.Cleanup(func() { cli.RemoveVolume(context.Background(), name) })
	dockerOf(t, e).UseTreeVolume(name, "/usr")
	res := transient(t, e, executor.Request{Code: "print(1)"})
	wantStatus(t, res, "ok")
	if dockerOf(t, e).TreeVolume() != "" {
		t.Errorf("the executor still mounts the empty volume")
	}
}

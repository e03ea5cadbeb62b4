package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

func TestTreeOf(t *testing.T) {
	for p, want := range map[string]string{
		"/usr/lib/python3.13":        "/usr",
		"/usr/local/lib/python3.12":  "/usr",
		"/pyenv/lib/python3.11":      "/pyenv",
		"/usr/lib":                   "", // too shallow to be a library directory
		"/usr":                       "",
		"/":                          "",
		"usr/lib/python3.13":         "",
		"/usr/lib/../lib/python3.13": "",
		"/usr/lib/python3.13/":       "",
		"/tmp/lib/python3.13":        "",
		"/workspace/lib/python3.13":  "",
		"/etc/lib/python3.13":        "",
		"/proc/self/cwd":             "",
		"/var/lib/python3.13":        "",
		"/dev/shm/python3.13":        "",
		"/home/me/lib/python3.13":    "",
	} {
		if got := treeOf(p, "/workspace"); got != want {
			t.Errorf("treeOf(%q) = %q, want %q", p, got, want)
		}
	}
	// A mount over a directory that holds the working directory or the
	// package directory would hide them.
	if got := treeOf("/srv/py/lib/python3.13", "/srv/work"); got != "" {
		t.Errorf("a tree holding the working directory was accepted: %q", got)
	}
	if got := treeOf("/opt/py/lib/python3.13", "/workspace"); got != "" || PackagesDir != "/opt/pdm-packages" {
		t.Errorf("a tree holding the package directory was accepted: %q", got)
	}
}

func TestTreeVolumeName(t *testing.T) {
	if got, want := treeVolumeName("sha256:af47067e3014c31af43364ea05e5e15dc065932a", "/usr"), "python-docker-mcp-tree-af47067e3014-usr"; got != want {
		t.Errorf("treeVolumeName = %q, want %q", got, want)
	}
}

// labelPID labels what this test process creates, as the executor's
// sandboxes are (python-docker-mcp.pid), so the project's cleanup finds it.
const labelPID = "python-docker-mcp.pid"

// testBackend is a Backend on the real daemon, closed when the test ends.
func testBackend(t *testing.T) (*Backend, *client.Client) {
	t.Helper()
	cli := dockertest.RequireImage(t, image)
	c, err := Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b := New(c)
	b.closer = c
	t.Cleanup(func() { b.Close() })
	return b, cli
}

// helper is the spec of a helper container as the executor gives it.
func helper() backend.Spec {
	return backend.Spec{
		Image: image, Command: []string{"true"}, User: "1000:1000", WorkingDir: "/workspace",
		Labels:          map[string]string{backend.LabelKind: "transient", labelPID: strconv.Itoa(os.Getpid())},
		MemoryBytes:     16 << 20,
		CPUs:            0.1,
		Pids:            4,
		ReadOnlyRoot:    true,
		NetworkDisabled: true,
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func tctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// leftovers are the containers of this test process.
func leftovers(t *testing.T, cli *client.Client) []string {
	list, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", labelPID+"="+strconv.Itoa(os.Getpid()))})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range list.Items {
		ids = append(ids, c.ID[:12])
	}
	return ids
}

// treeFixture is a tree volume of the image's /opt (a small directory, so
// the test copies little and leaves the shared /usr volume alone), removed
// when the test ends.
func treeFixture(t *testing.T) (*Backend, *client.Client, string) {
	t.Helper()
	b, cli := testBackend(t)
	img, err := cli.ImageInspect(context.Background(), image)
	if err != nil {
		t.Fatal(err)
	}
	name := treeVolumeName(img.ID, "/opt")
	cli.VolumeRemove(context.Background(), name, client.VolumeRemoveOptions{Force: true})
	t.Cleanup(func() {
		cli.ContainerRemove(context.Background(), name+"-fill", client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		cli.VolumeRemove(context.Background(), name, client.VolumeRemoveOptions{Force: true})
	})
	return b, cli, name
}

// volumeHolder creates (never starts) a container that mounts volume
// name at /v as it is, for the archive API to read or write it.
func volumeHolder(t *testing.T, cli *client.Client, image, name string) string {
	t.Helper()
	c, err := cli.ContainerCreate(context.Background(), client.ContainerCreateOptions{
		Config:     &container.Config{Image: image, Cmd: []string{"true"}},
		HostConfig: &container.HostConfig{Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: name, Target: "/v", VolumeOptions: &mount.VolumeOptions{NoCopy: true}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c.ID
}

// volumeFiles lists the files in volume name (through a container that is
// created, never started).
func volumeFiles(t *testing.T, cli *client.Client, image, name string) []string {
	t.Helper()
	ctx := context.Background()
	id := volumeHolder(t, cli, image, name)
	defer cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	res, err := cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: "/v/."})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Content.Close()
	var names []string
	tr := tar.NewReader(res.Content)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			names = append(names, h.Name)
		}
	}
}

// A volume left by a fill that did not finish (no marker) is removed and
// filled again; a filled one is used as it is.
func TestTreeFillCut(t *testing.T) {
	e, cli, name := treeFixture(t)
	ctx := tctx(t, 2*time.Minute)
	// A cut fill: the volume holds a file of its own and no marker.
	id := volumeHolder(t, cli, image, name)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "half", Mode: 0o644, Size: 1})
	tw.Write([]byte("x"))
	tw.Close()
	if _, err := cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: "/v", Content: &buf}); err != nil {
		t.Fatal(err)
	}
	cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})

	v, filled, err := e.fillTree(ctx, helper(), "/opt")
	if err != nil {
		t.Fatalf("fillTree: %v", err)
	}
	if v.name != name || v.path != "/opt" || !filled {
		t.Errorf("fillTree = %+v, filled %v; want %s over /opt, filled", v, filled, name)
	}
	if got := volumeFiles(t, cli, image, name); len(got) != 1 || got[0] != "./"+treeMarker {
		t.Errorf("the refilled volume holds %q, want only the marker (the image's /opt is empty)", got)
	}
	if _, filled, err := e.fillTree(ctx, helper(), "/opt"); err != nil || filled {
		t.Errorf("second fillTree: filled %v, %v; want the volume used as it is", filled, err)
	}
	if left := leftovers(t, cli); len(left) != 0 {
		t.Errorf("containers of this process left: %v", left)
	}
}

// While another server's filler holds the lock, fillTree waits for it,
// and gives up with a clear error when it never goes.
func TestTreeFillBusy(t *testing.T) {
	e, cli, name := treeFixture(t)
	lock, err := cli.ContainerCreate(context.Background(), client.ContainerCreateOptions{Name: name + "-fill", Config: &container.Config{Image: image, Cmd: []string{"true"}}})
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	if _, _, err := e.fillTree(short, helper(), "/opt"); !errors.Is(err, errTreeBusy) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("fillTree while locked: %v, want errTreeBusy and the context's end", err)
	}
	// A server that closes (its context cancelled) does not wait for
	// another's fill.
	cctx, ccancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, ccancel)
	if _, _, err := e.fillTree(cctx, helper(), "/opt"); !errors.Is(err, errTreeBusy) || !errors.Is(err, context.Canceled) {
		t.Errorf("fillTree while locked, then cancelled: %v, want errTreeBusy and context.Canceled", err)
	}
	time.AfterFunc(1500*time.Millisecond, func() {
		cli.ContainerRemove(context.Background(), lock.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	})
	if _, filled, err := e.fillTree(tctx(t, time.Minute), helper(), "/opt"); err != nil || !filled {
		t.Errorf("fillTree after the lock went: filled %v, %v; want filled", filled, err)
	}
}

// The reaper removes tree volumes whose image is gone, and keeps those
// whose image exists.
func TestReapTreeVolumes(t *testing.T) {
	e, cli, name := treeFixture(t)
	ctx := tctx(t, time.Minute)
	if _, _, err := e.fillTree(ctx, helper(), "/opt"); err != nil {
		t.Fatal(err)
	}
	orphan := "python-docker-mcp-tree-test-" + randomHex(4)
	t.Cleanup(func() { cli.VolumeRemove(context.Background(), orphan, client.VolumeRemoveOptions{Force: true}) })
	if _, err := cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: orphan, Labels: map[string]string{
		backend.LabelKind: backend.KindTree, LabelImage: "sha256:" + randomHex(32), LabelTree: "/usr"}}); err != nil {
		t.Fatal(err)
	}
	if n := e.reapTreeVolumes(ctx); n < 1 {
		t.Errorf("reapTreeVolumes removed %d volumes, want the orphan", n)
	}
	if _, err := cli.VolumeInspect(ctx, orphan, client.VolumeInspectOptions{}); err == nil {
		t.Errorf("volume %s of a gone image left", orphan)
	}
	if _, err := cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{}); err != nil {
		t.Errorf("volume %s of an existing image removed: %v", name, err)
	}
}

// Servers that start together fill the volume once: one fills it, the
// others use it (waiting for the filler's lock when they meet it).
func TestTreeFillConcurrent(t *testing.T) {
	e, _, name := treeFixture(t)
	others := []*Backend{e}
	for range 3 {
		o, _ := testBackend(t)
		others = append(others, o)
	}
	type result struct {
		v      *treeVolume
		filled bool
		err    error
	}
	results := make(chan result, len(others))
	for _, o := range others {
		go func() {
			v, filled, err := o.fillTree(tctx(t, time.Minute), helper(), "/opt")
			results <- result{v, filled, err}
		}()
	}
	fills := 0
	for range others {
		r := <-results
		if r.err != nil {
			t.Errorf("fillTree: %v", r.err)
			continue
		}
		if r.v.name != name {
			t.Errorf("fillTree gave volume %s, want %s", r.v.name, name)
		}
		if r.filled {
			fills++
		}
	}
	if fills != 1 {
		t.Errorf("%d of %d executors filled the volume, want 1", fills, len(others))
	}
}

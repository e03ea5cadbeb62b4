package image

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

func TestRecipeHash(t *testing.T) {
	cfg := config.Default()
	a := RecipeFrom(cfg)
	cfg.Image.Packages = append([]string{"python3-six"}, cfg.Image.Packages...)
	b := RecipeFrom(cfg)
	if a.Hash() == b.Hash() {
		t.Error("adding a package did not change the recipe hash")
	}
	// Order of the package list does not matter.
	cfg2 := config.Default()
	cfg2.Image.Packages = append(cfg2.Image.Packages[1:], cfg2.Image.Packages[0])
	if RecipeFrom(cfg2).Hash() != a.Hash() {
		t.Error("reordering the package list changed the recipe hash")
	}
	cfg3 := config.Default()
	cfg3.Image.Release = "forky"
	if RecipeFrom(cfg3).Hash() == a.Hash() {
		t.Error("changing the release did not change the recipe hash")
	}
}

func TestManaged(t *testing.T) {
	for ref, want := range map[string]bool{
		"python-docker-mcp-sandbox:latest":               true,
		"python-docker-mcp-sandbox":                      true,
		"python-docker-mcp-sandbox:test":                 true,
		"python:3.12-slim":                               false,
		"registry:5000/python-docker-mcp-sandbox:latest": false,
	} {
		if got := Managed(ref); got != want {
			t.Errorf("Managed(%q) = %v, want %v", ref, got, want)
		}
	}
}

func TestChanges(t *testing.T) {
	r := RecipeFrom(config.Default())
	got := strings.Join(Changes(r), "\n")
	for _, want := range []string{"USER 1000:1000", "WORKDIR /workspace", "MPLBACKEND=\"Agg\"", "OPENBLAS_NUM_THREADS=\"1\"", "PYTHONDONTWRITEBYTECODE=\"1\"", LabelRecipe + "=" + r.Hash()} {
		if !strings.Contains(got, want) {
			t.Errorf("changes %q lack %q", got, want)
		}
	}
}

// runIn runs cmd in image with the flags the acceptance names: the image's
// non-root user, a read-only root filesystem, no network.
func runIn(t *testing.T, cli *client.Client, image string, cmd ...string) (string, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{Image: image, Cmd: cmd, Labels: map[string]string{"python-docker-mcp.test": "1"}},
		HostConfig: &container.HostConfig{
			ReadonlyRootfs: true,
			NetworkMode:    "none",
		},
	})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	defer cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if _, err := cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("start: %v", err)
	}
	w := cli.ContainerWait(ctx, c.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	var code int64
	select {
	case r := <-w.Result:
		code = r.StatusCode
	case err := <-w.Error:
		t.Fatalf("wait: %v", err)
	}
	logs, err := cli.ContainerLogs(ctx, c.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatalf("logs: %v", err)
	}
	defer logs.Close()
	var out bytes.Buffer
	stdcopy.StdCopy(&out, &out, logs)
	return out.String(), code
}

// TestDefaultImage checks the built default image: current recipe, the
// scientific stack importable as the non-root user with --read-only and
// --network none.
func TestDefaultImage(t *testing.T) {
	cfg := config.Default()
	cli := dockertest.RequireImage(t, cfg.Docker.Image)
	st, err := Check(context.Background(), cli, cfg.Docker.Image, RecipeFrom(cfg))
	if err != nil || st != Current {
		t.Fatalf("Check(default image) = %v, %v; want current (run `python-docker-mcp image build`)", st, err)
	}
	out, code := runIn(t, cli, cfg.Docker.Image, "python3", "-c",
		"import os, sys, numpy, pandas, scipy, matplotlib, sklearn, sympy; import matplotlib.pyplot; print(os.getuid(), os.getgid(), sys.version_info[:2], os.getcwd())")
	if code != 0 {
		t.Fatalf("import of the scientific stack failed (exit %d):\n%s", code, out)
	}
	if want := "1000 1000 (3, 13) /workspace"; !strings.Contains(out, want) {
		t.Errorf("got %q, want it to contain %q", out, want)
	}
}

// TestBuildAndRebuild builds a small image from a recipe, checks that the
// same recipe is a no-op, that a changed package list rebuilds, and what
// becomes of the image a rebuild replaces: kept, with a line saying how to
// remove it, while a container still uses it; removed otherwise. It needs
// root and Debian's mirror; it is slow (about a minute a build with the
// package cache warm), so -short skips it.
func TestBuildAndRebuild(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: builds three images with debootstrap")
	}
	cli := dockertest.Require(t)
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("building images needs root")
		}
		t.Skip("building images needs root")
	}
	ctx := context.Background()
	// A tag of this run's own: one left by an earlier run that was killed
	// would make the first Ensure a no-op.
	ref := fmt.Sprintf("%s:recipe-test-%d", ManagedRepository, time.Now().UnixNano())
	var built1 string // the first build's image, kept by the first rebuild
	t.Cleanup(func() {
		cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true, PruneChildren: true})
		if built1 != "" {
			cli.ImageRemove(context.Background(), built1, client.ImageRemoveOptions{Force: true, PruneChildren: true})
		}
	})
	id := func() string {
		t.Helper()
		res, err := cli.ImageInspect(ctx, ref)
		if err != nil {
			t.Fatalf("inspect %s: %v", ref, err)
		}
		return res.ID
	}
	gone := func(id string) bool {
		_, err := cli.ImageInspect(ctx, id)
		return err != nil && isNotFound(err)
	}
	// lineStarting keeps the last progress line that starts with prefix.
	lineStarting := func(prefix string) (*string, Progress) {
		var line string
		return &line, func(l string) {
			if strings.HasPrefix(l, prefix) {
				line = l
			}
		}
	}

	cfg := config.Default()
	cfg.Image.Packages = []string{"python3-minimal"}
	r1 := RecipeFrom(cfg)
	var lines int
	built, err := Ensure(ctx, cli, ref, r1, func(string) { lines++ })
	if err != nil || !built {
		t.Fatalf("first Ensure = %v, %v; want built", built, err)
	}
	if lines == 0 {
		t.Error("no progress lines during a build")
	}
	built1 = id()

	start := time.Now()
	built, err = Ensure(ctx, cli, ref, r1, nil)
	if err != nil || built {
		t.Fatalf("second Ensure with the same recipe = %v, %v; want a no-op", built, err)
	}
	t.Logf("second Ensure with the same recipe took %v", time.Since(start))

	// A container made from the first image (never started) holds it.
	holder, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{Image: ref, Cmd: []string{"true"}, Labels: map[string]string{"python-docker-mcp.test": "1"}},
	})
	if err != nil {
		t.Fatalf("create a container of the first image: %v", err)
	}
	defer cli.ContainerRemove(context.Background(), holder.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})

	cfg.Image.Packages = []string{"python3-minimal", "python3-six"}
	r2 := RecipeFrom(cfg)
	if st, _ := Check(ctx, cli, ref, r2); st != Stale {
		t.Fatalf("Check after changing the package list = %v, want stale", st)
	}
	kept, progress := lineStarting("kept the image")
	built, err = Ensure(ctx, cli, ref, r2, progress)
	if err != nil || !built {
		t.Fatalf("Ensure with a changed package list = %v, %v; want a rebuild", built, err)
	}
	out, code := runIn(t, cli, ref, "python3", "-c", "import six, os; print('six', os.getuid())")
	if code != 0 || !strings.Contains(out, "six 1000") {
		t.Errorf("rebuilt image: exit %d, output %q; want six importable as uid 1000", code, out)
	}
	short := strings.TrimPrefix(built1, "sha256:")[:12]
	if gone(built1) {
		t.Errorf("the first image %s was removed while a container used it", short)
	}
	if !strings.Contains(*kept, short) || !strings.Contains(*kept, "docker image rm "+short) {
		t.Errorf("progress when the replaced image is in use = %q; want it named, with how to remove it", *kept)
	}

	// With nothing using it, the image a rebuild replaces goes.
	built2 := id()
	removed, progress := lineStarting("removed the image")
	built, err = Ensure(ctx, cli, ref, r1, progress)
	if err != nil || !built {
		t.Fatalf("Ensure back to the first recipe = %v, %v; want a rebuild", built, err)
	}
	if !gone(built2) {
		t.Errorf("the replaced image %s is still there after a rebuild", built2)
	}
	if !strings.Contains(*removed, strings.TrimPrefix(built2, "sha256:")[:12]) {
		t.Errorf("progress after removing the replaced image = %q; want it named", *removed)
	}
}

func TestEnsureForeignImage(t *testing.T) {
	cli := dockertest.Require(t)
	_, err := Ensure(context.Background(), cli, "no-such-image-of-ours:1", RecipeFrom(config.Default()), nil)
	if err == nil || !strings.Contains(err.Error(), "docker.image") {
		t.Fatalf("Ensure(missing foreign image) = %v; want an error that says what to do", err)
	}
}

// TestExplain checks what an operator is told before the managed
// image is built (nothing is built here).
func TestExplain(t *testing.T) {
	cfg := config.Default()
	cli := dockertest.RequireImage(t, cfg.Docker.Image)
	ctx := context.Background()
	r := RecipeFrom(cfg)
	if got := Explain(ctx, cli, cfg.Docker.Image, r); got != "" {
		t.Errorf("current image: %q, want nothing", got)
	}
	if got := Explain(ctx, cli, "python:3.12.2-slim", r); got != "" {
		t.Errorf("an image python-docker-mcp does not build: %q, want nothing", got)
	}
	// A new tag, same packages: the image exists under :latest already.
	tag := ManagedRepository + ":e2e-no-such-tag"
	if got := Explain(ctx, cli, tag, r); !strings.Contains(got, cfg.Docker.Image+" was built from the same recipe") || !strings.Contains(got, "set docker.image to "+cfg.Docker.Image) {
		t.Errorf("new tag without new packages: %q, want it to name %s and how to use it", got, cfg.Docker.Image)
	}
	cfg.Image.Packages = append(cfg.Image.Packages, "python3-tabulate")
	r2 := RecipeFrom(cfg)
	if got := Explain(ctx, cli, tag, r2); !strings.Contains(got, "does not exist: building it now") || !strings.Contains(got, "python3-tabulate") {
		t.Errorf("new tag with new packages: %q", got)
	}
	if got := Explain(ctx, cli, cfg.Docker.Image, r2); !strings.Contains(got, "built from another recipe") {
		t.Errorf("changed packages under the same tag: %q", got)
	}
}

// namedImages is a fake Docker for removeReplaced's decisions: images by
// ID with their tags, and the IDs it was asked to remove.
type namedImages struct {
	tags    map[string][]string
	removed []string
}

func (f *namedImages) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (client.ImageInspectResult, error) {
	tags, ok := f.tags[ref]
	if !ok {
		return client.ImageInspectResult{}, fmt.Errorf("no such image: %s", ref)
	}
	var res client.ImageInspectResult
	res.ID, res.RepoTags = ref, tags
	return res, nil
}

func (f *namedImages) ImageImport(context.Context, client.ImageImportSource, string, client.ImageImportOptions) (client.ImageImportResult, error) {
	return nil, fmt.Errorf("not used")
}

func (f *namedImages) ImageRemove(_ context.Context, id string, _ client.ImageRemoveOptions) (client.ImageRemoveResult, error) {
	f.removed = append(f.removed, id)
	delete(f.tags, id)
	return client.ImageRemoveResult{}, nil
}

// TestRemoveReplacedNamed checks that a replaced image another name still
// holds is kept (and said so), one the build did not replace is left
// silently, and an untagged one is removed.
func TestRemoveReplacedNamed(t *testing.T) {
	const ref = ManagedRepository + ":latest"
	old := "sha256:0123456789abcdef0123"
	cases := []struct {
		name        string
		tags        []string
		wantRemoved bool
		wantLine    string
	}{
		{"untagged", []string{}, true, "removed the image 0123456789ab"},
		{"tagged by the operator", []string{ManagedRepository + ":backup"}, false,
			"kept the image 0123456789ab built from the previous recipe: " + ManagedRepository + ":backup still names it"},
		{"not replaced", []string{ref}, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &namedImages{tags: map[string][]string{old: c.tags}}
			var lines []string
			removeReplaced(context.Background(), f, ref, old, func(l string) { lines = append(lines, l) })
			if got := len(f.removed) == 1; got != c.wantRemoved {
				t.Errorf("removed %v; want removed %v", f.removed, c.wantRemoved)
			}
			got := strings.Join(lines, "\n")
			if c.wantLine == "" && got != "" || !strings.HasPrefix(got, c.wantLine) {
				t.Errorf("progress %q; want it to start with %q", got, c.wantLine)
			}
		})
	}
}

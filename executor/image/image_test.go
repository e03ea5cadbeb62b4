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
// same recipe is a no-op, and that a changed package list rebuilds. It needs
// root and Debian's mirror; it is slow (about a minute a build with the
// package cache warm), so -short skips it.
func TestBuildAndRebuild(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: builds two images with debootstrap")
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
	defer cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true, PruneChildren: true})

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

	start := time.Now()
	built, err = Ensure(ctx, cli, ref, r1, nil)
	if err != nil || built {
		t.Fatalf("second Ensure with the same recipe = %v, %v; want a no-op", built, err)
	}
	t.Logf("second Ensure with the same recipe took %v", time.Since(start))

	cfg.Image.Packages = []string{"python3-minimal", "python3-six"}
	r2 := RecipeFrom(cfg)
	if st, _ := Check(ctx, cli, ref, r2); st != Stale {
		t.Fatalf("Check after changing the package list = %v, want stale", st)
	}
	built, err = Ensure(ctx, cli, ref, r2, nil)
	if err != nil || !built {
		t.Fatalf("Ensure with a changed package list = %v, %v; want a rebuild", built, err)
	}
	out, code := runIn(t, cli, ref, "python3", "-c", "import six, os; print('six', os.getuid())")
	if code != 0 || !strings.Contains(out, "six 1000") {
		t.Errorf("rebuilt image: exit %d, output %q; want six importable as uid 1000", code, out)
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

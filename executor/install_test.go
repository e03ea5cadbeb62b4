package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/docker"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
	"github.com/python-docker-mcp/python-docker-mcp/executor/internal/install"
)

func TestInstallRejectsBadNamesBeforeDocker(t *testing.T) {
	e, fd := newFakeDocker(t, func(c *config.Config) { c.Package.FindLinks = []string{"/nonexistent"} })
	for _, tc := range []struct{ name, spec string }{
		{"numpy; rm -rf /", ""}, {"../x", ""}, {"-e git+https://example.com/x.git", ""}, {"--index-url=http://evil", ""},
		{"pkg @ file:///etc", ""}, {"", ""}, {strings.Repeat("a", 200), ""}, {"numpy", "==1; rm -rf /"}, {"numpy", "--pre"},
		{"numpy", "@ file:///etc"},
	} {
		_, err := e.Install(tctx(t, time.Minute), InstallRequest{Owner: "alice", Name: tc.name, Specifier: tc.spec})
		if !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("Install(%.40q, %q) = %v, want ErrInvalidRequest", tc.name, tc.spec, err)
		}
	}
	if n := len(fd.Jobs()); n != 0 {
		t.Errorf("%d installer runs, want 0", n)
	}
}

func TestInstallerSpec(t *testing.T) {
	c := config.Default()
	c.Package.FindLinks = []string{"/srv/wheels"}
	meta := sandboxMeta{Kind: KindInstaller, Session: "s1", Packages: sessionVolume("s1")}
	cfg, host := docker.InstallerConfig(install.Container(sandboxSpec(c.Docker, Limits{Memory: 1 << 30}, meta), c.Package, []string{"1000", "1000", "{}", "pip"}))
	if host.NetworkMode != "none" || !host.ReadonlyRootfs || cfg.User != "0:0" {
		t.Errorf("network %q, readonly %v, user %q; want none, true, 0:0 (the bootstrap drops to docker.user)", host.NetworkMode, host.ReadonlyRootfs, cfg.User)
	}
	if diff := cmp.Diff([]string{"CHOWN", "SETUID", "SETGID"}, host.CapAdd); diff != "" || !slices.Equal(host.CapDrop, []string{"ALL"}) {
		t.Errorf("caps drop %v add (-want +got):\n%s", host.CapDrop, diff)
	}
	type m struct {
		Type, Source, Target string
		ReadOnly             bool
	}
	want := []m{
		{"volume", "python-docker-mcp-pkgs-s1", PackagesDir, false},
		{"bind", "/srv/wheels", "/wheelhouse/0", true},
	}
	var got []m
	for _, x := range host.Mounts {
		got = append(got, m{string(x.Type), x.Source, x.Target, x.ReadOnly})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	if !strings.Contains(host.Tmpfs["/tmp"], "noexec") {
		t.Errorf("/tmp %q: want noexec without allow_sdist", host.Tmpfs["/tmp"])
	}
	c.Package.IndexURL = "https://pypi.example/simple"
	if _, host := docker.InstallerConfig(install.Container(sandboxSpec(c.Docker, Limits{}, meta), c.Package, nil)); host.NetworkMode != "bridge" {
		t.Errorf("with index_url: network %q, want bridge", host.NetworkMode)
	}

	// The sandbox mounts the same volume read-only.
	_, sh := docker.ContainerConfig(sandboxSpec(c.Docker, Limits{}, sandboxMeta{Kind: backend.KindPersistent, Session: "s1", Packages: sessionVolume("s1")}))
	if len(sh.Mounts) != 1 || !sh.Mounts[0].ReadOnly || sh.Mounts[0].Target != PackagesDir || sh.Mounts[0].Source != "python-docker-mcp-pkgs-s1" {
		t.Errorf("sandbox mounts %+v, want the package volume read-only at %s", sh.Mounts, PackagesDir)
	}
}

// BenchmarkInstall measures one install of a small wheel, not installed
// yet, from a wheelhouse (resolving, then installing: each an installer
// container start, pip, removal):
// go test ./executor/ -run '^$' -bench Install -benchtime 10x
func BenchmarkInstall(b *testing.B) {
	dir := b.TempDir()
	os.Chmod(dir, 0o755)
	e, _ := newExec(b, func(c *config.Config) { c.Package.FindLinks = []string{dir} })
	n := 0
	for b.Loop() {
		n++
		name := fmt.Sprintf("pdmdemo%d", n)
		dockertest.WriteWheel(b, dir, name, "1.0", "42")
		ir, err := e.Install(context.Background(), InstallRequest{Owner: "bench", Name: name, Specifier: "==1.0"})
		if err != nil || ir.Status != "ok" || len(ir.Packages) != 1 {
			b.Fatalf("Install = %+v, %v", ir, err)
		}
	}
}

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
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// wheelhouse is a temporary directory with one wheel, readable by the
// sandbox user.
func wheelhouse(t *testing.T) string {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	dockertest.WriteWheel(t, dir, "pdmdemo", "1.0", "42")
	return dir
}

func packageVolumes(t *testing.T, cli *dockertest.Daemon, label string) []string {
	t.Helper()
	names, err := cli.Volumes(context.Background(), label)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

var importDemo = []analyze.Import{{Module: "pdmdemo", Line: 1}}

func TestInstallIntoSession(t *testing.T) {
	dir := wheelhouse(t)
	e, cli := newExec(t, func(c *config.Config) { c.Package.FindLinks = []string{dir} })
	res, id := persistent(t, e, "", Request{Owner: "alice", Code: "x = 1"})
	wantStatus(t, res, "ok")
	var progress []string
	ir, err := e.Install(tctx(t, 2*time.Minute), InstallRequest{Owner: "alice", SessionID: id, Name: "pdmdemo", Specifier: "==1.0",
		Progress: func(m string) { progress = append(progress, m) }})
	if err != nil {
		t.Fatal(err)
	}
	if ir.Status != "ok" || ir.Version != "1.0" || ir.Installer != "pip" {
		t.Fatalf("Install = %+v, want ok, version 1.0 by pip", ir)
	}
	if !slices.ContainsFunc(progress, func(m string) bool { return strings.Contains(m, "Successfully installed pdmdemo-1.0") }) {
		t.Errorf("progress %q lacks pip's success line", progress)
	}
	// The running interpreter sees the package in its next call, and its
	// earlier state is still there: no restart.
	res, _ = persistent(t, e, id, Request{Owner: "alice", Code: "import pdmdemo\npdmdemo.VALUE + x", Imports: importDemo})
	wantStatus(t, res, "ok")
	if res.Result == nil || *res.Result != "43" {
		t.Errorf("import after install: result %v, want 43", res.Result)
	}
	// Read-only for the sandbox.
	res, _ = persistent(t, e, id, Request{Owner: "alice", Code: "open('" + PackagesDir + "/x.py', 'w')"})
	if res.Status != "error" || res.Error == nil || !strings.Contains(res.Error.Type, "OSError") && !strings.Contains(res.Error.Message, "Read-only") {
		t.Errorf("writing into the package volume: %+v %+v, want a read-only error", res.Status, res.Error)
	}
	if n, err := e.Installed("alice", id); err != nil || n != 1 {
		t.Errorf("Installed = %d, %v; want 1", n, err)
	}
	if _, err := e.Installed("bob", id); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("Installed by bob: %v, want ErrUnknownSession", err)
	}

	ir, err = e.Install(tctx(t, 2*time.Minute), InstallRequest{Owner: "alice", SessionID: id, Name: "nosuchpkg"})
	if err != nil {
		t.Fatal(err)
	}
	if ir.Status != "not_found" || !strings.Contains(ir.Message, dir) {
		t.Errorf("missing package: %+v, want not_found naming the wheelhouse", ir)
	}

	vol := sessionVolume(id)
	if got := packageVolumes(t, cli, backend.LabelSession+"="+id); !slices.Contains(got, vol) {
		t.Fatalf("volumes of the session %v, want %s", got, vol)
	}
	if err := e.Cleanup(tctx(t, time.Minute), "alice", id); err != nil {
		t.Fatal(err)
	}
	if got := packageVolumes(t, cli, backend.LabelSession+"="+id); len(got) != 0 {
		t.Errorf("volumes after cleanup %v, want none", got)
	}
	if n := ourContainers(t, cli, backend.LabelKind+"="+KindInstaller); n != 0 {
		t.Errorf("%d installer containers left, want 0", n)
	}
}

func TestInstallForTransientCalls(t *testing.T) {
	dir := wheelhouse(t)
	e, cli := newExec(t, func(c *config.Config) {
		c.Package.FindLinks = []string{dir}
		c.Pool.Enabled, c.Pool.Size, c.Pool.Preload = true, 1, nil
	})
	ir, err := e.Install(tctx(t, 2*time.Minute), InstallRequest{Owner: "alice", Name: "pdmdemo"})
	if err != nil || ir.Status != "ok" {
		t.Fatalf("Install = %+v, %v", ir, err)
	}
	res, err := e.Transient(tctx(t, time.Minute), Request{Owner: "alice", Code: "import pdmdemo\npdmdemo.VALUE", Imports: importDemo})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, "ok")
	if res.Result == nil || *res.Result != "42" {
		t.Errorf("alice's transient import: result %v, want 42", res.Result)
	}
	res, err = e.Transient(tctx(t, time.Minute), Request{Owner: "bob", Code: "import pdmdemo", Imports: importDemo})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "error" || res.Error == nil || res.Error.Type != "ModuleNotFoundError" {
		t.Errorf("bob's transient import: %s %+v, want ModuleNotFoundError (packages are per owner)", res.Status, res.Error)
	}
	label := backend.LabelInstance + "=" + e.instance
	if got := packageVolumes(t, cli, label); len(got) == 0 {
		t.Fatal("no package volume while the executor runs")
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := packageVolumes(t, cli, label); len(got) != 0 {
		t.Errorf("package volumes after Close: %v", got)
	}
}

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

func TestInstallerUVFallsBackToPip(t *testing.T) {
	dir := wheelhouse(t)
	e, _ := newExec(t, func(c *config.Config) { c.Package.FindLinks = []string{dir}; c.Package.Installer = "uv" })
	ir, err := e.Install(tctx(t, 2*time.Minute), InstallRequest{Owner: "alice", Name: "pdmdemo"})
	if err != nil {
		t.Fatal(err)
	}
	if ir.Status != "ok" || ir.Installer != "pip" || !strings.Contains(ir.Output, "the image has no uv: using pip") {
		t.Errorf("installer uv without uv in the image: %+v", ir)
	}
}

func TestInstallTimeout(t *testing.T) {
	dir := wheelhouse(t)
	e, cli := newExec(t, func(c *config.Config) {
		c.Package.FindLinks = []string{dir}
		c.Package.Timeout = config.Duration(50 * time.Millisecond)
	})
	ir, err := e.Install(tctx(t, 2*time.Minute), InstallRequest{Owner: "alice", Name: "pdmdemo"})
	if err != nil {
		t.Fatal(err)
	}
	if ir.Status != "timeout" || !strings.Contains(ir.Message, "package.timeout") {
		t.Errorf("install past package.timeout: %+v", ir)
	}
	if n, _ := e.Installed("alice", ""); n != 0 {
		t.Errorf("Installed = %d after a timeout, want 0", n)
	}
	if n := ourContainers(t, cli, backend.LabelKind+"="+KindInstaller); n != 0 {
		t.Errorf("%d installer containers left after the timeout", n)
	}
}

func TestSessionVolumeGoesWithExpiry(t *testing.T) {
	e, cli := newExec(t, func(c *config.Config) { c.Sessions.IdleTTL = config.Duration(300 * time.Millisecond) })
	_, id := persistent(t, e, "", Request{Owner: "alice", Code: "1"})
	if got := packageVolumes(t, cli, backend.LabelSession+"="+id); len(got) != 1 {
		t.Fatalf("volumes of a new session: %v, want its package volume", got)
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(packageVolumes(t, cli, backend.LabelSession+"="+id)) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the package volume of an expired session is still there")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, _, err := e.Persistent(tctx(t, time.Minute), id, Request{Owner: "alice", Code: "1"}); !errors.Is(err, ErrExpiredSession) {
		t.Errorf("call after expiry: %v, want ErrExpiredSession", err)
	}
}

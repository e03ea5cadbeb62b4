package docker_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
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
	res, id := persistent(t, e, "", executor.Request{Owner: "alice", Code: "x = 1"})
	wantStatus(t, res, "ok")
	var progress []string
	ir, err := e.Install(tctx(t, 2*time.Minute), executor.InstallRequest{Owner: "alice", SessionID: id, Name: "pdmdemo", Specifier: "==1.0",
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
	res, _ = persistent(t, e, id, executor.Request{Owner: "alice", Code: "import pdmdemo\npdmdemo.VALUE + x", Imports: importDemo})
	wantStatus(t, res, "ok")
	if res.Result == nil || *res.Result != "43" {
		t.Errorf("import after install: result %v, want 43", res.Result)
	}
	// Read-only for the sandbox.
	res, _ = persistent(t, e, id, executor.Request{Owner: "alice", Code: "open('" + executor.PackagesDir + "/x.py', 'w')"})
	if res.Status != "error" || res.Error == nil || !strings.Contains(res.Error.Type, "OSError") && !strings.Contains(res.Error.Message, "Read-only") {
		t.Errorf("writing into the package volume: %+v %+v, want a read-only error", res.Status, res.Error)
	}
	if n, err := e.Installed("alice", id); err != nil || n != 1 {
		t.Errorf("Installed = %d, %v; want 1", n, err)
	}
	if _, err := e.Installed("bob", id); !errors.Is(err, executor.ErrUnknownSession) {
		t.Errorf("Installed by bob: %v, want ErrUnknownSession", err)
	}

	ir, err = e.Install(tctx(t, 2*time.Minute), executor.InstallRequest{Owner: "alice", SessionID: id, Name: "nosuchpkg"})
	if err != nil {
		t.Fatal(err)
	}
	if ir.Status != "not_found" || !strings.Contains(ir.Message, dir) {
		t.Errorf("missing package: %+v, want not_found naming the wheelhouse", ir)
	}

	vol := install.SessionVolume(id)
	if got := packageVolumes(t, cli, backend.LabelSession+"="+id); !slices.Contains(got, vol) {
		t.Fatalf("volumes of the session %v, want %s", got, vol)
	}
	if err := e.Cleanup(tctx(t, time.Minute), "alice", id); err != nil {
		t.Fatal(err)
	}
	if got := packageVolumes(t, cli, backend.LabelSession+"="+id); len(got) != 0 {
		t.Errorf("volumes after cleanup %v, want none", got)
	}
	if n := dockertest.Ours(t, cli, backend.LabelKind+"="+executor.KindInstaller); n != 0 {
		t.Errorf("%d installer containers left, want 0", n)
	}
}

func TestInstallForTransientCalls(t *testing.T) {
	dir := wheelhouse(t)
	e, cli := newExec(t, func(c *config.Config) {
		c.Package.FindLinks = []string{dir}
		c.Pool.Enabled, c.Pool.Size, c.Pool.Preload = true, 1, nil
	})
	ir, err := e.Install(tctx(t, 2*time.Minute), executor.InstallRequest{Owner: "alice", Name: "pdmdemo"})
	if err != nil || ir.Status != "ok" {
		t.Fatalf("Install = %+v, %v", ir, err)
	}
	res, err := e.Transient(tctx(t, time.Minute), executor.Request{Owner: "alice", Code: "import pdmdemo\npdmdemo.VALUE", Imports: importDemo})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, "ok")
	if res.Result == nil || *res.Result != "42" {
		t.Errorf("alice's transient import: result %v, want 42", res.Result)
	}
	res, err = e.Transient(tctx(t, time.Minute), executor.Request{Owner: "bob", Code: "import pdmdemo", Imports: importDemo})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "error" || res.Error == nil || res.Error.Type != "ModuleNotFoundError" {
		t.Errorf("bob's transient import: %s %+v, want ModuleNotFoundError (packages are per owner)", res.Status, res.Error)
	}
	label := backend.LabelInstance + "=" + e.Instance()
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

func TestInstallerUVFallsBackToPip(t *testing.T) {
	dir := wheelhouse(t)
	e, _ := newExec(t, func(c *config.Config) { c.Package.FindLinks = []string{dir}; c.Package.Installer = "uv" })
	ir, err := e.Install(tctx(t, 2*time.Minute), executor.InstallRequest{Owner: "alice", Name: "pdmdemo"})
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
	ir, err := e.Install(tctx(t, 2*time.Minute), executor.InstallRequest{Owner: "alice", Name: "pdmdemo"})
	if err != nil {
		t.Fatal(err)
	}
	if ir.Status != "timeout" || !strings.Contains(ir.Message, "package.timeout") {
		t.Errorf("install past package.timeout: %+v", ir)
	}
	if n, _ := e.Installed("alice", ""); n != 0 {
		t.Errorf("Installed = %d after a timeout, want 0", n)
	}
	if n := dockertest.Ours(t, cli, backend.LabelKind+"="+executor.KindInstaller); n != 0 {
		t.Errorf("%d installer containers left after the timeout", n)
	}
}

func TestSessionVolumeGoesWithExpiry(t *testing.T) {
	e, cli := newExec(t, func(c *config.Config) { c.Sessions.IdleTTL = config.Duration(300 * time.Millisecond) })
	_, id := persistent(t, e, "", executor.Request{Owner: "alice", Code: "1"})
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
	if _, _, err := e.Persistent(tctx(t, time.Minute), id, executor.Request{Owner: "alice", Code: "1"}); !errors.Is(err, executor.ErrExpiredSession) {
		t.Errorf("call after expiry: %v, want ErrExpiredSession", err)
	}
}

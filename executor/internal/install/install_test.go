package install

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend/backendtest"
)

func TestInstallerArgs(t *testing.T) {
	pip, uv := installerArgs(config.Package{}, 2, "pdmdemo==1.0")
	wantPip := []string{"python3", "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check", "--no-input",
		"--upgrade", "--no-deps", "--target", Dir, "--only-binary=:all:", "--no-index",
		"--find-links", "/wheelhouse/0", "--find-links", "/wheelhouse/1", "--", "pdmdemo==1.0"}
	if diff := cmp.Diff(wantPip, pip); diff != "" {
		t.Errorf("pip (-want +got):\n%s", diff)
	}
	if uv[0] != "uv" || uv[len(uv)-2] != "--" || !slices.Contains(uv, "--no-deps") {
		t.Errorf("uv %q", uv)
	}
	pip, _ = installerArgs(config.Package{IndexURL: "https://i.example/simple", TrustedHosts: []string{"i.example"}, AllowSdist: true}, 0, "x")
	if slices.Contains(pip, "--no-index") || slices.Contains(pip, "--only-binary=:all:") || !slices.Contains(pip, "--trusted-host") {
		t.Errorf("pip with an index and sdists %q", pip)
	}
}

func TestInstalledVersion(t *testing.T) {
	for _, tc := range []struct{ out, name, want string }{
		{"Processing x\nSuccessfully installed pdmdemo-1.0\n", "pdmdemo", "1.0"},
		{"Successfully installed My_Pkg-2.0rc1 other-1\n", "my-pkg", "2.0rc1"},
		{"Installed 1 package\n + my-pkg==3.1\n", "My.Pkg", "3.1"},
		{"nothing", "x", ""},
	} {
		if got := installedVersion(tc.out, tc.name); got != tc.want {
			t.Errorf("installedVersion(%q, %q) = %q, want %q", tc.out, tc.name, got, tc.want)
		}
	}
}

// dialTimesOut fails the install as a dial to the daemon does when the
// deadline passes during it.
type dialTimesOut struct{ backend.Packages }

func (dialTimesOut) Install(context.Context, backend.InstallJob, io.Writer, func(string) bool) (int, error) {
	return 0, errors.New("attach installer: dial unix /var/run/docker.sock: i/o timeout")
}

func TestDeadlineSeenBeforeItsTimerIsATimeout(t *testing.T) {
	s := Setup{
		Backend: dialTimesOut{},
		Package: config.Package{Timeout: config.Duration(time.Hour)},
		Installer: func() (backend.Spec, Track, error) {
			return backend.Spec{User: "1000:1000"}, func(string) (func(), error) { return func() {}, nil }, nil
		},
	}
	res, err := run(backendtest.DeadlinePassed(context.Background()), s, Request{Owner: "alice", Name: "pdmdemo"}, job{verb: "installing", what: "pdmdemo"})
	if err != nil || res.Status != "timeout" || !strings.Contains(res.Message, "package.timeout") {
		t.Errorf("a step that failed on the passed deadline: %+v, %v; want status timeout", res, err)
	}
	res, err = run(context.Background(), s, Request{Owner: "alice", Name: "pdmdemo"}, job{verb: "installing", what: "pdmdemo"})
	if err == nil || !strings.Contains(err.Error(), "i/o timeout") {
		t.Errorf("the same failure before the deadline: %+v, %v; want the error", res, err)
	}
}

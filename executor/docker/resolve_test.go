package docker_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// chainWheelhouse holds pdma 1.0 -> pdmb 1.0 -> pdmc 2.0 (and pdmc 1.0,
// which pdmb's pdmc>=2 excludes), pdmx behind an extra of pdma, and
// pdmorphan, which needs a package the wheelhouse lacks.
func chainWheelhouse(t *testing.T) string {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	dockertest.WriteWheelRequiring(t, dir, "pdma", "1.0", "1", "pdmb>=1", "pdmx; extra == 'x'", "numpy")
	dockertest.WriteWheelRequiring(t, dir, "pdmb", "1.0", "10", "pdmc>=2")
	dockertest.WriteWheel(t, dir, "pdmc", "1.0", "99")
	dockertest.WriteWheel(t, dir, "pdmc", "2.0", "100")
	dockertest.WriteWheel(t, dir, "pdmx", "1.0", "0")
	dockertest.WriteWheelRequiring(t, dir, "pdmorphan", "1.0", "0", "pdmmissing")
	return dir
}

func TestInstallResolvesDependencies(t *testing.T) {
	dir := chainWheelhouse(t)
	e, _ := newExec(t, func(c *config.Config) { c.Package.FindLinks = []string{dir} })
	res, id := persistent(t, e, "", executor.Request{Owner: "alice", Code: "x = 1"})
	wantStatus(t, res, "ok")

	// A refusal from Approve stops the install: nothing lands.
	refused := errors.New("refused by the test")
	var judged []executor.Resolved
	_, err := e.Install(tctx(t, 3*time.Minute), executor.InstallRequest{Owner: "alice", SessionID: id, Name: "pdma",
		Approve: func(_ context.Context, plan []executor.Resolved) error { judged = plan; return refused }})
	if !errors.Is(err, refused) {
		t.Fatalf("Install with a refusing Approve: %v, want its error", err)
	}
	want := []executor.Resolved{
		{Name: "pdma", Version: "1.0", RequiredBy: []string{}},
		{Name: "pdmb", Version: "1.0", RequiredBy: []string{"pdma"}},
		{Name: "pdmc", Version: "2.0", RequiredBy: []string{"pdmb"}},
	}
	sortPlan := func(p []executor.Resolved) []executor.Resolved {
		p = slices.Clone(p)
		slices.SortFunc(p, func(a, b executor.Resolved) int { return strings.Compare(a.Name, b.Name) })
		return p
	}
	if diff := cmp.Diff(want, sortPlan(judged)); diff != "" {
		t.Errorf("the plan Approve saw (-want +got):\n%s", diff)
	}
	imports := []analyze.Import{{Module: "pdma", Line: 1}, {Module: "pdmc", Line: 1}}
	res, _ = persistent(t, e, id, executor.Request{Owner: "alice", Code: "import pdma", Imports: imports[:1]})
	if res.Error == nil || res.Error.Type != "ModuleNotFoundError" {
		t.Errorf("import after a refused install: %s %+v, want ModuleNotFoundError", res.Status, res.Error)
	}

	var progress []string
	ir, err := e.Install(tctx(t, 3*time.Minute), executor.InstallRequest{Owner: "alice", SessionID: id, Name: "pdma",
		Progress: func(m string) { progress = append(progress, m) }})
	if err != nil {
		t.Fatal(err)
	}
	if ir.Status != "ok" || ir.Version != "1.0" {
		t.Fatalf("Install = %+v, want ok 1.0", ir)
	}
	if diff := cmp.Diff(want, sortPlan(ir.Packages)); diff != "" {
		t.Errorf("installed packages (-want +got):\n%s", diff)
	}
	for _, m := range []string{"resolved pdmb 1.0 (required by pdma)", "resolved pdmc 2.0 (required by pdmb)"} {
		if !slices.Contains(progress, m) {
			t.Errorf("progress %q lacks %q", progress, m)
		}
	}
	if n, _ := e.Installed("alice", id); n != 1 {
		t.Errorf("Installed = %d, want 1 (one install)", n)
	}
	res, _ = persistent(t, e, id, executor.Request{Owner: "alice", Code: "import pdma, pdmc\npdma.VALUE + pdmc.VALUE + x", Imports: imports})
	wantStatus(t, res, "ok")
	if res.Result == nil || *res.Result != "102" {
		t.Errorf("pdma.VALUE + pdmc.VALUE + x = %v, want 102 (pdmc 2.0)", res.Result)
	}

	t.Run("already installed", func(t *testing.T) {
		ir, err := e.Install(tctx(t, 3*time.Minute), executor.InstallRequest{Owner: "alice", SessionID: id, Name: "pdmb",
			Approve: func(context.Context, []executor.Resolved) error { return errors.New("nothing should be judged") }})
		if err != nil || ir.Status != "ok" || len(ir.Packages) != 0 || ir.Version != "1.0" || !strings.Contains(ir.Message, "already installed") {
			t.Errorf("Install(pdmb) again = %+v, %v; want ok, nothing installed", ir, err)
		}
	})

	t.Run("missing dependency", func(t *testing.T) {
		ir, err := e.Install(tctx(t, 3*time.Minute), executor.InstallRequest{Owner: "alice", SessionID: id, Name: "pdmorphan"})
		if err != nil || ir.Status != "not_found" || !strings.Contains(ir.Message, "pdmmissing (required by pdmorphan)") {
			t.Errorf("Install(pdmorphan) = %+v, %v; want not_found naming pdmmissing and pdmorphan", ir, err)
		}
	})
}

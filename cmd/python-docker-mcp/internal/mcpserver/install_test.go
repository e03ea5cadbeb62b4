package mcpserver

import (
	"context"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/server"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/auth"
	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/policy"
)

func TestParsePackage(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		want          policy.Package
		wantErr       string
	}{
		{name: "tabulate", want: policy.Package{Name: "tabulate"}},
		{name: "tabulate", version: "0.9.0", want: policy.Package{Name: "tabulate", Specifier: "==0.9.0"}},
		{name: "tabulate", version: ">=0.9,<1", want: policy.Package{Name: "tabulate", Specifier: ">=0.9,<1"}},
		{name: "tabulate==0.9.0", want: policy.Package{Name: "tabulate", Specifier: "==0.9.0"}},
		{name: "", wantErr: "empty"},
		{name: strings.Repeat("a", 129), wantErr: "maximum"},
		{name: "numpy; rm -rf /", wantErr: "not a package name"},
		{name: "../x", wantErr: "not a package name"},
		{name: "-e git+https://example.com/x.git", wantErr: "option"},
		{name: "--index-url=http://evil", wantErr: "option"},
		{name: "pkg @ file:///etc", wantErr: "not a package name"},
		{name: "pkg[extra]", wantErr: "extras"},
		{name: "pkg", version: "==1; rm -rf /", wantErr: "pkg"},
		{name: "pkg==1", version: "2", wantErr: "pkg"},
	} {
		got, err := parsePackage(tc.name, tc.version)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parsePackage(%.40q, %q) = %+v, %v; want an error about %q", tc.name, tc.version, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parsePackage(%q, %q): %v", tc.name, tc.version, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("parsePackage(%q, %q) (-want +got):\n%s", tc.name, tc.version, diff)
		}
	}
}

// countingInstaller installs everything the Approve callback approves,
// counts per session, and records what reached it. The requested package
// resolves to itself at version 1.0 plus deps, if set.
type countingInstaller struct {
	mu    sync.Mutex
	reqs  []executor.InstallRequest
	count map[string]int
	deps  []executor.Resolved
}

func (f *countingInstaller) Install(ctx context.Context, req executor.InstallRequest) (*executor.InstallResult, error) {
	plan := append([]executor.Resolved{{Name: req.Name, Version: "1.0", RequiredBy: []string{}}}, f.deps...)
	if req.Approve != nil {
		if err := req.Approve(ctx, plan); err != nil {
			return nil, err
		}
	}
	req.Progress("Successfully installed " + req.Name + "-1.0")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	f.count[req.SessionID]++
	return &executor.InstallResult{Status: "ok", Package: req.Name, Version: "1.0", Installer: "pip", Message: "installed " + req.Name + " 1.0",
		Output: "Successfully installed " + req.Name + "-1.0\n", Packages: plan}, nil
}

func (f *countingInstaller) Installed(owner, sessionID string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count[sessionID], nil
}

// progressLog collects progress messages.
type progressLog struct {
	mu   sync.Mutex
	msgs []string
}

func (l *progressLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string{}, l.msgs...)
}

func startInstall(t *testing.T, cfg config.Config, inst Installer) (*sdk.ClientSession, *progressLog) {
	t.Helper()
	return startInstallWith(t, cfg, inst, &scriptedExec{result: executor.Result{Status: "ok"}, ended: make(chan error, 1), files: map[string][]byte{}})
}

func startInstallWith(t *testing.T, cfg config.Config, inst Installer, ex *scriptedExec) (*sdk.ClientSession, *progressLog) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv := newServer(t, cfg, Deps{Exec: ex, Installer: inst})
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	stdio := server.NewStdioServer(srv.MCP())
	stdio.SetContextFunc(func(ctx context.Context) context.Context {
		return auth.WithPrincipal(ctx, auth.Principal{Sub: "tester", Scopes: []string{"python:execute", "python:sessions"}})
	})
	go stdio.Listen(ctx, sr, sw)
	prog := &progressLog{}
	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			prog.mu.Lock()
			prog.msgs = append(prog.msgs, r.Params.Message)
			prog.mu.Unlock()
		},
	})
	cs, err := client.Connect(ctx, &sdk.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, prog
}

func TestInstallPolicy(t *testing.T) {
	cfg := config.Default()
	cfg.Package.Blocked = []string{"evil-pkg"}
	cfg.Package.MaxPerSession = 2
	cfg.Package.RequirePinned = true
	inst := &countingInstaller{count: map[string]int{}}
	cs, _ := startInstall(t, cfg, inst)
	call := func(args map[string]any) (*sdk.CallToolResult, map[string]any) {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: ToolInstallPackage, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return res, structuredOf(t, res)
	}
	rules := func(out map[string]any) []string {
		var rs []string
		for _, v := range out["violations"].([]any) {
			rs = append(rs, v.(map[string]any)["rule"].(string))
		}
		return rs
	}
	// PEP 503: Evil_Pkg is evil-pkg.
	res, out := call(map[string]any{"package_name": "Evil_Pkg", "version": "1.0", "session_id": "s1"})
	if !res.IsError || out["status"] != "denied" || !cmp.Equal(rules(out), []string{"packages.blocked"}) {
		t.Errorf("blocked: %q %v", textOf(res), out)
	}
	res, out = call(map[string]any{"package_name": "tabulate", "session_id": "s1"})
	if !res.IsError || !cmp.Equal(rules(out), []string{"packages.unpinned"}) {
		t.Errorf("unpinned: %q %v", textOf(res), out)
	}
	for i := range 2 {
		res, out = call(map[string]any{"package_name": "tabulate", "version": "0.9.0", "session_id": "s1"})
		if res.IsError || out["status"] != "ok" || out["version"] != "1.0" {
			t.Fatalf("install %d: %q %v", i+1, textOf(res), out)
		}
	}
	res, out = call(map[string]any{"package_name": "tabulate", "version": "0.9.0", "session_id": "s1"})
	if !res.IsError || !cmp.Equal(rules(out), []string{"packages.max_per_session"}) {
		t.Errorf("third install into s1: %q %v", textOf(res), out)
	}
	// The owner's transient volume counts on its own.
	res, out = call(map[string]any{"package_name": "tabulate", "version": "0.9.0"})
	if res.IsError || out["session_id"] != "" {
		t.Errorf("transient install: %q %v", textOf(res), out)
	}
	res, out = call(map[string]any{"package_name": "tabulate; rm -rf /"})
	if !res.IsError || out["status"] != "invalid" {
		t.Errorf("injection: %q %v", textOf(res), out)
	}
	if len(inst.reqs) != 3 {
		t.Errorf("%d installs reached the installer, want 3 (denials and bad input never do)", len(inst.reqs))
	}
	want := executor.InstallRequest{Owner: "tester", SessionID: "s1", Name: "tabulate", Specifier: "==0.9.0"}
	if diff := cmp.Diff(want, inst.reqs[0], cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Progress" || p.Last().String() == ".Approve" }, cmp.Ignore())); diff != "" {
		t.Errorf("install request (-want +got):\n%s", diff)
	}
}

func TestInstallProgress(t *testing.T) {
	cs, prog := startInstall(t, config.Default(), &countingInstaller{count: map[string]int{}})
	params := &sdk.CallToolParams{Name: ToolInstallPackage, Arguments: map[string]any{"package_name": "tabulate"}}
	params.SetProgressToken("p")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil || res.IsError {
		t.Fatalf("install: %v %q", err, textOf(res))
	}
	if !strings.Contains(textOf(res), "Successfully installed tabulate-1.0") {
		t.Errorf("result text %q lacks the installer output", textOf(res))
	}
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(prog.all(), "Successfully installed tabulate-1.0") {
		if time.Now().After(deadline) {
			t.Fatalf("progress %q: want the installer's line", prog.all())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestInstallDependencyPolicy: the resolved set is judged as a whole; a
// refused dependency is named with the package that needs it and nothing
// is installed. The executor's resolver is faked here; the built server
// runs the real one in TestInstallDependencies (package main).
func TestInstallDependencyPolicy(t *testing.T) {
	cfg := config.Default()
	cfg.Package.Blocked = []string{"evil"}
	inst := &countingInstaller{count: map[string]int{}, deps: []executor.Resolved{
		{Name: "pdmb", Version: "1.0", RequiredBy: []string{"pdma"}},
		{Name: "Evil", Version: "0.1", RequiredBy: []string{"pdmb"}},
	}}
	cs, _ := startInstall(t, cfg, inst)
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: ToolInstallPackage, Arguments: map[string]any{"package_name": "pdma", "session_id": "s1"}})
	if err != nil {
		t.Fatal(err)
	}
	out := structuredOf(t, res)
	vs, _ := out["violations"].([]any)
	pkgs, _ := out["packages"].([]any)
	if !res.IsError || out["status"] != "denied" || len(vs) != 1 || len(pkgs) != 3 {
		t.Fatalf("install with a blocked dependency: %q %v", textOf(res), out)
	}
	v := vs[0].(map[string]any)
	if v["rule"] != "packages.blocked" || !strings.Contains(v["msg"].(string), "dependency Evil 0.1 (required by pdmb) is blocked") {
		t.Errorf("violation %v, want packages.blocked naming Evil and pdmb", v)
	}
	if !strings.Contains(textOf(res), "resolved: pdma 1.0, pdmb 1.0 (required by pdma), Evil 0.1 (required by pdmb)") {
		t.Errorf("text %q lacks the resolved set", textOf(res))
	}
	if len(inst.reqs) != 0 {
		t.Errorf("%d installs went ahead after the refusal, want 0", len(inst.reqs))
	}

	inst.deps = inst.deps[:1]
	res, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: ToolInstallPackage, Arguments: map[string]any{"package_name": "pdma", "session_id": "s1"}})
	if err != nil {
		t.Fatal(err)
	}
	out = structuredOf(t, res)
	pkgs, _ = out["packages"].([]any)
	if res.IsError || out["status"] != "ok" || len(pkgs) != 2 || !strings.Contains(textOf(res), "packages: pdma 1.0, pdmb 1.0 (required by pdma)") {
		t.Errorf("install with allowed dependencies: %q %v", textOf(res), out)
	}
}

// TestInstallOnKubernetes: the refusal says why, what the image has, and
// reaches neither the installer nor the policy.
func TestInstallOnKubernetes(t *testing.T) {
	cfg := config.Default()
	cfg.Backend = "kubernetes"
	inst := &countingInstaller{count: map[string]int{}}
	cs, _ := startInstall(t, cfg, inst)
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: ToolInstallPackage, Arguments: map[string]any{"package_name": "tabulate"}})
	if err != nil {
		t.Fatal(err)
	}
	txt := textOf(res)
	for _, want := range []string{"Kubernetes Pods", "nothing was installed", cfg.Docker.Image, "numpy", "executor/kubernetes/README.md"} {
		if !res.IsError || !strings.Contains(txt, want) {
			t.Errorf("install-package on kubernetes: %q, want an error saying %q", txt, want)
		}
	}
	if st := structuredOf(t, res)["status"]; st != "unavailable" {
		t.Errorf("status %v, want unavailable", st)
	}
	if len(inst.reqs) != 0 {
		t.Errorf("the installer was called: %+v", inst.reqs)
	}
}

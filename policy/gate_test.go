package policy

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

func TestReloadKeepsEngineOnBrokenRego(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "ops.rego")
	rule := func(name string) string {
		return "package pydocker.rules.ops\n\ndeny contains {\"rule\": \"" + name + "\", \"msg\": \"m\", \"line\": 0, \"col\": 0} if true\n"
	}
	write := func(src string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := config.Default()
	cfg.Policy.Paths = []string{dir}
	rulesNow := func(g *Gate) []string {
		t.Helper()
		d, err := g.Decide(ctx, run(analyze.Facts{}))
		if err != nil {
			t.Fatalf("Decide: %v", err)
		}
		return brief(d.Violations)
	}

	write(rule("first"))
	g := NewGate(load(t, cfg, nil))
	defer g.Close()
	if diff := cmp.Diff([]string{"0:first"}, rulesNow(g)); diff != "" {
		t.Fatalf("good (-want +got):\n%s", diff)
	}

	// Deciding goes on while the policy is reloaded.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var decideErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := g.Decide(ctx, run(analyze.Facts{})); err != nil {
				decideErr = err
				return
			}
		}
	}()

	write("package pydocker.rules.ops\n\ndeny contains v if {\n\tv := \n}\n")
	before := g.Engine()
	err := g.Reload(ctx, cfg)
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("Reload of broken Rego: error = %v, want a *CompileError", err)
	}
	if want := file + ":5: "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Reload error = %q, want it to start with %q", err, want)
	}
	if g.Engine() != before {
		t.Errorf("a failed reload replaced the engine")
	}
	if diff := cmp.Diff([]string{"0:first"}, rulesNow(g)); diff != "" {
		t.Errorf("after broken (-want +got):\n%s", diff)
	}

	write(rule("second"))
	if err := g.Reload(ctx, cfg); err != nil {
		t.Fatalf("Reload of fixed Rego: %v", err)
	}
	if diff := cmp.Diff([]string{"0:second"}, rulesNow(g)); diff != "" {
		t.Errorf("after fix (-want +got):\n%s", diff)
	}

	// A bad config value is refused the same way.
	bad := cfg
	bad.Policy.Profile = "lenient"
	if err := g.Reload(ctx, bad); err == nil {
		t.Errorf("Reload with a bad profile succeeded")
	}
	if diff := cmp.Diff([]string{"0:second"}, rulesNow(g)); diff != "" {
		t.Errorf("after bad config (-want +got):\n%s", diff)
	}

	close(stop)
	wg.Wait()
	if decideErr != nil {
		t.Errorf("Decide during reloads: %v", decideErr)
	}
}

func TestDecisionLog(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "decisions.jsonl")
	cfg := config.Default()
	cfg.BlockedModules = []string{"os"}
	cfg.Policy.DecisionLog = logPath

	src := []byte("import os\n")
	in := run(analyze.Facts{Imports: []analyze.Import{imp("os", 1)}})
	in.Code = NewCode(in.Code.Facts, src)

	g := NewGate(load(t, cfg, nil))
	g.now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	if d, err := g.Decide(ctx, in); err != nil || d.Allow {
		t.Fatalf("Decide = %+v, %v; want a denial", d, err)
	}
	// With decision_log_code, the code is logged too.
	cfg.Policy.DecisionLogCode = true
	if err := g.Reload(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Decide(ctx, Input{Tool: ToolInstallPackage, Package: &Package{Name: "numpy"}, Principal: Principal{Sub: "bob"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Decide(ctx, in); err != nil {
		t.Fatal(err)
	}
	bash := Input{Tool: ToolExecuteTransient, Language: "bash", Code: NewCode(analyze.Facts{Imports: []analyze.Import{}, Dynamic: []analyze.Dynamic{}, Calls: []analyze.Call{}, References: []analyze.Call{}}, []byte("echo")), Principal: Principal{Sub: "bob"}}
	if _, err := g.Decide(ctx, bash); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(logPath); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("log file: %v, mode %v; want 0600", err, info.Mode().Perm())
	}

	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		got = append(got, m)
	}
	sum := sha256.Sum256(src)
	hash := hex.EncodeToString(sum[:])
	bsum := sha256.Sum256([]byte("echo"))
	bashHash := hex.EncodeToString(bsum[:])
	violation := []any{map[string]any{"rule": "modules.blocked", "msg": `import os: module os is blocked (blocked_modules lists "os")`, "line": 1.0, "col": 0.0}}
	want := []map[string]any{
		{"time": "2026-01-02T03:04:05Z", "tool": "execute-transient", "principal": map[string]any{"sub": "alice", "scopes": []any{}},
			"allow": false, "violations": violation, "code_sha256": hash},
		{"time": "2026-01-02T03:04:05Z", "tool": "install-package", "principal": map[string]any{"sub": "bob", "scopes": nil},
			"allow": true, "violations": []any{}, "package": map[string]any{"name": "numpy", "specifier": "", "index": ""}},
		{"time": "2026-01-02T03:04:05Z", "tool": "execute-transient", "principal": map[string]any{"sub": "alice", "scopes": []any{}},
			"allow": false, "violations": violation, "code_sha256": hash, "code": "import os\n"},
		{"time": "2026-01-02T03:04:05Z", "tool": "execute-transient", "language": "bash", "principal": map[string]any{"sub": "bob", "scopes": nil},
			"allow": false, "violations": []any{map[string]any{"rule": "languages.disabled", "msg": "bash is not enabled on this server (the operator sets languages.bash.enabled: true to allow it)", "line": 0.0, "col": 0.0}},
			"code_sha256": bashHash, "code": "echo"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decision log (-want +got):\n%s", diff)
	}
}

func TestDecisionLogUnwritableFailsClosed(t *testing.T) {
	cfg := config.Default()
	cfg.Policy.DecisionLog = filepath.Join(t.TempDir(), "missing-dir", "log.jsonl")
	g := NewGate(load(t, cfg, nil))
	defer g.Close()
	if _, err := g.Decide(context.Background(), run(analyze.Facts{})); err == nil || !strings.Contains(err.Error(), "policy.decision_log") {
		t.Errorf("Decide error = %v, want a decision log error", err)
	}
}

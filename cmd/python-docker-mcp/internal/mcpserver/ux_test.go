package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/quota"
	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/policy"
)

func TestArgumentErrorsAreSentences(t *testing.T) {
	h := start(t, config.Default(), "")
	for _, tc := range []struct {
		name string
		tool string
		args map[string]any
		want []string
	}{
		{"negative timeout", ToolExecuteTransient, map[string]any{"code": "1", "timeout": -1},
			[]string{"argument `timeout` is -1, but it must be greater than 0"}},
		{"missing code", ToolExecuteTransient, map[string]any{},
			[]string{"the required argument `code` is missing"}},
		{"wrong type", ToolExecuteTransient, map[string]any{"code": 5},
			[]string{"argument `code` is 5, but it must be a string"}},
		{"timeout as a string", ToolExecutePersistent, map[string]any{"code": "1", "timeout": "5"},
			[]string{"argument `timeout` is the string \"5\", but it must be a number"}},
		{"unknown argument", ToolExecuteTransient, map[string]any{"code": "1", "sesion_id": "x"},
			[]string{"unknown argument `sesion_id`: execute-transient takes only code, language, state, state_keys, timeout"}},
		{"bad enum", ToolWriteFile, map[string]any{"session_id": "s1", "path": "a", "content": "x", "encoding": "hex"},
			[]string{"argument `encoding` is the string \"hex\"; allowed values: the string \"text\", the string \"base64\""}},
		{"two problems", ToolReadFile, map[string]any{"path": 1},
			[]string{"the required argument `session_id` is missing", "argument `path` is 1, but it must be a string"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := h.call(t, tc.tool, tc.args)
			got := textOf(res)
			if !res.IsError || !strings.HasPrefix(got, "invalid arguments for "+tc.tool+", nothing was run:") {
				t.Errorf("got %q, want an isError result starting with the tool's name", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("got %q, want it to say %q", got, w)
				}
			}
			if strings.Contains(got, "&{") || strings.Contains(got, "<root>") {
				t.Errorf("got %q: Go structs leak into the message", got)
			}
		})
	}
	if n := len(h.exec.requests); n != 0 {
		t.Errorf("%d invalid calls reached the executor", n)
	}
}

func TestStateKeysRefused(t *testing.T) {
	h := start(t, config.Default(), "")
	res := h.call(t, ToolExecuteTransient, map[string]any{"code": "1", "state": map[string]any{
		"ok_name": 1, "my-var": 2, "list": 3, "__builtins__": 4, "class": 5, "1st": 6, "x": 7,
	}})
	got := textOf(res)
	for _, want := range []string{
		`state key "1st" is not a Python identifier`,
		`state key "__builtins__" is a dunder name`,
		`state key "class" is a Python keyword`,
		`state key "list" would shadow Python's builtin list`,
		`state key "my-var" is not a Python identifier`,
		`"my_var"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("got %q, want it to say %q", got, want)
		}
	}
	if strings.Contains(got, "ok_name") || strings.Contains(got, `"x"`) {
		t.Errorf("got %q: good keys are reported", got)
	}
	if !res.IsError || structuredOf(t, res)["status"] != "invalid" {
		t.Errorf("isError %v, structured %v: want status invalid", res.IsError, structuredOf(t, res))
	}
	if n := len(h.exec.requests); n != 0 {
		t.Errorf("%d calls with bad state reached the executor", n)
	}
	res = h.call(t, ToolExecuteTransient, map[string]any{"code": "x", "state": map[string]any{"x": 1, "données": 2, "_private": 3}})
	if res.IsError {
		t.Errorf("good keys refused: %q", textOf(res))
	}
	// Names asked for are identifiers, or "*"; they reach the executor.
	res = h.call(t, ToolExecuteTransient, map[string]any{"code": "1", "state_keys": []string{"a-b", "ok"}})
	if got := textOf(res); !res.IsError || structuredOf(t, res)["status"] != "invalid" || !strings.Contains(got, `state_keys name "a-b" is not a Python identifier`) {
		t.Errorf("state_keys [a-b ok]: %q, want status invalid naming a-b", got)
	}
	res = h.call(t, ToolExecuteTransient, map[string]any{"code": "1", "state_keys": []string{"*", "total"}})
	if n := len(h.exec.requests); res.IsError || n != 2 || strings.Join(h.exec.requests[n-1].StateKeys, ",") != "*,total" {
		t.Errorf("state_keys [* total]: %q, want them passed to the executor", textOf(res))
	}
}

func TestCutStreamBecomesResource(t *testing.T) {
	h := start(t, config.Default(), "")
	full := "HEAD" + strings.Repeat("x", 200<<10) + "TAIL\n"
	shown := "HEAD" + strings.Repeat("x", 100) + "\n... [N bytes dropped] ...\n" + "xxTAIL\n"
	h.exec.result = executor.Result{Status: "ok", Stdout: shown, StdoutTruncated: true, StdoutFull: full, StdoutBytes: int64(len(full)), Stderr: "warn\n", StderrBytes: 5}
	res := h.call(t, ToolExecuteTransient, map[string]any{"code": "print('x' * 10**6)"})
	sc := structuredOf(t, res)
	uri, _ := sc["stdout_uri"].(string)
	if res.IsError || !strings.HasPrefix(uri, "sandbox-output://") || !strings.HasSuffix(uri, "/stdout") || sc["stdout_truncated"] != true ||
		sc["stdout_bytes"] != float64(len(full)) || sc["stderr_uri"] != nil {
		t.Fatalf("structured = %v", sc)
	}
	if _, ok := sc["stdout"]; ok {
		t.Error("structured content carries stdout: the stream must be sent once, in the text")
	}
	txt := textOf(res)
	if strings.Count(txt, "HEAD") != 1 || !strings.Contains(txt, "full text: "+uri) || !strings.Contains(txt, "--- stderr ---\nwarn") {
		t.Errorf("text = %q", txt)
	}
	var link *sdk.ResourceLink
	for _, c := range res.Content {
		if rl, ok := c.(*sdk.ResourceLink); ok {
			link = rl
		}
	}
	if link == nil || link.URI != uri || link.MIMEType != "text/plain" {
		t.Fatalf("resource link = %+v, want %s", link, uri)
	}
	rr, err := h.session.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != full {
		t.Fatalf("resources/read %s: %v (%d contents)", uri, err, len(rr.Contents))
	}
	lr, err := h.session.ListResources(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var listed bool
	for _, r := range lr.Resources {
		listed = listed || r.URI == uri
	}
	if !listed {
		t.Errorf("resources/list does not list %s: %+v", uri, lr.Resources)
	}
	if _, err := h.session.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "sandbox-output://nope/stdout"}); err == nil {
		t.Error("an unknown output was read")
	}
}

func TestOutputStoreOwnerTTLAndCap(t *testing.T) {
	o := newOutputStore()
	now := time.Unix(1000, 0)
	o.now = func() time.Time { return now }
	o.setLimits(10, time.Minute)
	q := policy.Quota{Max: 10, Key: "quotas.output_bytes"}
	put := func(owner, call, text string) string {
		t.Helper()
		uri, err := o.put(owner, call, "stdout", text, int64(len(text)), q)
		if err != nil {
			t.Fatalf("put %s %s: %v", owner, call, err)
		}
		return uri
	}
	a := put("alice", "c1", "aaaa")
	if _, err := o.get("bob", a); err == nil {
		t.Error("bob read alice's output")
	}
	if out, err := o.get("alice", a); err != nil || out.text != "aaaa" {
		t.Errorf("alice: %v %+v", err, out)
	}
	b := put("alice", "c2", "bbbbbb")
	c := put("alice", "c3", "cc") // 12 bytes > 10: the oldest goes
	if _, err := o.get("alice", a); err == nil {
		t.Error("the oldest output survived the total cap")
	}
	if _, err := o.get("alice", b); err != nil {
		t.Errorf("b: %v", err)
	}
	if uri, err := o.put("alice", "c4", "stdout", strings.Repeat("z", 11), 11, q); uri != "" || err == nil {
		t.Errorf("an output larger than the quota was kept: %q %v", uri, err)
	}
	now = now.Add(2 * time.Minute)
	if _, err := o.get("alice", c); err == nil {
		t.Error("an output outlived its TTL")
	}
	if n := len(o.list("alice")); n != 0 || o.size != 0 {
		t.Errorf("after the TTL: %d listed, %d bytes held", n, o.size)
	}
}

// One owner's outputs never evict another's: past its quota an owner
// loses its own oldest, and when the store is full of other owners'
// outputs its new one is not kept, with a quota error that says so.
func TestOutputStorePerOwner(t *testing.T) {
	o := newOutputStore()
	o.setLimits(20, time.Hour)
	q := policy.Quota{Max: 12, Key: "quotas.output_bytes"}
	bob, err := o.put("bob", "b1", "stdout", "bbbbbbbb", 8, q)
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for i := range 10 {
		uri, err := o.put("alice", fmt.Sprint("a", i), "stdout", "aaaaa", 5, q)
		if err != nil {
			t.Fatalf("alice's output %d: %v", i, err)
		}
		last = uri
	}
	if _, err := o.get("bob", bob); err != nil {
		t.Errorf("alice's flood evicted bob's output: %v", err)
	}
	if _, err := o.get("alice", last); err != nil {
		t.Errorf("alice's newest output: %v", err)
	}
	if got := o.owners["alice"]; got > q.Max {
		t.Errorf("alice keeps %d bytes, over her quota %d", got, q.Max)
	}
	// carol's 12 bytes fit her quota but not beside bob's 8 and alice's 10.
	_, err = o.put("carol", "c1", "stdout", strings.Repeat("c", 12), 12, q)
	var qe *quota.Error
	if !errors.As(err, &qe) || qe.Quota != policy.QuotaOutputBytes || qe.Key != "outputs.max_total_bytes" {
		t.Errorf("carol's output in a full store: %v, want a quota error naming outputs.max_total_bytes", err)
	}
	if u := o.use(); u.Total != 18 || u.Top != 10 {
		t.Errorf("use = %+v, want 18 in all, 10 for alice", u)
	}
}

func TestResourcesListAndAbsolutePaths(t *testing.T) {
	h := start(t, config.Default(), "")
	res := h.call(t, ToolWriteFile, map[string]any{"session_id": "s1", "path": "/workspace/data/in.txt", "content": "hi"})
	if res.IsError || structuredOf(t, res)["uri"] != "sandbox://s1/data/in.txt" {
		t.Fatalf("write-file with an absolute path: %q %v", textOf(res), structuredOf(t, res))
	}
	h.exec.files["data/in.txt"] = []byte("hi")
	rr, err := h.session.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: "sandbox://s1/data/in.txt"})
	if err != nil || rr.Contents[0].Text != "hi" {
		t.Errorf("the URI write-file returned does not resolve: %v", err)
	}
	lr, err := h.session.ListResources(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range lr.Resources {
		uris = append(uris, r.URI)
	}
	if !strings.Contains(strings.Join(uris, " "), "sandbox://s1/data/in.txt") {
		t.Errorf("resources/list = %v, want the session's file", uris)
	}
}

func TestTransientFilesAreSaidToVanish(t *testing.T) {
	h := start(t, config.Default(), "")
	h.exec.result = executor.Result{Status: "ok", Files: []string{"out.csv", "big.bin", "raw.dat"},
		FileData: []executor.WorkspaceFile{{Path: "out.csv", Data: []byte("a,b\n")}, {Path: "raw.dat", Data: []byte{0xff, 0}}}}
	res := h.call(t, ToolExecuteTransient, map[string]any{"code": "open('out.csv','w').write('a')"})
	sc := structuredOf(t, res)
	if got, _ := sc["discarded_files"].([]any); len(got) != 3 || got[0] != "out.csv" {
		t.Errorf("discarded_files = %v", sc["discarded_files"])
	}
	returned, _ := sc["returned_files"].([]any)
	if len(returned) != 2 || !strings.HasSuffix(returned[0].(string), "/files/out.csv") {
		t.Fatalf("returned_files = %v", sc["returned_files"])
	}
	txt := textOf(res)
	if !strings.Contains(txt, "deleted when this call ended: out.csv, big.bin, raw.dat") || !strings.Contains(txt, "2 small one(s) are embedded") ||
		!strings.Contains(txt, "use execute-persistent and read-file") {
		t.Errorf("text = %q", txt)
	}
	var embedded []*sdk.ResourceContents
	for _, c := range res.Content {
		if er, ok := c.(*sdk.EmbeddedResource); ok {
			embedded = append(embedded, er.Resource)
		}
	}
	if len(embedded) != 2 || embedded[0].Text != "a,b\n" || embedded[0].MIMEType != "text/csv; charset=utf-8" || string(embedded[1].Blob) != "\xff\x00" {
		t.Errorf("embedded = %+v", embedded)
	}
	rr, err := h.session.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: returned[0].(string)})
	if err != nil || rr.Contents[0].Text != "a,b\n" {
		t.Errorf("resources/read %s: %v", returned[0], err)
	}
}

func TestDescriptionsFollowConfig(t *testing.T) {
	cfg := config.Default()
	cfg.AllowedModules = []string{"math", "json"}
	cfg.Docker.Timeout = config.Duration(12 * time.Second)
	cfg.Limits.MaxOutputBytes = 32 << 10
	cfg.Image.Packages = []string{"python3", "python3-numpy", "python3-pip"}
	tools := Tools(cfg)
	var d strings.Builder
	for _, tl := range tools {
		d.WriteString(tl.Description)
		d.Write(tl.RawInputSchema)
	}
	for _, want := range []string{"Only these modules (and their submodules) may be imported: math, json.", "limit of 12 s", "each up to 32 KiB", "Installed: numpy and the standard library."} {
		if !strings.Contains(d.String(), want) {
			t.Errorf("descriptions do not say %q", want)
		}
	}
	cfg.Docker.Image = "python:3.13-slim"
	if got := imagePackages(cfg); !strings.Contains(got, "python:3.13-slim") {
		t.Errorf("own image: %q", got)
	}
}

func TestInstallAfterImportNeedsRestart(t *testing.T) {
	ex := &scriptedExec{result: executor.Result{Status: "ok"}, ended: make(chan error, 1), files: map[string][]byte{}}
	cs, _ := startInstallWith(t, config.Default(), &countingInstaller{count: map[string]int{}}, ex)
	install := func() (*sdk.CallToolResult, map[string]any) {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: ToolInstallPackage, Arguments: map[string]any{"package_name": "PyYAML", "session_id": "s1"}})
		if err != nil {
			t.Fatal(err)
		}
		return res, structuredOf(t, res)
	}
	if res, sc := install(); res.IsError || sc["restart_needed"] != false || !strings.Contains(textOf(res), "no restart needed") {
		t.Errorf("not imported yet: %q %v", textOf(res), sc)
	}
	ex.mu.Lock()
	ex.imported = map[string]bool{"yaml": true}
	ex.mu.Unlock()
	res, sc := install()
	if res.IsError || sc["restart_needed"] != true || strings.Contains(textOf(res), "no restart needed") ||
		!strings.Contains(textOf(res), "restart needed: session s1 already imported yaml") || !strings.Contains(sc["message"].(string), "start a new session") {
		t.Errorf("after import yaml: %q %v", textOf(res), sc)
	}
}

func TestModuleCandidates(t *testing.T) {
	for name, want := range map[string]string{
		"tabulate": "tabulate", "PyYAML": "pyyaml yaml", "python-dateutil": "python_dateutil dateutil", "zope.interface": "zope_interface",
	} {
		if got := strings.Join(moduleCandidates(name), " "); got != want {
			t.Errorf("moduleCandidates(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestDescriptionsFollowReload(t *testing.T) {
	cfg := config.Default()
	var mu sync.Mutex
	current := cfg
	eng, err := policy.Load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Deps{Config: func() config.Config { mu.Lock(); defer mu.Unlock(); return current }, Gate: policy.NewGate(eng),
		Exec: &scriptedExec{result: executor.Result{Status: "ok"}, ended: make(chan error, 1), files: map[string][]byte{}}, Version: "test"})
	describe := func() string {
		var b strings.Builder
		for _, tl := range srv.currentTools(context.Background(), Tools(config.Default())) {
			b.WriteString(tl.Description)
			b.Write(tl.RawInputSchema)
		}
		return b.String()
	}
	if strings.Contains(describe(), "may not be imported") {
		t.Fatal("defaults mention blocked modules")
	}
	mu.Lock()
	current.BlockedModules = []string{"ctypes"}
	mu.Unlock()
	if !strings.Contains(describe(), "These modules may not be imported: ctypes.") {
		t.Error("a reloaded blocked_modules is not in the descriptions")
	}
}

// TestReconfiguredSaysWhenToolsChanged: a reload that changes what the
// descriptions state counts as a change of the tools (clients are told),
// one that changes nothing they state does not; languages.bash.enabled
// is among what they state.
func TestReconfiguredSaysWhenToolsChanged(t *testing.T) {
	cfg := config.Default()
	srv := New(Deps{Config: func() config.Config { return cfg }, Version: "test"})
	other := cfg
	other.Sessions.MaxTotal = 99
	if srv.Reconfigured(cfg, other) {
		t.Error("sessions.max_total is in no description, yet the tools changed")
	}
	for name, edit := range map[string]func(*config.Config){
		"docker.timeout":          func(c *config.Config) { c.Docker.Timeout = config.Duration(time.Minute) },
		"limits.max_output_bytes": func(c *config.Config) { c.Limits.MaxOutputBytes = 1 << 10 },
		"languages.bash.enabled":  func(c *config.Config) { c.Languages.Bash.Enabled = true },
	} {
		next := cfg
		edit(&next)
		if !srv.Reconfigured(cfg, next) {
			t.Errorf("%s changed: the tools did not", name)
		}
	}
}

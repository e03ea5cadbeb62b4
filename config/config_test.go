package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustLoad(t *testing.T, o Options) *Loaded {
	t.Helper()
	if o.Home == "" {
		o.Home = t.TempDir()
	}
	l, err := Load(o)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return l
}

func TestDefaults(t *testing.T) {
	l := mustLoad(t, Options{})
	if diff := cmp.Diff(Default(), l.Config); diff != "" {
		t.Errorf("Load with nothing (-want +got):\n%s", diff)
	}
	c := l.Config
	if c.Docker.MemoryLimit != 512<<20 || c.Docker.CPULimit != 1 || c.Docker.Timeout.D() != 30*time.Second ||
		!c.Docker.NetworkDisabled || !c.Docker.ReadOnly || c.Limits.MaxOutputBytes != 64<<10 {
		t.Errorf("defaults are not the documented ones: %+v", c.Docker)
	}
	if l.File != "" {
		t.Errorf("File = %q, want none", l.File)
	}
	for _, k := range Keys() {
		if l.Origin[k] != "default" {
			t.Errorf("Origin[%s] = %q, want default", k, l.Origin[k])
		}
	}
}

func TestLayers(t *testing.T) {
	dir := t.TempDir()
	f := writeFile(t, dir, "c.yaml", "docker:\n  memory_limit: 256m\n  timeout: 10\npool:\n  size: 3\n")

	l := mustLoad(t, Options{File: f})
	if got := l.Config.Docker.MemoryLimit; got != 256<<20 {
		t.Errorf("file: memory_limit = %d, want 256m", got)
	}
	if got := l.Config.Docker.Timeout.D(); got != 10*time.Second {
		t.Errorf("file: timeout = %v, want 10s", got)
	}
	if l.Origin["docker.memory_limit"] != "file" || l.Origin["docker.cpu_limit"] != "default" {
		t.Errorf("origins: %q %q", l.Origin["docker.memory_limit"], l.Origin["docker.cpu_limit"])
	}

	env := []string{"PYTHON_DOCKER_MCP_DOCKER_MEMORY_LIMIT=1g", "PYTHON_DOCKER_MCP_POOL_SIZE=5", "PYTHON_DOCKER_MCP_ALLOWED_MODULES=numpy, pandas"}
	l = mustLoad(t, Options{File: f, Env: env})
	if got := l.Config.Docker.MemoryLimit; got != 1<<30 {
		t.Errorf("env over file: memory_limit = %d, want 1g", got)
	}
	if got := l.Config.Pool.Size; got != 5 {
		t.Errorf("env over file: pool.size = %d, want 5", got)
	}
	if diff := cmp.Diff([]string{"numpy", "pandas"}, l.Config.AllowedModules); diff != "" {
		t.Errorf("env list (-want +got):\n%s", diff)
	}
	if got := l.Origin["pool.size"]; got != "env PYTHON_DOCKER_MCP_POOL_SIZE" {
		t.Errorf("origin of pool.size = %q", got)
	}

	l = mustLoad(t, Options{File: f, Env: env, Flags: map[string]string{"pool.size": "7", "server.transport": "http"}})
	if got := l.Config.Pool.Size; got != 7 {
		t.Errorf("flag over env: pool.size = %d, want 7", got)
	}
	if got := l.Origin["server.transport"]; got != "flag --transport" {
		t.Errorf("origin of server.transport = %q", got)
	}
}

func TestFileChoice(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".python-docker-mcp"), 0o755); err != nil {
		t.Fatal(err)
	}
	def := writeFile(t, filepath.Join(home, ".python-docker-mcp"), "config.yaml", "pool:\n  size: 1\n")
	envFile := writeFile(t, t.TempDir(), "env.yaml", "pool:\n  size: 2\n")
	flagFile := writeFile(t, t.TempDir(), "flag.yaml", "pool:\n  size: 3\n")
	for _, tc := range []struct {
		name string
		o    Options
		file string
		size int
	}{
		{"default file", Options{Home: home}, def, 1},
		{"env names the file", Options{Home: home, Env: []string{EnvConfigFile + "=" + envFile}}, envFile, 2},
		{"--config wins", Options{Home: home, File: flagFile, Env: []string{EnvConfigFile + "=" + envFile}}, flagFile, 3},
	} {
		l := mustLoad(t, tc.o)
		if l.File != tc.file || l.Config.Pool.Size != tc.size {
			t.Errorf("%s: got file %q size %d, want %q %d", tc.name, l.File, l.Config.Pool.Size, tc.file, tc.size)
		}
	}
}

func TestLegacyEnv(t *testing.T) {
	env := []string{
		"PYTHON_DOCKER_MCP_POOL_ENABLED=false",
		"PYTHON_DOCKER_MCP_POOL_SIZE=4",
		"PYTHON_DOCKER_MCP_POOL_MAX_AGE=120",
		"PYTHON_DOCKER_MCP_MAX_CONCURRENT_CREATIONS=3",
		"PYTHON_DOCKER_MCP_MEMORY_LIMIT=1g",
		"PYTHON_DOCKER_MCP_CPU_LIMIT=0.5",
		"MCP_AUDIENCE=other",
	}
	c := mustLoad(t, Options{Env: env}).Config
	got := fmt.Sprint(c.Pool.Enabled, c.Pool.Size, c.Pool.MaxAge.D(), c.Pool.MaxConcurrentCreations, c.Docker.MemoryLimit, c.Docker.CPULimit, c.Auth.Audience)
	want := fmt.Sprint(false, 4, 2*time.Minute, 3, Size(1<<30), 0.5, "other")
	if got != want {
		t.Errorf("legacy env: got %s, want %s", got, want)
	}
	// The canonical name wins over the legacy one.
	c = mustLoad(t, Options{Env: []string{"PYTHON_DOCKER_MCP_MEMORY_LIMIT=1g", "PYTHON_DOCKER_MCP_DOCKER_MEMORY_LIMIT=2g"}}).Config
	if c.Docker.MemoryLimit != 2<<30 {
		t.Errorf("canonical over legacy: memory_limit = %v, want 2g", c.Docker.MemoryLimit)
	}
}

func TestPythonDockerMCPExample(t *testing.T) {
	l := mustLoad(t, Options{File: "../examples/config/python-docker-mcp.yaml"})
	c := l.Config
	if c.Docker.Image != "python:3.12.2-slim" || c.Docker.WorkingDir != "/app" || c.Docker.MemoryLimit != 256<<20 ||
		c.Docker.CPULimit != 0.5 || c.Docker.Timeout.D() != 30*time.Second || c.Package.Installer != "uv" || c.Package.IndexURL != "" {
		t.Errorf("example loaded wrong: %+v %+v", c.Docker, c.Package)
	}
	if diff := cmp.Diff([]string{"os", "sys", "subprocess", "shutil", "pathlib"}, c.BlockedModules); diff != "" {
		t.Errorf("blocked_modules (-want +got):\n%s", diff)
	}
	if len(c.AllowedModules) != 6 {
		t.Errorf("allowed_modules = %v", c.AllowedModules)
	}
}

func TestFullExampleIsDefaults(t *testing.T) {
	l := mustLoad(t, Options{File: "../examples/config/full.yaml"})
	if diff := cmp.Diff(Default(), l.Config); diff != "" {
		t.Errorf("examples/config/full.yaml differs from Default() (-want +got):\n%s", diff)
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		yaml string
		env  []string
		file string // overrides the written file
		want []string
	}{
		{name: "unknown key", yaml: "pool:\n  szie: 3\n", want: []string{"pool.szie", `unknown key "szie"`, `did you mean "pool.size"`}},
		{name: "unknown section", yaml: "dokcer:\n  image: x\n", want: []string{"dokcer", "unknown key"}},
		{name: "bad size", yaml: "docker:\n  memory_limit: 256x\n", want: []string{"docker.memory_limit", `"256x"`, "256m"}},
		{name: "expression limit not positive", yaml: "limits:\n  max_expression_tokens: 0\n", want: []string{"limits.max_expression_tokens", "want 1 or more"}},
		{name: "negative timeout", yaml: "docker:\n  timeout: -5\n", want: []string{"docker.timeout", "-5", "not positive"}},
		{name: "zero timeout", yaml: "docker:\n  timeout: 0s\n", want: []string{"docker.timeout", "not positive"}},
		{name: "wrong type", yaml: "pool:\n  size: [1, 2]\n", want: []string{"pool.size", "whole number"}},
		{name: "bool", yaml: "docker:\n  read_only: maybe\n", want: []string{"docker.read_only", "true or false"}},
		{name: "section as value", yaml: "docker: 3\n", want: []string{"docker", "is a section"}},
		{name: "yaml syntax", yaml: "docker:\n  image: [unclosed\n  timeout: 3\n", want: []string{"not valid YAML", "line"}},
		{name: "enum", yaml: "policy:\n  profile: lax\n", want: []string{"policy.profile", "standard, strict"}},
		{name: "public url not absolute", yaml: "server:\n  public_url: mcp.example.com/mcp\n", want: []string{"server.public_url", "absolute http(s) URL"}},
		{name: "public url with a query", yaml: "server:\n  public_url: https://mcp.example.com/mcp?x=1\n", want: []string{"server.public_url", "without query"}},
		{name: "metrics address", yaml: "server:\n  metrics_addr: \"9090\"\n", want: []string{"server.metrics_addr", `"9090"`, "HOST:PORT"}},
		{name: "root user", yaml: "docker:\n  user: \"0:0\"\n", want: []string{"docker.user", "non-root"}},
		{name: "kept output smaller than shown", yaml: "limits:\n  max_output_bytes: 1m\noutputs:\n  max_stream_bytes: 64k\n", want: []string{"outputs.max_stream_bytes", "at least limits.max_output_bytes (1048576 bytes)"}},
		{name: "pool cap out of range", yaml: "pool:\n  max_size: 100\n", want: []string{"pool.max_size", "want 0 to 64"}},
		{name: "bad env pool cap", env: []string{"PYTHON_DOCKER_MCP_POOL_MAX_SIZE=-1"}, want: []string{"pool.max_size", "want 0 to 64"}},
		{name: "zero output ttl", yaml: "outputs:\n  ttl: 0s\n", want: []string{"outputs.ttl"}},
		{name: "zero sandbox quota", yaml: "quotas:\n  sandboxes: 0\n", want: []string{"quotas.sandboxes", "1 or more"}},
		{name: "zero transport session quota", yaml: "quotas:\n  transport_sessions: 0\n", want: []string{"quotas.transport_sessions", "1 or more"}},
		{name: "zero output quota", yaml: "quotas:\n  output_bytes: 0\n", want: []string{"quotas.output_bytes", "positive size"}},
		{name: "in-flight quota below one request", yaml: "quotas:\n  inflight_bytes: 1m\n", want: []string{"quotas.inflight_bytes", "at least server.max_body_bytes (4194304 bytes)"}},
		{name: "missing file", file: filepath.Join(dir, "nope.yaml"), want: []string{"nope.yaml", "does not exist"}},
		{name: "directory", file: dir, want: []string{"is a directory"}},
		{name: "bad env", env: []string{"PYTHON_DOCKER_MCP_POOL_SIZE=many"}, want: []string{"env PYTHON_DOCKER_MCP_POOL_SIZE", "pool.size", `"many"`, "whole number"}},
		{name: "bad env size", env: []string{"PYTHON_DOCKER_MCP_MEMORY_LIMIT=lots"}, want: []string{"env PYTHON_DOCKER_MCP_MEMORY_LIMIT", "docker.memory_limit"}},
		{name: "capability not a bool", yaml: "policy:\n  capabilities:\n    sockets: some\n", want: []string{"policy.capabilities.sockets", `"some"`, "true, false, or null"}},
		{name: "capability a list", yaml: "policy:\n  capabilities:\n    processes: [a]\n", want: []string{"policy.capabilities.processes", "true, false, or null"}},
		{name: "socket family", yaml: "policy:\n  capabilities:\n    socket_families: [unix, netlink]\n", want: []string{"policy.capabilities.socket_families", `"netlink"`, "unix, inet, inet6"}},
		{name: "bad env capability", env: []string{"PYTHON_DOCKER_MCP_POLICY_CAPABILITIES_PTY=nope"}, want: []string{"env PYTHON_DOCKER_MCP_POLICY_CAPABILITIES_PTY", "policy.capabilities.pty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.file
			if f == "" && tc.yaml != "" {
				f = writeFile(t, dir, strings.ReplaceAll(tc.name, " ", "_")+".yaml", tc.yaml)
			}
			_, err := Load(Options{File: f, Env: tc.env, Home: dir})
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error %T is not config.Errors", err)
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
			if f != "" && tc.env == nil && !strings.Contains(msg, f) {
				t.Errorf("error %q does not name the file %s", msg, f)
			}
		})
	}
}

// Capabilities are tri-states: unset (nil) unless a file, the environment
// or a flag says true or false; "auto" and null set them back to unset.
func TestCapabilities(t *testing.T) {
	yes, no := true, false
	dir := t.TempDir()
	f := writeFile(t, dir, "c.yaml", "policy:\n  capabilities:\n    processes: false\n    sockets: true\n    pty: null\n    socket_families: [unix]\n")
	l := mustLoad(t, Options{File: f,
		Env:   []string{"PYTHON_DOCKER_MCP_POLICY_CAPABILITIES_NATIVE_CODE=FALSE", "PYTHON_DOCKER_MCP_POLICY_CAPABILITIES_SOCKETS=auto"},
		Flags: map[string]string{"policy.capabilities.pty": "true"}})
	want := Capabilities{Processes: &no, Sockets: nil, PTY: &yes, NativeCode: &no, SocketFamilies: []string{"unix"}}
	if diff := cmp.Diff(want, l.Config.Policy.Capabilities); diff != "" {
		t.Errorf("capabilities (-want +got):\n%s", diff)
	}
	for key, origin := range map[string]string{
		"policy.capabilities.processes":   "file",
		"policy.capabilities.sockets":     "env PYTHON_DOCKER_MCP_POLICY_CAPABILITIES_SOCKETS",
		"policy.capabilities.pty":         "flag --set policy.capabilities.pty",
		"policy.capabilities.native_code": "env PYTHON_DOCKER_MCP_POLICY_CAPABILITIES_NATIVE_CODE",
	} {
		if l.Origin[key] != origin {
			t.Errorf("Origin[%s] = %q, want %q", key, l.Origin[key], origin)
		}
	}
	if d := Default().Policy.Capabilities; d.Processes != nil || d.Sockets != nil || d.PTY != nil || d.NativeCode != nil {
		t.Errorf("default capabilities %+v, want every class unset", d)
	}
}

func TestEveryErrorReported(t *testing.T) {
	f := writeFile(t, t.TempDir(), "c.yaml", "pool:\n  szie: 3\ndocker:\n  memory_limit: 256x\n  timeout: -1\n")
	_, err := Load(Options{File: f, Home: t.TempDir()})
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 3 {
		t.Fatalf("got %v, want 3 errors", err)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]Size{"256m": 256 << 20, "1g": 1 << 30, "1.5GiB": 3 << 29, "1024": 1024, "64KiB": 64 << 10, "512MB": 512 << 20, " 2 g ": 2 << 30} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"256x", "", "m", "-1m", "1..2g", "NaNg"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) succeeded, want error", in)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"30s": 30 * time.Second, "30": 30 * time.Second, "2.5": 2500 * time.Millisecond, "1h30m": 90 * time.Minute} {
		got, err := ParseDuration(in)
		if err != nil || got.D() != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "-1s", "soon", ""} {
		if _, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) succeeded, want error", in)
		}
	}
}

// TestKubernetesKeys: the backend switch and the kubernetes section load
// from YAML, and each bad value is an error naming its key.
func TestKubernetesKeys(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "k.yaml", `backend: kubernetes
kubernetes:
  kubeconfig: /etc/kube/config
  namespace: sandboxes
  runtime_class: gvisor
  node_selector: ["kubernetes.io/os=linux", "pool=sandbox"]
  image_pull_policy: Never
  start_timeout: 30s
  cpu_request: 0.3
`)
	c := mustLoad(t, Options{File: good}).Config
	k := c.Kubernetes
	if c.Backend != "kubernetes" || k.Kubeconfig != "/etc/kube/config" || k.Namespace != "sandboxes" || k.RuntimeClass != "gvisor" ||
		len(k.NodeSelector) != 2 || k.ImagePullPolicy != "Never" || k.StartTimeout.D() != 30*time.Second || k.CPURequest != 0.3 {
		t.Errorf("loaded %+v", c.Kubernetes)
	}
	bad := writeFile(t, dir, "bad.yaml", `backend: k8s
`)
	_, err := Load(Options{File: bad})
	if err == nil || !strings.Contains(err.Error(), "backend") || !strings.Contains(err.Error(), "kubernetes") {
		t.Errorf("backend: k8s: %v, want an error naming backend and the allowed values", err)
	}
	bad = writeFile(t, dir, "bad2.yaml", `backend: kubernetes
kubernetes:
  node_selector: ["nokey"]
  image_pull_policy: Sometimes
  cpu_request: -0.5
docker:
  runtime: runsc
`)
	_, err = Load(Options{File: bad})
	for _, key := range []string{"kubernetes.node_selector", "kubernetes.image_pull_policy", "kubernetes.cpu_request", "docker.runtime"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("bad kubernetes section: %v, want an error naming %s", err, key)
		}
	}
}

// TestSandboxRuntimes: the runtimes a decision may name come from the
// backend's keys, the default first; bad entries name their key.
func TestSandboxRuntimes(t *testing.T) {
	dir := t.TempDir()
	c := mustLoad(t, Options{File: writeFile(t, dir, "d.yaml", "docker:\n  runtimes: [runsc, runsc, kata]\n")}).Config
	names, keys := c.SandboxRuntimes()
	if diff := cmp.Diff([]string{"", "runsc", "kata"}, names); diff != "" || keys != "docker.runtime, docker.runtimes" {
		t.Errorf("docker: %q %q (-want +got):\n%s", names, keys, diff)
	}
	c = mustLoad(t, Options{File: writeFile(t, dir, "k.yaml", "backend: kubernetes\nkubernetes:\n  runtime_class: runc\n  runtime_classes: [gvisor]\n")}).Config
	names, keys = c.SandboxRuntimes()
	if diff := cmp.Diff([]string{"runc", "gvisor"}, names); diff != "" || keys != "kubernetes.runtime_class, kubernetes.runtime_classes" {
		t.Errorf("kubernetes: %q %q (-want +got):\n%s", names, keys, diff)
	}
	for file, key := range map[string]string{
		"backend: kubernetes\ndocker:\n  runtimes: [runsc]\n": "docker.runtimes",
		"docker:\n  runtimes: [\"\"]\n":                       "docker.runtimes",
		"kubernetes:\n  runtime_classes: [\"a b\"]\n":         "kubernetes.runtime_classes",
	} {
		_, err := Load(Options{File: writeFile(t, dir, "bad.yaml", file)})
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: %v, want an error naming %s", file, err, key)
		}
	}
}

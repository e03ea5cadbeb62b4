package executor

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/docker"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// hardening is the part of a container spec the sandbox's safety rests on.
type hardening struct {
	User           string
	NetworkMode    string
	ReadonlyRootfs bool
	Tmpfs          map[string]string
	CapDrop        []string
	CapAdd         []string
	SecurityOpt    []string
	Privileged     bool
	Binds          []string
	Mounts         int
	AutoRemove     bool
	Memory         int64
	MemorySwap     int64
	NanoCPUs       int64
	PidsLimit      int64
	Ulimits        string
	Runtime        string
	Init           bool
	Labels         map[string]string
	EnvHasHost     bool
}

// hardeningOf reads the hardening of spec's container config.
func hardeningOf(spec backend.Spec) hardening {
	c, h := docker.ContainerConfig(spec)
	var ul []string
	for _, u := range h.Ulimits {
		ul = append(ul, u.String())
	}
	pids := int64(-1)
	if h.PidsLimit != nil {
		pids = *h.PidsLimit
	}
	envHasHost := false
	for _, kv := range c.Env {
		k, _, _ := strings.Cut(kv, "=")
		if k == "DOCKER_HOST" || k == "USER" || k == "SSH_AUTH_SOCK" {
			envHasHost = true
		}
	}
	return hardening{
		User: c.User, NetworkMode: string(h.NetworkMode), ReadonlyRootfs: h.ReadonlyRootfs, Tmpfs: h.Tmpfs,
		CapDrop: h.CapDrop, CapAdd: h.CapAdd, SecurityOpt: h.SecurityOpt, Privileged: h.Privileged,
		Binds: h.Binds, Mounts: len(h.Mounts), AutoRemove: h.AutoRemove,
		Memory: h.Memory, MemorySwap: h.MemorySwap, NanoCPUs: h.NanoCPUs, PidsLimit: pids,
		Ulimits: strings.Join(ul, ","), Runtime: h.Runtime, Init: h.Init == nil || *h.Init, Labels: c.Labels, EnvHasHost: envHasHost,
	}
}

func TestContainerSpec(t *testing.T) {
	created := time.Date(2026, 11, 22, 1, 2, 3, 0, time.UTC)
	meta := sandboxMeta{Kind: backend.KindPersistent, Session: "abc", Owner: "alice", Created: created, Instance: "i1", PID: 42, Host: "h"}
	labels := map[string]string{
		backend.LabelKind: "persistent", backend.LabelSession: "abc", backend.LabelOwner: "alice", backend.LabelCreated: "2026-11-22T01:02:03Z",
		backend.LabelInstance: "i1", backend.LabelPID: "42", backend.LabelHost: "h",
		// The Docker backend's own: which labels are annotations (free
		// text) for the other backends.
		docker.LabelAnnotations: "python-docker-mcp.created,python-docker-mcp.host,python-docker-mcp.owner",
	}
	base := hardening{
		User:           "1000:1000",
		NetworkMode:    "none",
		ReadonlyRootfs: true,
		Tmpfs: map[string]string{
			"/tmp":       "rw,noexec,nosuid,nodev,size=67108864,mode=1777",
			"/workspace": "rw,noexec,nosuid,nodev,size=134217728,uid=1000,gid=1000,mode=0700",
		},
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges:true"},
		Memory:      512 << 20,
		MemorySwap:  512 << 20,
		NanoCPUs:    1e9,
		PidsLimit:   128,
		Ulimits:     "nofile=1024:1024",
		Labels:      labels,
	}
	tests := []struct {
		name string
		edit func(*config.Docker)
		lim  Limits
		want func(*hardening)
	}{
		{name: "defaults", want: func(*hardening) {}},
		{
			name: "tightened limits",
			lim:  Limits{Memory: 256 << 20, CPUs: 0.5, Pids: 32},
			want: func(h *hardening) { h.Memory, h.MemorySwap, h.NanoCPUs, h.PidsLimit = 256<<20, 256<<20, 5e8, 32 },
		},
		{
			name: "runsc runtime, other user and sizes",
			edit: func(d *config.Docker) {
				d.Runtime, d.User, d.TmpSize, d.WorkspaceSize, d.WorkingDir = "runsc", "2000:3000", 1<<20, 2<<20, "/work"
			},
			want: func(h *hardening) {
				h.Runtime, h.User = "runsc", "2000:3000"
				h.Tmpfs = map[string]string{
					"/tmp":  "rw,noexec,nosuid,nodev,size=1048576,mode=1777",
					"/work": "rw,noexec,nosuid,nodev,size=2097152,uid=2000,gid=3000,mode=0700",
				}
			},
		},
		{
			name: "network enabled by the operator",
			edit: func(d *config.Docker) { d.NetworkDisabled = false },
			want: func(h *hardening) { h.NetworkMode = "bridge" },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := config.Default().Docker
			if tt.edit != nil {
				tt.edit(&d)
			}
			lim, err := resolveLimits(d, tt.lim)
			if err != nil {
				t.Fatal(err)
			}
			c, h := docker.ContainerConfig(sandboxSpec(d, lim, meta))
			want := base
			want.Tmpfs = map[string]string{}
			for k, v := range base.Tmpfs {
				want.Tmpfs[k] = v
			}
			tt.want(&want)
			if diff := cmp.Diff(want, hardeningOf(sandboxSpec(d, lim, meta))); diff != "" {
				t.Errorf("hardening (-want +got):\n%s", diff)
			}
			if got := c.Entrypoint; len(got) != 6 || got[0] != "python3" || got[5] != protocol.RunnerTag {
				t.Errorf("entrypoint = %.60q, want python3 -I -B -c <bootstrap> %s", got, protocol.RunnerTag)
			}
			if !c.OpenStdin || !c.StdinOnce || c.Tty {
				t.Errorf("stdin: OpenStdin %v StdinOnce %v Tty %v, want true true false", c.OpenStdin, c.StdinOnce, c.Tty)
			}
			if h.LogConfig.Type != "none" {
				t.Errorf("log driver %q, want none (frames are not logs)", h.LogConfig.Type)
			}
		})
	}
}

// The runner's source goes to stdin, not on the command line, which Docker
// and containerd copy into every state file they write.
func TestRunnerNotInCommand(t *testing.T) {
	for _, a := range protocol.Command() {
		if len(a) > 1024 {
			t.Errorf("a command-line argument of %d bytes (%.40q...)", len(a), a)
		}
	}
}

// The bootstrap runs the preamble's code when its Python's magic number
// is the code's, compiles the source otherwise (no code, another magic,
// code that does not load), names the runner's file "<pdm-runner>" either
// way, and leaves stdin just after the preamble. Run with the host's
// python3: the bootstrap is plain Python.
func TestRunnerBootstrap(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("this test runs the bootstrap with the host's python3: %v", err)
	}
	probe := `import sys
print(_pdm_runner, sys._getframe().f_code.co_filename, %q, sys.argv, sys.stdin.buffer.read())
`
	source, compiled := fmt.Sprintf(probe, "from source"), fmt.Sprintf(probe, "from code")
	cmd := exec.Command("python3", "-I", "-c", `import importlib.util, marshal, sys
sys.stdout.buffer.write(importlib.util.MAGIC_NUMBER + marshal.dumps(compile(sys.stdin.read(), "<pdm-runner>", "exec")))`)
	cmd.Stdin = strings.NewReader(compiled)
	out, err := cmd.Output()
	if err != nil || len(out) < 5 {
		t.Fatalf("compile with the host's python3: %v (%d bytes)", err, len(out))
	}
	magic, code := [4]byte(out[:4]), out[4:]
	other := magic
	other[0] ^= 0xff
	tests := []struct {
		name  string
		code  []byte
		magic [4]byte
		want  string
	}{
		{"no code", nil, magic, "compiled <pdm-runner> from source"},
		{"code", code, magic, "loaded <pdm-runner> from code"},
		{"another Python's code", code, other, "compiled <pdm-runner> from source"},
		{"code that does not load", []byte("not marshal"), magic, "compiled <pdm-runner> from source"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in bytes.Buffer
			if err := protocol.WritePreamble(&in, source, tt.code, tt.magic); err != nil {
				t.Fatal(err)
			}
			in.WriteString("first frame")
			cmd := exec.Command(protocol.Command()[0], protocol.Command()[1:]...)
			cmd.Stdin = &in
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("bootstrap: %v: %s", err, out)
			}
			if want := tt.want + " ['-c'] b'first frame'\n"; string(out) != want {
				t.Errorf("got %q, want %q", out, want)
			}
		})
	}
}

func TestResolveLimits(t *testing.T) {
	d := config.Default().Docker
	tests := []struct {
		name    string
		req     Limits
		want    Limits
		wantErr string
	}{
		{name: "zero means config", want: Limits{Timeout: 30 * time.Second, Memory: 512 << 20, CPUs: 1, Pids: 128}},
		{name: "tighter", req: Limits{Timeout: time.Second, Memory: 64 << 20, CPUs: 0.25, Pids: 10},
			want: Limits{Timeout: time.Second, Memory: 64 << 20, CPUs: 0.25, Pids: 10}},
		{name: "timeout above max", req: Limits{Timeout: time.Minute}, wantErr: "timeout 1m0s exceeds the maximum 30s (docker.timeout)"},
		{name: "memory above max", req: Limits{Memory: 1 << 30}, wantErr: "memory 1073741824 bytes exceeds the maximum 536870912 bytes (docker.memory_limit)"},
		{name: "cpus above max", req: Limits{CPUs: 2}, wantErr: "cpus 2 exceeds the maximum 1 (docker.cpu_limit)"},
		{name: "pids above max", req: Limits{Pids: 1000}, wantErr: "pids 1000 exceeds the maximum 128 (docker.pids_limit)"},
		{name: "negative", req: Limits{Pids: -1}, wantErr: "must not be negative"},
		{name: "memory below docker minimum", req: Limits{Memory: 1 << 20}, wantErr: "below Docker's minimum"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolveLimits(d, tt.req)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrLimitExceeded) {
					t.Fatalf("resolveLimits(%+v) error = %v, want ErrLimitExceeded containing %q", tt.req, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("resolveLimits(%+v) (-want +got):\n%s", tt.req, diff)
			}
		})
	}
}

// Only transient sandboxes tell the runner they serve one call (it then
// skips the import caches' invalidation a session needs after an install).
func TestTransientEnv(t *testing.T) {
	for _, kind := range []string{backend.KindTransient, backend.KindPersistent} {
		spec := sandboxSpec(config.Default().Docker, Limits{}, sandboxMeta{Kind: kind})
		got := slices.Contains(spec.Env, "PDM_TRANSIENT=1")
		if want := kind == backend.KindTransient; got != want {
			t.Errorf("%s sandbox: PDM_TRANSIENT=1 in its env is %v, want %v", kind, got, want)
		}
	}
}

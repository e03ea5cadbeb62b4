package policy

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// The example operator policy loads through policy.paths, as an operator
// would configure it, and decides by the principal's scopes.
func TestExamplePolicy(t *testing.T) {
	cfg := config.Default()
	cfg.Policy.Paths = []string{"../examples/policy"}
	cfg.Docker.Runtimes = []string{"runsc"} // gvisor.rego sends untrusted principals there
	e := load(t, cfg, nil)

	opens := run(analyze.Facts{Calls: []analyze.Call{call("open", 3), call("io.open", 4), call("print", 5)}})
	d := decide(t, e, opens)
	if diff := cmp.Diff([]string{"3:files.open", "4:files.open"}, brief(d.Violations)); diff != "" {
		t.Errorf("without scope (-want +got):\n%s", diff)
	}
	if d.Violations[0].Msg != "open() needs scope python:files; use the read-file and write-file tools for files in the workspace" {
		t.Errorf("message = %q", d.Violations[0].Msg)
	}

	opens.Principal.Scopes = []string{"python:files"}
	if d := decide(t, e, opens); !d.Allow {
		t.Errorf("with scope python:files: %+v", d.Violations)
	}

	heavy := run(analyze.Facts{})
	heavy.LimitsRequested.Memory = 512 << 20
	if diff := cmp.Diff([]string{"0:files.heavy"}, brief(decide(t, e, heavy).Violations)); diff != "" {
		t.Errorf("heavy (-want +got):\n%s", diff)
	}
	heavy.Principal.Scopes = []string{"python:heavy"}
	if d := decide(t, e, heavy); !d.Allow || d.Limits.Memory != 512<<20 {
		t.Errorf("heavy with scope: %+v", d)
	}

	// network.rego: sockets and processes by scope, for principals with a
	// subject; never more than the configuration.
	for _, tt := range []struct {
		sub    string
		scopes []string
		want   Capabilities
	}{
		{"alice", []string{}, Capabilities{Sockets: []string{}, PTY: true, NativeCode: true}},
		{"alice", []string{"python:net"}, Capabilities{Sockets: []string{"inet", "unix"}, PTY: true, NativeCode: true}},
		{"alice", []string{"python:net", "python:processes"}, Capabilities{Processes: true, Sockets: []string{"inet", "unix"}, PTY: true, NativeCode: true}},
		{"", nil, allOpen},
	} {
		in := run(analyze.Facts{})
		in.Principal = Principal{Sub: tt.sub, Scopes: tt.scopes}
		if diff := cmp.Diff(tt.want, decide(t, e, in).Capabilities); diff != "" {
			t.Errorf("%q %v: capabilities (-want +got):\n%s", tt.sub, tt.scopes, diff)
		}
	}
	cfg.BlockedModules = []string{"socket"}
	in := run(analyze.Facts{})
	in.Principal = Principal{Sub: "alice", Scopes: []string{"python:net", "python:processes"}}
	if got := decide(t, load(t, cfg, nil), in).Capabilities.Sockets; len(got) != 0 {
		t.Errorf("python:net with socket blocked: sockets %v, want none", got)
	}

	// gvisor.rego: authenticated principals run under runsc unless trusted;
	// without runsc configured their calls are denied.
	for _, tt := range []struct {
		sub    string
		scopes []string
		want   string
	}{
		{"alice", []string{"python:files"}, "runsc"},
		{"alice", []string{"python:trusted"}, ""},
		{"", nil, ""},
	} {
		in := run(analyze.Facts{})
		in.Principal = Principal{Sub: tt.sub, Scopes: tt.scopes}
		if d := decide(t, e, in); !d.Allow || d.Runtime != tt.want {
			t.Errorf("%q %v: allow %v, runtime %q; want allowed, %q (%+v)", tt.sub, tt.scopes, d.Allow, d.Runtime, tt.want, d.Violations)
		}
	}
	bare := config.Default()
	bare.Policy.Paths = cfg.Policy.Paths
	in = run(analyze.Facts{})
	in.Principal = Principal{Sub: "alice"}
	if d := decide(t, load(t, bare, nil), in); d.Allow || len(d.Violations) != 1 || d.Violations[0].Rule != "runtime.invalid" {
		t.Errorf("untrusted principal without runsc configured: %+v, want denied by runtime.invalid", d)
	}

	for _, m := range e.Modules() {
		if m == "../examples/policy/files_test.rego" {
			t.Errorf("a test file was loaded into the engine")
		}
	}
}

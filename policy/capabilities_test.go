package policy

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

func ptr(b bool) *bool { return &b }

var allOpen = Capabilities{Processes: true, Sockets: []string{"inet", "inet6", "unix"}, PTY: true, NativeCode: true}

// The capabilities of a decision come from the configuration: derived from
// the module and call lists, or said directly.
func TestCapabilitiesFromConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  func(*config.Config)
		want Capabilities
	}{
		{"defaults: everything", func(*config.Config) {}, allOpen},
		{"blocked subprocess", func(c *config.Config) { c.BlockedModules = []string{"subprocess"} },
			Capabilities{Sockets: allOpen.Sockets, PTY: true, NativeCode: true}},
		{"blocked socket and ctypes", func(c *config.Config) { c.BlockedModules = []string{"socket", "ctypes"} },
			Capabilities{Processes: true, Sockets: []string{}, PTY: true}},
		{"blocked os: processes and pty", func(c *config.Config) { c.BlockedModules = []string{"os"} },
			Capabilities{Sockets: allOpen.Sockets, NativeCode: true}},
		{"blocked calls by pattern", func(c *config.Config) { c.BlockedCalls = []string{"os.spawnvp", "os.openpty"} },
			Capabilities{Sockets: allOpen.Sockets, NativeCode: true}},
		{"blocked calls that are no class", func(c *config.Config) { c.BlockedCalls = []string{"eval", "os.getcwd", "open"} }, allOpen},
		{"allowlist without any class module", func(c *config.Config) { c.AllowedModules = []string{"numpy", "pandas"} },
			Capabilities{Sockets: []string{}}},
		{"allowlist with os", func(c *config.Config) { c.AllowedModules = []string{"numpy", "os"} },
			Capabilities{Processes: true, Sockets: []string{}, PTY: true}},
		{"python-docker-mcp lists", compat, Capabilities{Sockets: []string{}}},
		{"explicit beats the lists", func(c *config.Config) {
			compat(c)
			c.Policy.Capabilities.Processes = ptr(true)
			c.Policy.Capabilities.Sockets = ptr(true)
			c.Policy.Capabilities.SocketFamilies = []string{"unix"}
		}, Capabilities{Processes: true, Sockets: []string{"unix"}}},
		{"explicit false", func(c *config.Config) {
			c.Policy.Capabilities.Sockets = ptr(false)
			c.Policy.Capabilities.NativeCode = ptr(false)
		}, Capabilities{Processes: true, Sockets: []string{}, PTY: true}},
		{"socket families", func(c *config.Config) { c.Policy.Capabilities.SocketFamilies = []string{"inet6", "unix", "inet6"} },
			Capabilities{Processes: true, Sockets: []string{"inet6", "unix"}, PTY: true, NativeCode: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			tt.cfg(&cfg)
			e := load(t, cfg, nil)
			for _, in := range []Input{run(analyze.Facts{}), {Tool: ToolListSessions}} {
				d := decide(t, e, in)
				if diff := cmp.Diff(tt.want, d.Capabilities); diff != "" {
					t.Errorf("%s: capabilities (-want +got):\n%s", in.Tool, diff)
				}
			}
			if diff := cmp.Diff(tt.want, e.Configured()); diff != "" {
				t.Errorf("Configured (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBadSocketFamily(t *testing.T) {
	cfg := config.Default()
	cfg.Policy.Capabilities.SocketFamilies = []string{"unix", "packet"}
	_, err := Load(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "policy.capabilities.socket_families[1]") || !strings.Contains(err.Error(), `"packet"`) {
		t.Fatalf("Load = %v, want an error naming policy.capabilities.socket_families[1]", err)
	}
}

// Operator Rego tightens per principal; it cannot loosen past the
// configuration, whatever it says.
func TestCapabilitiesTightenedPerPrincipal(t *testing.T) {
	rules := fstest.MapFS{
		"net.rego": {Data: []byte(`package pydocker.rules.net

capability_denied contains "sockets" if not "python:net" in input.principal.scopes

capability_denied contains "sockets.inet6"

capability_denied contains "processes" if input.principal.sub == "mallory"
`)},
		"loosen.rego": {Data: []byte(`package pydocker.rules.loosen

# Not a way to add anything: only capability_denied is read.
capabilities := {"processes": true, "sockets": ["inet", "inet6", "unix"], "pty": true, "native_code": true}
`)},
	}
	cfg := config.Default()
	cfg.BlockedModules = []string{"ctypes"}
	e := load(t, cfg, rules)
	for _, tt := range []struct {
		sub    string
		scopes []string
		want   Capabilities
	}{
		{"alice", []string{"python:execute"}, Capabilities{Processes: true, Sockets: []string{}, PTY: true}},
		{"alice", []string{"python:net"}, Capabilities{Processes: true, Sockets: []string{"inet", "unix"}, PTY: true}},
		{"mallory", []string{"python:net"}, Capabilities{Sockets: []string{"inet", "unix"}, PTY: true}},
	} {
		in := run(dataScience)
		in.Principal = Principal{Sub: tt.sub, Scopes: tt.scopes}
		d := decide(t, e, in)
		if !d.Allow {
			t.Errorf("%s %v: denied: %v", tt.sub, tt.scopes, d.Violations)
		}
		if diff := cmp.Diff(tt.want, d.Capabilities); diff != "" {
			t.Errorf("%s %v: capabilities (-want +got):\n%s", tt.sub, tt.scopes, diff)
		}
	}
}

func TestUnknownCapabilityNameDenies(t *testing.T) {
	e := load(t, config.Default(), fstest.MapFS{"typo.rego": {Data: []byte("package pydocker.rules.typo\n\ncapability_denied contains \"network\"\n")}})
	d := decide(t, e, run(analyze.Facts{}))
	if d.Allow || len(d.Violations) != 1 || d.Violations[0].Rule != "capabilities.unknown" || !strings.Contains(d.Violations[0].Msg, `"network"`) {
		t.Errorf("decision %+v, want one capabilities.unknown violation naming \"network\"", d)
	}
}

// A module and its C twin are judged as one, statically and in the list
// handed to the sandbox's import guard; so are calls spelled through a
// twin.
func TestTwins(t *testing.T) {
	cfg := config.Default()
	cfg.BlockedModules = []string{"socket", "subprocess", "ctypes"}
	cfg.BlockedCalls = []string{"os.system"}
	e := load(t, cfg, nil)
	d := decide(t, e, run(analyze.Facts{
		Imports: []analyze.Import{imp("_socket", 1), imp("_posixsubprocess", 2), fromImp("_ctypes", 3, "dlopen"), imp("posix", 4), imp("numpy", 5)},
		Calls:   []analyze.Call{call("posix.system", 6), call("posix.getcwd", 7)},
	}))
	want := []string{
		"1:modules.blocked:import _socket: module _socket is blocked: it is a C twin of socket, and blocked_modules lists \"socket\"",
		"2:modules.blocked:import _posixsubprocess: module _posixsubprocess is blocked: it is a C twin of subprocess, and blocked_modules lists \"subprocess\"",
		"3:modules.blocked:from _ctypes import dlopen: module _ctypes is blocked: it is a C twin of ctypes, and blocked_modules lists \"ctypes\"",
		"6:calls.blocked:call to posix.system is blocked: posix.system is os.system under another name, and blocked_calls lists \"os.system\"",
	}
	var got []string
	for _, v := range d.Violations {
		got = append(got, strings.Join([]string{itoa(v.Line), v.Rule, v.Msg}, ":"))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
	wantBlocked := []string{"_ctypes", "_posixsubprocess", "_socket", "ctypes", "socket", "subprocess"}
	if diff := cmp.Diff(wantBlocked, d.Modules.Blocked); diff != "" {
		t.Errorf("modules.blocked (-want +got):\n%s", diff)
	}
}

// The routes around the static rules that the strict profile closes, and
// the aliases every profile resolves: real code through analyze.Source and
// the shipped rules.
func TestStaticGaps(t *testing.T) {
	cfg := config.Default()
	cfg.BlockedModules = []string{"subprocess", "socket"}
	cfg.BlockedCalls = []string{"os.system", "os.popen", "builtins.open"}
	standard := load(t, cfg, nil)
	cfg.Policy.Profile = "strict"
	strict := load(t, cfg, nil)
	tests := []struct {
		name, src        string
		standard, strict []string // nil: the same as standard
	}{
		{"assignment alias of a module", "import os\no = os\no.system('ls')\n", []string{"3:calls.blocked"}, nil},
		{"assignment alias of a function", "import os\ns = os.system\ns('ls')\n", []string{"2:calls.blocked", "3:calls.blocked"}, nil},
		{"alias chain", "import os\na = os\nb = a\nc = b.popen\nc('ls')\n", []string{"4:calls.blocked", "5:calls.blocked"}, nil},
		{"getattr alias", "import os\nf = getattr(os, 'system')\nf('ls')\n", []string{"2:calls.blocked", "3:calls.blocked"}, nil},
		{"vars alias", "import os\nf = vars(os)['system']\nf('ls')\n", []string{"3:calls.blocked"}, []string{"2:dynamic.namespace", "3:calls.blocked"}},
		{"decorator", "import os\n@os.system\ndef f(): pass\n", []string{"2:calls.blocked", "2:calls.blocked"}, nil},
		{"builtins.open entry", "open('/etc/passwd')\nimport io\nio.open('x')\n", []string{"1:calls.blocked", "3:calls.blocked"}, nil},
		{"C twin of a blocked module", "import _socket\nfrom _posixsubprocess import fork_exec\n", []string{"1:modules.blocked", "2:modules.blocked"}, nil},
		{"C twin of a blocked call", "import posix\nposix.system('ls')\n", []string{"2:calls.blocked"}, nil},
		{"frame walk", "try:\n    1/0\nexcept Exception as e:\n    g = e.__traceback__.tb_frame.f_back.f_globals\n", []string{},
			[]string{"4:dynamic.dunder", "4:dynamic.frame", "4:dynamic.frame", "4:dynamic.frame"}},
		{"sys._getframe", "import sys\nsys._getframe(1).f_globals\n", []string{}, []string{"2:dynamic.frame", "2:dynamic.frame"}},
		{"gc", "import gc\nfor o in gc.get_objects(): pass\n", []string{}, []string{"2:dynamic.gc"}},
		{"attrgetter", "import operator, os\noperator.attrgetter('system')(os)('ls')\n", []string{}, []string{"2:dynamic.attrgetter"}},
		{"walrus", "import os\nif (s := os.system):\n    s('ls')\n", []string{"2:calls.blocked", "3:calls.blocked"}, nil},
		{"match keyword capture", "import os\nmatch os:\n    case object(system=f):\n        f('ls')\n", []string{"3:calls.blocked", "3:calls.blocked", "4:calls.blocked"}, nil},
		{"data science stays allowed", "import numpy as np\nx = np\nprint(x.ones(3).sum())\n", []string{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := analyzed(t, tt.src)
			if diff := cmp.Diff(tt.standard, brief(decide(t, standard, in).Violations)); diff != "" {
				t.Errorf("standard profile: violations (-want +got):\n%s", diff)
			}
			want := tt.strict
			if want == nil {
				want = tt.standard
			}
			if diff := cmp.Diff(want, brief(decide(t, strict, in).Violations)); diff != "" {
				t.Errorf("strict profile: violations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCapabilityDeniedNotASetDenies(t *testing.T) {
	e := load(t, config.Default(), fstest.MapFS{"odd.rego": {Data: []byte("package pydocker.rules.odd\n\ncapability_denied := \"sockets\"\n")}})
	d := decide(t, e, run(analyze.Facts{}))
	if d.Allow || len(d.Violations) != 1 || d.Violations[0].Rule != "capabilities.unknown" {
		t.Errorf("decision %+v, want one capabilities.unknown violation", d)
	}
}

package main

import (
	"context"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

func TestConfigShowFits100Columns(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("PYTHON_DOCKER_MCP_POOL_SIZE", "3")
	var stdout, stderr strings.Builder
	code := run(context.Background(), []string{"config", "show", "--set", "limits.max_output_bytes=32k", "--image", "img:1"}, nil, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for i, line := range strings.Split(out, "\n") {
		if len(line) > showWidth {
			t.Errorf("line %d is %d columns: %q", i+1, len(line), line)
		}
	}
	// A value set by a flag or variable ends its line; its source goes on
	// the next line (the key column is as wide as the longest key).
	for _, want := range []string{
		`(?m)^limits\.max_output_bytes +"32k"$`, `\(from flag --set limits\.max_output_bytes\)`,
		`(?m)^docker\.image +"img:1"$`, `\(from flag --image\)`,
		`\(from env PYTHON_DOCKER_MCP_POOL_SIZE\)`, `"python3-matplotlib",`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("config show lacks %s:\n%s", want, out)
		}
	}
	if code := run(context.Background(), []string{"config", "show", "--set", "limits.max_output_bytes=-1"}, nil, &stdout, &stderr); code != exitConfig {
		t.Errorf("a bad --set after the command: exit %d, want %d", code, exitConfig)
	}
}

// TestConfigErrorsExit3 runs the built server with settings that load but
// cannot serve: each is a configuration error, exit 3.
func TestConfigErrorsExit3(t *testing.T) {
	dockertest.Require(t)
	for _, args := range [][]string{
		{"--transport", "http", "--set", "auth.mode=jwt"},
		{"--transport", "http", "--addr", "127.0.0.1:notaport"},
		{"--set", "policy.paths=/nonexistent"},
		{"--set", "limits.max_output_bytes=-1"},
	} {
		cmd := serverCommand(append(args, "--set", "pool.enabled=false")...)
		cmd.Env = serverEnv(t)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitConfig {
			t.Errorf("%v: %v, want exit %d\n%s", args, err, exitConfig, out)
		}
	}
}

func TestServerArgs(t *testing.T) {
	g := &global{configFile: "/etc/pdm.yaml", flags: map[string]string{"pool.size": "4", "docker.image": "img:1"}}
	got := serverArgs(g)
	want := []string{"--config", "/etc/pdm.yaml", "--set", "docker.image=img:1", "--set", "pool.size=4", "serve"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("serverArgs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"serve"}, serverArgs(&global{flags: map[string]string{}})); diff != "" {
		t.Errorf("serverArgs without flags (-want +got):\n%s", diff)
	}
}

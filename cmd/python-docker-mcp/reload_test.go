package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
)

// reloadRig is a running configuration whose policy and executor are
// recorders, and its log.
type reloadRig struct {
	r         *running
	log       *bytes.Buffer
	policies  []config.Config
	execs     []executor.Config
	policyErr error
	told      int
}

func newReloadRig() *reloadRig {
	rig := &reloadRig{log: &bytes.Buffer{}}
	level := new(slog.LevelVar)
	rig.r = newRunning(config.Default(), slog.New(slog.NewTextHandler(rig.log, &slog.HandlerOptions{Level: level})), level)
	rig.r.policy = func(_ context.Context, c config.Config) error {
		rig.policies = append(rig.policies, c)
		return rig.policyErr
	}
	rig.r.exec = func(c executor.Config) error {
		rig.execs = append(rig.execs, c)
		return nil
	}
	rig.r.told = func(old, cfg config.Config) { rig.told++ }
	return rig
}

// TestReloadAppliesEverywhere: one reload gives the policy, the executor
// and Config the same new values.
func TestReloadAppliesEverywhere(t *testing.T) {
	rig := newReloadRig()
	next := config.Default()
	next.Docker.Timeout = config.Duration(time.Minute)
	next.Limits.MaxOutputBytes = 1 << 10
	next.Pool.Size = 5
	rig.r.apply(context.Background(), &config.Loaded{Config: next, File: "c.yaml"})
	if got := rig.r.Config(); got.Docker.Timeout.D() != time.Minute || got.Limits.MaxOutputBytes != 1<<10 || got.Pool.Size != 5 {
		t.Errorf("Config after reload: timeout %v, max_output_bytes %d, pool.size %d", got.Docker.Timeout, got.Limits.MaxOutputBytes, got.Pool.Size)
	}
	if len(rig.policies) != 1 || rig.policies[0].Docker.Timeout.D() != time.Minute {
		t.Errorf("policy given %d configs, want 1 with the new timeout", len(rig.policies))
	}
	if len(rig.execs) != 1 || rig.execs[0].Docker.Timeout.D() != time.Minute || rig.execs[0].Pool.Size != 5 || rig.execs[0].Limits.MaxOutputBytes != 1<<10 {
		t.Errorf("executor given %+v, want the new timeout, pool size and output cap", rig.execs)
	}
	if rig.told != 1 {
		t.Errorf("told %d times, want 1", rig.told)
	}
	if !strings.Contains(rig.log.String(), `applied="docker.timeout, pool.size, limits.max_output_bytes"`) {
		t.Errorf("log does not list the applied keys:\n%s", rig.log)
	}
}

// TestReloadKeepsRestartKeys: a changed restart key keeps its running
// value and is logged by name; the live keys of the same reload apply.
func TestReloadKeepsRestartKeys(t *testing.T) {
	rig := newReloadRig()
	next := config.Default()
	next.Server.Addr = "127.0.0.1:9999"
	next.Docker.Image = "other:1"
	next.Docker.Timeout = config.Duration(time.Minute)
	rig.r.apply(context.Background(), &config.Loaded{Config: next, File: "c.yaml"})
	got := rig.r.Config()
	if got.Server.Addr != "127.0.0.1:8000" || got.Docker.Image != config.Default().Docker.Image {
		t.Errorf("restart keys changed: server.addr %q, docker.image %q", got.Server.Addr, got.Docker.Image)
	}
	if got.Docker.Timeout.D() != time.Minute {
		t.Errorf("docker.timeout = %v, want the new 1m beside the refused keys", got.Docker.Timeout)
	}
	if rig.execs[0].Docker.Image != config.Default().Docker.Image {
		t.Errorf("executor given docker.image %q", rig.execs[0].Docker.Image)
	}
	log := rig.log.String()
	for _, k := range []string{"server.addr", "docker.image"} {
		if !strings.Contains(log, "key="+k) || !strings.Contains(log, "restart") {
			t.Errorf("log does not name %s as needing a restart:\n%s", k, log)
		}
	}
	if !strings.Contains(log, `applied=docker.timeout`) {
		t.Errorf("log does not say docker.timeout applied:\n%s", log)
	}

	// Only restart keys: nothing is given to anyone.
	rig = newReloadRig()
	next = config.Default()
	next.Auth.Leeway = config.Duration(time.Hour)
	rig.r.apply(context.Background(), &config.Loaded{Config: next})
	if len(rig.policies)+len(rig.execs)+rig.told != 0 {
		t.Errorf("a reload of restart keys only reached the policy (%d), executor (%d), tools (%d)", len(rig.policies), len(rig.execs), rig.told)
	}
	if !strings.Contains(rig.log.String(), "key=auth.leeway") || !strings.Contains(rig.log.String(), "nothing applied") {
		t.Errorf("log:\n%s", rig.log)
	}
}

// TestReloadPolicyFailureAppliesNothing: a configuration the policy cannot
// be built from reaches neither the executor nor Config.
func TestReloadPolicyFailureAppliesNothing(t *testing.T) {
	rig := newReloadRig()
	rig.policyErr = errors.New("rules.rego:3: rego_parse_error")
	next := config.Default()
	next.Docker.Timeout = config.Duration(time.Minute)
	rig.r.apply(context.Background(), &config.Loaded{Config: next})
	if got := rig.r.Config().Docker.Timeout.D(); got != 30*time.Second {
		t.Errorf("docker.timeout = %v after a failed reload, want the running 30s", got)
	}
	if len(rig.execs) != 0 || rig.told != 0 {
		t.Errorf("a failed reload reached the executor (%d) or the tools (%d)", len(rig.execs), rig.told)
	}
	if !strings.Contains(rig.log.String(), "nothing applied") || !strings.Contains(rig.log.String(), "rego_parse_error") {
		t.Errorf("log:\n%s", rig.log)
	}
}

// TestReloadLogLevel: log.level applies at once.
func TestReloadLogLevel(t *testing.T) {
	rig := newReloadRig()
	next := config.Default()
	next.Log.Level = "debug"
	rig.r.apply(context.Background(), &config.Loaded{Config: next})
	if got := rig.r.level.Level(); got != slog.LevelDebug {
		t.Errorf("level = %v, want debug", got)
	}
}

package docker

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/api/types/mount"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

// TestLabelsRoundTrip: Docker has labels only; List must give a Spec's
// labels and annotations back apart, without the backend's bookkeeping.
func TestLabelsRoundTrip(t *testing.T) {
	spec := backend.Spec{
		Labels:      map[string]string{"python-docker-mcp.kind": "transient", "python-docker-mcp.pid": "12"},
		Annotations: map[string]string{"python-docker-mcp.owner": "a@b", "python-docker-mcp.created": "2026-11-24T10:00:00Z"},
		WorkingDir:  "/workspace",
	}
	cfg, _ := ContainerConfig(spec)
	l, a := splitLabels(cfg.Labels)
	if diff := cmp.Diff(spec.Labels, l); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(spec.Annotations, a); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
}

// TestContainerConfigHardening: the fixed hardening and each Spec field's
// mapping (package executor's spec tests hold the whole sandbox).
func TestContainerConfigHardening(t *testing.T) {
	spec := backend.Spec{
		Image: "img", Command: []string{"python3", "-c"}, Args: []string{"pass"}, User: "1000:1000", WorkingDir: "/workspace",
		MemoryBytes: 64 << 20, CPUs: 0.5, Pids: 32, TmpBytes: 1 << 20, WorkspaceBytes: 2 << 20,
		ReadOnlyRoot: true, NetworkDisabled: true, Runtime: "runsc",
		Volumes: []backend.Volume{{Name: "pkgs", Path: "/opt/pkgs", ReadOnly: true}},
	}
	cfg, host := ContainerConfig(spec)
	if diff := cmp.Diff([]string{"python3", "-c", "pass"}, []string(cfg.Entrypoint)); diff != "" {
		t.Errorf("entrypoint (-want +got):\n%s", diff)
	}
	if !cfg.OpenStdin || !cfg.StdinOnce || cfg.Tty || cfg.Hostname != "sandbox" || cfg.StopSignal != "SIGKILL" {
		t.Errorf("stdin/tty/hostname/stop signal: %+v", cfg)
	}
	want := map[string]string{
		"/tmp":       "rw,noexec,nosuid,nodev,size=1048576,mode=1777",
		"/workspace": "rw,noexec,nosuid,nodev,size=2097152,uid=1000,gid=1000,mode=0700",
	}
	if diff := cmp.Diff(want, host.Tmpfs); diff != "" {
		t.Errorf("tmpfs (-want +got):\n%s", diff)
	}
	if host.NetworkMode != "none" || !host.ReadonlyRootfs || host.Memory != 64<<20 || host.MemorySwap != 64<<20 ||
		host.NanoCPUs != 5e8 || host.PidsLimit == nil || *host.PidsLimit != 32 || host.Runtime != "runsc" ||
		host.Init == nil || *host.Init || host.IpcMode != "private" || host.LogConfig.Type != "none" {
		t.Errorf("host config: %+v", host)
	}
	if diff := cmp.Diff([]string{"ALL"}, host.CapDrop); diff != "" || len(host.CapAdd) > 0 || host.Privileged {
		t.Errorf("capabilities: drop %v add %v privileged %v", host.CapDrop, host.CapAdd, host.Privileged)
	}
	if diff := cmp.Diff([]mount.Mount{{Type: mount.TypeVolume, Source: "pkgs", Target: "/opt/pkgs", ReadOnly: true, VolumeOptions: &mount.VolumeOptions{NoCopy: true}}}, host.Mounts); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}

	// A sandbox that joins a holder's namespace has no hostname of its
	// own (Docker refuses one with another container's network).
	spec.JoinNetwork = "abc123"
	cfg, host = ContainerConfig(spec)
	if host.NetworkMode != "container:abc123" || cfg.Hostname != "" {
		t.Errorf("joined network: mode %q hostname %q, want container:abc123 and none", host.NetworkMode, cfg.Hostname)
	}
}

package docker

import (
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

const (
	// LabelAnnotations lists, comma-separated, which of the container's
	// labels are the Spec's Annotations (Docker has labels only), so List
	// can return both apart.
	LabelAnnotations = "python-docker-mcp.annotations"
)

// Nofile is the open-files ulimit (soft and hard) of every sandbox.
const Nofile = 1024

// shmBytes sizes /dev/shm.
const shmBytes = 16 << 20

// ContainerConfig is the whole hardening of a sandbox in Docker's terms: a
// pure function of spec (which Create validates first). Every field used is
// honoured by Docker API 1.41. How each Spec field maps:
//
//   - Command + Args: the entrypoint (the image's own is not used).
//   - User, WorkingDir, Env: as they are; nothing from the host.
//   - ReadOnlyRoot: ReadonlyRootfs.
//   - TmpBytes, WorkspaceBytes: tmpfs /tmp (mode 1777) and WorkingDir
//     (owned by User, mode 0700), both rw,noexec,nosuid,nodev,size=: a
//     library written there cannot be mapped executable.
//   - MemoryBytes: Memory = MemorySwap (no swap); CPUs: NanoCPUs; Pids:
//     PidsLimit.
//   - NetworkDisabled: network mode none (else the default bridge).
//   - JoinNetwork: network mode container:ID (the hostname is then that
//     container's, so none is set).
//   - Runtime: the container runtime (e.g. runsc).
//   - Volumes: named volume mounts, not copying the image's content in;
//     Docker creates a volume, with the Volume's labels, on first use.
//   - Labels and Annotations: container labels (see LabelAnnotations).
//   - always: every capability dropped, no-new-privileges, log driver
//     none, private IPC, no Docker init (the program is process 1, so
//     nothing dumpable holds the attached streams), nofile Nofile,
//     /dev/shm 16 MiB, stop signal SIGKILL, hostname "sandbox", stdin
//     open and attached once (the program sees EOF when the attach ends).
func ContainerConfig(spec backend.Spec) (*container.Config, *container.HostConfig) {
	labels := map[string]string{}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	if len(spec.Annotations) > 0 {
		keys := make([]string, 0, len(spec.Annotations))
		for k, v := range spec.Annotations {
			labels[k] = v
			keys = append(keys, k)
		}
		sort.Strings(keys)
		labels[LabelAnnotations] = strings.Join(keys, ",")
	}
	cfg := &container.Config{
		Image:        spec.Image,
		User:         spec.User,
		WorkingDir:   spec.WorkingDir,
		Hostname:     "sandbox",
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		OpenStdin:    true,
		StdinOnce:    true,
		Entrypoint:   append(append([]string{}, spec.Command...), spec.Args...),
		Env:          append([]string{}, spec.Env...),
		Labels:       labels,
		StopSignal:   "SIGKILL",
	}
	tmpOpts := []string{"rw", "noexec", "nosuid", "nodev"}
	wsOpts := []string{"rw", "noexec", "nosuid", "nodev"}
	if spec.TmpBytes > 0 {
		tmpOpts = append(tmpOpts, "size="+strconv.FormatInt(spec.TmpBytes, 10))
	}
	if spec.WorkspaceBytes > 0 {
		wsOpts = append(wsOpts, "size="+strconv.FormatInt(spec.WorkspaceBytes, 10))
	}
	if uid, gid, err := spec.UIDGID(); err == nil {
		wsOpts = append(wsOpts, "uid="+strconv.FormatInt(uid, 10), "gid="+strconv.FormatInt(gid, 10), "mode=0700")
		tmpOpts = append(tmpOpts, "mode=1777")
	}
	init := false
	host := &container.HostConfig{
		NetworkMode:    "bridge",
		ReadonlyRootfs: spec.ReadOnlyRoot,
		Tmpfs: map[string]string{
			"/tmp":          strings.Join(tmpOpts, ","),
			spec.WorkingDir: strings.Join(wsOpts, ","),
		},
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges:true"},
		LogConfig:   container.LogConfig{Type: "none"},
		IpcMode:     "private",
		Init:        &init,
		Runtime:     spec.Runtime,
		ShmSize:     shmBytes,
		Resources: container.Resources{
			Ulimits: []*container.Ulimit{{Name: "nofile", Soft: Nofile, Hard: Nofile}},
		},
	}
	if spec.NetworkDisabled {
		host.NetworkMode = "none"
	}
	if spec.JoinNetwork != "" {
		host.NetworkMode = container.NetworkMode("container:" + spec.JoinNetwork)
		cfg.Hostname = "" // Docker refuses a hostname with another container's network
	}
	for _, v := range spec.Volumes {
		host.Mounts = append(host.Mounts, mount.Mount{
			Type: mount.TypeVolume, Source: v.Name, Target: v.Path, ReadOnly: v.ReadOnly,
			VolumeOptions: &mount.VolumeOptions{NoCopy: true, Labels: v.Labels},
		})
	}
	if spec.MemoryBytes > 0 {
		host.Memory = spec.MemoryBytes
		host.MemorySwap = spec.MemoryBytes
	}
	if spec.CPUs > 0 {
		host.NanoCPUs = int64(math.Round(spec.CPUs * 1e9))
	}
	if spec.Pids > 0 {
		p := spec.Pids
		host.PidsLimit = &p
	}
	return cfg, host
}

// splitLabels undoes ContainerConfig's merge: the Spec's labels and
// annotations of a container, without the backend's own bookkeeping.
func splitLabels(all map[string]string) (labels, annotations map[string]string) {
	labels, annotations = map[string]string{}, map[string]string{}
	ann := map[string]bool{}
	if list := all[LabelAnnotations]; list != "" {
		for _, k := range strings.Split(list, ",") {
			ann[k] = true
		}
	}
	for k, v := range all {
		switch {
		case k == LabelAnnotations:
		case ann[k]:
			annotations[k] = v
		default:
			labels[k] = v
		}
	}
	return labels, annotations
}

package executor

import (
	"context"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/docker"
)

// KindStdlib labels the volume that holds a copy of the image's standard
// library (and the container that fills it), as LabelKind.
const KindStdlib = "stdlib"

// stdlibVolume is a named volume holding a copy of the image's standard
// library directory, which Docker sandboxes mount read-only over that
// directory. With the fuse-overlayfs storage driver (this machine's),
// each container's root filesystem is a new FUSE mount whose page cache
// starts cold, so every interpreter read its standard library through
// FUSE; a volume is a plain directory of the host, its pages cached
// across containers. In bench's cost table the runner's ready
// phase went from 121-139 to 91-101 ms of wall time and a sandbox's
// machine CPU down by about 5%.
type stdlibVolume struct {
	name string // the volume
	path string // where the image has its standard library
}

// mountIn has spec mount the volume read-only over the standard library;
// nothing when v is nil.
func (v *stdlibVolume) mountIn(spec *backend.Spec) {
	if v != nil {
		spec.Volumes = append(spec.Volumes, backend.Volume{Name: v.name, Path: v.path, ReadOnly: true})
	}
}

// stdlibState is what the executor knows of its standard library volume.
type stdlibState struct {
	vol   atomic.Pointer[stdlibVolume]
	tried atomic.Bool // made (or tried to make) once per executor
}

// stdlibVolumeName is the executor's own volume: one per server, removed
// by Close, and by the next server to start when this one crashed
// (reapVolumes, like package volumes).
func (e *Executor) stdlibVolumeName() string {
	return "python-docker-mcp-stdlib-" + e.instance
}

// stdlibPathOK reports whether p can be the image's standard library
// directory to mount a volume over: an absolute, clean path at least two
// levels deep that is none of the directories the sandbox writes to or
// the system needs (and not above one).
func stdlibPathOK(p, workdir string) bool {
	if !path.IsAbs(workdir) || path.Clean(workdir) == "/" || !path.IsAbs(p) || path.Clean(p) != p || strings.Count(p, "/") < 2 {
		return false
	}
	for _, d := range []string{"/tmp", "/proc", "/dev", "/sys", "/etc", "/run", "/var", "/bin", "/sbin", "/usr/bin", "/usr/sbin", workdir, PackagesDir} {
		if p == d || strings.HasPrefix(p, d+"/") || strings.HasPrefix(d, p+"/") {
			return false
		}
	}
	return true
}

// makeStdlibVolume fills the executor's standard library volume from the
// image's directory p (as a fresh sandbox reported it) and has later
// Docker sandboxes mount it. Docker copies an image directory into an
// empty volume when it creates a container that mounts the volume there,
// keeping modes and times (so the image's .pyc files stay valid): the
// container is created and removed, never started. Only once per
// executor, only on Docker; on any failure sandboxes keep reading the
// image's own directory.
func (e *Executor) makeStdlibVolume(ctx context.Context, p string) {
	if e.docker == nil || !e.stdlib.tried.CompareAndSwap(false, true) {
		return
	}
	meta := sandboxMeta{Kind: KindStdlib, Instance: e.instance, PID: e.pid, Host: e.host, Created: time.Now()}
	e.self.stamp(&meta)
	spec := sandboxSpec(e.cfg.Docker, Limits{Memory: 16 << 20, CPUs: 0.1, Pids: 4}, meta)
	if !stdlibPathOK(p, spec.WorkingDir) {
		e.log.Warn("the sandbox's standard library is not where a volume can be mounted; sandboxes read the image's own", "path", p)
		return
	}
	name := e.stdlibVolumeName()
	spec.Command = []string{"python3", "-c", "pass"}
	spec.Env = []string{"PATH=/usr/bin:/bin"}
	cfg, host := docker.ContainerConfig(spec)
	cfg.AttachStdin, cfg.AttachStdout, cfg.AttachStderr, cfg.OpenStdin, cfg.StdinOnce = false, false, false, false, false
	labels := meta.labels()
	host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeVolume, Source: name, Target: p,
		VolumeOptions: &mount.VolumeOptions{NoCopy: false, Labels: labels}})
	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	created, err := e.docker.ContainerCreate(ctx, client.ContainerCreateOptions{Config: cfg, HostConfig: host})
	if err != nil {
		e.log.Warn("copy the standard library into a volume; sandboxes read the image's own", "err", err)
		e.removeVolume(name)
		return
	}
	e.removeContainer(created.ID) // retried at Close when it fails
	e.stdlib.vol.Store(&stdlibVolume{name: name, path: p})
	e.log.Debug("sandboxes mount the standard library from a volume", "volume", name, "path", p)
}

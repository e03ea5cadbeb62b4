package docker

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

// installerTmp is the least /tmp an installer gets (wheels unpack there).
const installerTmp = 256 << 20

// InstallerConfig is an installer's container: job.Spec's hardening,
// limits and labels, run as root (pip writes into the volume, then hands
// it to the sandbox's user) with only the capabilities that needs, Docker's
// init reaping pip's subprocesses, the package volume writable, the
// wheelhouses read-only, no network unless job.Network. A pure function.
func InstallerConfig(job backend.InstallJob) (*container.Config, *container.HostConfig) {
	spec := job.Spec
	cfg, host := ContainerConfig(spec)
	cfg.User = "0:0"
	cfg.Hostname = "installer"
	cfg.WorkingDir = "/tmp"
	cfg.AttachStdin, cfg.OpenStdin, cfg.StdinOnce = false, false, false
	tmpOpts := []string{"rw", "nosuid", "nodev"}
	if !job.ExecTmp {
		tmpOpts = append(tmpOpts, "noexec")
	}
	if spec.TmpBytes > 0 {
		tmpOpts = append(tmpOpts, "size="+strconv.FormatInt(max(spec.TmpBytes, installerTmp), 10))
	}
	host.Tmpfs = map[string]string{"/tmp": strings.Join(tmpOpts, ",")}
	init := true // pip's subprocesses: Docker's init reaps them
	host.Init = &init
	host.ReadonlyRootfs = true
	host.CapAdd = []string{"CHOWN", "SETUID", "SETGID"}
	host.NetworkMode = "none"
	if job.Network {
		host.NetworkMode = "bridge"
	}
	for _, b := range job.Binds {
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: b.Source, Target: b.Path, ReadOnly: true})
	}
	return cfg, host
}

// Install creates the installer, has started track it, attaches its
// output, starts it and waits for its exit (or ctx's end); its output is
// copied to out until it ends, at most 5 s after the exit.
func (b *Backend) Install(ctx context.Context, job backend.InstallJob, out io.Writer, started func(id string) bool) (int, error) {
	cfg, host := InstallerConfig(job)
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	created, err := b.api.ContainerCreate(cctx, client.ContainerCreateOptions{Config: cfg, HostConfig: host})
	ccancel()
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return -1, missingImage("create installer", job.Spec.Image)
		}
		return -1, Err("create installer", "", err)
	}
	id := created.ID
	if !started(id) {
		return -1, fmt.Errorf("create installer: abandoned")
	}
	att, err := b.api.ContainerAttach(ctx, id, client.ContainerAttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return -1, Err("attach installer", "", err)
	}
	conn := att.HijackedResponse
	defer conn.Close()
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = stdcopy.StdCopy(out, out, conn.Reader)
	}()
	// The wait is registered before the start so a fast exit is not missed.
	wctx, wcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer wcancel()
	wait := b.api.ContainerWait(wctx, id, client.ContainerWaitOptions{Condition: "next-exit"})
	if _, err := b.api.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return -1, Err("start installer", "", err)
	}
	select {
	case r := <-wait.Result:
		select {
		case <-copied:
		case <-time.After(5 * time.Second):
		}
		return int(r.StatusCode), nil
	case err := <-wait.Error:
		return -1, Err("wait for installer", "", err)
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

// RemoveVolume force-removes a volume; a missing one is not an error.
func (b *Backend) RemoveVolume(ctx context.Context, name string) error {
	if _, err := b.api.VolumeRemove(ctx, name, client.VolumeRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return Err("remove volume "+name, "", err)
	}
	return nil
}

// removeVolume is RemoveVolume with its own timeout, logging a failure.
func (b *Backend) removeVolume(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.RemoveVolume(ctx, name); err != nil {
		b.log.Warn("remove volume", "volume", name, "err", err)
	}
}

// Volumes lists the volumes carrying the label key.
func (b *Backend) Volumes(ctx context.Context, key string) ([]backend.VolumeInfo, error) {
	list, err := b.api.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", key)})
	if err != nil {
		return nil, Err("list volumes", "", err)
	}
	out := make([]backend.VolumeInfo, 0, len(list.Items))
	for _, v := range list.Items {
		out = append(out, backend.VolumeInfo{Name: v.Name, Labels: v.Labels})
	}
	return out, nil
}

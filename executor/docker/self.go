package docker

import (
	"bufio"
	"context"
	"os"
	"regexp"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

var containerIDInPath = regexp.MustCompile(`/containers/([0-9a-f]{64})/(hostname|hosts|resolv\.conf)$`)

// containerInMount returns the container id of a /proc/self/mountinfo line
// that mounts Docker's per-container hostname, hosts or resolv.conf file
// at its place in /etc (m[1]), or nil. Only the mount point counts: on a
// Docker host the host's own mount table lists other containers' files
// (their shm mounts), never at /etc/hostname.
func containerInMount(line string) []string {
	f := strings.Fields(line)
	if len(f) < 5 {
		return nil
	}
	switch f[4] {
	case "/etc/hostname", "/etc/hosts", "/etc/resolv.conf":
		return containerIDInPath.FindStringSubmatch(f[3])
	}
	return nil
}

// Self finds, once, the container this process runs in: Docker bind-mounts
// the container's hostname, hosts and resolv.conf files from
// /var/lib/docker/containers/ID/, which /proc/self/mountinfo shows. The id
// counts only if the daemon knows a running container by it (the
// server talks to the daemon it runs under).
func (b *Backend) Self(ctx context.Context) string {
	b.selfOnce.Do(func() { b.self = b.findSelf(ctx) })
	return b.self
}

func (b *Backend) findSelf(ctx context.Context) string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := containerInMount(sc.Text())
		if m == nil {
			continue
		}
		if running, err := b.Running(ctx, m[1]); err == nil && running {
			return m[1]
		}
		break
	}
	return ""
}

// Running says whether the daemon runs a container with this id.
func (b *Backend) Running(ctx context.Context, id string) (bool, error) {
	res, err := b.api.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	switch {
	case err == nil:
		return res.Container.State != nil && res.Container.State.Running, nil
	case cerrdefs.IsNotFound(err):
		return false, nil
	}
	return false, Err("inspect container "+shortID(id), "", err)
}

// RemoveLeftovers removes the tree volumes whose image is gone.
func (b *Backend) RemoveLeftovers(ctx context.Context) int {
	return b.reapTreeVolumes(ctx)
}

package dockertest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// Daemon is the real daemon as the executor's tests look at it behind the
// executor's back: containers and volumes by label, and what a test does
// to a sandbox from outside (kill, pause). It keeps the Docker client out
// of the executor's own files, which speak only the backend.
type Daemon struct {
	*client.Client
}

// RequireDaemon is RequireImage, as a Daemon.
func RequireDaemon(t testing.TB, image string) *Daemon {
	t.Helper()
	return &Daemon{RequireImage(t, image)}
}

// Container is one container as Containers lists it.
type Container struct {
	ID     string
	Labels map[string]string
	State  string // "running", "exited", "paused", ...
}

// Containers lists the containers, running or not (running: only those
// that run), that carry every label ("key" or "key=value").
func (d *Daemon) Containers(ctx context.Context, running bool, labels ...string) ([]Container, error) {
	f := make(client.Filters)
	for _, l := range labels {
		f = f.Add("label", l)
	}
	if running {
		f = f.Add("status", "running")
	}
	list, err := d.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, err
	}
	out := make([]Container, 0, len(list.Items))
	for _, c := range list.Items {
		out = append(out, Container{ID: c.ID, Labels: c.Labels, State: string(c.State)})
	}
	return out, nil
}

// Exists says whether the daemon knows container id.
func (d *Daemon) Exists(ctx context.Context, id string) bool {
	_, err := d.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	return err == nil
}

// Memory is container id's memory limit in bytes.
func (d *Daemon) Memory(ctx context.Context, id string) (int64, error) {
	in, err := d.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return 0, err
	}
	return in.Container.HostConfig.Memory, nil
}

// Create creates (does not start) a container of image running cmd, with
// labels and no network: a stand-in for another server's leftovers.
func (d *Daemon) Create(ctx context.Context, image string, labels map[string]string, cmd ...string) (string, error) {
	c, err := d.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: image, Entrypoint: cmd, Labels: labels},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	return c.ID, err
}

// Start starts container id.
func (d *Daemon) Start(ctx context.Context, id string) error {
	_, err := d.ContainerStart(ctx, id, client.ContainerStartOptions{})
	return err
}

// Kill sends signal (e.g. "SIGKILL") to container id.
func (d *Daemon) Kill(ctx context.Context, id, signal string) error {
	_, err := d.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: signal})
	return err
}

// Wait waits until container id is not running.
func (d *Daemon) Wait(ctx context.Context, id string) error {
	w := d.ContainerWait(ctx, id, client.ContainerWaitOptions{})
	select {
	case <-w.Result:
		return nil
	case err := <-w.Error:
		return err
	}
}

// Pause and Unpause freeze and thaw container id (docker pause).
func (d *Daemon) Pause(ctx context.Context, id string) error {
	_, err := d.ContainerPause(ctx, id, client.ContainerPauseOptions{})
	return err
}

func (d *Daemon) Unpause(ctx context.Context, id string) error {
	_, err := d.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{})
	return err
}

// Remove force-removes container id and its anonymous volumes.
func (d *Daemon) Remove(ctx context.Context, id string) error {
	_, err := d.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	return err
}

// Volumes lists the names of the volumes that carry label ("key" or
// "key=value").
func (d *Daemon) Volumes(ctx context.Context, label string) ([]string, error) {
	list, err := d.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", label)})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, v := range list.Items {
		names = append(names, v.Name)
	}
	return names, nil
}

// VolumeCreated is when volume name was created, as the daemon says it;
// a missing volume is an error.
func (d *Daemon) VolumeCreated(ctx context.Context, name string) (string, error) {
	v, err := d.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	return v.Volume.CreatedAt, err
}

// RemoveVolume force-removes volume name; a missing one is not an error.
func (d *Daemon) RemoveVolume(ctx context.Context, name string) error {
	_, err := d.Client.VolumeRemove(ctx, name, client.VolumeRemoveOptions{Force: true})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	return err
}

// MemoryUsage is container id's memory use without the page cache, as
// `docker stats` shows it.
func (d *Daemon) MemoryUsage(ctx context.Context, id string) (uint64, error) {
	st, err := d.ContainerStats(ctx, id, client.ContainerStatsOptions{})
	if err != nil {
		return 0, err
	}
	defer st.Body.Close()
	var stats container.StatsResponse
	if err := json.NewDecoder(st.Body).Decode(&stats); err != nil {
		return 0, err
	}
	return stats.MemoryStats.Usage - stats.MemoryStats.Stats["cache"], nil
}

// Reachable is the daemon DOCKER_HOST names when it answers within 10 s,
// else nil; for checks after a whole suite (no test to skip). Close it.
func Reachable() *Daemon {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		return nil
	}
	return &Daemon{cli}
}

// HasRuntime says whether the daemon has the OCI runtime name registered
// (e.g. "runsc"); err when the daemon did not answer.
func (d *Daemon) HasRuntime(ctx context.Context, name string) (bool, error) {
	info, err := d.Info(ctx, client.InfoOptions{})
	if err != nil {
		return false, err
	}
	_, ok := info.Info.Runtimes[name]
	return ok, nil
}

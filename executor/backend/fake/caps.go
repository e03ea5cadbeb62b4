package fake

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

// Docker is the fake runtime with the optional capabilities the Docker
// backend has, held in memory: shared network namespaces that sandboxes
// lease (backend.Preparer), an interpreter tree copy (Tree), package
// volumes and installers (Packages), and the server's own container
// (Host). Create it with NewDocker. Safe for concurrent use.
type Docker struct {
	*Backend
	// Installer, when set, plays an installer run: what it writes to out
	// is the installer's output and its exit code the run's; it should
	// honour ctx. Nil: the installer writes "installer: pip" and exits 0.
	Installer func(ctx context.Context, job backend.InstallJob, out io.Writer) (int, error)
	// SelfID is the container the server runs in ("" = on the host).
	SelfID string

	d *dockerState
}

type dockerState struct {
	mu      sync.Mutex
	seq     int
	idle    []string
	leased  map[string]bool
	dropped int
	tree    bool
	volumes map[string]map[string]string // name -> labels
	running map[string]bool              // containers Host.Running knows
	jobs    []backend.InstallJob
}

// TreeVolume is the volume the fake mounts as its interpreter tree copy.
const TreeVolume = "fake-tree"

var (
	_ backend.Preparer = (*Docker)(nil)
	_ backend.Tree     = (*Docker)(nil)
	_ backend.Packages = (*Docker)(nil)
	_ backend.Host     = (*Docker)(nil)
)

// NewDocker returns an empty fake runtime with Docker's capabilities.
func NewDocker() *Docker {
	return &Docker{Backend: New(), d: &dockerState{leased: map[string]bool{}, volumes: map[string]map[string]string{}, running: map[string]bool{}}}
}

// Prepare leases an idle namespace (a new one when none is idle) with
// needs.SharedNetwork, and mounts TreeVolume at /usr with needs.Tree once
// MakeTree ran. Volumes the spec mounts are recorded as created.
func (d *Docker) Prepare(ctx context.Context, spec *backend.Spec, needs backend.Needs) (backend.Prepared, error) {
	if err := ctx.Err(); err != nil {
		return backend.Prepared{}, err
	}
	s := d.d
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range spec.Volumes {
		s.volumes[v.Name] = maps.Clone(v.Labels)
	}
	var p backend.Prepared
	if needs.Tree && s.tree {
		spec.Volumes = append(spec.Volumes, backend.Volume{Name: TreeVolume, Path: "/usr", ReadOnly: true})
		p.Tree = true
	}
	if !needs.SharedNetwork || !spec.NetworkDisabled {
		return p, nil
	}
	var id string
	if n := len(s.idle); n > 0 {
		id, s.idle = s.idle[n-1], s.idle[:n-1]
	} else {
		s.seq++
		id = fmt.Sprintf("ns-%d", s.seq)
	}
	s.leased[id] = true
	spec.JoinNetwork = id
	keep := max(needs.KeepIdle, 1)
	p.Release = func(removed bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.leased, id)
		if removed && len(s.idle) < keep {
			s.idle = append(s.idle, id)
		} else {
			s.dropped++
		}
	}
	return p, nil
}

// Warm adds one idle namespace when fewer than floor are idle.
func (d *Docker) Warm(ctx context.Context, needs backend.Needs, floor int) bool {
	s := d.d
	s.mu.Lock()
	defer s.mu.Unlock()
	if !needs.SharedNetwork || len(s.idle) >= floor {
		return false
	}
	s.seq++
	s.idle = append(s.idle, fmt.Sprintf("ns-%d", s.seq))
	return true
}

// Idle is the number of idle namespaces.
func (d *Docker) Idle() int {
	d.d.mu.Lock()
	defer d.d.mu.Unlock()
	return len(d.d.idle)
}

// Leased is the number of namespaces leased now; Dropped how many were
// discarded instead of coming back idle.
func (d *Docker) Leased() (leased, dropped int) {
	d.d.mu.Lock()
	defer d.d.mu.Unlock()
	return len(d.d.leased), d.d.dropped
}

// MakeTree has later sandboxes (with Needs.Tree) mount TreeVolume.
func (d *Docker) MakeTree(ctx context.Context, helper backend.Spec, stdlib string) {
	d.d.mu.Lock()
	defer d.d.mu.Unlock()
	d.d.tree = true
}

// DropTree stops mounting TreeVolume.
func (d *Docker) DropTree() bool {
	d.d.mu.Lock()
	defer d.d.mu.Unlock()
	was := d.d.tree
	d.d.tree = false
	return was
}

// HasTree says whether sandboxes mount TreeVolume now.
func (d *Docker) HasTree() bool {
	d.d.mu.Lock()
	defer d.d.mu.Unlock()
	return d.d.tree
}

// Install records job and its volumes, reports a new installer id to
// started, and plays Installer.
func (d *Docker) Install(ctx context.Context, job backend.InstallJob, out io.Writer, started func(id string) bool) (int, error) {
	d.d.mu.Lock()
	d.d.seq++
	id := fmt.Sprintf("installer-%d", d.d.seq)
	d.d.jobs = append(d.d.jobs, job)
	for _, v := range job.Spec.Volumes {
		d.d.volumes[v.Name] = maps.Clone(v.Labels)
	}
	d.d.mu.Unlock()
	if !started(id) {
		return -1, fmt.Errorf("create installer: abandoned")
	}
	if d.Installer == nil {
		_, err := io.WriteString(out, "installer: pip\n")
		return 0, err
	}
	return d.Installer(ctx, job, out)
}

// Jobs are the installer runs so far.
func (d *Docker) Jobs() []backend.InstallJob {
	d.d.mu.Lock()
	defer d.d.mu.Unlock()
	return slices.Clone(d.d.jobs)
}

// AddVolume records a volume as if a sandbox or another server had made
// it.
func (d *Docker) AddVolume(name string, labels map[string]string) {
	d.d.mu.Lock()
	defer d.d.mu.Unlock()
	d.d.volumes[name] = maps.Clone(labels)
}

// RemoveVolume forgets a volume.
func (d *Docker) RemoveVolume(ctx context.Context, name string) error {
	d.d.mu.Lock()
	defer d.d.mu.Unlock()
	delete(d.d.volumes, name)
	return nil
}

// Volumes lists the volumes with label key, by name.
func (d *Docker) Volumes(ctx context.Context, key string) ([]backend.VolumeInfo, error) {
	d.d.mu.Lock()
	defer d.d.mu.Unlock()
	var out []backend.VolumeInfo
	for name, l := range d.d.volumes {
		if _, ok := l[key]; ok {
			out = append(out, backend.VolumeInfo{Name: name, Labels: maps.Clone(l)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// VolumeNames are the volumes that exist, sorted.
func (d *Docker) VolumeNames() []string {
	d.d.mu.Lock()
	defer d.d.mu.Unlock()
	return slices.Sorted(maps.Keys(d.d.volumes))
}

// Self is SelfID.
func (d *Docker) Self(ctx context.Context) string { return d.SelfID }

// SetRunning makes Running report container id as running or not.
func (d *Docker) SetRunning(id string, running bool) {
	d.d.mu.Lock()
	defer d.d.mu.Unlock()
	d.d.running[id] = running
}

// Running says what SetRunning said about id (false when it said
// nothing).
func (d *Docker) Running(ctx context.Context, id string) (bool, error) {
	d.d.mu.Lock()
	defer d.d.mu.Unlock()
	return d.d.running[id], nil
}

// RemoveLeftovers has none.
func (d *Docker) RemoveLeftovers(ctx context.Context) int { return 0 }

package executor

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// Limits are the resource limits of one run. A zero field means the
// operator's value from config.Docker in force when the call begins (a
// persistent session's sandbox keeps the limits it started with); a
// request may lower a limit, never raise it past the config.
type Limits struct {
	// Timeout is the wall-clock limit of one call (config docker.timeout).
	Timeout time.Duration
	// Memory is the memory limit in bytes; memory+swap is set to the same
	// value, so the sandbox never swaps (config docker.memory_limit).
	Memory int64
	// CPUs is the CPU quota in CPUs, fractions allowed (docker.cpu_limit).
	CPUs float64
	// Pids caps processes and threads (docker.pids_limit).
	Pids int64
	// Runtime is the runtime the sandbox runs under (not a resource
	// limit, but like one it is fixed when the sandbox starts, and a
	// pooled sandbox serves only calls of its own): "" is docker.runtime.
	// Request.Runtime sets it.
	Runtime string
}

// resolveLimits fills zero fields of req from the config and refuses values
// above it (or negative), naming the maximum and the config key. A config
// value of zero means "no maximum".
func resolveLimits(d config.Docker, req Limits) (Limits, error) {
	out := Limits{Timeout: d.Timeout.D(), Memory: int64(d.MemoryLimit), CPUs: d.CPULimit, Pids: d.PidsLimit, Runtime: d.Runtime}
	if req.Runtime != "" {
		out.Runtime = req.Runtime
	}
	if req.Timeout < 0 || req.Memory < 0 || req.CPUs < 0 || req.Pids < 0 || math.IsNaN(req.CPUs) {
		return Limits{}, fmt.Errorf("%w: limits must not be negative (got timeout %s, memory %d, cpus %g, pids %d)",
			ErrLimitExceeded, req.Timeout, req.Memory, req.CPUs, req.Pids)
	}
	if req.Timeout > 0 {
		if out.Timeout > 0 && req.Timeout > out.Timeout {
			return Limits{}, fmt.Errorf("%w: timeout %s exceeds the maximum %s (docker.timeout)", ErrLimitExceeded, req.Timeout, out.Timeout)
		}
		out.Timeout = req.Timeout
	}
	if req.Memory > 0 {
		if out.Memory > 0 && req.Memory > out.Memory {
			return Limits{}, fmt.Errorf("%w: memory %d bytes exceeds the maximum %d bytes (docker.memory_limit)", ErrLimitExceeded, req.Memory, out.Memory)
		}
		if req.Memory < 6<<20 {
			return Limits{}, fmt.Errorf("%w: memory %d bytes is below Docker's minimum of 6 MiB", ErrLimitExceeded, req.Memory)
		}
		out.Memory = req.Memory
	}
	if req.CPUs > 0 {
		if out.CPUs > 0 && req.CPUs > out.CPUs {
			return Limits{}, fmt.Errorf("%w: cpus %g exceeds the maximum %g (docker.cpu_limit)", ErrLimitExceeded, req.CPUs, out.CPUs)
		}
		out.CPUs = req.CPUs
	}
	if req.Pids > 0 {
		if out.Pids > 0 && req.Pids > out.Pids {
			return Limits{}, fmt.Errorf("%w: pids %d exceeds the maximum %d (docker.pids_limit)", ErrLimitExceeded, req.Pids, out.Pids)
		}
		out.Pids = req.Pids
	}
	if out.Timeout <= 0 {
		out.Timeout = 30 * time.Second
	}
	return out, nil
}

// sandboxMeta is what the labels of one sandbox say about it.
type sandboxMeta struct {
	Kind     string
	Session  string
	Owner    string
	Created  time.Time
	Instance string
	PID      int
	Host     string
	// PIDNS and Server are the owner's pid namespace and container (see
	// LabelPIDNS, LabelServer); labels only when set.
	PIDNS  string
	Server string
	// Packages is the package volume the sandbox mounts read-only at
	// PackagesDir ("" = none). It is not a label.
	Packages string
}

func (m sandboxMeta) labels() map[string]string {
	l := map[string]string{
		backend.LabelKind:     m.Kind,
		backend.LabelOwner:    m.Owner,
		backend.LabelCreated:  m.Created.UTC().Format(time.RFC3339Nano),
		backend.LabelInstance: m.Instance,
		backend.LabelPID:      strconv.Itoa(m.PID),
		backend.LabelHost:     m.Host,
	}
	if m.Session != "" {
		l[backend.LabelSession] = m.Session
	}
	if m.PIDNS != "" {
		l[LabelPIDNS] = m.PIDNS
	}
	if m.Server != "" {
		l[LabelServer] = m.Server
	}
	return l
}

// helperSpec is the spec of a container the executor runs for itself (a
// network namespace holder, a tree volume's filler): a sandbox's
// hardening with small limits, labelled kind and owned by this executor.
func (e *Executor) helperSpec(kind string) backend.Spec {
	meta := e.owned(sandboxMeta{Kind: kind})
	d := e.config().Docker
	return sandboxSpec(d, Limits{Memory: 16 << 20, CPUs: 0.1, Pids: 4, Runtime: d.Runtime}, meta)
}

// sandboxSpec is one sandbox for any backend: a pure function from the
// operator's sandbox config, the run's resolved limits and the sandbox's
// metadata. Labels carry what the reaper and tests select on (kind,
// session, instance, pid), all valid Kubernetes label values; free text
// (owner, created, host, pid namespace, server container) goes in
// Annotations. Docker keeps both as container labels, under the same
// names as ever.
func sandboxSpec(d config.Docker, lim Limits, meta sandboxMeta) backend.Spec {
	workdir := d.WorkingDir
	if workdir == "" {
		workdir = "/workspace"
	}
	all := meta.labels()
	labels, annotations := map[string]string{}, map[string]string{}
	for k, v := range all {
		switch k {
		case backend.LabelKind, backend.LabelSession, backend.LabelInstance, backend.LabelPID:
			labels[k] = v
		default:
			annotations[k] = v
		}
	}
	spec := backend.Spec{
		Image: d.Image,
		// The runner exits when the server's attach goes away, so a
		// crashed server leaves stopped sandboxes (reaped at the next
		// start), not running interpreters.
		Command:    protocol.Command(),
		User:       d.User,
		WorkingDir: workdir,
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"HOME=" + workdir,
			"LANG=C.UTF-8",
			"MPLBACKEND=Agg",
			"MPLCONFIGDIR=/tmp/matplotlib",
			"OPENBLAS_NUM_THREADS=1",
			"OMP_NUM_THREADS=1",
			"MKL_NUM_THREADS=1",
			"NUMEXPR_NUM_THREADS=1",
			"PYTHONDONTWRITEBYTECODE=1",
			"PYTHONUNBUFFERED=1",
		},
		Labels:          labels,
		Annotations:     annotations,
		MemoryBytes:     lim.Memory,
		CPUs:            lim.CPUs,
		Pids:            lim.Pids,
		TmpBytes:        int64(d.TmpSize),
		WorkspaceBytes:  int64(d.WorkspaceSize),
		ReadOnlyRoot:    d.ReadOnly,
		NetworkDisabled: d.NetworkDisabled,
		Runtime:         lim.Runtime,
	}
	if meta.Packages != "" {
		spec.Volumes = []backend.Volume{{Name: meta.Packages, Path: PackagesDir, ReadOnly: true, Labels: volumeLabels(meta)}}
	}
	if meta.Kind == backend.KindTransient {
		// One call and nothing installed meanwhile: the runner skips
		// the import caches' invalidation sessions need.
		spec.Env = append(spec.Env, "PDM_TRANSIENT=1")
	}
	return spec
}

// numericUser splits a "uid:gid" of numbers; the tmpfs owner options need
// numbers.
func numericUser(u string) (uid, gid string, ok bool) {
	a, b, found := strings.Cut(u, ":")
	if !found {
		b = a
	}
	if _, err := strconv.ParseUint(a, 10, 32); err != nil {
		return "", "", false
	}
	if _, err := strconv.ParseUint(b, 10, 32); err != nil {
		return "", "", false
	}
	return a, b, true
}

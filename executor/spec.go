package executor

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// Labels every sandbox carries. Kind is "transient" or "persistent"; Session
// is the session id of a persistent sandbox; Owner the principal; Created an
// RFC 3339 time; Instance, PID and Host identify the executor that started
// it, so a restarted server reaps only containers whose executor is gone.
const (
	LabelKind     = "python-docker-mcp.kind"
	LabelSession  = "python-docker-mcp.session"
	LabelOwner    = "python-docker-mcp.owner"
	LabelCreated  = "python-docker-mcp.created"
	LabelInstance = "python-docker-mcp.instance"
	LabelPID      = "python-docker-mcp.pid"
	LabelHost     = "python-docker-mcp.host"
)

// Sandbox kinds, the value of LabelKind.
const (
	KindTransient  = "transient"
	KindPersistent = "persistent"
)

// Kinds of what the Docker backend makes for itself (executor/docker has
// the same names): the containers that hold shared network namespaces,
// the interpreter tree volume and its filler, and the per-server standard
// library volumes of older servers, which the reaper still removes.
const (
	KindNetwork = "network"
	KindTree    = "tree"
	KindStdlib  = "stdlib"
)

// runnerBootstrap reads the runner from stdin, where the executor writes
// a preamble (protocol.WritePreamble) before the first frame: the runner's
// source and, once the executor has it, the code an earlier sandbox
// compiled from it (runnerCodes). It runs the code when its own Python's
// magic number is the one the code was marshalled with, and compiles the
// source otherwise (about 25 ms of CPU per sandbox), under the runner's
// own file name either way, so tracebacks and the import guard can tell
// its frames from user code's "<string>". _pdm_runner tells the runner's
// ready frame which it was; _pdm_code is what the runner marshals when the
// executor asks it for its code. The source is not an argument: Docker
// and containerd copy a container's command line into every state file
// they write, and 84 KiB of it cost the machine 20-50 ms of CPU per
// container.
const runnerBootstrap = `import os, sys
del sys.argv[1]
def _r(n):
    b = bytearray()
    while len(b) < n:
        c = os.read(0, n - len(b))
        if not c:
            raise SystemExit("runner: stdin ended inside the runner's preamble")
        b += c
    return b
_h = _r(12)
_ns, _nc = int.from_bytes(_h[0:4], "big"), int.from_bytes(_h[4:8], "big")
_b = _r(_ns + _nc)
_pdm_code = None
if _nc and bytes(_h[8:12]) == getattr(sys.modules.get("_frozen_importlib_external"), "MAGIC_NUMBER", None):
    import marshal
    try:
        _pdm_code = marshal.loads(_b[_ns:])
    except Exception:
        _pdm_code = None
_pdm_runner = "compiled" if _pdm_code is None else "loaded"
if _pdm_code is None:
    _pdm_code = compile(bytes(_b[:_ns]), "<pdm-runner>", "exec")
del _r, _h, _ns, _nc, _b
exec(_pdm_code)
`

// runnerCommand is every sandbox's command line; its stdin starts with the
// runner's preamble (sendRunner). The last argument, protocol.RunnerTag,
// says so to whoever reads the command (a test's fake backend).
var runnerCommand = []string{"python3", "-I", "-B", "-c", runnerBootstrap, protocol.RunnerTag}

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
		LabelKind:     m.Kind,
		LabelOwner:    m.Owner,
		LabelCreated:  m.Created.UTC().Format(time.RFC3339Nano),
		LabelInstance: m.Instance,
		LabelPID:      strconv.Itoa(m.PID),
		LabelHost:     m.Host,
	}
	if m.Session != "" {
		l[LabelSession] = m.Session
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
		case LabelKind, LabelSession, LabelInstance, LabelPID:
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
		Command:    slices.Clone(runnerCommand),
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
	if meta.Kind == KindTransient {
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

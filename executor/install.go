package executor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

// PackagesDir is where a sandbox sees its package volume, read-only. The
// runner appends it to sys.path (after the standard library and the
// image's packages, so nothing installed shadows them) and calls
// importlib.invalidate_caches() before every run.
const PackagesDir = "/opt/pdm-packages"

// Kinds of the other labelled Docker objects: package volumes and the
// short-lived installer containers (reaped like sandboxes when their
// executor is gone).
const (
	KindPackages  = "packages"
	KindInstaller = "installer"
)

// wheelhouseDir is where package.find_links directories are mounted
// (read-only) in the installer, as wheelhouseDir/0, /1, ...
const wheelhouseDir = "/wheelhouse"

// maxInstallOutput caps the installer output kept in an InstallResult
// (head and tail kept, a marker in between).
const maxInstallOutput = 64 << 10

// defaultInstallTimeout applies when package.timeout is zero.
const defaultInstallTimeout = 120 * time.Second

// InstallRequest asks for one package. Name and Specifier must already be
// judged by the policy; Install checks them again (PEP 508 name, PEP 440
// specifier characters) and never passes them through a shell.
type InstallRequest struct {
	// Owner is the principal.
	Owner string
	// SessionID is the persistent session to install into; "" installs
	// into the owner's transient package volume.
	SessionID string
	// Name is the distribution name, e.g. "tabulate".
	Name string
	// Specifier is a PEP 440 version specifier such as "==0.9.0"; "" for
	// any version.
	Specifier string
	// Progress, when set, receives the installer's output lines, each
	// resolved package and a heartbeat every few seconds. It may be called
	// from another goroutine than Install's and must not block.
	Progress func(message string)
	// Approve, when set, judges every package the install would add (the
	// requested one and its dependencies, as resolved) before anything is
	// installed; an error stops the install and Install returns it as is.
	// Nil approves every resolved package.
	Approve func(ctx context.Context, plan []Resolved) error
}

func (r InstallRequest) progress(msg string) {
	if r.Progress != nil {
		r.Progress(msg)
	}
}

// InstallResult is the outcome of one install. Status is one of:
//
//	ok         installed; importable in the session's next call (or the
//	           owner's next transient call)
//	not_found  the wheelhouse/index has no distribution that matches
//	error      the installer failed (Output says why)
//	timeout    package.timeout passed; the installer was killed
type InstallResult struct {
	Status  string `json:"status"`
	Package string `json:"package"`
	// Version is the installed version, from the installer's output.
	Version string `json:"version"`
	// Installer is the program that ran: "pip" or "uv".
	Installer string `json:"installer"`
	// Message says what happened in one sentence.
	Message string `json:"message"`
	// Output is the installer's stdout and stderr, capped at 64 KiB
	// (head and tail kept).
	Output          string  `json:"output"`
	OutputTruncated bool    `json:"output_truncated,omitempty"`
	DurationMS      float64 `json:"duration_ms"`
	// Packages are the packages installed (ok) or that would have been
	// (resolved, then not installed): the requested one and its
	// dependencies. Empty when the request was already satisfied.
	Packages []Resolved `json:"packages"`
}

// ownerPackages is the transient package volume of one owner.
type ownerPackages struct {
	volume    string
	installed []string
	sem       chan struct{} // one install at a time into the volume
}

var (
	pep508Name = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$`)
	specChars  = regexp.MustCompile(`^[A-Za-z0-9.,=<>!~*+ ]*$`)
)

// maxPackageName bounds a package name (PyPI's longest are far shorter).
const maxPackageName = 128

// checkRequirement is the executor's own check of a name and specifier,
// whatever the caller validated: nothing that could be read as an option,
// a path, a URL or a marker reaches the installer's argv.
func checkRequirement(name, spec string) error {
	switch {
	case name == "":
		return errors.New("the package name is empty")
	case len(name) > maxPackageName:
		return fmt.Errorf("the package name is %d characters; the maximum is %d", len(name), maxPackageName)
	case !pep508Name.MatchString(name):
		return fmt.Errorf("%q is not a package name (PEP 508: letters, digits, '.', '-', '_'; no paths, URLs or options)", name)
	case len(spec) > 256 || !specChars.MatchString(spec) || strings.HasPrefix(strings.TrimSpace(spec), "-"):
		return fmt.Errorf("%q is not a version specifier (PEP 440, e.g. ==1.2.3 or >=1,<2)", spec)
	}
	return nil
}

// sessionVolume names a persistent session's package volume. Every
// persistent sandbox mounts it, so it exists from the session's start.
func sessionVolume(sessionID string) string { return "python-docker-mcp-pkgs-" + sessionID }

// ownerVolumeName names an owner's transient package volume; the
// executor's instance is part of it, so volumes never outlive it unnoticed.
func (e *Executor) ownerVolumeName(owner string) string {
	h := sha256.Sum256([]byte(owner))
	return "python-docker-mcp-pkgs-" + e.instance + "-" + hex.EncodeToString(h[:8])
}

// ownerPackageVolume is the volume transient calls of owner mount: "" when
// owner installed nothing (the call may then take a pooled sandbox).
func (e *Executor) ownerPackageVolume(owner string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if op := e.owners[owner]; op != nil && len(op.installed) > 0 {
		return op.volume
	}
	return ""
}

func volumeLabels(meta sandboxMeta) map[string]string {
	l := meta.labels()
	l[LabelKind] = KindPackages
	return l
}

// installerBootstrap runs as root with only CHOWN, SETUID and SETGID: it
// gives the package volume to the sandbox user, drops to that user for good
// and execs the installer (argv[3] holds the pip and uv command lines;
// argv[4] the configured installer). No shell is involved.
const installerBootstrap = `import json, os, shutil, sys
uid, gid = int(sys.argv[1]), int(sys.argv[2])
cmds, want = json.loads(sys.argv[3]), sys.argv[4]
st = os.stat(` + "\"" + PackagesDir + "\"" + `)
if (st.st_uid, st.st_gid) != (uid, gid):
    os.chown(` + "\"" + PackagesDir + "\"" + `, uid, gid)
os.setgroups([])
os.setgid(gid)
os.setuid(uid)
argv = cmds["pip"]
if want == "uv":
    if shutil.which("uv"):
        argv = cmds["uv"]
    else:
        print("package.installer is uv but the image has no uv: using pip", flush=True)
print("installer: " + ("uv" if argv is cmds.get("uv") else "pip"), flush=True)
os.execvp(argv[0], argv)
`

// installerArgs are the pip and uv command lines for a resolved set of
// exact requirements (resolve.go). Both install into PackagesDir without
// resolving again (--no-deps: the set is what the policy judged, nothing
// more lands in the sandbox) and, unless package.allow_sdist, from wheels
// only (no setup.py runs). With no package.index_url there is no index at
// all, only the wheelhouses.
func installerArgs(p config.Package, wheelhouses int, requirements ...string) (pip, uv []string) {
	pip = []string{"python3", "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check", "--no-input",
		"--upgrade", "--no-deps", "--target", PackagesDir}
	uv = []string{"uv", "pip", "install", "--python", "python3", "--no-cache", "--upgrade", "--no-deps", "--target", PackagesDir}
	pip, uv = sourceArgs(p, wheelhouses, pip, uv)
	pip = append(append(pip, "--"), requirements...)
	uv = append(append(uv, "--"), requirements...)
	return pip, uv
}

// sourceArgs appends where packages come from, and in which form, to the
// pip and uv command lines.
func sourceArgs(p config.Package, wheelhouses int, pip, uv []string) ([]string, []string) {
	if !p.AllowSdist {
		pip = append(pip, "--only-binary=:all:")
		uv = append(uv, "--only-binary", ":all:")
	} else {
		pip = append(pip, "--prefer-binary")
	}
	if p.IndexURL == "" {
		pip = append(pip, "--no-index")
		uv = append(uv, "--no-index")
	} else {
		pip = append(pip, "--index-url", p.IndexURL)
		uv = append(uv, "--index-url", p.IndexURL)
		for _, h := range p.TrustedHosts {
			pip = append(pip, "--trusted-host", h)
			uv = append(uv, "--allow-insecure-host", h)
		}
	}
	for i := range wheelhouses {
		dir := wheelhouseDir + "/" + strconv.Itoa(i)
		pip = append(pip, "--find-links", dir)
		uv = append(uv, "--find-links", dir)
	}
	return pip, uv
}

// installerContainer is the installer: the sandbox's image and resource limits,
// read-only rootfs, no network unless package.index_url is set, /tmp
// executable only with package.allow_sdist, the package volume writable,
// the wheelhouses read-only (the backend adds what runs it as root with
// only CHOWN, SETUID and SETGID, used once by the bootstrap before it
// drops to docker.user: see docker.InstallerConfig). A pure function.
func installerContainer(c Config, lim Limits, meta sandboxMeta, cmd []string) backend.InstallJob {
	spec := sandboxSpec(c.Docker, lim, meta)
	spec.Command = append([]string{"python3", "-I", "-c", installerBootstrap}, cmd...)
	spec.Env = []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/tmp",
		"LANG=C.UTF-8",
		"PYTHONUNBUFFERED=1",
		"PIP_NO_COLOR=1",
		"PIP_PROGRESS_BAR=off",
	}
	for i := range spec.Volumes {
		spec.Volumes[i].ReadOnly = false
	}
	job := backend.InstallJob{Spec: spec, Network: c.Package.IndexURL != "", ExecTmp: c.Package.AllowSdist}
	for i, dir := range c.Package.FindLinks {
		job.Binds = append(job.Binds, backend.Bind{Source: dir, Path: wheelhouseDir + "/" + strconv.Itoa(i)})
	}
	return job
}

// Installed is how many packages were installed into owner's session
// (sessionID != "") or owner's transient volume so far: the count the
// policy's package.max_per_session judges. Unknown and foreign sessions
// fail with ErrUnknownSession. Safe for concurrent use.
func (e *Executor) Installed(owner, sessionID string) (int, error) {
	if sessionID != "" {
		return e.sessions.installed(owner, sessionID)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if op := e.owners[owner]; op != nil {
		return len(op.installed), nil
	}
	return 0, nil
}

// Install installs one package and the dependencies it lacks (resolved,
// approved by req.Approve, then installed as an exact set: resolve.go) with
// short-lived installer containers into a package volume: a persistent
// session's own (the session's sandbox has
// it mounted read-only from the start, so the package is importable in the
// session's next call without a restart), or, without a session id, the
// owner's transient volume. Transient calls of an owner who installed a
// package start a cold sandbox that mounts that volume (pooled sandboxes
// have no owner); it lives until Close (or the next server start's reaping).
//
// An install into a session waits for the session's running call and
// holds the session meanwhile; installs into one owner's transient volume
// run one at a time. Bad names are an error wrapping
// ErrInvalidRequest before any container starts; an installer failure is a
// Result (see Status); an error means the install could not run. Safe for
// concurrent use.
func (e *Executor) Install(ctx context.Context, req InstallRequest) (*InstallResult, error) {
	if _, ok := e.be.(backend.Packages); !ok {
		return nil, fmt.Errorf("%w: install-package needs the docker backend (package volumes are Docker-only); preinstall packages in the sandbox image instead (image.packages; on Kubernetes, the image docker.image names that the nodes run)", ErrInvalidRequest)
	}
	if err := checkRequirement(req.Name, req.Specifier); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	for _, dir := range e.config().Package.FindLinks {
		if !filepath.IsAbs(dir) {
			return nil, fmt.Errorf("package.find_links entry %q is not an absolute path; fix the server's config", dir)
		}
	}
	if len(e.config().Package.FindLinks) == 0 && e.config().Package.IndexURL == "" {
		return nil, errors.New("no package source is configured: the operator sets package.find_links (a wheelhouse directory) or package.index_url")
	}
	meta := sandboxMeta{Kind: KindInstaller, Owner: req.Owner, Session: req.SessionID}
	var s *session
	if req.SessionID != "" {
		var err error
		if s, err = e.sessions.acquire(ctx, req.Owner, req.SessionID, req.progress); err != nil {
			return nil, err
		}
		defer e.sessions.release(s, true)
		meta.Packages = sessionVolume(s.id)
	} else {
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			return nil, ErrClosed
		}
		op := e.owners[req.Owner]
		if op == nil {
			op = &ownerPackages{volume: e.ownerVolumeName(req.Owner), sem: make(chan struct{}, 1)}
			e.owners[req.Owner] = op
		}
		meta.Packages = op.volume
		e.mu.Unlock()
		select {
		case op.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for your running install: %w", ctx.Err())
		}
		defer func() { <-op.sem }()
	}
	res, err := e.installResolved(ctx, meta, req)
	if err != nil || res.Status != "ok" || len(res.Packages) == 0 {
		return res, err
	}
	if s != nil {
		e.sessions.addPackage(s, req.Name+req.Specifier)
		return res, nil
	}
	e.mu.Lock()
	if op := e.owners[req.Owner]; op != nil {
		op.installed = append(op.installed, req.Name+req.Specifier)
	}
	e.mu.Unlock()
	return res, nil
}

// installerJob is one run of the installer container: resolving a
// request's dependencies or installing the resolved set (resolve.go).
type installerJob struct {
	verb, what string   // "resolving", "pdma==1.0": for messages
	pip, uv    []string // the command lines; uv nil means pip whatever package.installer says
	// capture, when set, takes the output lines that are data, not output.
	capture func(line string) bool
	// cfg is the configuration of the whole install (both runs).
	cfg *Config
}

// runInstaller runs the installer container to its end, the timeout or
// ctx's end; the container is removed whatever happens.
func (e *Executor) runInstaller(ctx context.Context, meta sandboxMeta, req InstallRequest, job installerJob) (*InstallResult, error) {
	c := job.cfg // one configuration for the whole install
	lim, err := resolveLimits(c.Docker, Limits{})
	if err != nil {
		return nil, err
	}
	meta.Instance, meta.PID, meta.Host, meta.Created = e.instance, e.pid, e.host, time.Now()
	e.self.stamp(&meta)
	requirement := job.what
	cmds, _ := json.Marshal(map[string][]string{"pip": job.pip, "uv": job.uv})
	uid, gid, _ := numericUser(c.Docker.User)
	want := c.Package.Installer
	if want == "" || job.uv == nil {
		want = "pip"
	}
	run := installerContainer(*c, lim, meta, []string{uid, gid, string(cmds), want})
	timeout := c.Package.Timeout.D()
	if timeout <= 0 {
		timeout = defaultInstallTimeout
	}
	req.progress("starting the installer: " + job.verb + " " + requirement)
	t0 := time.Now()
	var sb *sandbox
	abandoned := false
	defer func() { e.destroy(sb) }()
	started := func(id string) bool {
		sb = &sandbox{id: id, meta: meta, lim: lim, quit: make(chan struct{})}
		if !e.track(sb) {
			e.removeContainer(id)
			sb, abandoned = nil, true
			return false
		}
		return true
	}
	out := &installOutput{max: maxInstallOutput, progress: req.progress, capture: job.capture}
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stopBeat := make(chan struct{})
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				req.progress(fmt.Sprintf("%s %s (%.0f s)", job.verb, requirement, time.Since(t0).Seconds()))
			case <-stopBeat:
				return
			}
		}
	}()
	exit, err := e.be.(backend.Packages).Install(ictx, run, out, started)
	close(stopBeat)
	out.flush()
	res := &InstallResult{Package: req.Name, Installer: "pip"}
	switch {
	case err == nil:
	case abandoned:
		return nil, ErrClosed
	case ctx.Err() != nil:
		return nil, fmt.Errorf("install cancelled: %w", ctx.Err())
	case ictx.Err() != nil:
		e.destroy(sb)
		res.Status = "timeout"
		res.Message = fmt.Sprintf("%s %s took longer than %s (package.timeout); the installer was stopped and nothing was installed", job.verb, requirement, timeout)
	default:
		return nil, err
	}
	res.Output, res.OutputTruncated = out.result()
	res.DurationMS = float64(time.Since(t0).Microseconds()) / 1000
	if strings.Contains(res.Output, "installer: uv") {
		res.Installer = "uv"
	}
	if res.Status == "timeout" {
		return res, nil
	}
	switch {
	case exit == 0:
		res.Status = "ok"
		res.Version = installedVersion(res.Output, req.Name)
		res.Message = fmt.Sprintf("installed %s %s", req.Name, res.Version)
	case strings.Contains(res.Output, "No matching distribution found") || strings.Contains(res.Output, "not found in the package registry") ||
		strings.Contains(res.Output, "was not found in the provided package locations"):
		res.Status = "not_found"
		res.Message = fmt.Sprintf("no distribution of %s is available from %s", requirement, e.sources())
		if !c.Package.AllowSdist {
			res.Message += " (only wheels are installed: package.allow_sdist is off)"
		}
	default:
		res.Status = "error"
		res.Message = fmt.Sprintf("%s %s failed (installer exit code %d); see output", job.verb, requirement, exit)
	}
	return res, nil
}

// sources describes where packages come from, for messages.
func (e *Executor) sources() string {
	var parts []string
	if n := len(e.config().Package.FindLinks); n > 0 {
		parts = append(parts, fmt.Sprintf("the wheelhouse (package.find_links: %s)", strings.Join(e.config().Package.FindLinks, ", ")))
	}
	if e.config().Package.IndexURL != "" {
		parts = append(parts, "the index "+e.config().Package.IndexURL+" (package.index_url)")
	}
	return strings.Join(parts, " or ")
}

// installedVersion reads "Successfully installed NAME-VERSION" (pip) or
// " + NAME==VERSION" (uv).
func installedVersion(output, name string) string {
	norm := func(s string) string { return strings.ToLower(strings.NewReplacer("_", "-", ".", "-").Replace(s)) }
	want := norm(name)
	for _, line := range strings.Split(output, "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "Successfully installed "); ok {
			for _, f := range strings.Fields(rest) {
				if i := strings.LastIndex(f, "-"); i > 0 && norm(f[:i]) == want {
					return f[i+1:]
				}
			}
		}
		if rest, ok := strings.CutPrefix(line, "+ "); ok {
			if n, v, ok := strings.Cut(rest, "=="); ok && norm(n) == want {
				return v
			}
		}
	}
	return ""
}

// installOutput keeps the installer's output (head and tail when over max)
// and reports each complete line as progress.
type installOutput struct {
	mu       sync.Mutex
	max      int
	head     []byte
	tail     []byte
	dropped  int64
	line     []byte
	progress func(string)
	capture  func(string) bool // takes data lines: not progress
}

func (o *installOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	half := o.max / 2
	for _, c := range p {
		if len(o.head) < half {
			o.head = append(o.head, c)
			continue
		}
		o.tail = append(o.tail, c)
	}
	if len(o.tail) > half {
		o.dropped += int64(len(o.tail) - half)
		o.tail = append(o.tail[:0], o.tail[len(o.tail)-half:]...)
	}
	o.line = append(o.line, p...)
	for {
		i := bytes.IndexByte(o.line, '\n')
		if i < 0 {
			break
		}
		o.emit(o.line[:i])
		o.line = o.line[i+1:]
	}
	if len(o.line) > 4096 {
		o.line = o.line[:0]
	}
	return len(p), nil
}

func (o *installOutput) emit(line []byte) {
	s := strings.TrimSpace(string(line))
	if o.capture != nil && o.capture(s) {
		return
	}
	if s != "" && o.progress != nil {
		if len(s) > 200 {
			s = s[:200] + "…"
		}
		o.progress(s)
	}
}

func (o *installOutput) flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.emit(o.line)
	o.line = nil
}

func (o *installOutput) result() (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dropped == 0 {
		return string(o.head) + string(o.tail), false
	}
	return fmt.Sprintf("%s\n[... %d bytes dropped ...]\n%s", o.head, o.dropped, o.tail), true
}

var _ io.Writer = (*installOutput)(nil)

// removeVolume removes a package volume; one still in use (an installer
// running) or gone is left alone: Close sweeps the executor's volumes and
// the next start reaps those of dead executors.
func (e *Executor) removeVolume(name string) {
	pk, ok := e.be.(backend.Packages)
	if name == "" || !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pk.RemoveVolume(ctx, name); err != nil {
		e.log.Warn("remove volume", "volume", name, "err", err)
	}
}

// reapVolumes removes package volumes, and the standard library volumes
// that older servers made (treevol.go), that keep is false for (by label).
func (e *Executor) reapVolumes(ctx context.Context, keep func(labels map[string]string) bool) int {
	pk, ok := e.be.(backend.Packages)
	if !ok {
		return 0
	}
	list, err := pk.Volumes(ctx, LabelKind)
	if err != nil {
		e.log.Warn("list volumes", "err", err)
		return 0
	}
	n := 0
	for _, v := range list {
		if k := v.Labels[LabelKind]; (k != KindPackages && k != KindStdlib) || keep(v.Labels) {
			continue
		}
		e.removeVolume(v.Name)
		n++
	}
	return n
}

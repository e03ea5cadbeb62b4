// Package install is the executor's package installation: the installer
// containers that resolve a requested package with its dependencies and
// install the resolved set into a package volume (Run), the checks that
// keep names and specifiers from ever reaching the installer's argv as
// anything else (Check), and the package volumes of owners and sessions
// (Volumes). It runs on a backend with package volumes
// (backend.Packages: Docker) and knows nothing of the executor: the
// executor hands it each installer container's spec and takes the
// containers into its own sandboxes (Setup), so that they carry its
// labels and its Close removes them.
package install

import (
	"bytes"
	"context"
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

// Dir is where a sandbox sees its package volume, read-only. The runner
// appends it to sys.path (after the standard library and the image's
// packages, so nothing installed shadows them) and calls
// importlib.invalidate_caches() before every run.
const Dir = "/opt/pdm-packages"

// wheelhouseDir is where package.find_links directories are mounted
// (read-only) in the installer, as wheelhouseDir/0, /1, ...
const wheelhouseDir = "/wheelhouse"

// maxOutput caps the installer output kept in a Result (head and tail
// kept, a marker in between).
const maxOutput = 64 << 10

// defaultTimeout applies when package.timeout is zero.
const defaultTimeout = 120 * time.Second

// Request asks for one package. Name and Specifier must already be
// judged by the policy; the executor checks them again (Check: PEP 508
// name, PEP 440 specifier characters) and never passes them through a
// shell.
type Request struct {
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

func (r Request) progress(msg string) {
	if r.Progress != nil {
		r.Progress(msg)
	}
}

// Result is the outcome of one install. Status is one of:
//
//	ok         installed; importable in the session's next call (or the
//	           owner's next transient call)
//	not_found  the wheelhouse/index has no distribution that matches
//	error      the installer failed (Output says why)
//	timeout    package.timeout passed; the installer was killed
type Result struct {
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

// Setup is what one install runs with: the backend, the configuration of
// the whole install (both of its runs), and the executor's side of each
// installer container.
type Setup struct {
	Backend backend.Packages
	Package config.Package
	// Installer readies one installer run. It returns the spec the
	// installer derives from (a sandbox's image, hardening and limits,
	// labelled as the executor's installer, the package volume in
	// Volumes) and track, which the run calls with the container's id
	// before the container starts.
	Installer func() (spec backend.Spec, track Track, err error)
}

// Track takes an installer container into the executor's sandboxes, so
// that its Close removes it. It returns what removes the container (the
// run calls it once it is over; a second call does nothing), or an error
// (the executor is closing: Track removed the container itself), which
// the install returns as is.
type Track func(id string) (remove func(), err error)

var (
	pep508Name = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$`)
	specChars  = regexp.MustCompile(`^[A-Za-z0-9.,=<>!~*+ ]*$`)
)

// maxPackageName bounds a package name (PyPI's longest are far shorter).
const maxPackageName = 128

// Check is the executor's own check of a name and specifier, whatever the
// caller validated: nothing that could be read as an option, a path, a URL
// or a marker reaches the installer's argv.
func Check(name, spec string) error {
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

// CheckSources says whether p names a package source an install can use:
// absolute wheelhouse directories (package.find_links) or an index
// (package.index_url). Its errors are the operator's to fix.
func CheckSources(p config.Package) error {
	for _, dir := range p.FindLinks {
		if !filepath.IsAbs(dir) {
			return fmt.Errorf("package.find_links entry %q is not an absolute path; fix the server's config", dir)
		}
	}
	if len(p.FindLinks) == 0 && p.IndexURL == "" {
		return errors.New("no package source is configured: the operator sets package.find_links (a wheelhouse directory) or package.index_url")
	}
	return nil
}

// bootstrap runs as root with only CHOWN, SETUID and SETGID: it gives the
// package volume to the sandbox user, drops to that user for good and
// execs the installer (argv[3] holds the pip and uv command lines;
// argv[4] the configured installer). No shell is involved.
const bootstrap = `import json, os, shutil, sys
uid, gid = int(sys.argv[1]), int(sys.argv[2])
cmds, want = json.loads(sys.argv[3]), sys.argv[4]
st = os.stat(` + "\"" + Dir + "\"" + `)
if (st.st_uid, st.st_gid) != (uid, gid):
    os.chown(` + "\"" + Dir + "\"" + `, uid, gid)
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
// exact requirements (resolve.go). Both install into Dir without
// resolving again (--no-deps: the set is what the policy judged, nothing
// more lands in the sandbox) and, unless package.allow_sdist, from wheels
// only (no setup.py runs). With no package.index_url there is no index at
// all, only the wheelhouses.
func installerArgs(p config.Package, wheelhouses int, requirements ...string) (pip, uv []string) {
	pip = []string{"python3", "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check", "--no-input",
		"--upgrade", "--no-deps", "--target", Dir}
	uv = []string{"uv", "pip", "install", "--python", "python3", "--no-cache", "--upgrade", "--no-deps", "--target", Dir}
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

// Container is the installer: spec (a sandbox's: the image and resource
// limits, read-only rootfs, the package volume in Volumes) running the
// bootstrap with cmd as its arguments, no network unless
// package.index_url is set, /tmp executable only with
// package.allow_sdist, the package volume writable, the wheelhouses
// read-only (the backend adds what runs it as root with only CHOWN,
// SETUID and SETGID, used once by the bootstrap before it drops to
// docker.user: see docker.InstallerConfig). A pure function.
func Container(spec backend.Spec, p config.Package, cmd []string) backend.InstallJob {
	spec.Command = append([]string{"python3", "-I", "-c", bootstrap}, cmd...)
	spec.Env = []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/tmp",
		"LANG=C.UTF-8",
		"PYTHONUNBUFFERED=1",
		"PIP_NO_COLOR=1",
		"PIP_PROGRESS_BAR=off",
	}
	spec.Volumes = append([]backend.Volume(nil), spec.Volumes...)
	for i := range spec.Volumes {
		spec.Volumes[i].ReadOnly = false
	}
	job := backend.InstallJob{Spec: spec, Network: p.IndexURL != "", ExecTmp: p.AllowSdist}
	for i, dir := range p.FindLinks {
		job.Binds = append(job.Binds, backend.Bind{Source: dir, Path: wheelhouseDir + "/" + strconv.Itoa(i)})
	}
	return job
}

// job is one run of the installer container: resolving a request's
// dependencies or installing the resolved set (resolve.go).
type job struct {
	verb, what string   // "resolving", "pdma==1.0": for messages
	pip, uv    []string // the command lines; uv nil means pip whatever package.installer says
	// capture, when set, takes the output lines that are data, not output.
	capture func(line string) bool
}

// run runs the installer container to its end, the timeout or ctx's end;
// the container is removed whatever happens.
func run(ctx context.Context, s Setup, req Request, j job) (*Result, error) {
	base, track, err := s.Installer()
	if err != nil {
		return nil, err
	}
	requirement := j.what
	cmds, _ := json.Marshal(map[string][]string{"pip": j.pip, "uv": j.uv})
	uid, gid, found := strings.Cut(base.User, ":") // numeric: the executor checked docker.user
	if !found {
		gid = uid
	}
	want := s.Package.Installer
	if want == "" || j.uv == nil {
		want = "pip"
	}
	spec := Container(base, s.Package, []string{uid, gid, string(cmds), want})
	timeout := s.Package.Timeout.D()
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	req.progress("starting the installer: " + j.verb + " " + requirement)
	t0 := time.Now()
	remove := func() {}
	var abandoned error
	defer func() { remove() }()
	started := func(id string) bool {
		r, err := track(id)
		if err != nil {
			abandoned = err
			return false
		}
		remove = r
		return true
	}
	out := &output{max: maxOutput, progress: req.progress, capture: j.capture}
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stopBeat := make(chan struct{})
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				req.progress(fmt.Sprintf("%s %s (%.0f s)", j.verb, requirement, time.Since(t0).Seconds()))
			case <-stopBeat:
				return
			}
		}
	}()
	exit, err := s.Backend.Install(ictx, spec, out, started)
	close(stopBeat)
	out.flush()
	res := &Result{Package: req.Name, Installer: "pip"}
	switch {
	case err == nil:
	case abandoned != nil:
		return nil, abandoned
	case ctx.Err() != nil:
		return nil, fmt.Errorf("install cancelled: %w", ctx.Err())
	case backend.Ended(ictx) != nil:
		remove()
		res.Status = "timeout"
		res.Message = fmt.Sprintf("%s %s took longer than %s (package.timeout); the installer was stopped and nothing was installed", j.verb, requirement, timeout)
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
		res.Message = fmt.Sprintf("no distribution of %s is available from %s", requirement, sources(s.Package))
		if !s.Package.AllowSdist {
			res.Message += " (only wheels are installed: package.allow_sdist is off)"
		}
	default:
		res.Status = "error"
		res.Message = fmt.Sprintf("%s %s failed (installer exit code %d); see output", j.verb, requirement, exit)
	}
	return res, nil
}

// sources describes where packages come from, for messages.
func sources(p config.Package) string {
	var parts []string
	if n := len(p.FindLinks); n > 0 {
		parts = append(parts, fmt.Sprintf("the wheelhouse (package.find_links: %s)", strings.Join(p.FindLinks, ", ")))
	}
	if p.IndexURL != "" {
		parts = append(parts, "the index "+p.IndexURL+" (package.index_url)")
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

// output keeps the installer's output (head and tail when over max) and
// reports each complete line as progress.
type output struct {
	mu       sync.Mutex
	max      int
	head     []byte
	tail     []byte
	dropped  int64
	line     []byte
	progress func(string)
	capture  func(string) bool // takes data lines: not progress
}

func (o *output) Write(p []byte) (int, error) {
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

func (o *output) emit(line []byte) {
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

func (o *output) flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.emit(o.line)
	o.line = nil
}

func (o *output) result() (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dropped == 0 {
		return string(o.head) + string(o.tail), false
	}
	return fmt.Sprintf("%s\n[... %d bytes dropped ...]\n%s", o.head, o.dropped, o.tail), true
}

var _ io.Writer = (*output)(nil)

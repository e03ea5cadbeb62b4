package executor

import (
	"context"
	"fmt"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/internal/install"
)

// PackagesDir is where a sandbox sees its package volume, read-only. The
// runner appends it to sys.path (after the standard library and the
// image's packages, so nothing installed shadows them) and calls
// importlib.invalidate_caches() before every run.
const PackagesDir = install.Dir

// Kinds of the other labelled Docker objects: package volumes and the
// short-lived installer containers (reaped like sandboxes when their
// executor is gone).
const (
	KindPackages  = "packages"
	KindInstaller = "installer"
)

// InstallRequest, InstallResult and Resolved are the package
// installation's (internal/install, which documents them): Install takes
// and returns them as they are.
type (
	InstallRequest = install.Request
	InstallResult  = install.Result
	Resolved       = install.Resolved
)

func sessionVolume(sessionID string) string { return install.SessionVolume(sessionID) }

func volumeLabels(meta sandboxMeta) map[string]string {
	l := meta.labels()
	l[backend.LabelKind] = KindPackages
	return l
}

// leftoverVolumes selects, by their labels, the package volumes and the
// standard library volumes that older servers made that keep is false for.
func leftoverVolumes(keep func(labels map[string]string) bool) func(map[string]string) bool {
	return func(l map[string]string) bool {
		k := l[backend.LabelKind]
		return (k == KindPackages || k == backend.KindStdlib) && !keep(l)
	}
}

// Installed is how many packages were installed into owner's session
// (sessionID != "") or owner's transient volume so far: the count the
// policy's package.max_per_session judges. Unknown and foreign sessions
// fail with ErrUnknownSession. Safe for concurrent use.
func (e *Executor) Installed(owner, sessionID string) (int, error) {
	if sessionID == "" {
		return e.volumes.Installed(owner), nil
	}
	return e.sessions.installed(owner, sessionID)
}

// Install installs one package and the dependencies it lacks (resolved,
// approved by req.Approve, then installed as an exact set: install.Run)
// with short-lived installer containers into a package volume: a
// persistent session's own (the session's sandbox has it mounted
// read-only from the start, so the package is importable in the session's
// next call without a restart), or, without a session id, the owner's
// transient volume. Transient calls of an owner who installed a package
// start a cold sandbox that mounts that volume (pooled sandboxes have no
// owner); it lives until Close (or the next server start's reaping).
//
// An install into a session waits for the session's running call and
// holds the session meanwhile; installs into one owner's transient volume
// run one at a time. Bad names are an error wrapping
// ErrInvalidRequest before any container starts; an installer failure is a
// Result (see Status); an error means the install could not run. Safe for
// concurrent use.
func (e *Executor) Install(ctx context.Context, req InstallRequest) (*InstallResult, error) {
	pk, ok := e.be.(backend.Packages)
	if !ok {
		return nil, fmt.Errorf("%w: install-package needs the docker backend (package volumes are Docker-only); preinstall packages in the sandbox image instead (image.packages; on Kubernetes, the image docker.image names that the nodes run)", ErrInvalidRequest)
	}
	if err := install.Check(req.Name, req.Specifier); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	}
	c := e.config() // one configuration for the whole install
	if err := install.CheckSources(c.Package); err != nil {
		return nil, err
	}
	meta := sandboxMeta{Kind: KindInstaller, Owner: req.Owner, Session: req.SessionID}
	var s *session
	if req.SessionID != "" {
		var err error
		if s, err = e.sessions.acquire(ctx, req.Owner, req.SessionID, req.Progress); err != nil {
			return nil, err
		}
		defer e.sessions.release(s, true)
		meta.Packages = sessionVolume(s.id)
	} else {
		if e.closing() {
			return nil, ErrClosed
		}
		volume, release, err := e.volumes.Hold(ctx, req.Owner)
		if err != nil {
			return nil, err
		}
		defer release()
		meta.Packages = volume
	}
	// Each installer container is one of the executor's sandboxes, so
	// that it carries the executor's labels and Close removes it.
	installer := func() (backend.Spec, install.Track, error) {
		lim, err := resolveLimits(c.Docker, Limits{})
		if err != nil {
			return backend.Spec{}, nil, err
		}
		meta := e.owned(meta)
		track := func(id string) (func(), error) {
			sb := &sandbox{id: id, meta: meta, lim: lim, quit: make(chan struct{})}
			if !e.track(sb) {
				e.removeContainer(id)
				return nil, ErrClosed
			}
			return func() { e.destroy(sb) }, nil
		}
		return sandboxSpec(c.Docker, lim, meta), track, nil
	}
	res, err := install.Run(ctx, install.Setup{Backend: pk, Package: c.Package, Installer: installer}, req)
	if err != nil || res.Status != "ok" || len(res.Packages) == 0 {
		return res, err
	}
	if s != nil {
		e.sessions.addPackage(s, req.Name+req.Specifier)
	} else {
		e.volumes.Add(req.Owner, req.Name+req.Specifier)
	}
	return res, nil
}

// removeVolume removes a package volume (see install.Volumes.Remove).
func (e *Executor) removeVolume(name string) { e.volumes.Remove(name) }

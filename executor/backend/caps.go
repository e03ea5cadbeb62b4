package backend

import (
	"context"
	"errors"
	"io"
)

// Optional capabilities. The executor checks for each with a type
// assertion, next to Liveness and Shared; a backend without one simply
// does not offer what it gives (Kubernetes has none of these: its sandboxes
// get a namespace of their own, read the image's files, and have packages
// preinstalled in the image). Everything runtime-specific behind them (the
// Docker namespace holders, volumes, images, leftover cleanup) lives in the
// backend, as nomad keeps its pause container inside its Docker driver.

// ErrStale is what a Create wraps when what Prepare readied for the spec
// was gone (Docker: a namespace holder killed from outside). The caller
// releases it (removed false) and may Prepare and Create once more.
var ErrStale = errors.New("what was prepared for the sandbox is gone")

// Needs says what the executor wants Prepare to ready for one sandbox.
type Needs struct {
	// SharedNetwork: the sandbox may take turns with other sandboxes in
	// a network namespace without network (Spec.JoinNetwork), one at a
	// time. Only for sandboxes whose spec has NetworkDisabled.
	SharedNetwork bool
	// Tree: the sandbox may mount the backend's copy of the image's
	// interpreter tree (see Tree), when it has one.
	Tree bool
	// Helper is the spec of a small container the backend may run for
	// the executor (a namespace holder, a volume's filler): the
	// executor's labels, hardening and small limits. The backend sets its
	// command and its kind label.
	Helper Spec
	// KeepIdle bounds what the backend keeps idle for later sandboxes
	// (namespace holders); at least 1.
	KeepIdle int
}

// Prepared is what Prepare readied for one sandbox.
type Prepared struct {
	// Tree: the spec now mounts the backend's interpreter tree. When such
	// a sandbox does not start, the executor calls Tree.DropTree and
	// starts it again without.
	Tree bool
	// Release gives back what was readied, once the sandbox is gone;
	// removed says the backend confirmed its removal (else shared parts
	// are discarded, not reused). Nil when nothing was readied; called
	// at most once.
	Release func(removed bool)
}

// Preparer is implemented by backends that ready more than the Spec for a
// sandbox (Docker: a leased network namespace, the interpreter tree
// volume). The executor calls Prepare before each Create of a sandbox and
// the Release it returns once that sandbox is removed (or its Create
// failed).
type Preparer interface {
	// Prepare edits spec to use what it readied. Readying only saves
	// work: when it cannot, the spec is left as it was and err is nil;
	// err is ctx's end.
	Prepare(ctx context.Context, spec *Spec, needs Needs) (Prepared, error)
	// Warm readies, in the background of the caller, one shared part for
	// later sandboxes when fewer than floor are idle (Docker: a namespace
	// holder). It reports whether it readied one.
	Warm(ctx context.Context, needs Needs, floor int) bool
	// Idle is how many shared parts are idle now (tests, bench).
	Idle() int
}

// Tree is implemented by backends that can serve the image's interpreter
// tree from a copy that sandboxes start faster from (Docker on
// fuse-overlayfs: a named volume, whose pages stay cached across
// containers).
type Tree interface {
	// MakeTree has later Prepare calls (with Needs.Tree) mount a copy of
	// the top-level directory that holds stdlib (the standard library's
	// path a sandbox reported) of helper's image, making the copy when no
	// server has. Only once per backend; on failure (logged) sandboxes
	// keep reading the image's own files. ctx ends its wait for another
	// server's copy, never its own copying.
	MakeTree(ctx context.Context, helper Spec, stdlib string)
	// DropTree stops mounting the copy: a sandbox that mounted it did not
	// start. It reports whether this call stopped it (false: already
	// stopped).
	DropTree() bool
}

// Packages is implemented by backends with named volumes that hold
// packages installed at run time (Docker): an installer writes into one,
// and sandboxes mount it (Spec.Volumes).
type Packages interface {
	// Install runs job's installer until it exits or ctx ends, its stdout
	// and stderr written to out. started is called with the installer's
	// id once it exists and before it starts; false abandons it (the
	// caller is closing). The caller removes the installer with Remove,
	// also after an error. An image that is not there wraps
	// ErrImageMissing.
	Install(ctx context.Context, job InstallJob, out io.Writer, started func(id string) bool) (exitCode int, err error)
	// RemoveVolume removes a volume; an unknown one is not an error, one
	// still mounted is.
	RemoveVolume(ctx context.Context, name string) error
	// Volumes lists the volumes with a label key (e.g. the kind label),
	// with their labels.
	Volumes(ctx context.Context, key string) ([]VolumeInfo, error)
}

// InstallJob is one run of an installer into a package volume.
type InstallJob struct {
	// Spec is the sandbox spec the installer derives from: image, limits,
	// labels, and Volumes (the package volume, mounted writable). Its
	// Command is the installer's argv and Env its whole environment.
	Spec Spec
	// Network: the installer reaches the network (a package index).
	Network bool
	// ExecTmp: programs may run from /tmp (building source distributions).
	ExecTmp bool
	// Binds are host directories mounted read-only.
	Binds []Bind
}

// Bind is a host directory mounted read-only at Path.
type Bind struct {
	Source, Path string
}

// VolumeInfo is one volume as Packages.Volumes lists it.
type VolumeInfo struct {
	Name   string
	Labels map[string]string
}

// Stepper is implemented by backends that can take a sandbox's creation one
// step at a time, so that each step can be measured (python-docker-mcp
// bench). A sandbox made with Define is removed with Remove.
type Stepper interface {
	// Define creates spec's sandbox without attaching or starting it.
	Define(ctx context.Context, spec Spec) (id string, err error)
	// AttachDefined attaches to a defined sandbox's stdin and stdout
	// (stderr is dropped); the sandbox is not started.
	AttachDefined(ctx context.Context, id string) (*Sandbox, error)
	// Await registers a wait for the sandbox's next exit (before Start,
	// so that a fast exit is not missed) and returns what waits for it.
	Await(ctx context.Context, id string) (wait func() (exitCode int, err error))
	// Start starts a defined sandbox.
	Start(ctx context.Context, id string) error
}

// Host is implemented by backends whose sandboxes share a runtime with the
// server process itself (Docker: the server may run in a container of the
// daemon it uses), so that the reaper can tell a live server's sandboxes
// from a dead one's.
type Host interface {
	// Self is the id of the container this process runs in, "" on the
	// host or when unknown. It is looked up once.
	Self(ctx context.Context) string
	// Running says whether the runtime runs container id; an error means
	// it could not tell.
	Running(ctx context.Context, id string) (bool, error)
	// RemoveLeftovers removes what the backend made for itself and no
	// longer needs (Docker: tree volumes of images that are gone) and
	// returns how many it removed.
	RemoveLeftovers(ctx context.Context) int
}

// Package docker is the sandbox backend on a Docker daemon: one container
// per sandbox, hardened as ContainerConfig says, its program's stdin,
// stdout and stderr attached before it starts so that no output is lost.
// It implements backend.Backend over the Docker Engine Go SDK.
package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	pdmimage "github.com/python-docker-mcp/python-docker-mcp/executor/image"
)

// API is the part of the Docker client the backend uses.
type API interface {
	ContainerCreate(ctx context.Context, options client.ContainerCreateOptions) (client.ContainerCreateResult, error)
	ContainerAttach(ctx context.Context, id string, options client.ContainerAttachOptions) (client.ContainerAttachResult, error)
	ContainerStart(ctx context.Context, id string, options client.ContainerStartOptions) (client.ContainerStartResult, error)
	ContainerRemove(ctx context.Context, id string, options client.ContainerRemoveOptions) (client.ContainerRemoveResult, error)
	ContainerInspect(ctx context.Context, id string, options client.ContainerInspectOptions) (client.ContainerInspectResult, error)
	ContainerList(ctx context.Context, options client.ContainerListOptions) (client.ContainerListResult, error)
	ContainerWait(ctx context.Context, id string, options client.ContainerWaitOptions) client.ContainerWaitResult
	VolumeList(ctx context.Context, options client.VolumeListOptions) (client.VolumeListResult, error)
	VolumeInspect(ctx context.Context, volumeID string, options client.VolumeInspectOptions) (client.VolumeInspectResult, error)
	VolumeRemove(ctx context.Context, volumeID string, options client.VolumeRemoveOptions) (client.VolumeRemoveResult, error)
	ImageInspect(ctx context.Context, imageID string, inspectOpts ...client.ImageInspectOption) (client.ImageInspectResult, error)
	ContainerStatPath(ctx context.Context, containerID string, options client.ContainerStatPathOptions) (client.ContainerStatPathResult, error)
	CopyToContainer(ctx context.Context, containerID string, options client.CopyToContainerOptions) (client.CopyToContainerResult, error)
}

// createTimeout bounds the create call, which is never cancelled half-way
// (see Create).
const createTimeout = 60 * time.Second

// Backend runs sandboxes as containers of one Docker daemon. It is safe for
// concurrent use. Besides backend.Backend it has the optional capabilities
// (backend.Preparer, Tree, Packages, Stepper, Host): network namespace
// holders, the interpreter tree volume, package volumes and installers, a
// sandbox's creation step by step, and the server's own container.
type Backend struct {
	api    API
	log    *slog.Logger
	closer io.Closer // the client, closed by Close; nil when the caller owns it

	netns netHolders // network namespaces that sandboxes lease (netns.go)
	tree  treeState  // the interpreter tree volume (treevol.go)

	selfOnce sync.Once
	self     string // the server's own container (self.go)
}

var (
	_ backend.Backend  = (*Backend)(nil)
	_ backend.Preparer = (*Backend)(nil)
	_ backend.Tree     = (*Backend)(nil)
	_ backend.Packages = (*Backend)(nil)
	_ backend.Stepper  = (*Backend)(nil)
	_ backend.Host     = (*Backend)(nil)
)

// New returns a Backend on the daemon the client talks to. It does not
// contact the daemon, and leaves the client open at Close.
func New(api API) *Backend { return &Backend{api: api, log: slog.Default()} }

// Open connects to the daemon that DOCKER_HOST and friends name (see
// Connect) and returns a Backend on it that logs to log (nil:
// slog.Default()). Close closes the client.
func Open(ctx context.Context, log *slog.Logger) (*Backend, error) {
	cli, err := Connect(ctx)
	if err != nil {
		return nil, err
	}
	b := New(cli)
	b.closer = cli
	if log != nil {
		b.log = log
	}
	return b, nil
}

// Close removes the network namespace holders and closes the client when
// Open made it. Call it once no sandbox of this backend runs; the
// executor's Close does.
func (b *Backend) Close() error {
	b.closeNetworks()
	if b.closer == nil {
		return nil
	}
	return b.closer.Close()
}

// Connect returns a client of the daemon that DOCKER_HOST and friends name,
// with the API version negotiated. A daemon that does not answer is an
// error wrapping backend.ErrUnavailable that says where it looked.
func Connect(ctx context.Context) (*client.Client, error) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("%w: docker: %v", backend.ErrUnavailable, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		return nil, fmt.Errorf("%w: docker at %s: %v (is it running, and may this user use it? start Docker or set DOCKER_HOST)", backend.ErrUnavailable, cli.DaemonHost(), err)
	}
	return cli, nil
}

// Err classifies a Docker error of op for callers that branch with
// errors.Is: a missing image wraps backend.ErrImageMissing (with the
// command that builds it), an unreachable daemon backend.ErrUnavailable.
func Err(op, image string, err error) error {
	switch {
	case err == nil:
		return nil
	case client.IsErrConnectionFailed(err):
		return fmt.Errorf("%s: %w: %v (start Docker or set DOCKER_HOST)", op, backend.ErrUnavailable, err)
	case cerrdefs.IsNotFound(err) && image != "" && strings.Contains(err.Error(), image):
		return missingImage(op, image)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Create creates the container, attaches its streams, then starts it. The
// create call is not cancelled with ctx (a create aborted on the client
// side may still complete in the daemon and leave an untracked container);
// attach and start honour ctx. Whatever fails after the create removes the
// container.
func (b *Backend) Create(ctx context.Context, spec backend.Spec) (_ *backend.Sandbox, err error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.JoinNetwork != "" {
		defer func() {
			if err != nil && ctx.Err() == nil && !b.holderRunning(context.WithoutCancel(ctx), spec.JoinNetwork) {
				err = fmt.Errorf("%w: the network namespace's holder %s no longer runs: %w", backend.ErrStale, shortID(spec.JoinNetwork), err)
			}
		}()
	}
	cfg, host := ContainerConfig(spec)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	created, err := b.api.ContainerCreate(cctx, client.ContainerCreateOptions{Config: cfg, HostConfig: host})
	cancel()
	if err != nil {
		return nil, Err("create sandbox", spec.Image, err)
	}
	id := created.ID
	defer func() {
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
			defer cancel()
			b.Remove(rctx, id)
		}
	}()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	att, err := b.api.ContainerAttach(ctx, id, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		if cerr := backend.Ended(ctx); cerr != nil {
			return nil, fmt.Errorf("attach sandbox: %w", cerr)
		}
		return nil, Err("attach sandbox", "", err)
	}
	conn := att.HijackedResponse
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	defer func() {
		if err != nil {
			// Output the program wrote before start failed must not hold
			// the demultiplexer on a pipe that nobody will read.
			conn.Close()
			outR.Close()
			errR.Close()
		}
	}()
	go func() {
		_, err := stdcopy.StdCopy(outW, errW, conn.Reader)
		if err == nil {
			err = io.EOF
		}
		outW.CloseWithError(err)
		errW.CloseWithError(err)
	}()
	if _, err := b.api.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		if cerr := backend.Ended(ctx); cerr != nil {
			return nil, fmt.Errorf("start sandbox: %w: %w", backend.ErrStart, cerr)
		}
		if client.IsErrConnectionFailed(err) {
			return nil, Err("start sandbox", "", err)
		}
		return nil, fmt.Errorf("start sandbox: %w: %v", backend.ErrStart, err)
	}
	return backend.NewSandbox(id, stdin{&conn}, outR, errR, func() error {
		conn.Close()
		// Unblocks the demultiplexer should a stream be left unread.
		outR.Close()
		errR.Close()
		return nil
	}), nil
}

// stdin is the attach connection's writing half; Close half-closes it,
// so the program sees EOF.
type stdin struct{ conn *client.HijackedResponse }

func (s stdin) Write(p []byte) (int, error) { return s.conn.Conn.Write(p) }
func (s stdin) Close() error                { return s.conn.CloseWrite() }

// Remove force-removes the container (and its anonymous volumes); an
// unknown id is not an error.
func (b *Backend) Remove(ctx context.Context, id string) error {
	_, err := b.api.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return Err("remove sandbox "+shortID(id), "", err)
	}
	return nil
}

// List returns the containers, running or not, whose labels include all of
// labels; nil or empty labels: every container carrying backend.LabelKind.
func (b *Backend) List(ctx context.Context, labels map[string]string) ([]backend.Info, error) {
	if err := backend.ValidateLabels(labels); err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	f := make(client.Filters)
	for k, v := range labels {
		f = f.Add("label", k+"="+v)
	}
	if len(labels) == 0 {
		f = f.Add("label", backend.LabelKind)
	}
	res, err := b.api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, Err("list sandboxes", "", err)
	}
	out := make([]backend.Info, 0, len(res.Items))
	for _, c := range res.Items {
		l, a := splitLabels(c.Labels)
		out = append(out, backend.Info{
			ID: c.ID, Labels: l, Annotations: a,
			Created:  time.Unix(c.Created, 0).UTC(),
			Removing: c.State == "removing",
		})
	}
	return out, nil
}

// State inspects the container.
func (b *Backend) State(ctx context.Context, id string) (backend.State, error) {
	res, err := b.api.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return backend.State{}, fmt.Errorf("sandbox %s: %w", shortID(id), backend.ErrNotFound)
	}
	if err != nil {
		return backend.State{}, Err("inspect sandbox "+shortID(id), "", err)
	}
	st := res.Container.State
	if st == nil {
		return backend.State{}, fmt.Errorf("inspect sandbox %s: the daemon sent no state", shortID(id))
	}
	out := backend.State{
		Running:   st.Running,
		Exited:    !st.Running && (st.Status == "exited" || st.Status == "dead"),
		ExitCode:  st.ExitCode,
		OOMKilled: st.OOMKilled,
		Reason:    string(st.Status),
	}
	if st.OOMKilled {
		out.Reason = "OOMKilled"
	}
	out.StartedAt = parseTime(st.StartedAt)
	out.FinishedAt = parseTime(st.FinishedAt)
	return out, nil
}

// parseTime reads Docker's RFC 3339 times; its zero time ("0001-01-01…")
// and anything unreadable are the zero time.
func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() <= 1 {
		return time.Time{}
	}
	return t.UTC()
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// IsNotFound says whether err is the daemon's "no such object".
func IsNotFound(err error) bool {
	return cerrdefs.IsNotFound(err) || errors.Is(err, backend.ErrNotFound)
}

var _ backend.Pinger = (*Backend)(nil)

// Ping says whether the daemon answers now (the server's /healthz asks).
// An API without a Ping (a test's) counts as answering. An error wraps
// backend.ErrUnavailable.
func (b *Backend) Ping(ctx context.Context) error {
	p, ok := b.api.(interface {
		Ping(context.Context, client.PingOptions) (client.PingResult, error)
	})
	if !ok {
		return nil
	}
	if _, err := p.Ping(ctx, client.PingOptions{}); err != nil {
		return fmt.Errorf("%w: the Docker daemon does not answer: %v", backend.ErrUnavailable, err)
	}
	return nil
}

// missingImage is op's error for a sandbox image the daemon lacks, with
// what to do: image build for an image python-docker-mcp builds, pull or
// build it yourself for any other (image build would not help).
func missingImage(op, image string) error {
	if !pdmimage.Managed(image) {
		return fmt.Errorf("%s: %w: %s (pull it or build it yourself: docker.image names it)", op, backend.ErrImageMissing, image)
	}
	return fmt.Errorf("%s: %w: %s (build it with `python-docker-mcp image build`)", op, backend.ErrImageMissing, image)
}

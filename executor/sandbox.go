package executor

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
	"github.com/python-docker-mcp/python-docker-mcp/executor/runner"
)

// startupTimeout bounds creating a sandbox up to the runner's ready frame.
const startupTimeout = 60 * time.Second

// idleFrameLimit caps a frame from the sandbox when no request is waiting
// for one: the ready frame, or anything the sandbox has no business sending.
const idleFrameLimit = 64 << 10

// sandbox is one running container with its runner attached. Its methods
// are not safe for concurrent use: transient sandboxes have one caller and
// persistent ones are serialized by their session.
type sandbox struct {
	id string
	// release gives back what the backend prepared for the sandbox (a
	// leased network namespace) once it is removed; nil = nothing.
	release func(removed bool)
	meta    sandboxMeta
	lim     Limits
	// preloaded are the modules its runner imported before its first
	// call (a pooled sandbox's class); nil for a cold one.
	preloaded []string
	box       *backend.Sandbox // the attach streams; nil before they exist
	frames    chan frameOrErr
	stderr    *tailBuffer
	nextID    uint64
	// limit is the largest frame the reader accepts now: the reply cap of
	// the request in flight, idleFrameLimit otherwise.
	limit atomic.Int64
	dead  atomic.Bool
	once  sync.Once     // destroy (or detach) runs once
	quit  chan struct{} // closed by destroy: the frame reader stops
	// shared: the sandbox of a session on a Shared backend, which other
	// servers may attach to and write to. Its reader drops frames while
	// no request of this server waits (they answer another server's
	// requests), and roundTrip skips replies with another nonce.
	shared  bool
	waiting atomic.Bool // a request of this server waits for its reply
	ended   atomic.Bool // the reader hit the stream's end or an error
	// recorded: a session record names this sandbox, so it outlives this
	// server (Close detaches from it instead of removing it).
	recorded atomic.Bool
}

// alive says the sandbox was not destroyed and its runner has not hung up
// (an idle runner sends nothing, so anything pending is its end; a shared
// sandbox's pending frames may answer another server).
func (sb *sandbox) alive() bool {
	if sb.shared {
		return !sb.dead.Load() && !sb.ended.Load()
	}
	return !sb.dead.Load() && len(sb.frames) == 0
}

type frameOrErr struct {
	data []byte
	err  error
}

// tailBuffer keeps the last max bytes written: the runner's diagnostics.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// start creates a sandbox through the backend and waits for the runner's
// ready frame. On failure nothing is left behind.
func (e *Executor) start(ctx context.Context, meta sandboxMeta, lim Limits) (_ *sandbox, err error) {
	defer func() { e.counts.countStart(err) }()
	sb, tree, err := e.startWith(ctx, meta, lim, true)
	if t, ok := e.be.(backend.Tree); ok && err != nil && tree && err != ErrClosed && ctx.Err() == nil && t.DropTree() {
		// The backend's copy of the interpreter tree may be gone (a volume
		// removed behind the executor's back): sandboxes read the image's
		// own files from now on.
		sb, _, err = e.startWith(ctx, meta, lim, false)
	}
	return sb, err
}

// StartAllowance is how long a sandbox start may take on top of the call's
// timeout: a call with timeout T waits at most T + StartAllowance for its
// sandbox to become ready (and never more than the executor's own startup
// cap of 60 s), then fails with an error that says so.
const StartAllowance = 20 * time.Second

// startWithin starts a sandbox, waiting at most runTimeout+StartAllowance.
func (e *Executor) startWithin(ctx context.Context, meta sandboxMeta, lim Limits, runTimeout time.Duration) (*sandbox, error) {
	budget := runTimeout + StartAllowance
	sctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	sb, err := e.start(sctx, meta, lim)
	if err != nil && ctx.Err() == nil && sctx.Err() != nil {
		return nil, fmt.Errorf("start sandbox: the sandbox was not ready within %s (the call's timeout %s plus a start allowance of %s); the backend (Docker daemon or cluster) may be busy or have no room for it, try again: %w",
			budget, runTimeout, StartAllowance, err)
	}
	return sb, err
}

// startWith is start; with tree, the sandbox may mount the backend's copy
// of the interpreter tree (see backend.Tree), and mounted says it did.
func (e *Executor) startWith(ctx context.Context, meta sandboxMeta, lim Limits, tree bool) (_ *sandbox, mounted bool, _ error) {
	meta = e.owned(meta)
	if _, ok := e.be.(backend.Packages); !ok {
		meta.Packages = "" // package volumes need a backend with them
	}
	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	spec := sandboxSpec(e.config().Docker, lim, meta)
	// On a Shared backend, persistent sandboxes (sessions', and the pool's
	// for new sessions) are shared between servers (shared.go).
	shared := e.shared != nil && meta.Kind == backend.KindPersistent
	if shared {
		spec.Detachable = true
		if d := e.config().idleExit(); d > 0 {
			spec.Env = append(spec.Env, fmt.Sprintf("PDM_IDLE_EXIT=%d", int64(d/time.Second)))
		}
	}
	box, prep, err := e.createSandbox(ctx, meta, spec, tree)
	if err != nil {
		return nil, prep.Tree, e.createErr(err)
	}
	sb := e.wrap(box, meta, lim, shared, true)
	sb.release = prep.Release
	if !e.track(sb) {
		box.Close()
		e.returnPrepared(sb, e.removeContainer(sb.id))
		return nil, false, ErrClosed
	}
	fail := func(op string, err error) (*sandbox, bool, error) {
		e.destroy(sb)
		return nil, prep.Tree, fmt.Errorf("%s: %w", op, err)
	}
	go e.sendRunner(sb.box.Stdin) // a runner that never reads it sends no ready frame
	select {
	case f, ok := <-sb.frames:
		if !ok || f.err != nil {
			var err error = errors.New("no frame")
			if ok {
				err = f.err
			}
			return fail("start sandbox", fmt.Errorf("runner did not start: %v; runner stderr: %q", err, sb.stderr.String()))
		}
		var ready protocol.Ready
		if err := json.Unmarshal(f.data, &ready); err != nil || ready.Op != "ready" {
			return fail("start sandbox", fmt.Errorf("unexpected first frame from runner: %.200q", f.data))
		}
		e.runner.Count(ready.Runner)
		sb.waiting.Store(false)
	case <-ctx.Done():
		return fail("start sandbox", fmt.Errorf("waiting for the runner: %w", ctx.Err()))
	}
	if e.pool() == nil && e.runner.Ask() {
		// Without a transient pool to ask, the executor's first fresh
		// sandboxes are asked for the runner's compiled code, before
		// anything else runs in them (a preload of nothing: one round
		// trip of a few ms, a few times at most: see protocol.Codes).
		resp, f, err := e.roundTrip(ctx, sb, &protocol.Preload{Modules: []string{}, RunnerCode: true}, startupTimeout, false, preloadReplyLimit)
		switch {
		case f != nil:
			return fail("start sandbox", errors.New(f.reason))
		case err != nil:
			return fail("start sandbox", err)
		case !e.runner.Keep(resp.RunnerCode):
			e.log.Debug("the sandbox did not give the runner's compiled code")
		}
	}
	return sb, prep.Tree, nil
}

// sendRunner writes the runner's preamble to a new sandbox's stdin, where
// its bootstrap (protocol.Bootstrap) reads it first: the source, and the
// compiled code once a sandbox gave it (protocol.Codes). Nothing else is
// written to the stream before the runner's ready frame, which comes
// after the preamble was read; a sandbox that ends first closes the
// stream and the write fails.
func (e *Executor) sendRunner(stdin io.Writer) {
	code, magic, _ := e.runner.Code()
	_ = protocol.WritePreamble(stdin, runner.Source, code, magic)
}

// createSandbox creates spec through the backend, with what a Preparer
// backend readies for it (a leased network namespace; with tree, its copy
// of the interpreter tree). A Create that failed because what was readied
// is gone (backend.ErrStale: a holder removed or killed from outside) is
// tried once more, then without a shared namespace; readying only saves
// work, so the sandbox then gets its own rather than the call failing.
func (e *Executor) createSandbox(ctx context.Context, meta sandboxMeta, spec backend.Spec, tree bool) (*backend.Sandbox, backend.Prepared, error) {
	p, ok := e.be.(backend.Preparer)
	if !ok {
		box, err := e.be.Create(ctx, spec)
		return box, backend.Prepared{}, err
	}
	needs := e.needs(meta)
	needs.Tree = tree
	for try := 0; ; try++ {
		s := spec
		s.Volumes = slices.Clone(spec.Volumes)
		prep, err := p.Prepare(ctx, &s, needs)
		if err != nil {
			return nil, backend.Prepared{}, err
		}
		box, err := e.be.Create(ctx, s)
		if err == nil {
			return box, prep, nil
		}
		if prep.Release != nil {
			prep.Release(false)
		}
		if !errors.Is(err, backend.ErrStale) || ctx.Err() != nil || try == 2 {
			return nil, backend.Prepared{Tree: prep.Tree}, err
		}
		needs.SharedNetwork = needs.SharedNetwork && try == 0
	}
}

// needs is what the executor asks a Preparer backend to ready for a
// sandbox of meta: any sandbox it starts with the network disabled may
// take turns in a shared network namespace.
func (e *Executor) needs(meta sandboxMeta) backend.Needs {
	n := backend.Needs{KeepIdle: e.maxIdleHolders()}
	if e.config().Docker.NetworkDisabled && (meta.Kind == backend.KindTransient || meta.Kind == backend.KindPersistent) {
		n.SharedNetwork = true
		n.Helper = e.helperSpec(backend.KindNetwork)
	}
	return n
}

// maxIdleHolders bounds the idle namespaces a backend keeps (on Docker,
// each is a shell waiting on its stdin, under 1 MiB); more are removed as
// they come back.
func (e *Executor) maxIdleHolders() int {
	return max(e.config().Pool.MaxSize+e.config().Pool.MaxConcurrentCreations, 4)
}

// holderFloor is how many idle namespaces the executor keeps ready while
// it has nothing else to start: enough for the creations the pools run at
// once plus calls that start cold, so a burst does not start them on its
// calls' path.
func (e *Executor) holderFloor() int {
	return min(2*e.config().Pool.MaxConcurrentCreations+2, e.maxIdleHolders())
}

// topUpNetworks has a Preparer backend ready one namespace in the
// background when fewer than holderFloor are idle (none while one is
// readied). The transient pool calls it when it has nothing to create.
func (e *Executor) topUpNetworks() {
	p, ok := e.be.(backend.Preparer)
	if !ok || !e.config().Docker.NetworkDisabled || p.Idle() >= e.holderFloor() || !e.topping.CompareAndSwap(false, true) {
		return
	}
	if !e.bgAdd() {
		e.topping.Store(false)
		return
	}
	go func() {
		defer e.bg.Done()
		defer e.topping.Store(false)
		if p.Warm(context.Background(), e.needs(sandboxMeta{Kind: backend.KindTransient}), e.holderFloor()) {
			e.pool().Signal() // the next one, if still below the floor
		}
	}()
}

// makeTree has a Tree backend copy the image's interpreter tree, which
// holds the standard library stdlib (as a fresh sandbox reported it), for
// later sandboxes to mount; in the background, until the executor closes.
func (e *Executor) makeTree(stdlib string) {
	t, ok := e.be.(backend.Tree)
	if !ok || stdlib == "" || !e.bgAdd() {
		return
	}
	go func() {
		defer e.bg.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-e.stop: // Close does not wait for another server's copy
				cancel()
			case <-ctx.Done():
			}
		}()
		t.MakeTree(ctx, e.helperSpec(backend.KindTree), stdlib)
	}()
}

// wrap makes a sandbox of an attach stream and starts reading its frames
// and stderr.
// A shared sandbox's first frame is let through when ready is set (a new
// sandbox's ready frame); later ones only while a request waits.
func (e *Executor) wrap(box *backend.Sandbox, meta sandboxMeta, lim Limits, shared, ready bool) *sandbox {
	sb := &sandbox{id: box.ID, box: box, meta: meta, lim: lim, frames: make(chan frameOrErr, 1), stderr: &tailBuffer{max: 16 << 10}, quit: make(chan struct{}), shared: shared}
	sb.limit.Store(idleFrameLimit)
	sb.waiting.Store(ready)
	if shared {
		// Request ids unlikely to repeat another server's, so that an
		// interrupt never names a request of another server.
		sb.nextID = randomUint52()
	}
	limit := sb.limit.Load
	if shared {
		// Another server's reply may be as large as any reply: it is
		// read (and dropped), so the stream stays in step.
		max := e.config().maxReplyLimit()
		limit = func() int64 { return max }
	}
	go io.Copy(sb.stderr, box.Stderr)
	go func() {
		defer sb.ended.Store(true)
		for {
			data, err := protocol.ReadFrame(box.Stdout, limit)
			if err == nil && shared && !sb.waiting.Load() {
				continue // no request of ours waits: another server's reply
			}
			if err != nil {
				sb.ended.Store(true)
			}
			select {
			case sb.frames <- frameOrErr{data, err}:
			case <-sb.quit:
				close(sb.frames)
				return
			}
			if err != nil {
				close(sb.frames)
				return
			}
		}
	}()
	return sb
}

// createErr says what to do about a backend's Create error.
func (e *Executor) createErr(err error) error {
	if errors.Is(err, backend.ErrImageMissing) && !managedImage(e.config().Docker.Image) {
		return fmt.Errorf("create sandbox: %w: %s is not built by python-docker-mcp: pull it or build it yourself (docker.image names it)", ErrImageMissing, e.config().Docker.Image)
	}
	return err
}

// managedRepository is the repository of the image python-docker-mcp
// builds (image.ManagedRepository; the image package talks to Docker, the
// executor does not).
const managedRepository = "python-docker-mcp-sandbox"

// managedImage reports whether ref names an image python-docker-mcp builds
// (image.Managed).
func managedImage(ref string) bool {
	repo := ref
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	return repo == managedRepository
}

// destroy kills and removes a sandbox's container. It uses its own context:
// it runs after the caller's context may be gone.
func (e *Executor) destroy(sb *sandbox) {
	if sb == nil {
		return
	}
	sb.dead.Store(true)
	sb.once.Do(func() {
		close(sb.quit)
		if sb.box != nil {
			sb.box.Close()
		}
		e.returnPrepared(sb, e.removeContainer(sb.id))
		e.untrack(sb)
		// A persistent sandbox's package volume goes with its session
		// (Cleanup, expiry, Close, or a pooled sandbox never taken); a
		// restart of a live session keeps it.
		if sb.meta.Kind == backend.KindPersistent && sb.meta.Packages != "" && e.sessions.gone(sb.meta.Session) {
			e.removeVolume(sb.meta.Packages)
		}
	})
}

// detach ends this server's attach stream to a sandbox without removing
// the sandbox (other servers may use it).
func (e *Executor) detach(sb *sandbox) {
	sb.dead.Store(true)
	sb.once.Do(func() {
		close(sb.quit)
		if sb.box != nil {
			sb.box.Close()
		}
		e.untrack(sb)
	})
}

// returnPrepared gives back what the backend prepared for sb, once.
func (e *Executor) returnPrepared(sb *sandbox, removed bool) {
	if sb.release != nil {
		sb.release(removed)
		sb.release = nil
	}
}

// removeContainer force-removes a container; a failure is remembered and
// retried by the reaper and by Close.
func (e *Executor) removeContainer(id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.be.Remove(ctx, id); err != nil {
		e.log.Warn("remove sandbox; will retry", "container", id, "err", err)
		e.mu.Lock()
		e.unremoved[id] = true
		e.mu.Unlock()
		return false
	}
	return true
}

// retryRemovals removes containers whose removal failed earlier (Docker was
// away, say).
func (e *Executor) retryRemovals() {
	e.mu.Lock()
	ids := make([]string, 0, len(e.unremoved))
	for id := range e.unremoved {
		ids = append(ids, id)
	}
	clear(e.unremoved)
	e.mu.Unlock()
	for _, id := range ids {
		e.removeContainer(id)
	}
}

// runnerResponse is the runner's answer to one request. It comes from
// inside the sandbox: protocol.DecodeReply and clip.Caps.Reply check it before use.
type runnerResponse = protocol.Reply

// outcome of one round trip when the runner did not answer.
type failure struct {
	status string // timeout, oom, killed
	reason string
}

// invalidReply is the reason of a sandbox killed for what it sent.
const invalidReply = "the sandbox sent an invalid reply"

// roundTrip sends one request and waits for its response, at most until
// hard: that timer is the server's own and no frame can stop it. If ctx
// ends first and interrupt is set, the runner is asked to interrupt the
// code and given grace to answer. A nil response comes with either a
// failure (the sandbox is then dead) or ctx's error.
//
// The answer must fit in limit bytes (checked before it is read), carry
// the request's id and a fresh random nonce, and decode; anything else
// kills the sandbox with status killed and invalidReply.
func (e *Executor) roundTrip(ctx context.Context, sb *sandbox, req protocol.Request, hard time.Duration, interrupt bool, limit int64) (*runnerResponse, *failure, error) {
	return e.exchange(ctx, sb, req, hard, interrupt, limit, nil)
}

// exchange is roundTrip that also takes output frames (a run with Stream)
// before the reply: each is handed to output, on the calling goroutine; an
// error from output (a frame out of order) kills the sandbox as an invalid
// reply. With output nil an output frame is an invalid reply.
func (e *Executor) exchange(ctx context.Context, sb *sandbox, req protocol.Request, hard time.Duration, interrupt bool, limit int64, output func(*protocol.Output) error) (*runnerResponse, *failure, error) {
	sb.nextID++
	id := sb.nextID
	nonce := randomHex(16)
	h := req.Head()
	h.ID, h.Nonce = id, nonce
	sb.limit.Store(limit)
	defer sb.limit.Store(idleFrameLimit)
	if sb.shared {
		sb.waiting.Store(true)
		defer sb.waiting.Store(false)
	}
	// A runner that takes no input holds the write: the limit, or ctx's end
	// (plus interruptGrace for a call that is interrupted), cuts it.
	grace := interruptGrace
	if !interrupt {
		grace = 0
	}
	if cutOff, err := protocol.WriteFrameWithin(ctx, sb.box.Stdin, req, hard, grace, func() { sb.box.Close() }); cutOff {
		e.destroy(sb)
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, &failure{status: "timeout", reason: "the runner did not take the request within the call's time limit; the sandbox was killed"}, nil
	} else if err != nil {
		return nil, e.diagnose(sb, "writing to the runner failed: "+err.Error()), nil
	}
	timer := time.NewTimer(hard)
	defer timer.Stop()
	done := ctx.Done()
	var cancelErr error
	for {
		select {
		case f, ok := <-sb.frames:
			if ok && errors.Is(f.err, protocol.ErrFrameTooLarge) {
				e.destroy(sb)
				return nil, &failure{status: "killed", reason: invalidReply + ": " + f.err.Error()}, nil
			}
			if !ok || f.err != nil {
				if cancelErr != nil {
					e.destroy(sb)
					return nil, nil, cancelErr
				}
				return nil, e.diagnose(sb, "the runner stopped"), nil
			}
			if sb.shared && int64(len(f.data)) > limit {
				e.destroy(sb)
				return nil, &failure{status: "killed", reason: fmt.Sprintf("%s: %v: a frame of %d bytes, the limit is %d bytes", invalidReply, protocol.ErrFrameTooLarge, len(f.data), limit)}, nil
			}
			if sb.shared && !protocol.NonceIs(f.data, nonce) {
				continue // the reply to another server's (or an earlier) request
			}
			if output != nil {
				o, isOutput, err := protocol.DecodeOutput(f.data, id, nonce)
				if err == nil && isOutput {
					err = output(o)
				}
				if err != nil {
					e.destroy(sb)
					return nil, &failure{status: "killed", reason: invalidReply + ": " + err.Error()}, nil
				}
				if isOutput {
					continue
				}
			}
			resp, err := protocol.DecodeReply(f.data, id, nonce)
			if err != nil {
				e.destroy(sb)
				return nil, &failure{status: "killed", reason: invalidReply + ": " + err.Error()}, nil
			}
			if cancelErr != nil {
				return nil, nil, cancelErr
			}
			return resp, nil, nil
		case <-done:
			cancelErr = ctx.Err()
			done = nil
			if !interrupt {
				e.destroy(sb)
				return nil, nil, cancelErr
			}
			_ = protocol.WriteRequest(sb.box.Stdin, &protocol.Interrupt{Header: protocol.Header{ID: id}})
			timer.Reset(interruptGrace)
		case <-timer.C:
			if cancelErr != nil {
				e.destroy(sb)
				return nil, nil, cancelErr
			}
			e.destroy(sb)
			return nil, &failure{status: "timeout", reason: fmt.Sprintf("the code ran past its time limit and did not stop within %s; the sandbox was killed", interruptGrace)}, nil
		}
	}
}

// interruptGrace is how long the runner gets to answer after the time
// limit or a cancel, before the container is killed. The runner itself
// gives user code runnerGrace to stop, then kills the process running it
// and answers, so a stuck call costs its session's state, not its
// container.
const (
	interruptGrace = 3 * time.Second
	runnerGrace    = time.Second
)

// oomSettle is how long diagnose waits for an OOM mark on a sandbox that
// ended by SIGKILL.
const oomSettle = 2 * time.Second

// diagnose finds out why a runner stopped answering: the container's state
// says whether the kernel's OOM killer struck. The sandbox is removed.
func (e *Executor) diagnose(sb *sandbox, what string) *failure {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f := &failure{status: "killed", reason: what}
	// The backend may learn of the end a little after the streams close.
	var st backend.State
	var err error
	for deadline := time.Now().Add(3 * time.Second); ; {
		st, err = e.be.State(ctx, sb.id)
		if err != nil || !st.Running || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Killed by SIGKILL but not (yet) marked OOM-killed: the daemon learns
	// of an OOM kill from an event of its own, which may come after the
	// exit (seen under gVisor's runsc, whose whole sandbox the kernel
	// kills: about one exit in five was read before its OOM mark). Read
	// again for a while before calling it a kill.
	for deadline := time.Now().Add(oomSettle); err == nil && st.Exited && st.ExitCode == 137 && !st.OOMKilled && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		if again, aerr := e.be.State(ctx, sb.id); aerr == nil {
			st = again
		}
	}
	if err == nil {
		if st.OOMKilled {
			f.status = "oom"
			f.reason = "the kernel's OOM killer stopped the sandbox"
		} else if st.Exited {
			f.reason = fmt.Sprintf("%s (exit code %d)", what, st.ExitCode)
			if st.ExitCode == 137 && sb.lim.Runtime != "" {
				// Seen under runsc: 3 of 40 OOM kills got no OOM mark
				// from the daemon within oomSettle.
				f.reason += fmt.Sprintf("; killed by SIGKILL under runtime %s, whose OOM kills the daemon does not always report: this may be the memory limit (%s)", sb.lim.Runtime, sizeText(sb.lim.Memory))
			}
		}
	}
	if diag := sb.stderr.String(); diag != "" {
		f.reason += "; runner stderr: " + diag
	}
	e.destroy(sb)
	return f
}

// errorOf unwraps a runner error frame of a file operation.
func errorOf(resp *runnerResponse) error {
	if resp.Status == "ok" {
		return nil
	}
	msg := "runner error"
	if resp.Error != nil {
		msg = resp.Error.Message
		switch resp.Error.Type {
		case "PathError":
			return fmt.Errorf("%w: %s", ErrInvalidPath, msg)
		case "FileNotFoundError":
			return fmt.Errorf("%w: %s", errNotExist, msg)
		}
	}
	return errors.New(msg)
}

// randomUint52 is a random id that JSON numbers carry exactly.
func randomUint52() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return binary.BigEndian.Uint64(b[:]) >> 12
}

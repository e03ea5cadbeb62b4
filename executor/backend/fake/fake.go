// Package fake is an in-process sandbox backend for unit tests of the
// executor's logic (pool, sessions, time limits, OOM, reaping) without a
// container runtime. Each sandbox is a goroutine that speaks the runner
// protocol (package protocol) over in-memory pipes and runs a tiny script
// language instead of Python, one statement per line of the code:
//
//	print TEXT     TEXT and a newline to stdout
//	stderr TEXT    TEXT and a newline to stderr
//	set NAME TEXT  a session global (kept across calls of one sandbox)
//	get NAME       the global's value and a newline to stdout
//	sleep MS       wait; past the run's timeout_ms the call answers
//	               status "timeout" and the session's globals are lost
//	hang           never answer, ignore interrupts (the server's own
//	               timer must end the call)
//	raise TYPE MSG status "error" with that exception
//	oom            the sandbox is killed as by the OOM killer (streams
//	               end, State says OOMKilled)
//	exit N         the program ends with exit code N (streams end)
//	output STREAM OFFSET TEXT
//	               an output frame as it is, whatever the request (a
//	               sandbox that sends them out of order or unasked)
//
// With a request's "stream", print and stderr also send their line as an
// output frame at once (protocol.Output), as the runner does.
//
// Anything else is an error reply (type FakeError), so a test that sends
// Python by mistake fails loudly. The fake is a test double of the runtime
// and runner, not of the sandbox's security: real-daemon tests hold that.
package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/protocol"
)

// Stdlib is where a fake sandbox says its standard library is (the preload
// reply's stdlib).
const Stdlib = "/usr/lib/python3.13"

// Backend is the fake runtime. The zero value is not usable: call New.
// Safe for concurrent use.
type Backend struct {
	// CreateDelay is how long each Create takes (honouring ctx).
	CreateDelay time.Duration
	// CreateHook, when set, is called first by every Create; an error it
	// returns is Create's.
	CreateHook func(spec backend.Spec) error
	// ResetHold, when set before the sandboxes are created, holds each
	// reset request until it is closed: a reset that takes long.
	ResetHold chan struct{}

	creates, removes, locks atomic.Int64

	mu    sync.Mutex
	seq   int
	boxes map[string]*box
	all   []*box // every sandbox ever created, for MaxRuns
	// held are the liveness records of the servers holding one.
	held map[string]bool
	// records are the session records (Cluster).
	records map[string]*backend.SessionRecord
}

// New returns an empty fake runtime.
func New() *Backend {
	return &Backend{boxes: map[string]*box{}, held: map[string]bool{}, records: map[string]*backend.SessionRecord{}}
}

// Liveness is the fake runtime with servers' liveness records
// (backend.Liveness), as on Kubernetes; Backend itself has none, as on
// Docker.
type Liveness struct{ *Backend }

var _ backend.Liveness = Liveness{}

// Hold records instance as alive until release.
func (l Liveness) Hold(ctx context.Context, instance string) (func(context.Context) error, error) {
	l.SetAlive(instance, true)
	return func(context.Context) error { l.SetAlive(instance, false); return nil }, nil
}

// Alive says whether instance holds a record.
func (l Liveness) Alive(ctx context.Context, instance string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held[instance], nil
}

// SetAlive sets or drops instance's record, as a server that starts or
// dies would.
func (b *Backend) SetAlive(instance string, alive bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if alive {
		b.held[instance] = true
	} else {
		delete(b.held, instance)
	}
}

var _ backend.Backend = (*Backend)(nil)

// box is one fake sandbox.
type box struct {
	id      string
	spec    backend.Spec
	created time.Time

	// The program reads stdinR; every attach stream writes to stdinW.
	// It writes to stdout and stderr, which copy to every attach stream
	// (none attached: the output is dropped, as a real runtime's log
	// takes it).
	stdinR *io.PipeReader
	stdinW *io.PipeWriter
	inMu   sync.Mutex // one frame at a time
	stdout *broadcast
	stderr *broadcast

	frozen atomic.Bool // drops every request, as a paused container

	resetHold chan struct{} // Backend.ResetHold

	mu      sync.Mutex
	state   backend.State
	runs    int
	resets  int           // reset requests served (a kept sandbox's)
	end     chan struct{} // closed when the program ends
	endOnce sync.Once
}

// Creates and Removes count successful calls (Remove of an unknown id
// included) since New.
func (b *Backend) Creates() int64 { return b.creates.Load() }
func (b *Backend) Removes() int64 { return b.removes.Load() }

// Live is the number of sandboxes created and not removed.
func (b *Backend) Live() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.boxes)
}

// MaxRuns is the most run requests any one sandbox has served.
func (b *Backend) MaxRuns() int {
	b.mu.Lock()
	all := append([]*box(nil), b.all...)
	b.mu.Unlock()
	n := 0
	for _, x := range all {
		x.mu.Lock()
		n = max(n, x.runs)
		x.mu.Unlock()
	}
	return n
}

// Resets counts the reset requests the sandboxes served.
func (b *Backend) Resets() int {
	b.mu.Lock()
	all := append([]*box(nil), b.all...)
	b.mu.Unlock()
	n := 0
	for _, x := range all {
		x.mu.Lock()
		n += x.resets
		x.mu.Unlock()
	}
	return n
}

// Specs returns the Specs of the live sandboxes.
func (b *Backend) Specs() []backend.Spec {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]backend.Spec, 0, len(b.boxes))
	for _, x := range b.boxes {
		out = append(out, x.spec)
	}
	return out
}

// Create starts a fake sandbox whose runner has sent its ready frame.
func (b *Backend) Create(ctx context.Context, spec backend.Spec) (*backend.Sandbox, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if b.CreateHook != nil {
		if err := b.CreateHook(spec); err != nil {
			return nil, err
		}
	}
	if b.CreateDelay > 0 {
		t := time.NewTimer(b.CreateDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, fmt.Errorf("create sandbox: %w", ctx.Err())
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	x := newBox(spec)
	x.resetHold = b.ResetHold
	b.mu.Lock()
	b.seq++
	x.id = fmt.Sprintf("fake-%d", b.seq)
	b.boxes[x.id] = x
	b.all = append(b.all, x)
	b.mu.Unlock()
	b.creates.Add(1)
	sb := x.attach()
	go x.run()
	return sb, nil
}

// attach opens an attach stream. Closing it ends the program's stdin
// unless the Spec is Detachable.
func (x *box) attach() *backend.Sandbox {
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	ko, ke := x.stdout.add(outW), x.stderr.add(errW)
	in := &attachIn{x: x}
	return backend.NewSandbox(x.id, in, outR, errR, func() error {
		in.Close()
		x.stdout.remove(ko)
		x.stderr.remove(ke)
		outR.Close()
		errR.Close()
		return nil
	})
}

// attachIn is one attach stream's stdin.
type attachIn struct {
	x      *box
	mu     sync.Mutex
	closed bool
}

func (a *attachIn) Write(p []byte) (int, error) {
	a.mu.Lock()
	closed := a.closed
	a.mu.Unlock()
	if closed {
		return 0, io.ErrClosedPipe
	}
	a.x.inMu.Lock()
	defer a.x.inMu.Unlock()
	return a.x.stdinW.Write(p)
}

func (a *attachIn) Close() error {
	a.mu.Lock()
	was := a.closed
	a.closed = true
	a.mu.Unlock()
	if !was && !a.x.spec.Detachable {
		a.x.stdinW.Close()
	}
	return nil
}

// broadcast copies what the program writes to every attached stream; a
// stream that fails (closed) is dropped.
type broadcast struct {
	mu    sync.Mutex
	seq   int
	ws    map[int]*io.PipeWriter
	ended bool
}

func newBroadcast() *broadcast { return &broadcast{ws: map[int]*io.PipeWriter{}} }

func (b *broadcast) add(w *io.PipeWriter) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended {
		w.CloseWithError(io.EOF)
		return -1
	}
	b.seq++
	b.ws[b.seq] = w
	return b.seq
}

func (b *broadcast) remove(k int) {
	b.mu.Lock()
	w := b.ws[k]
	delete(b.ws, k)
	b.mu.Unlock()
	if w != nil {
		w.CloseWithError(io.EOF)
	}
}

func (b *broadcast) Write(p []byte) (int, error) {
	b.mu.Lock()
	ws := make(map[int]*io.PipeWriter, len(b.ws))
	maps.Copy(ws, b.ws)
	b.mu.Unlock()
	for k, w := range ws {
		if _, err := w.Write(p); err != nil {
			b.mu.Lock()
			delete(b.ws, k)
			b.mu.Unlock()
		}
	}
	return len(p), nil
}

// end closes every stream with EOF; later attaches get EOF at once.
func (b *broadcast) end() {
	b.mu.Lock()
	ws := b.ws
	b.ws, b.ended = map[int]*io.PipeWriter{}, true
	b.mu.Unlock()
	for _, w := range ws {
		w.CloseWithError(io.EOF)
	}
}

// Remove ends the program (killed) and forgets the sandbox.
func (b *Backend) Remove(ctx context.Context, id string) error {
	b.mu.Lock()
	x := b.boxes[id]
	delete(b.boxes, id)
	b.mu.Unlock()
	b.removes.Add(1)
	if x != nil {
		x.exit(137, false)
	}
	return nil
}

// List returns the live sandboxes whose labels include labels.
func (b *Backend) List(ctx context.Context, labels map[string]string) ([]backend.Info, error) {
	if err := backend.ValidateLabels(labels); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []backend.Info
	for _, x := range b.boxes {
		match := true
		for k, v := range labels {
			if got, ok := x.spec.Labels[k]; !ok || got != v {
				match = false
			}
		}
		if match {
			out = append(out, backend.Info{ID: x.id, Labels: maps.Clone(x.spec.Labels), Annotations: maps.Clone(x.spec.Annotations), Created: x.created})
		}
	}
	return out, nil
}

// State reports the program's state.
func (b *Backend) State(ctx context.Context, id string) (backend.State, error) {
	b.mu.Lock()
	x := b.boxes[id]
	b.mu.Unlock()
	if x == nil {
		return backend.State{}, fmt.Errorf("sandbox %s: %w", id, backend.ErrNotFound)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.state, nil
}

// Adopt registers a sandbox as if another process had created it with
// spec (a crash leftover for the reaper to judge); its program has ended.
func (b *Backend) Adopt(spec backend.Spec) string {
	x := newBox(spec)
	x.exit(0, false)
	b.mu.Lock()
	b.seq++
	x.id = fmt.Sprintf("fake-%d", b.seq)
	b.boxes[x.id] = x
	b.mu.Unlock()
	return x.id
}

// Freeze has sandbox id stop answering, as a paused container does: from
// then on its program drops every request (a ping included) until it is
// removed. It reports whether id is a live sandbox.
func (b *Backend) Freeze(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	x := b.boxes[id]
	if x != nil {
		x.frozen.Store(true)
	}
	return x != nil
}

// Has says whether id is a live (not removed) sandbox.
func (b *Backend) Has(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.boxes[id] != nil
}

// newBox is a sandbox whose program runs (until exit).
func newBox(spec backend.Spec) *box {
	x := &box{spec: spec, created: time.Now().UTC(), end: make(chan struct{})}
	x.stdinR, x.stdinW = io.Pipe()
	x.stdout, x.stderr = newBroadcast(), newBroadcast()
	x.state = backend.State{Running: true, Reason: "running", StartedAt: x.created}
	return x
}

// exit ends the program once: its streams end and State says so.
func (x *box) exit(code int, oom bool) {
	x.endOnce.Do(func() {
		x.mu.Lock()
		x.state.Running, x.state.Exited, x.state.ExitCode, x.state.OOMKilled = false, true, code, oom
		x.state.Reason = "exited"
		if oom {
			x.state.Reason = "OOMKilled"
		}
		x.state.FinishedAt = time.Now().UTC()
		x.mu.Unlock()
		close(x.end)
		x.stdout.end()
		x.stderr.end()
		x.stdinR.Close()
	})
}

// request is the part of a request frame the fake reads.
type request struct {
	Op     string `json:"op"`
	ID     uint64 `json:"id"`
	Nonce  string `json:"nonce"`
	Code   string `json:"code"`
	Path   string `json:"path"`
	Data   []byte `json:"data"`
	Stream bool   `json:"stream"`
	Limits struct {
		TimeoutMS int64 `json:"timeout_ms"`
	} `json:"limits"`
}

// run is the fake runner: ready, then one reply per request. Like the
// executor's runner, whose command ends in protocol.RunnerTag and whose
// bootstrap reads a preamble from stdin first, it first skips the preamble
// when the command ends so.
func (x *box) run() {
	if c := x.spec.Command; len(c) > 0 && c[len(c)-1] == protocol.RunnerTag {
		if protocol.SkipPreamble(x.stdinR) != nil {
			x.exit(1, false)
			return
		}
	}
	reqs := make(chan request)
	go func() {
		defer close(reqs)
		for {
			data, err := protocol.ReadFrame(x.stdinR, func() int64 { return protocol.MaxRequestFrame })
			if err != nil {
				return
			}
			var r request
			if json.Unmarshal(data, &r) != nil {
				return
			}
			select {
			case reqs <- r:
			case <-x.end:
				return
			}
		}
	}()
	if protocol.WriteFrame(x.stdout, protocol.Ready{Op: protocol.OpReady}) != nil {
		x.exit(1, false)
		return
	}
	globals := map[string]string{}
	files := map[string][]byte{}
	lost := false
	for {
		var r request
		var ok bool
		select {
		case r, ok = <-reqs:
		case <-x.end:
			return
		}
		if ok && x.frozen.Load() {
			continue // a frozen program reads nothing and answers nothing
		}
		if !ok || r.Op == protocol.OpExit {
			x.exit(0, false)
			return
		}
		reply := protocol.Reply{ID: r.ID, Nonce: r.Nonce, Status: "ok"}
		switch r.Op {
		case protocol.OpRun:
			x.mu.Lock()
			x.runs++
			x.mu.Unlock()
			if !x.script(r, reqs, globals, &reply) {
				return // the program ended or hangs until removed
			}
			if reply.Status == "timeout" {
				clear(globals)
				lost = true
			} else if lost {
				reply.StateLost, lost = true, false
			}
		case protocol.OpPing:
		case protocol.OpPreload, protocol.OpParse:
			reply.Failed = []string{}
			if r.Op == protocol.OpPreload {
				reply.Stdlib = Stdlib
			}
		case protocol.OpWrite:
			files[r.Path] = r.Data
		case protocol.OpRead:
			data, found := files[r.Path]
			if !found {
				reply.Status, reply.Error = "error", &protocol.RunError{Type: "FileNotFoundError", Message: r.Path + ": no such file"}
			}
			reply.Data = data
		case protocol.OpList:
			for p, d := range files {
				reply.Entries = append(reply.Entries, protocol.Entry{Path: p, Size: int64(len(d))})
			}
		case protocol.OpReset:
			if x.resetHold != nil {
				<-x.resetHold
			}
			// As the runner's reset: nothing of the last call is left.
			clear(globals)
			clear(files)
			x.mu.Lock()
			x.resets++
			x.mu.Unlock()
			reply.Checked = []string{"fake: globals and files cleared"}
		case protocol.OpInterrupt:
			continue // nothing runs: nothing to interrupt
		default:
			reply.Status, reply.Error = "error", &protocol.RunError{Type: "FakeError", Message: "unknown op " + r.Op}
		}
		if protocol.WriteFrame(x.stdout, reply) != nil {
			x.exit(1, false)
			return
		}
	}
}

// script runs one run request's code into reply. It returns false when
// the program ended (oom, exit) or hangs.
func (x *box) script(r request, reqs <-chan request, globals map[string]string, reply *protocol.Reply) bool {
	t0 := time.Now()
	var out, errOut strings.Builder
	defer func() {
		reply.Stdout, reply.Stderr = out.String(), errOut.String()
		reply.DurationMS = float64(time.Since(t0).Microseconds()) / 1000
	}()
	deadline := t0.Add(time.Duration(r.Limits.TimeoutMS) * time.Millisecond)
	for n, line := range strings.Split(r.Code, "\n") {
		cmd, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
		fail := func(typ, msg string) bool {
			reply.Status, reply.Error = "error", &protocol.RunError{Type: typ, Message: msg, Line: n + 1}
			return true
		}
		live := func(stream string, b *strings.Builder, text string) {
			if r.Stream {
				_ = protocol.WriteFrame(x.stdout, protocol.Output{Op: protocol.OpOutput, ID: r.ID, Nonce: r.Nonce, Stream: stream,
					Offset: int64(b.Len()), Bytes: int64(len(text)), Data: text})
			}
			b.WriteString(text)
		}
		switch cmd {
		case "":
		case "print":
			live("stdout", &out, arg+"\n")
		case "stderr":
			live("stderr", &errOut, arg+"\n")
		case "output":
			f := strings.SplitN(arg, " ", 3)
			if len(f) != 3 {
				return fail("FakeError", "output wants STREAM OFFSET TEXT: "+arg)
			}
			off, _ := strconv.ParseInt(f[1], 10, 64)
			_ = protocol.WriteFrame(x.stdout, protocol.Output{Op: protocol.OpOutput, ID: r.ID, Nonce: r.Nonce, Stream: f[0],
				Offset: off, Bytes: int64(len(f[2])), Data: f[2]})
		case "set":
			k, v, _ := strings.Cut(arg, " ")
			globals[k] = v
		case "get":
			v, ok := globals[arg]
			if !ok {
				return fail("NameError", fmt.Sprintf("name %q is not defined", arg))
			}
			out.WriteString(v + "\n")
		case "sleep":
			ms, err := strconv.Atoi(arg)
			if err != nil {
				return fail("FakeError", "sleep wants milliseconds: "+arg)
			}
			wake := time.Now().Add(time.Duration(ms) * time.Millisecond)
			if r.Limits.TimeoutMS > 0 && wake.After(deadline) {
				wake = deadline
			}
			timer := time.NewTimer(time.Until(wake))
			interrupted := false
			for waiting := true; waiting; {
				select {
				case <-timer.C:
					waiting = false
				case q, ok := <-reqs:
					if !ok {
						timer.Stop()
						x.exit(0, false)
						return false
					}
					if q.Op == protocol.OpInterrupt {
						interrupted, waiting = true, false
						timer.Stop()
					}
				case <-x.end:
					timer.Stop()
					return false
				}
			}
			if interrupted {
				return fail("KeyboardInterrupt", "interrupted")
			}
			if r.Limits.TimeoutMS > 0 && !time.Now().Before(deadline) {
				reply.Status = "timeout"
				reply.Error = &protocol.RunError{Type: "Timeout", Message: fmt.Sprintf("the code ran past its time limit of %d ms", r.Limits.TimeoutMS), Line: n + 1}
				return true
			}
		case "hang":
			<-x.end
			return false
		case "raise":
			typ, msg, _ := strings.Cut(arg, " ")
			return fail(typ, msg)
		case "oom":
			x.exit(137, true)
			return false
		case "exit":
			code, _ := strconv.Atoi(arg)
			x.exit(code, false)
			return false
		default:
			return fail("FakeError", "the fake runner does not know "+strconv.Quote(line))
		}
	}
	return true
}

// Cluster is the fake runtime as Kubernetes is for the executor: with
// servers' liveness records and shared sessions (backend.Shared), so that
// several executors on one Cluster behave as replicas.
type Cluster struct{ Liveness }

var _ backend.Shared = Cluster{}

// NewCluster returns an empty fake cluster.
func NewCluster() Cluster { return Cluster{Liveness{New()}} }

// Attach opens another stream to a running sandbox.
func (c Cluster) Attach(ctx context.Context, id string) (*backend.Sandbox, error) {
	c.mu.Lock()
	x := c.boxes[id]
	c.mu.Unlock()
	if x == nil {
		return nil, fmt.Errorf("attach %s: %w", id, backend.ErrNotFound)
	}
	x.mu.Lock()
	running := x.state.Running
	x.mu.Unlock()
	if !running {
		return nil, fmt.Errorf("attach %s: %w: it has ended", id, backend.ErrNotFound)
	}
	return x.attach(), nil
}

// CreateSession stores rec held by holder.
func (c Cluster) CreateSession(ctx context.Context, rec backend.SessionRecord, holder string) (backend.SessionLock, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.records[rec.ID]; ok {
		return nil, fmt.Errorf("session record %s exists", rec.ID)
	}
	r := rec
	r.Meta = maps.Clone(rec.Meta)
	r.Holder, r.Renewed = holder, time.Now()
	c.records[rec.ID] = &r
	return &fakeLock{c: c, id: rec.ID, holder: holder, rec: r}, nil
}

// LockSession waits until the record is free (or its hold stale), then
// holds it.
func (c Cluster) LockSession(ctx context.Context, id, holder string) (backend.SessionLock, error) {
	for {
		c.mu.Lock()
		r, ok := c.records[id]
		if !ok {
			c.mu.Unlock()
			return nil, fmt.Errorf("session record %s: %w", id, backend.ErrNotFound)
		}
		if !r.Held(time.Now()) || r.Holder == holder {
			c.locks.Add(1)
			prev := r.Holder
			r.Holder, r.Renewed = holder, time.Now()
			got := *r
			if prev != "" && prev != holder {
				got.TakenOver = prev
			}
			got.Meta = maps.Clone(r.Meta)
			c.mu.Unlock()
			return &fakeLock{c: c, id: id, holder: holder, rec: got}, nil
		}
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("session %s is busy (held by %s): %w", id, r.Holder, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Sessions lists owner's records ("" = all).
func (c Cluster) Sessions(ctx context.Context, owner string) ([]backend.SessionRecord, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []backend.SessionRecord
	for _, r := range c.records {
		if owner == "" || r.Owner == owner {
			x := *r
			x.Meta = maps.Clone(r.Meta)
			out = append(out, x)
		}
	}
	return out, nil
}

// DeleteSession removes a record.
func (c Cluster) DeleteSession(ctx context.Context, id string) error {
	c.mu.Lock()
	delete(c.records, id)
	c.mu.Unlock()
	return nil
}

// Locks counts the LockSession calls that took a record.
func (c Cluster) Locks() int64 { return c.locks.Load() }

// StaleHold makes session id's hold look abandoned, as when its server
// died mid-call and SessionHold passed twice.
func (c Cluster) StaleHold(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.records[id]; r != nil {
		r.Renewed = time.Now().Add(-3 * backend.SessionHold)
	}
}

// fakeLock is a held record. The fake does not expire holds by itself
// (StaleHold does), so it needs no renewal.
type fakeLock struct {
	c      Cluster
	id     string
	holder string
	rec    backend.SessionRecord
}

func (l *fakeLock) Record() backend.SessionRecord { return l.rec }

func (l *fakeLock) mine() (*backend.SessionRecord, error) {
	r := l.c.records[l.id]
	if r == nil {
		return nil, fmt.Errorf("session record %s: %w", l.id, backend.ErrNotFound)
	}
	if r.Holder != l.holder {
		return nil, fmt.Errorf("session %s: another server took its lock over", l.id)
	}
	return r, nil
}

func (l *fakeLock) SetSandbox(ctx context.Context, id string) error {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	r, err := l.mine()
	if err != nil {
		return err
	}
	r.Sandbox, l.rec.Sandbox = id, id
	return nil
}

func (l *fakeLock) SetMeta(ctx context.Context, meta map[string]string) error {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	r, err := l.mine()
	if err != nil {
		return err
	}
	if r.Meta == nil {
		r.Meta = map[string]string{}
	}
	if l.rec.Meta == nil {
		l.rec.Meta = map[string]string{}
	}
	for k, v := range meta {
		if v == "" {
			delete(r.Meta, k)
			delete(l.rec.Meta, k)
			continue
		}
		r.Meta[k], l.rec.Meta[k] = v, v
	}
	return nil
}

func (l *fakeLock) Release(ctx context.Context) error {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	r, err := l.mine()
	if err != nil {
		return err
	}
	r.Holder, r.LastUsed, r.Renewed = "", time.Now(), time.Now()
	return nil
}

func (l *fakeLock) Delete(ctx context.Context) error {
	return l.c.DeleteSession(ctx, l.id)
}

package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/watch"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

// Config is the backend's configuration; FromConfig builds it from the
// operator's kubernetes section.
type Config struct {
	// Kubeconfig is the path of a kubeconfig file; empty means in-cluster
	// (the service account of the Pod the server runs in).
	Kubeconfig string
	// Namespace holds the sandbox Pods. Default "python-docker-mcp-sandboxes"
	// (examples/kubernetes).
	Namespace string
	// RuntimeClass is the runtimeClassName of every sandbox Pod whose Spec
	// names no Runtime (e.g. "gvisor"); empty: the cluster's default.
	RuntimeClass string
	// NodeSelector is the nodeSelector of every sandbox Pod.
	NodeSelector map[string]string
	// ImagePullPolicy of the sandbox image; default IfNotPresent (a ":latest"
	// tag would otherwise mean Always, which fails without a registry).
	ImagePullPolicy corev1.PullPolicy
	// NodeName binds every sandbox Pod to that node, bypassing the
	// scheduler: for single-node test clusters that run none.
	NodeName string
	// StartTimeout bounds how long Create waits for a Pod to run (image
	// pull included). Default 2 minutes.
	StartTimeout time.Duration
	// CPURequest is the CPU (in CPUs) every sandbox Pod requests when that
	// is below its CPU limit; 0: the request equals the limit (Guaranteed
	// QoS, what the Pod may use is reserved for it even while idle).
	CPURequest float64
	// Log receives what the backend reports on its own (a Lease renewal
	// that failed); nil: slog.Default().
	Log *slog.Logger
	// LeaseNamespace holds the servers' Leases (one per live server, see
	// Hold); default: the server's own namespace when it runs in a Pod,
	// else Namespace.
	LeaseNamespace string
	// Attach is the attach stream's protocol: "" (WebSocket, falling back
	// to SPDY when the API server cannot upgrade to it), "websocket" or
	// "spdy" (only that one).
	Attach string
}

// DefaultNamespace is Config.Namespace's default.
const DefaultNamespace = "python-docker-mcp-sandboxes"

// Backend runs sandboxes as Pods. It is safe for concurrent use.
type Backend struct {
	cfg    Config
	rest   *rest.Config
	client clientset.Interface
	// noEarlyAttach makes start wait for the API's running status before
	// attaching (for the latency comparison).
	noEarlyAttach bool
	// sessionCache holds each session record as this server released it
	// (session id -> *coordinationv1.Lease): the next LockSession tries
	// its update on that version first and reads the record only when
	// another server changed it since.
	sessionCache sync.Map
}

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Pinger  = (*Backend)(nil)
)

// New builds a Backend from cfg. It reads the kubeconfig (or the in-cluster
// service account) but does not contact the API server: call Ping for that.
func New(cfg Config) (*Backend, error) {
	var rc *rest.Config
	var err error
	if cfg.Kubeconfig == "" {
		rc, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("%w: kubernetes.kubeconfig is empty and this is not a Pod with a service account (%v): set kubernetes.kubeconfig to a kubeconfig file", backend.ErrUnavailable, err)
		}
	} else {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("%w: kubernetes.kubeconfig %s: %v", backend.ErrUnavailable, cfg.Kubeconfig, err)
		}
	}
	switch cfg.Attach {
	case "", "websocket", "spdy":
	default:
		return nil, fmt.Errorf("kubernetes attach protocol %q: want \"\", \"websocket\" or \"spdy\"", cfg.Attach)
	}
	switch cfg.ImagePullPolicy {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return nil, fmt.Errorf("kubernetes.image_pull_policy %q: want Always, IfNotPresent or Never", cfg.ImagePullPolicy)
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 2 * time.Minute
	}
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = 50, 100
	rc.UserAgent = "python-docker-mcp"
	client, err := clientset.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("%w: kubernetes client: %v", backend.ErrUnavailable, err)
	}
	return &Backend{cfg: cfg, rest: rc, client: client}, nil
}

// Namespace is the namespace the backend's Pods live in.
func (b *Backend) Namespace() string { return b.cfg.Namespace }

// Ping asks the API server for its version; an unreachable server or
// refused credentials wrap backend.ErrUnavailable.
func (b *Backend) Ping(ctx context.Context) error {
	if _, err := b.client.CoreV1().RESTClient().Get().AbsPath("/version").Do(ctx).Raw(); err != nil {
		return b.apiErr("ping", err)
	}
	return nil
}

// Create creates the Pod, waits until its container runs, attaches to it
// and opens its start gate. On any error the Pod is deleted. A Pod the
// node's kubelet turns away for want of room (OutOfcpu, OutOfmemory, …:
// Pods bound with NodeName skip the scheduler, which would have waited) is
// replaced by a new one after a pause, until StartTimeout.
func (b *Backend) Create(ctx context.Context, spec backend.Spec) (*backend.Sandbox, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(b.cfg.StartTimeout)
	pause := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		sb, err := b.create(ctx, spec)
		if err == nil || !errors.Is(err, errNoRoom) {
			return sb, err
		}
		if time.Now().Add(pause).After(deadline) {
			return nil, fmt.Errorf("%w (%d attempts in %s: the node has no room for another sandbox; wait for running ones to end, lower kubernetes.cpu_request, docker.memory_limit or the pool sizes, or add nodes)", err, attempt, b.cfg.StartTimeout)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("create sandbox pod: %w (after: %v)", ctx.Err(), err)
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// errNoRoom marks a Pod that the kubelet rejected for want of resources.
var errNoRoom = errors.New("rejected by the node for want of resources")

// create is one attempt of Create.
func (b *Backend) create(ctx context.Context, spec backend.Spec) (*backend.Sandbox, error) {
	name, err := podName()
	if err != nil {
		return nil, err
	}
	pod, err := Pod(spec, b.cfg, name)
	if err != nil {
		return nil, err
	}
	pods := b.client.CoreV1().Pods(b.cfg.Namespace)
	removeOnError := func(err error) error {
		rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		var away backoff
		for {
			rmErr := b.Remove(rmCtx, name)
			if rmErr == nil {
				return err
			}
			if !apiAway(rmErr) || !away.wait(rmCtx) {
				// The server's sweep of its strays removes the Pod later.
				return fmt.Errorf("%w (and removing pod %s/%s failed: %v)", err, b.cfg.Namespace, name, rmErr)
			}
		}
	}
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if _, ok := ctx.Deadline(); ok && strings.Contains(err.Error(), "would exceed context deadline") {
			// client-go's rate limiter gives up before the deadline it
			// foresees passing: let it pass, so the error is ctx's.
			<-ctx.Done()
		}
		err = b.apiErr("create sandbox pod", err)
		cerr := backend.Ended(ctx)
		if cerr == nil && (errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)) {
			// The API server or the transport gave up on the deadline:
			// the Pod may exist all the same.
			cerr = context.DeadlineExceeded
		}
		if cerr != nil {
			// ctx's end is the cause (client-go's rate limiter, for one,
			// says only that waiting would pass the deadline). The request
			// may have reached the API server before ctx ended: the Pod
			// may exist.
			if !errors.Is(err, cerr) {
				err = fmt.Errorf("%w (%v)", cerr, err)
			}
			err = removeOnError(err)
		}
		return nil, err
	}
	sb, err := b.start(ctx, created)
	if err != nil {
		return nil, removeOnError(err)
	}
	return sb, nil
}

// earlyAttach is how often start tries to attach before the API reports
// the container running.
const earlyAttach = 100 * time.Millisecond

// start waits for the Pod's container to run and attaches to it. The
// kubelet can attach as soon as the container runs, but reports that to
// the API only at its next relist (up to a second later): so start also
// tries to attach meanwhile, every earlyAttach, and takes the first stream
// that connects.
func (b *Backend) start(ctx context.Context, pod *corev1.Pod) (*backend.Sandbox, error) {
	wctx, cancel := context.WithTimeout(ctx, b.cfg.StartTimeout)
	defer cancel()
	running := make(chan error, 1)
	go func() { running <- b.waitRunning(wctx, pod) }()
	tick := time.NewTicker(earlyAttach)
	defer tick.Stop()
	if b.noEarlyAttach {
		tick.Stop()
	}
	for {
		select {
		case err := <-running:
			if err != nil {
				if ctx.Err() == nil && wctx.Err() != nil {
					return nil, fmt.Errorf("%w: pod %s/%s not running after %s: %v", backend.ErrStart, b.cfg.Namespace, pod.Name, b.cfg.StartTimeout, err)
				}
				return nil, err
			}
			return b.attach(wctx, pod.Name) // the stream itself outlives wctx
		case <-tick.C:
			actx, acancel := context.WithTimeout(wctx, 10*time.Second)
			sb, err := b.attach(actx, pod.Name)
			acancel()
			if err == nil {
				return sb, nil
			}
		}
	}
}

// waitRunning watches the Pod until its container runs, or fails with the
// reason the Pod's status gives.
func (b *Backend) waitRunning(ctx context.Context, pod *corev1.Pod) error {
	pods := b.client.CoreV1().Pods(b.cfg.Namespace)
	sel := fields.OneTermEqualSelector("metadata.name", pod.Name).String()
	last := pod
	// An API server that goes away (restarts) while the Pod starts is
	// waited for, until ctx ends: the Pod started all the same, and a
	// start that gave up could not remove it either.
	var away backoff
	for {
		if done, err := b.startState(last); done {
			return err
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: last.ResourceVersion})
		if err != nil {
			if apiAway(err) && away.wait(ctx) {
				continue
			}
			return b.wrapWait(last, b.apiErr("watch sandbox pod", err))
		}
		away.reset()
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				w.Stop()
				return fmt.Errorf("%w: pod %s/%s was deleted while starting", backend.ErrStart, b.cfg.Namespace, pod.Name)
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				break // an error event (e.g. resource version too old): get and watch again
			}
			last = p
			if done, err := b.startState(last); done {
				w.Stop()
				return err
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return b.wrapWait(last, ctx.Err())
		}
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			if apiAway(err) && away.wait(ctx) {
				continue
			}
			return b.wrapWait(last, b.apiErr("get sandbox pod", err))
		}
		last = p
	}
}

// apiUnreachable says whether err means the API server could not be
// reached or did not answer in time.
func apiUnreachable(err error) bool {
	var netErr net.Error
	var urlErr *url.Error
	return errors.As(err, &urlErr) || errors.As(err, &netErr) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
}

// apiAway says whether err means the API server did not answer (down,
// restarting, overloaded) rather than that it refused: worth waiting for.
func apiAway(err error) bool {
	return apiUnreachable(err) || apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err)
}

// backoff paces the retries of a start that lost the API server: 250 ms,
// doubling up to 2 s.
type backoff struct{ next time.Duration }

// wait sleeps for the next pause; false when ctx ends first.
func (p *backoff) wait(ctx context.Context) bool {
	p.next = min(max(2*p.next, 250*time.Millisecond), 2*time.Second)
	select {
	case <-ctx.Done():
		return false
	case <-time.After(p.next):
		return true
	}
}

func (p *backoff) reset() { p.next = 0 }

// wrapWait adds the Pod's last known status to an error of waitRunning.
func (b *Backend) wrapWait(last *corev1.Pod, err error) error {
	return fmt.Errorf("%w (last status: %s)", err, podStatusText(last))
}

// startState says whether a starting Pod is done starting: running (nil
// error) or failed (why).
func (b *Backend) startState(p *corev1.Pod) (bool, error) {
	where := b.cfg.Namespace + "/" + p.Name
	if p.DeletionTimestamp != nil {
		return true, fmt.Errorf("%w: pod %s is being deleted", backend.ErrStart, where)
	}
	if cs := containerStatus(p); cs != nil {
		switch {
		case cs.State.Running != nil:
			return true, nil
		case cs.State.Terminated != nil:
			t := cs.State.Terminated
			return true, fmt.Errorf("%w: pod %s exited (code %d, %s%s) before it could be attached", backend.ErrStart, where, t.ExitCode, t.Reason, suffix(t.Message))
		case cs.State.Waiting != nil:
			w := cs.State.Waiting
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName":
				return true, fmt.Errorf("%w: pod %s cannot get image %s (%s%s): load the image on the node or make it pullable (kubernetes.image_pull_policy)", backend.ErrImageMissing, where, cs.Image, w.Reason, suffix(w.Message))
			case "CreateContainerConfigError", "CreateContainerError", "RunContainerError", "CrashLoopBackOff":
				return true, fmt.Errorf("%w: pod %s: %s%s", backend.ErrStart, where, w.Reason, suffix(w.Message))
			}
		}
	}
	if p.Status.Phase == corev1.PodFailed && strings.HasPrefix(p.Status.Reason, "OutOf") {
		return true, fmt.Errorf("%w: pod %s %w (%s%s)", backend.ErrStart, where, errNoRoom, p.Status.Reason, suffix(p.Status.Message))
	}
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		return true, fmt.Errorf("%w: pod %s is %s (%s%s)", backend.ErrStart, where, p.Status.Phase, p.Status.Reason, suffix(p.Status.Message))
	}
	return false, nil
}

func suffix(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

func podStatusText(p *corev1.Pod) string {
	s := string(p.Status.Phase)
	if s == "" {
		s = "Pending"
	}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Reason != "" {
			s += fmt.Sprintf(", %s: %s %s", c.Type, c.Reason, c.Message)
		}
	}
	if p.Spec.NodeName == "" {
		s += ", not bound to a node (no scheduler, or no node matches kubernetes.node_selector?)"
	}
	if cs := containerStatus(p); cs != nil && cs.State.Waiting != nil {
		s += fmt.Sprintf(", container waiting: %s%s", cs.State.Waiting.Reason, suffix(cs.State.Waiting.Message))
	}
	return s
}

func containerStatus(p *corev1.Pod) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == ContainerName {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// attach opens the attach stream of a running sandbox and sends the start
// gate's line; it returns once the stream has taken that line.
func (b *Backend) attach(ctx context.Context, name string) (*backend.Sandbox, error) {
	return b.openStream(ctx, name, true)
}

// Attach opens another attach stream to a running Detachable sandbox Pod
// (backend.Shared). Its program is past the start gate: nothing is sent,
// and the stream is known to reach the container only once the program
// answers something sent on it (the executor's ping).
func (b *Backend) Attach(ctx context.Context, id string) (*backend.Sandbox, error) {
	p, err := b.client.CoreV1().Pods(b.cfg.Namespace).Get(ctx, id, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("attach sandbox pod %s/%s: %w", b.cfg.Namespace, id, backend.ErrNotFound)
	}
	if err != nil {
		return nil, b.apiErr("get sandbox pod "+id, err)
	}
	// The API may still say ContainerCreating for a second after the
	// container runs (the kubelet's relist): only an ended Pod is refused.
	if st := podState(p); p.DeletionTimestamp != nil || st.Exited || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return nil, fmt.Errorf("attach sandbox pod %s/%s: %w: it has ended (%s)", b.cfg.Namespace, id, backend.ErrNotFound, podStatusText(p))
	}
	return b.openStream(ctx, id, false)
}

// openStream opens an attach stream; gate says to pass the start gate
// first (a new Pod's first attach).
func (b *Backend) openStream(ctx context.Context, name string, gate bool) (*backend.Sandbox, error) {
	req := b.client.CoreV1().RESTClient().Post().
		Namespace(b.cfg.Namespace).Resource("pods").Name(name).SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{Container: ContainerName, Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	exec, err := b.executor(req.URL())
	if err != nil {
		return nil, fmt.Errorf("attach sandbox pod %s/%s: %w", b.cfg.Namespace, name, err)
	}
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	stderrR, stderrW := io.Pipe()
	// The stream outlives Create's ctx: it ends at Close or when the
	// sandbox's program ends.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ended := make(chan struct{})
	var streamErr error
	go func() {
		defer close(ended)
		streamErr = exec.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: stdinR, Stdout: stdoutW, Stderr: stderrW})
		if streamErr != nil && sctx.Err() == nil {
			streamErr = fmt.Errorf("attach stream of sandbox pod %s/%s: %w", b.cfg.Namespace, name, streamErr)
		}
		stdoutW.CloseWithError(streamErr)
		stderrW.CloseWithError(streamErr)
		// EOF, not an error, for client-go's stdin copier, which would
		// log one; writes to Stdin now fail with io.ErrClosedPipe.
		stdinW.Close()
	}()
	closeFn := func() error {
		stdinW.Close()
		cancel()
		stdoutR.Close()
		stderrR.Close()
		<-ended
		return nil
	}
	if !gate {
		return backend.NewSandbox(name, stdinW, stdoutR, stderrR, closeFn), nil
	}
	// Send the gate's line and wait for its ack on stderr: only then is
	// the stream known to reach the container.
	go stdinW.Write([]byte("\n"))
	ack := make(chan error, 1)
	go func() {
		var buf [1]byte
		_, err := io.ReadFull(stderrR, buf[:])
		if err == nil && buf[0] != gateAck {
			err = fmt.Errorf("stderr began with %q, not the start gate's acknowledgement", buf[0])
		}
		ack <- err
	}()
	select {
	case err := <-ack:
		if err != nil {
			closeFn()
			return nil, fmt.Errorf("%w: attach sandbox pod %s/%s: %v", backend.ErrStart, b.cfg.Namespace, name, err)
		}
	case <-ctx.Done():
		closeFn()
		return nil, fmt.Errorf("attach sandbox pod %s/%s: %w", b.cfg.Namespace, name, ctx.Err())
	}
	return backend.NewSandbox(name, stdinW, stdoutR, stderrR, closeFn), nil
}

func (b *Backend) executor(u *url.URL) (remotecommand.Executor, error) {
	spdy := func() (remotecommand.Executor, error) { return remotecommand.NewSPDYExecutor(b.rest, "POST", u) }
	ws := func() (remotecommand.Executor, error) {
		return remotecommand.NewWebSocketExecutor(b.rest, "GET", u.String())
	}
	switch b.cfg.Attach {
	case "spdy":
		return spdy()
	case "websocket":
		return ws()
	}
	w, err := ws()
	if err != nil {
		return nil, err
	}
	s, err := spdy()
	if err != nil {
		return nil, err
	}
	return remotecommand.NewFallbackExecutor(w, s, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// Remove deletes the Pod with a one-second grace period and returns without
// waiting for it to go (List reports it as Removing meanwhile).
func (b *Backend) Remove(ctx context.Context, id string) error {
	grace := int64(1)
	bg := metav1.DeletePropagationBackground
	err := b.client.CoreV1().Pods(b.cfg.Namespace).Delete(ctx, id, metav1.DeleteOptions{GracePeriodSeconds: &grace, PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		return b.apiErr("remove sandbox pod "+id, err)
	}
	return nil
}

// List returns the sandbox Pods of the namespace whose labels include all
// of want.
func (b *Backend) List(ctx context.Context, want map[string]string) ([]backend.Info, error) {
	set := labels.Set{LabelPartOf: partOf, LabelComponent: component}
	for k, v := range want {
		set[k] = v
	}
	sel, err := labels.ValidatedSelectorFromSet(set)
	if err != nil {
		return nil, fmt.Errorf("%w: list labels: %v", backend.ErrInvalidSpec, err)
	}
	list, err := b.client.CoreV1().Pods(b.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, b.apiErr("list sandbox pods", err)
	}
	out := make([]backend.Info, 0, len(list.Items))
	for _, p := range list.Items {
		out = append(out, backend.Info{
			ID:          p.Name,
			Labels:      p.Labels,
			Annotations: p.Annotations,
			Created:     p.CreationTimestamp.UTC(),
			Removing:    p.DeletionTimestamp != nil,
		})
	}
	return out, nil
}

// State reads the sandbox container's status.
func (b *Backend) State(ctx context.Context, id string) (backend.State, error) {
	p, err := b.client.CoreV1().Pods(b.cfg.Namespace).Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		return backend.State{}, b.apiErr("sandbox pod "+id, err)
	}
	return podState(p), nil
}

// podState is the backend.State a Pod's status says.
func podState(p *corev1.Pod) backend.State {
	var st backend.State
	cs := containerStatus(p)
	switch {
	case cs == nil:
		st.Reason = string(p.Status.Phase)
		if p.Status.Reason != "" {
			st.Reason = p.Status.Reason
		}
	case cs.State.Running != nil:
		st.Running = true
		st.Reason = "Running"
		st.StartedAt = cs.State.Running.StartedAt.UTC()
	case cs.State.Terminated != nil:
		t := cs.State.Terminated
		st.Exited = true
		st.ExitCode = int(t.ExitCode)
		st.OOMKilled = t.Reason == "OOMKilled"
		st.Reason = t.Reason
		st.StartedAt, st.FinishedAt = t.StartedAt.UTC(), t.FinishedAt.UTC()
	case cs.State.Waiting != nil:
		st.Reason = cs.State.Waiting.Reason
	}
	if st.StartedAt.IsZero() || st.StartedAt.Unix() == 0 {
		st.StartedAt = time.Time{}
	}
	if st.FinishedAt.Unix() == 0 {
		st.FinishedAt = time.Time{}
	}
	return st
}

// apiErr turns a client-go error into one that says what failed and what
// to do, wrapping backend.ErrNotFound or backend.ErrUnavailable.
func (b *Backend) apiErr(what string, err error) error {
	ns := b.cfg.Namespace
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The caller's ctx ended: not the API's fault.
		return fmt.Errorf("%s: %w", what, err)
	case apierrors.IsNotFound(err):
		if what == "create sandbox pod" {
			return fmt.Errorf("%s: namespace %q not found: create it (examples/kubernetes) or set kubernetes.namespace: %w", what, ns, err)
		}
		return fmt.Errorf("%w: %s in namespace %s", backend.ErrNotFound, what, ns)
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return fmt.Errorf("%w: %s: the kubernetes API refused it (%v): the server's account needs pods create/get/list/watch/delete and pods/attach in namespace %s (examples/kubernetes/rbac.yaml)", backend.ErrUnavailable, what, err, ns)
	case apierrors.IsInvalid(err):
		return fmt.Errorf("%w: %s: %v", backend.ErrInvalidSpec, what, err)
	case apiUnreachable(err):
		return fmt.Errorf("%w: %s: kubernetes API at %s: %w (is the cluster up, and kubernetes.kubeconfig right?)", backend.ErrUnavailable, what, b.rest.Host, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func podName() (string, error) {
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", fmt.Errorf("sandbox name: %w", err)
	}
	return "pdm-sandbox-" + hex.EncodeToString(r[:]), nil
}

// FromConfig is the backend's Config for the operator's kubernetes section
// (backend: kubernetes); config.Load has validated it.
func FromConfig(c config.Kubernetes) Config {
	sel := map[string]string{}
	for _, e := range c.NodeSelector {
		k, v, _ := strings.Cut(e, "=")
		sel[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return Config{
		Kubeconfig:      c.Kubeconfig,
		Namespace:       c.Namespace,
		RuntimeClass:    c.RuntimeClass,
		NodeSelector:    sel,
		ImagePullPolicy: corev1.PullPolicy(c.ImagePullPolicy),
		NodeName:        c.NodeName,
		StartTimeout:    c.StartTimeout.D(),
		CPURequest:      c.CPURequest,
	}
}

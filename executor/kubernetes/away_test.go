package kubernetes

import (
	"context"
	"errors"
	"net/url"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

// refused is what client-go returns while nothing listens at the API
// server's address.
func refused(verb string) error {
	return &url.Error{Op: verb, URL: "https://10.0.0.1:443/api/v1/namespaces/sandboxes/pods", Err: syscall.ECONNREFUSED}
}

// TestStartWaitsForTheAPIServer: a Pod whose start loses the API server
// (it restarts) is waited for until the server answers again and reports
// the Pod running; a server that stays away ends the wait with ctx,
// reported as unavailable. Against the fake clientset; manifests.sh stops
// the real API server while the replicas' pools start Pods.
func TestStartWaitsForTheAPIServer(t *testing.T) {
	cs := fake.NewClientset()
	b := &Backend{cfg: Config{Namespace: "sandboxes", Kubeconfig: "x"}, client: cs, rest: &rest.Config{Host: "https://10.0.0.1:443"}}
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pdm-sandbox-1", Namespace: "sandboxes"}}
	if _, err := cs.CoreV1().Pods("sandboxes").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := pod.DeepCopy()
	running.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "sandbox", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	// The API server is away for the first three requests (watches or
	// gets), then answers; with stay set it never comes back.
	var tries atomic.Int32
	var stay atomic.Bool
	away := func() bool { return stay.Load() || tries.Add(1) <= 3 }
	cs.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		if away() {
			return true, nil, refused("Get")
		}
		w := watch.NewFake()
		go w.Modify(running)
		return true, w, nil
	})
	cs.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if away() {
			return true, nil, refused("Get")
		}
		return true, pod.DeepCopy(), nil
	})
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := b.waitRunning(wctx, pod); err != nil {
		t.Fatalf("waitRunning after the API server came back: %v (%d requests)", err, tries.Load())
	}
	if tries.Load() < 4 {
		t.Errorf("%d requests: want the start to have waited through the API server's absence", tries.Load())
	}

	stay.Store(true)
	wctx, cancel = context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	t0 := time.Now()
	err := b.waitRunning(wctx, pod)
	if !errors.Is(err, backend.ErrUnavailable) || time.Since(t0) > 10*time.Second {
		t.Errorf("waitRunning with the API server away: %v after %s, want ErrUnavailable when ctx ends", err, time.Since(t0))
	}
	// A refusal (not an absence) is not waited for.
	cs.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("pods is forbidden")
	})
	cs.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, nil, errors.New("pods is forbidden")
	})
	wctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	t0 = time.Now()
	if err := b.waitRunning(wctx, pod); err == nil || time.Since(t0) > 5*time.Second {
		t.Errorf("waitRunning refused: %v after %s, want the refusal at once", err, time.Since(t0))
	}
}

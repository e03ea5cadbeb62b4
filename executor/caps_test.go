package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend/fake"
	"github.com/python-docker-mcp/python-docker-mcp/policy/analyze"
)

// The tests in this file run the executor's use of the optional backend
// capabilities (backend.Preparer, Tree, Packages, Host) on the fake
// runtime with Docker's capabilities held in memory (*fake.Docker): no
// Docker, so they run under -short. The Docker backend's own tests
// (executor/docker) and the real-daemon tests here hold them end to end.

// newFakeDocker starts an executor on a fresh fake.Docker with the default
// config (pool off unless edit turns it on; a wheelhouse configured) and
// checks, when the test ends, that Close left no sandbox behind.
func newFakeDocker(t *testing.T, edit func(*config.Config)) (*Executor, *fake.Docker) {
	t.Helper()
	fd := fake.NewDocker()
	cfg := config.Default()
	cfg.Pool.Enabled = false
	cfg.Package.FindLinks = []string{"/srv/wheels"}
	if edit != nil {
		edit(&cfg)
	}
	e, err := NewWithBackend(context.Background(), ConfigFrom(cfg), fd, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("NewWithBackend: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
		if n := fd.Live(); n != 0 {
			t.Errorf("%d sandbox(es) left after Close: %v", n, fd.Specs())
		}
	})
	return e, fd
}

// A sandbox leases a shared namespace from the Preparer, and gives it back
// once it is removed: the next call's sandbox joins the same one.
func TestCapsNamespaceLeasedAndReturned(t *testing.T) {
	e, fd := newFakeDocker(t, nil)
	created := recordSpecs(fd)
	ctx := tctx(t, time.Minute)
	for i := range 2 {
		res, err := e.Transient(ctx, Request{Code: "print hi"})
		if err != nil || res.Status != "ok" {
			t.Fatalf("call %d: %v %+v", i, err, res)
		}
		eventually(t, "the sandbox removed and its namespace idle", func() bool { return fd.Live() == 0 && fd.Idle() == 1 })
	}
	specs := created()
	if len(specs) != 2 || specs[0].JoinNetwork == "" || specs[0].JoinNetwork != specs[1].JoinNetwork {
		t.Errorf("sandboxes joined %q, want both the same leased namespace", joined(specs))
	}
	if leased, dropped := fd.Leased(); leased != 0 || dropped != 0 {
		t.Errorf("%d namespaces leased, %d dropped after both calls, want 0 and 0", leased, dropped)
	}
}

// Without docker.network_disabled sandboxes have a network of their own:
// nothing is leased.
func TestCapsNoLeaseWithNetwork(t *testing.T) {
	e, fd := newFakeDocker(t, func(c *config.Config) { c.Docker.NetworkDisabled = false })
	created := recordSpecs(fd)
	res, err := e.Transient(tctx(t, time.Minute), Request{Code: "print hi"})
	if err != nil || res.Status != "ok" {
		t.Fatalf("%v %+v", err, res)
	}
	if j := joined(created()); j != "" {
		t.Errorf("a sandbox with network joined %q", j)
	}
}

// recordSpecs has fd record the spec of every sandbox created from now on.
func recordSpecs(fd *fake.Docker) func() []backend.Spec {
	var mu sync.Mutex
	var specs []backend.Spec
	fd.CreateHook = func(spec backend.Spec) error {
		mu.Lock()
		defer mu.Unlock()
		specs = append(specs, spec)
		return nil
	}
	return func() []backend.Spec {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(specs)
	}
}

func joined(specs []backend.Spec) string {
	var s []string
	for _, sp := range specs {
		s = append(s, sp.JoinNetwork)
	}
	return strings.Join(s, ",")
}

// A Create that fails because the leased namespace is gone
// (backend.ErrStale) is tried again, and after a second such failure the
// sandbox gets a namespace of its own: the call runs.
func TestCapsStaleNamespaceRetried(t *testing.T) {
	fd := fake.NewDocker()
	stale := 0
	fd.CreateHook = func(spec backend.Spec) error {
		if spec.JoinNetwork != "" {
			stale++
			return fmt.Errorf("%w: holder %s gone", backend.ErrStale, spec.JoinNetwork)
		}
		return nil
	}
	e := newFakeDockerOn(t, fd)
	res, err := e.Transient(tctx(t, time.Minute), Request{Code: "print hi"})
	if err != nil || res.Status != "ok" {
		t.Fatalf("%v %+v", err, res)
	}
	if stale != 2 {
		t.Errorf("%d creates in a stale namespace, want 2 before one of its own", stale)
	}
	if _, dropped := fd.Leased(); dropped != 2 {
		t.Errorf("%d stale namespaces dropped, want 2 (never reused)", dropped)
	}
	// Any other create error is the call's, at once.
	fd.CreateHook = func(spec backend.Spec) error { return errors.New("refused") }
	if _, err := e.Transient(tctx(t, time.Minute), Request{Code: "print hi"}); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("Transient with a refusing backend: %v, want its error", err)
	}
}

func newFakeDockerOn(t *testing.T, fd *fake.Docker) *Executor {
	t.Helper()
	cfg := config.Default()
	cfg.Pool.Enabled = false
	e, err := NewWithBackend(context.Background(), ConfigFrom(cfg), fd, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("NewWithBackend: %v", err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

// A sandbox that mounts the backend's tree copy and does not start costs
// no call: it is started again without, and the copy is dropped.
func TestCapsTreeDroppedWhenSandboxFails(t *testing.T) {
	fd := fake.NewDocker()
	fd.CreateHook = func(spec backend.Spec) error {
		for _, v := range spec.Volumes {
			if v.Name == fake.TreeVolume {
				return errors.New("the volume is empty")
			}
		}
		return nil
	}
	e := newFakeDockerOn(t, fd)
	fd.MakeTree(context.Background(), backend.Spec{}, "/usr/lib/python3.13")
	res, err := e.Transient(tctx(t, time.Minute), Request{Code: "print hi"})
	if err != nil || res.Status != "ok" {
		t.Fatalf("%v %+v", err, res)
	}
	if fd.HasTree() {
		t.Error("the tree copy is still mounted after a sandbox with it did not start")
	}
}

// The pool's first sandbox reports its standard library: the executor has
// the backend make its tree copy, which later sandboxes mount read-only.
func TestCapsTreeMadeByThePool(t *testing.T) {
	e, fd := newFakeDocker(t, func(c *config.Config) {
		c.Pool.Enabled = true
		c.Pool.Size, c.Pool.MaxSize = 1, 1
		c.Pool.Preload = nil
	})
	created := recordSpecs(fd)
	eventually(t, "the tree copy made", fd.HasTree)
	eventually(t, "a sandbox mounts the tree copy", func() bool {
		res, err := e.Transient(tctx(t, time.Minute), Request{Code: "print hi"})
		if err != nil || res.Status != "ok" {
			t.Fatalf("%v %+v", err, res)
		}
		for _, s := range created() {
			for _, v := range s.Volumes {
				if v.Name == fake.TreeVolume && v.ReadOnly && v.Path == "/usr" {
					return true
				}
			}
		}
		return false
	})
}

// installsTabulate is an installer (fake.Docker.Installer) that resolves
// and installs tabulate 0.9.0 with pip.
func installsTabulate(ctx context.Context, job backend.InstallJob, out io.Writer) (int, error) {
	if strings.Contains(strings.Join(job.Spec.Command, " "), "--dry-run") {
		// The resolver's run: the plan, one line per package, and its count.
		io.WriteString(out, "installer: pip\npdm-resolved "+`{"name":"tabulate","version":"0.9.0","required_by":[]}`+"\npdm-resolved-count 1\n")
		return 0, nil
	}
	io.WriteString(out, "installer: pip\nSuccessfully installed tabulate-0.9.0\n")
	return 0, nil
}

// install-package runs the installer through backend.Packages: the job
// mounts the session's package volume writable and the wheelhouse
// read-only, the output decides the status, and the session's sandbox
// mounts the volume read-only. Cleanup removes the volume.
func TestCapsInstallIntoSession(t *testing.T) {
	e, fd := newFakeDocker(t, nil)
	ctx := tctx(t, time.Minute)
	_, sid, err := e.Persistent(ctx, "", Request{Owner: "alice", Code: "set x 1"})
	if err != nil {
		t.Fatal(err)
	}
	fd.Installer = installsTabulate
	var progress []string
	res, err := e.Install(ctx, InstallRequest{Owner: "alice", SessionID: sid, Name: "tabulate", Specifier: "==0.9.0",
		Progress: func(m string) { progress = append(progress, m) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "ok" || res.Version != "0.9.0" || res.Installer != "pip" {
		t.Errorf("Install = %+v, want ok, version 0.9.0 by pip", res)
	}
	jobs := fd.Jobs()
	if len(jobs) != 2 {
		t.Fatalf("%d installer runs, want 2 (resolve, then install)", len(jobs))
	}
	for _, j := range jobs {
		if len(j.Spec.Volumes) != 1 || j.Spec.Volumes[0].Name != sessionVolume(sid) || j.Spec.Volumes[0].ReadOnly || j.Spec.Volumes[0].Path != PackagesDir {
			t.Errorf("installer volumes %+v, want the session's volume writable at %s", j.Spec.Volumes, PackagesDir)
		}
		if len(j.Binds) != 1 || j.Binds[0].Source != "/srv/wheels" || j.Binds[0].Path != "/wheelhouse/0" || j.Network {
			t.Errorf("installer binds %+v, network %v; want the wheelhouse at /wheelhouse/0 and no network", j.Binds, j.Network)
		}
	}
	if n, err := e.Installed("alice", sid); err != nil || n != 1 {
		t.Errorf("Installed = %d, %v; want 1", n, err)
	}
	if !strings.Contains(strings.Join(progress, "\n"), "Successfully installed") {
		t.Errorf("progress %q lacks the installer's output", progress)
	}
	if err := e.Cleanup(ctx, "alice", sid); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the session's package volume removed", func() bool {
		for _, v := range fd.VolumeNames() {
			if v == sessionVolume(sid) {
				return false
			}
		}
		return true
	})
}

// An installer that fails, finds nothing or runs past package.timeout is
// a result, not an error; the installer is removed each time.
func TestCapsInstallOutcomes(t *testing.T) {
	e, fd := newFakeDocker(t, func(c *config.Config) { c.Package.Timeout = config.Duration(200 * time.Millisecond) })
	ctx := tctx(t, time.Minute)
	for _, tc := range []struct {
		name string
		play func(ctx context.Context, job backend.InstallJob, out io.Writer) (int, error)
		want string
	}{
		{"error", func(ctx context.Context, job backend.InstallJob, out io.Writer) (int, error) {
			io.WriteString(out, "boom\n")
			return 1, nil
		}, "error"},
		{"not_found", func(ctx context.Context, job backend.InstallJob, out io.Writer) (int, error) {
			io.WriteString(out, "ERROR: No matching distribution found for nothere\n")
			return 1, nil
		}, "not_found"},
		{"timeout", func(ctx context.Context, job backend.InstallJob, out io.Writer) (int, error) {
			<-ctx.Done()
			return -1, ctx.Err()
		}, "timeout"},
	} {
		fd.Installer = tc.play
		res, err := e.Install(ctx, InstallRequest{Owner: "bob", Name: "nothere"})
		if err != nil || res.Status != tc.want {
			t.Errorf("%s: Install = %+v, %v; want status %s", tc.name, res, err, tc.want)
		}
	}
	if n, _ := e.Installed("bob", ""); n != 0 {
		t.Errorf("%d packages counted after failed installs, want 0", n)
	}
	// A cancelled install is an error.
	fd.Installer = func(ctx context.Context, job backend.InstallJob, out io.Writer) (int, error) {
		<-ctx.Done()
		return -1, ctx.Err()
	}
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := e.Install(cctx, InstallRequest{Owner: "bob", Name: "nothere"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Install: %v, want context.Canceled", err)
	}
}

// Without backend.Packages (Kubernetes, the plain fake), install-package
// is refused before anything runs, saying what to do instead.
func TestCapsInstallNeedsPackages(t *testing.T) {
	e, _ := newFake(t, nil)
	_, err := e.Install(tctx(t, time.Minute), InstallRequest{Owner: "bob", Name: "tabulate"})
	if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), "image.packages") {
		t.Errorf("Install without package volumes: %v, want ErrInvalidRequest naming image.packages", err)
	}
}

// The reaper asks backend.Host whether a sandbox's server container runs:
// a leftover of a server whose container stopped is removed, one of a
// running server kept; package volumes of gone servers go too.
func TestCapsReaperAsksHost(t *testing.T) {
	fd := fake.NewDocker()
	fd.SetRunning("live", true)
	meta := func(server string) sandboxMeta {
		return sandboxMeta{Kind: backend.KindTransient, Instance: randomHex(8), PID: 1, Host: "elsewhere", Server: server, PIDNS: "pid:[1]", Created: time.Now()}
	}
	spec := func(server string) backend.Spec { return sandboxSpec(config.Default().Docker, Limits{}, meta(server)) }
	ofLive, ofDead := fd.Adopt(spec("live")), fd.Adopt(spec("dead"))
	m := meta("dead")
	m.Packages = "python-docker-mcp-pkgs-dead"
	fd.AddVolume(m.Packages, volumeLabels(m))
	newFakeDockerOn(t, fd)
	if !fd.Has(ofLive) || fd.Has(ofDead) {
		t.Errorf("after the reaper: sandbox of the running server there %v (want true), of the stopped one %v (want false)", fd.Has(ofLive), fd.Has(ofDead))
	}
	if v := fd.VolumeNames(); len(v) != 0 {
		t.Errorf("volumes %v left, want the dead server's removed", v)
	}
	fd.Remove(context.Background(), ofLive)
}

// The server's own container comes from backend.Host and is stamped on
// every sandbox it starts, for the reaper of another server.
func TestCapsSelfStamped(t *testing.T) {
	fd := fake.NewDocker()
	fd.SelfID = "mine"
	e := newFakeDockerOn(t, fd)
	created := recordSpecs(fd)
	if _, err := e.Transient(tctx(t, time.Minute), Request{Code: "print hi"}); err != nil {
		t.Fatal(err)
	}
	if s := created(); len(s) != 1 || s[0].Annotations[LabelServer] != "mine" {
		t.Errorf("sandboxes created %+v, want one annotated %s=mine", s, LabelServer)
	}
}

// A session's package volume lives as long as the session: it goes when
// the session is cleaned up or expires, on a backend with package volumes.
func TestCapsSessionVolumeGoesWithTheSession(t *testing.T) {
	for _, tc := range []struct {
		name string
		ttl  time.Duration // sessions.idle_ttl, 0 = the default
		end  func(t *testing.T, e *Executor, sid string)
	}{
		{"cleanup", 0, func(t *testing.T, e *Executor, sid string) {
			if err := e.Cleanup(tctx(t, time.Minute), "alice", sid); err != nil {
				t.Fatal(err)
			}
		}},
		{"expiry", 300 * time.Millisecond, func(t *testing.T, e *Executor, sid string) {
			eventually(t, "the session expires", func() bool { return len(e.Sessions("alice")) == 0 })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, fd := newFakeDocker(t, func(c *config.Config) {
				if tc.ttl > 0 {
					c.Sessions.IdleTTL = config.Duration(tc.ttl)
				}
			})
			sid := fakeSession(t, e, "alice", "set x 1")
			volumes := func() []string {
				l, err := fd.Volumes(context.Background(), backend.LabelSession)
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, v := range l {
					if v.Labels[backend.LabelSession] == sid {
						names = append(names, v.Name)
					}
				}
				return names
			}
			if got := volumes(); len(got) != 1 {
				t.Fatalf("volumes of a new session: %v, want its package volume", got)
			}
			tc.end(t, e, sid)
			eventually(t, "the session's package volume is removed", func() bool { return len(volumes()) == 0 })
		})
	}
}

// A package installed without a session is the owner's, for transient
// calls: the owner's sandboxes mount the owner's package volume read-only,
// another owner's do not, and Close removes the volume.
func TestCapsInstallForTransientCalls(t *testing.T) {
	e, fd := newFakeDocker(t, nil)
	ctx := tctx(t, time.Minute)
	fd.Installer = installsTabulate
	var mu sync.Mutex
	mounts := map[string][]string{} // owner -> volumes its sandboxes mounted
	fd.CreateHook = func(spec backend.Spec) error {
		mu.Lock()
		defer mu.Unlock()
		for _, v := range spec.Volumes {
			if v.ReadOnly && v.Path != "/usr" {
				owner := spec.Annotations[backend.LabelOwner]
				mounts[owner] = append(mounts[owner], v.Name)
			}
		}
		return nil
	}
	if ir, err := e.Install(ctx, InstallRequest{Owner: "alice", Name: "tabulate"}); err != nil || ir.Status != "ok" || len(ir.Packages) != 1 {
		t.Fatalf("Install = %+v, %v", ir, err)
	}
	for _, owner := range []string{"alice", "bob"} {
		if res, err := e.Transient(ctx, Request{Owner: owner, Code: "print 1", Imports: []analyze.Import{{Module: "tabulate", Line: 1}}}); err != nil || res.Status != "ok" {
			t.Fatalf("%s's call: %+v, %v", owner, res, err)
		}
	}
	jobs := fd.Jobs()
	if len(jobs) == 0 {
		t.Fatal("no installer job ran")
	}
	mu.Lock()
	alice, bob := mounts["alice"], mounts["bob"]
	mu.Unlock()
	if len(alice) != 1 || len(bob) != 0 {
		t.Fatalf("package volumes mounted read-only: alice's sandbox %v, bob's %v; want one for alice, none for bob", alice, bob)
	}
	if !slices.Contains(fd.VolumeNames(), alice[0]) {
		t.Fatalf("alice's volume %s is not among the backend's %v", alice[0], fd.VolumeNames())
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(fd.VolumeNames(), alice[0]) {
		t.Errorf("alice's package volume %s is left after Close", alice[0])
	}
}

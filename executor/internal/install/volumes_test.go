package install

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend/fake"
)

func TestOwnerVolumes(t *testing.T) {
	v := NewVolumes(nil, "inst1", slog.Default())
	ctx := context.Background()
	if got := v.Owner("alice"); got != "" {
		t.Errorf("Owner before any install = %q, want \"\" (pooled sandboxes serve alice)", got)
	}
	vol, release, err := v.Hold(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(vol, "python-docker-mcp-pkgs-inst1-") {
		t.Errorf("alice's volume %q, want it named after the executor's instance", vol)
	}
	if got := v.Owner("alice"); got != "" {
		t.Errorf("Owner while the first install runs = %q, want \"\" until something is installed", got)
	}
	// A second install of alice waits for the first; bob's does not.
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, _, err := v.Hold(wctx, "alice"); err == nil || !strings.Contains(err.Error(), "waiting for your running install") {
		t.Errorf("second Hold of alice's volume: %v, want it to wait until its context ends", err)
	}
	bobs, releaseBob, err := v.Hold(ctx, "bob")
	if err != nil || bobs == vol {
		t.Errorf("Hold of bob's volume = %q, %v; want a volume of his own at once", bobs, err)
	}
	releaseBob()
	v.Add("alice", "pdmdemo==1.0")
	release()
	if got, n := v.Owner("alice"), v.Installed("alice"); got != vol || n != 1 {
		t.Errorf("after an install: Owner %q, Installed %d; want %q, 1", got, n, vol)
	}
	if again, release, err := v.Hold(ctx, "alice"); err != nil || again != vol {
		t.Errorf("Hold after release = %q, %v; want %q", again, err, vol)
	} else {
		release()
	}
	if n := v.Installed("carol"); n != 0 {
		t.Errorf("Installed of an owner who installed nothing = %d", n)
	}
	v.Remove("anything") // no backend: nothing to do
	if n := v.Reap(ctx, "kind", func(map[string]string) bool { return true }); n != 0 {
		t.Errorf("Reap without package volumes = %d, want 0", n)
	}
}

func TestReapAndRemove(t *testing.T) {
	fd := fake.NewDocker()
	fd.AddVolume("mine", map[string]string{"kind": "packages", "instance": "me"})
	fd.AddVolume("theirs", map[string]string{"kind": "packages", "instance": "gone"})
	fd.AddVolume("unlabelled", map[string]string{})
	v := NewVolumes(fd, "me", slog.Default())
	n := v.Reap(context.Background(), "kind", func(l map[string]string) bool { return l["instance"] != "me" })
	if got := fd.VolumeNames(); n != 1 || !slices.Equal(got, []string{"mine", "unlabelled"}) {
		t.Errorf("Reap removed %d, left %v; want 1 removed, mine and unlabelled left", n, got)
	}
	v.Remove("mine")
	v.Remove("")
	if got := fd.VolumeNames(); !slices.Equal(got, []string{"unlabelled"}) {
		t.Errorf("after Remove: %v, want unlabelled left", got)
	}
}

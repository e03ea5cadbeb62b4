package executor

import (
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
	"github.com/python-docker-mcp/python-docker-mcp/executor/internal/owner"
)

// TestSandboxesCarryTheOwnerIdentity checks the labels the reaper reads.
func TestSandboxesCarryTheOwnerIdentity(t *testing.T) {
	meta := sandboxMeta{Kind: backend.KindTransient, PIDNS: "pid:[7]", Server: "abc"}
	l := meta.labels()
	if l[LabelPIDNS] != "pid:[7]" || l[LabelServer] != "abc" {
		t.Errorf("labels %v lack the owner identity", l)
	}
	meta = sandboxMeta{Kind: backend.KindTransient, Instance: "i1", PID: 42, Host: "h"}
	meta.stamp(owner.Identity{PIDNS: "pid:[8]", Container: "c1"})
	want := owner.Server{Instance: "i1", PID: "42", Host: "h", Identity: owner.Identity{PIDNS: "pid:[8]", Container: "c1"}}
	if got := ownerOf(meta.labels()); got != want {
		t.Errorf("ownerOf(labels) = %+v, want %+v", got, want)
	}
}

// TestOwnedStampsEverySite: every container the executor starts for
// itself or a call (sandboxes, helpers, installers, the cost measurement's)
// takes its meta from owned, which carries the whole owner identity.
func TestOwnedStampsEverySite(t *testing.T) {
	e, _ := newFake(t, nil)
	e.self = owner.Identity{PIDNS: "pid:[9]", Container: "c9"}
	before := time.Now()
	m := e.owned(sandboxMeta{Kind: KindInstaller, Owner: "alice"})
	want := owner.Server{Instance: e.instance, PID: strconv.Itoa(e.pid), Host: e.host, Identity: e.self}
	if got := ownerOf(m.labels()); got != want || m.Owner != "alice" || m.Created.Before(before) {
		t.Errorf("owned: owner %+v (want %+v), meta %+v", got, want, m)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if m := e.owned(sandboxMeta{Kind: backend.KindTransient, Created: at}); !m.Created.Equal(at) {
		t.Errorf("owned changed a given creation time to %v", m.Created)
	}
	spec := e.helperSpec(backend.KindNetwork)
	all := maps.Clone(spec.Labels)
	maps.Copy(all, spec.Annotations)
	if got := ownerOf(all); got != want {
		t.Errorf("a helper's labels name %+v, want %+v", got, want)
	}
}

package quota

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/python-docker-mcp/python-docker-mcp/policy"
)

// Take counts what the principal holds plus what the ledger does not
// count; a refusal says the quota, the use, the bound and the key; a
// release gives back once.
func TestTakeAndRelease(t *testing.T) {
	l := New()
	q := policy.Quota{Max: 3, Key: "quotas.sandboxes"}
	r1, err := l.Take(policy.QuotaSandboxes, "alice", 1, 1, q) // one session held
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Take(policy.QuotaSandboxes, "alice", 1, 1, q); err != nil {
		t.Fatal(err)
	}
	_, err = l.Take(policy.QuotaSandboxes, "alice", 1, 1, q)
	var qe *Error
	if !errors.As(err, &qe) || *qe != (Error{Quota: "sandboxes", Use: 3, Asked: 1, Max: 3, Key: "quotas.sandboxes"}) {
		t.Fatalf("alice past her quota: %#v", err)
	}
	for _, want := range []string{"quota sandboxes", "holds 3 of its 3 sandboxes at once", "quotas.sandboxes"} {
		if !strings.Contains(qe.Error(), want) {
			t.Errorf("%q does not say %q", qe.Error(), want)
		}
	}
	if _, err := l.Take(policy.QuotaSandboxes, "bob", 1, 0, q); err != nil {
		t.Errorf("bob while alice is at her quota: %v", err)
	}
	r1()
	r1() // once only
	if _, err := l.Take(policy.QuotaSandboxes, "alice", 1, 1, q); err != nil {
		t.Errorf("alice after a release: %v", err)
	}
	got := l.Stats([]string{policy.QuotaSandboxes, policy.QuotaInflightBytes})
	want := []Stat{{Name: "inflight_bytes"}, {Name: "sandboxes", Use: Use{Total: 3, Top: 2}, Refused: 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
}

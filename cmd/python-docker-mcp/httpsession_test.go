package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSignedSessionIDs: replicas sharing server.session_key_file accept
// each other's session ids, for the subject they were issued to only; a
// tampered id, another key, or an id terminated here is refused.
func TestSignedSessionIDs(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("k", 40)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, b, other := newHTTPSessions(), newHTTPSessions(), newHTTPSessions()
	for _, s := range []*httpSessions{a, b} {
		if err := s.loadKey(keyFile); err != nil {
			t.Fatal(err)
		}
	}
	otherKey := filepath.Join(t.TempDir(), "other")
	os.WriteFile(otherKey, []byte(strings.Repeat("o", 40)), 0o600)
	if err := other.loadKey(otherKey); err != nil {
		t.Fatal(err)
	}
	id := (&sessionIDs{s: a, sub: "alice", bound: true}).Generate()
	if err := a.check(id, "alice"); err != nil {
		t.Fatalf("issuing replica: %v", err)
	}
	if err := b.check(id, "alice"); err != nil {
		t.Errorf("replica with the same key: %v, want the id accepted", err)
	}
	if err := b.check(id, "bob"); err == nil {
		t.Error("another subject's use of the id was accepted")
	}
	if err := other.check(id, "alice"); err == nil {
		t.Error("a replica with another key accepted the id")
	}
	raw, sig, _ := strings.Cut(id, ".")
	if err := b.check(raw+"."+strings.Repeat("0", len(sig)), "alice"); err == nil {
		t.Error("a forged signature was accepted")
	}
	if err := b.check(raw, "alice"); err == nil {
		t.Error("the id without its signature was accepted")
	}
	if _, err := (&sessionIDs{s: b, sub: "alice", bound: true}).Terminate(id); err != nil {
		t.Fatal(err)
	}
	if err := b.check(id, "alice"); err == nil {
		t.Error("an id terminated on this replica was accepted again")
	}
	plain := newHTTPSessions()
	if err := plain.check(id, "alice"); err == nil {
		t.Error("a replica without a key accepted another replica's id")
	}
	short := filepath.Join(t.TempDir(), "short")
	os.WriteFile(short, []byte("tooshort"), 0o600)
	if err := newHTTPSessions().loadKey(short); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("short key: %v, want an error asking for 32 bytes", err)
	}
	if err := newHTTPSessions().loadKey(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing key file accepted")
	}
}

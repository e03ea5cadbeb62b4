package backend

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func validSpec() Spec {
	return Spec{
		Image:      "python-docker-mcp-sandbox:latest",
		Command:    []string{"python3", "-c", "print(1)"},
		User:       "1000:1000",
		WorkingDir: "/workspace",
		Env:        []string{"LANG=C.UTF-8", "EMPTY="},
		Labels: map[string]string{
			"python-docker-mcp.kind":    "transient",
			"python-docker-mcp.session": "0123abcd",
			"example.com/x":             "",
		},
		Annotations: map[string]string{"python-docker-mcp.owner": "alice@example.com: any text"},
		MemoryBytes: 256 << 20, CPUs: 0.5, Pids: 128, TmpBytes: 64 << 20, WorkspaceBytes: 128 << 20,
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Spec)
		wantErr string // "" = valid
	}{
		{"valid", func(*Spec) {}, ""},
		{"no image", func(s *Spec) { s.Image = " " }, "Image"},
		{"no command", func(s *Spec) { s.Command = nil }, "Command"},
		{"empty program", func(s *Spec) { s.Command = []string{""} }, "Command"},
		{"root user", func(s *Spec) { s.User = "0:0" }, "non-root"},
		{"named user", func(s *Spec) { s.User = "nobody" }, "non-root"},
		{"no gid", func(s *Spec) { s.User = "1000" }, "non-root"},
		{"relative workdir", func(s *Spec) { s.WorkingDir = "workspace" }, "WorkingDir"},
		{"root workdir", func(s *Spec) { s.WorkingDir = "/" }, "WorkingDir"},
		{"tmp workdir", func(s *Spec) { s.WorkingDir = "/tmp/" }, "WorkingDir"},
		{"env without =", func(s *Spec) { s.Env = []string{"PATH"} }, "Env entry"},
		{"env without key", func(s *Spec) { s.Env = []string{"=x"} }, "Env entry"},
		{"negative memory", func(s *Spec) { s.MemoryBytes = -1 }, "negative"},
		{"NaN cpus", func(s *Spec) { s.CPUs = math.NaN() }, "negative"},
		{"label value with @", func(s *Spec) { s.Labels["o"] = "alice@example.com" }, "Annotations"},
		{"label value too long", func(s *Spec) { s.Labels["o"] = strings.Repeat("a", 64) }, "63"},
		{"label key with space", func(s *Spec) { s.Labels["a b"] = "x" }, "label key"},
		{"label key bad prefix", func(s *Spec) { s.Labels["Example.com/x"] = "x" }, "DNS subdomain"},
		{"annotation key bad", func(s *Spec) { s.Annotations["-x"] = "x" }, "annotation key"},
		{"joined network", func(s *Spec) { s.NetworkDisabled, s.JoinNetwork = true, "holder" }, ""},
		{"joined network with network", func(s *Spec) { s.NetworkDisabled, s.JoinNetwork = false, "holder" }, "JoinNetwork"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSpec()
			tt.change(&s)
			err := s.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate() = %v, want ErrInvalidSpec mentioning %q", err, tt.wantErr)
			}
		})
	}
}

func TestUIDGID(t *testing.T) {
	uid, gid, err := Spec{User: "1000:2000"}.UIDGID()
	if err != nil || uid != 1000 || gid != 2000 {
		t.Fatalf("UIDGID() = %d, %d, %v, want 1000, 2000, nil", uid, gid, err)
	}
}

func TestSandboxCloseOnce(t *testing.T) {
	calls := 0
	s := NewSandbox("id", nil, nil, nil, func() error { calls++; return errors.New("boom") })
	for range 3 {
		if err := s.Close(); err == nil || err.Error() != "boom" {
			t.Fatalf("Close() = %v, want boom", err)
		}
	}
	if calls != 1 {
		t.Fatalf("close func called %d times, want 1", calls)
	}
}

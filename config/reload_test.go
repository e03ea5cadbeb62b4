package config

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestEveryKeyClassified fails when a key is not in Reloads: whoever adds a
// key decides whether a reload applies it (and makes it so) or it needs a
// restart, and the reload table of config/README.md says the same.
func TestEveryKeyClassified(t *testing.T) {
	known := map[string]bool{}
	for _, k := range Keys() {
		known[k] = true
		switch Reloads[k] {
		case Live, Restart:
		default:
			t.Errorf("key %s is not in config.Reloads: classify it Live (a reload applies it; make it so where it is read) or Restart", k)
		}
	}
	for k := range Reloads {
		if !known[k] {
			t.Errorf("config.Reloads classifies %s, which is not a key", k)
		}
	}
}

func TestChanged(t *testing.T) {
	a, b := Default(), Default()
	if got := Changed(a, b); len(got) != 0 {
		t.Errorf("Changed(default, default) = %v, want none", got)
	}
	b.Docker.Timeout = Duration(time.Minute)
	b.Pool.Preload = []string{"numpy"}
	yes := true
	b.Policy.Capabilities.PTY = &yes
	want := []string{"docker.timeout", "policy.capabilities.pty", "pool.preload"}
	if diff := cmp.Diff(want, Changed(a, b)); diff != "" {
		t.Errorf("Changed (-want +got):\n%s", diff)
	}
}

// TestSplit: restart keys keep their running value, live keys take the new
// one, and each is reported as what it is.
func TestSplit(t *testing.T) {
	running := Default()
	next := Default()
	next.Docker.Timeout = Duration(time.Minute)
	next.Limits.MaxOutputBytes = 1 << 10
	next.Docker.Image = "other:1"
	next.Server.Addr = "127.0.0.1:9"
	merged, live, restart := Split(running, next)
	if diff := cmp.Diff([]string{"docker.timeout", "limits.max_output_bytes"}, live); diff != "" {
		t.Errorf("live (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"docker.image", "server.addr"}, restart); diff != "" {
		t.Errorf("restart (-want +got):\n%s", diff)
	}
	want := running
	want.Docker.Timeout = Duration(time.Minute)
	want.Limits.MaxOutputBytes = 1 << 10
	if diff := cmp.Diff(want, merged); diff != "" {
		t.Errorf("merged (-want +got):\n%s", diff)
	}
	if next.Docker.Image != "other:1" {
		t.Errorf("Split changed its argument: docker.image = %q", next.Docker.Image)
	}
}

func TestReloadOfUnclassifiedIsRestart(t *testing.T) {
	if got := ReloadOf("no.such.key"); got != Restart {
		t.Errorf("ReloadOf(unknown) = %v, want Restart", got)
	}
}

// TestReadmeReloadTable: the table of what a reload applies, in
// config/README.md, says what Reloads says, for every key.
func TestReadmeReloadTable(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]Reload{}
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		if line == "| keys | on reload |" {
			in = true
			continue
		}
		if in && !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, "|")
		if !in || len(cells) < 3 || strings.HasPrefix(cells[1], " ---") {
			continue
		}
		class := Live
		if strings.HasPrefix(strings.TrimSpace(cells[2]), "restart") {
			class = Restart
		}
		for _, m := range regexp.MustCompile("`([a-z_.*]+)`").FindAllStringSubmatch(cells[1], -1) {
			pat := m[1]
			for _, k := range Keys() {
				if k == pat || strings.HasSuffix(pat, ".*") && strings.HasPrefix(k, strings.TrimSuffix(pat, "*")) {
					doc[k] = class
				}
			}
		}
	}
	if len(doc) == 0 {
		t.Fatal("no reload table in config/README.md")
	}
	for _, k := range Keys() {
		got, ok := doc[k]
		switch {
		case !ok:
			t.Errorf("config/README.md: the reload table does not name %s", k)
		case got != ReloadOf(k):
			t.Errorf("config/README.md: the reload table says %s is %v, config.Reloads says %v", k, got, ReloadOf(k))
		}
	}
}

package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// TestHTTPPoolClassesPerSubject runs the built server over HTTP with two
// JWT subjects and a transient pool of one: the pool learns alice's
// imports (scipy, outside the operator's pool.preload) and preloads them
// for her calls only; bob's transient call never finds them imported.
func TestHTTPPoolClassesPerSubject(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	pub, mint := testKeys(t)
	url, _ := startHTTP(t, cli, "--set", "auth.mode=jwt", "--set", "auth.issuer=https://idp.test", "--set", "auth.public_key_path="+pub,
		"--set", "pool.size=1", "--set", "pool.max_size=1")
	murl := strings.TrimSuffix(url, "/mcp") + "/metrics"
	connect := func(sub string) *sdk.ClientSession {
		hc := &http.Client{Transport: bearer{mint(sub, "python:execute python:sessions")}}
		c := sdk.NewClient(&sdk.Implementation{Name: "e2e-pool", Version: "1"}, nil)
		cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatalf("%s connects: %v", sub, err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	alice, bob := connect("alice"), connect("bob")
	run := func(cs *sdk.ClientSession, who, code string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "execute-transient", Arguments: map[string]any{"code": code}})
		if err != nil || res.IsError {
			t.Fatalf("%s's call: %v %q", who, err, text(res))
		}
		out, _ := structured(t, res)["result"].(string) // the last expression's repr
		return out
	}
	// stocked waits until the pool holds its one sandbox: after a call
	// took the last one, the refill of the class the pool learned.
	stocked := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); value(scrape(t, murl), "python_docker_mcp_pool_idle{kind=transient}") != 1; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the pool is still empty after two minutes: %s", what)
			}
		}
	}

	stocked("the first fill")
	run(alice, "alice", "import scipy\nscipy.__name__")
	stocked("a refill for alice's class")
	// The pool learned alice's class: her next scipy call finds it imported.
	warm := "import sys\nwarm = 'scipy' in sys.modules\nimport scipy\nwarm"
	if out := run(alice, "alice", warm); out != "True" {
		t.Fatalf("alice's second scipy call printed %q, want True (scipy preloaded for her)", out)
	}
	stocked("another refill for alice's class")
	check := "import sys\n[m for m in sys.modules if m.split('.')[0] == 'scipy']"
	if out := run(bob, "bob", check); out != "[]" {
		t.Errorf("bob's transient call found %q already imported: alice's learned imports", out)
	}
}

// TestHTTPPoolFrozenSandboxIsRetired freezes (docker pause) every warm
// sandbox of a running server: the next call must not wait on a frozen one
// and be blamed for a timeout; the frozen sandbox it was offered is retired
// (removed) and the call runs in another.
func TestHTTPPoolFrozenSandboxIsRetired(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	url, _, pid := startHTTPServer(t, cli, "--set", "pool.size=2", "--set", "pool.max_size=2")
	murl := strings.TrimSuffix(url, "/mcp") + "/metrics"
	for deadline := time.Now().Add(2 * time.Minute); value(scrape(t, murl), "python_docker_mcp_pool_idle{kind=transient}") != 2; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the pool did not fill in two minutes")
		}
	}
	warm := runningTransient(t, cli, pid)
	if len(warm) != 2 {
		t.Fatalf("%d warm sandboxes, want 2", len(warm))
	}
	var frozen []string
	for _, c := range warm {
		// The cgroup freezer can refuse while a process is between states
		// ("unable to freeze"); a moment later it takes.
		var err error
		for try := 0; try < 10; try++ {
			if _, err = cli.ContainerPause(context.Background(), c.ID, client.ContainerPauseOptions{}); err == nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		frozen = append(frozen, c.ID)
	}
	t.Cleanup(func() { // so that the server can remove them if the test fails
		for _, id := range frozen {
			cli.ContainerUnpause(context.Background(), id, client.ContainerUnpauseOptions{})
		}
	})

	cs := connectHTTP(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "execute-transient", Arguments: map[string]any{"code": "2+2"}})
	if err != nil {
		t.Fatal(err)
	}
	if st := structured(t, res); res.IsError || st["status"] != "ok" || st["result"] != "4" {
		t.Fatalf("2+2 with every warm sandbox frozen: %v %q, want status ok and 4 from a live sandbox", st["status"], text(res))
	}
	// The frozen sandbox the call was offered is retired; one of another
	// class may still wait in the pool, and is pinged in its turn.
	retired := 0
	for _, id := range frozen {
		if _, err := cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{}); err != nil {
			retired++
		}
	}
	if retired == 0 {
		t.Errorf("both frozen sandboxes are still there after the call, want the one it was offered retired")
	}
}

// TestHTTPPoolIdleCap loads a server whose pool may hold 2 with 16 calls at
// once: the warm sandboxes left afterwards never exceed pool.max_size, and
// those kept for the caller never exceed pool.max_per_principal.
func TestHTTPPoolIdleCap(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	url, _, pid := startHTTPServer(t, cli, "--set", "pool.size=2", "--set", "pool.max_size=2", "--set", "quotas.sandboxes=16")
	murl := strings.TrimSuffix(url, "/mcp") + "/metrics"
	cs := connectHTTP(t, url)
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			code := fmt.Sprintf("import json\nprint(%d)", i)
			if i%2 == 1 {
				code = fmt.Sprintf("import decimal\nprint(%d)", i) // another class
			}
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "execute-transient", Arguments: map[string]any{"code": code}})
			if err != nil || res.IsError {
				errs <- fmt.Sprintf("call %d: %v %q", i, err, text(res))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	// Watch the pool settle: late cold starts and refills land after the
	// calls have answered. The pool's own count never passes the cap.
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if n := value(scrape(t, murl), "python_docker_mcp_pool_idle{kind=transient}"); n > 2 {
			t.Fatalf("pool_idle{transient} = %v after a 16-way load, want at most pool.max_size 2", n)
		}
	}
	// The calls' own sandboxes are removed in the background after their
	// answer, but for those kept for the caller's next calls (at most
	// pool.max_per_principal, 4); once the others are gone, what still
	// runs is the pool and those.
	const most = 2 + 4
	n := idleTransient(t, cli, pid)
	for deadline := time.Now().Add(30 * time.Second); n > most && time.Now().Before(deadline); n = idleTransient(t, cli, pid) {
		time.Sleep(200 * time.Millisecond)
	}
	if n > most {
		t.Fatalf("%d running transient sandboxes with no call 45 s after the load, want at most pool.max_size 2 + pool.max_per_principal 4", n)
	}
	if k := value(scrape(t, murl), "python_docker_mcp_reuse_idle{}"); k > 4 {
		t.Errorf("reuse_idle = %v after a 16-way load of one principal, want at most pool.max_per_principal 4", k)
	}
}

// connectHTTP connects the go-sdk client to a server without
// authentication (loopback).
func connectHTTP(t *testing.T, url string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "e2e-pool", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

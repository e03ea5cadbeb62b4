package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

func TestStdinFilter(t *testing.T) {
	var replies strings.Builder
	out := &stdoutFilter{w: &replies}
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":7,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9007199254740993}}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 200) + `"}}`,
		`{"jsonrpc":"2.0","method":"ping","params":{"x":"` + strings.Repeat("a", 200) + `"}}`,
		`{"jsonrpc":"2.0","id":"s","method":"ping"}`,
	}, "\n") + "\n"
	got, err := io.ReadAll(filterStdin(strings.NewReader(in), 120, out, slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
	want := []string{
		`{"jsonrpc":"2.0","id":7,"method":"ping"}`,
		`{"id":"\u0000pdm-id:9007199254740993","jsonrpc":"2.0","method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"\u0000pdm-id:9007199254740993"}}`,
		`{"message too long"`,
		`{"jsonrpc":"2.0","id":"s","method":"ping"}`,
	}
	if len(lines) != len(want) {
		t.Fatalf("passed %d lines, want %d:\n%s", len(lines), len(want), got)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d = %s, want %s", i, lines[i], want[i])
		}
	}
	if r := replies.String(); !strings.Contains(r, `"id":1,`) || !strings.Contains(r, "server.max_body_bytes") || strings.Count(r, "\n") != 1 {
		t.Errorf("answers written by the filter = %q, want one error for id 1 naming the limit", r)
	}
	replies.Reset()
	fmt.Fprintf(out, "%s\n", `{"jsonrpc":"2.0","id":"\u0000pdm-id:9007199254740993","result":{}}`)
	if r := replies.String(); r != `{"jsonrpc":"2.0","id":9007199254740993,"result":{}}`+"\n" {
		t.Errorf("restored = %s", r)
	}
}

func TestAnnounceStdioOnlyOnATerminal(t *testing.T) {
	var b strings.Builder
	r, w, _ := os.Pipe()
	defer r.Close()
	defer w.Close()
	announceStdio(r, &b)
	if null, err := os.Open(os.DevNull); err == nil {
		announceStdio(null, &b) // a character device, but not a terminal
		null.Close()
	}
	if b.Len() != 0 {
		t.Errorf("hint on a pipe or /dev/null: %q", b.String())
	}
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal to test with: %v", err)
	}
	defer ptmx.Close()
	announceStdio(ptmx, &b)
	if !strings.Contains(b.String(), "waiting for an MCP client") {
		t.Errorf("hint on a terminal = %q", b.String())
	}
}

// rawServer starts the built server over stdio with args, for tests that
// speak raw JSON-RPC lines. It returns the server's stdin, the lines the
// server writes to stdout (closed when stdout ends) and its stderr. When
// t ends, stdin is closed and the server has 20 seconds to exit before it
// is killed; its stderr is logged if t failed.
func rawServer(t *testing.T, args ...string) (io.WriteCloser, <-chan string, *lockedBuffer) {
	t.Helper()
	cmd := serverCommand(args...)
	cmd.Env = serverEnv(t)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr.String())
		}
	})
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return stdin, lines, stderr
}

// TestStdioIDsEchoedExactly speaks raw JSON-RPC lines to the built server:
// every id comes back exactly as written, and an oversized message gets an
// error for its id instead of a hang.
func TestStdioIDsEchoedExactly(t *testing.T) {
	dockertest.Require(t)
	var stderr *lockedBuffer
	t.Cleanup(func() { // after the server has exited
		if stderr != nil && strings.Contains(stderr.String(), "waiting for an MCP client") {
			t.Errorf("the terminal hint was printed for a pipe:\n%s", stderr.String())
		}
	})
	stdin, responses, stderr := rawServer(t, "--set", "server.max_body_bytes=64k", "--set", "pool.enabled=false")
	send := func(line string) {
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	next := func() string {
		select {
		case r := <-responses:
			return r
		case <-time.After(30 * time.Second):
			t.Fatalf("no response; stderr:\n%s", stderr.String())
		}
		return ""
	}
	send(`{"jsonrpc":"2.0","id":"init-1","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if r := next(); !strings.HasPrefix(r, `{"jsonrpc":"2.0","id":"init-1","result":`) {
		t.Fatalf("initialize: %s", r)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, id := range []string{`"a string"`, `""`, `7`, `-3`, `0`, `9007199254740993`, `12345678901234567890123`, `1.5`, `0.1`, `1e3`} {
		send(`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`)
		r := next()
		if want := `{"jsonrpc":"2.0","id":` + id + `,"result":{}}`; r != want {
			t.Errorf("ping with id %s answered %s, want %s", id, r, want)
		}
	}
	send(`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"execute-transient","arguments":{"code":"` + strings.Repeat("x", 70<<10) + `"}}}`)
	r := next()
	var resp struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(r), &resp); err != nil || string(resp.ID) != "99" || resp.Error.Code != -32600 || !strings.Contains(resp.Error.Message, "server.max_body_bytes") {
		t.Errorf("oversized message answered %.300s, want an error for id 99 naming server.max_body_bytes", r)
	}
	send(`{"jsonrpc":"2.0","id":100,"method":"ping"}`)
	if r := next(); r != `{"jsonrpc":"2.0","id":100,"result":{}}` {
		t.Errorf("after the oversized message: %s", r)
	}
}

package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/server"
	"golang.org/x/tools/txtar"

	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/auth"
	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
)

// A transcript (testdata/*.txtar) is a whole exchange with the tool layer
// over stdio, with the fake executor behind it:
//
//	comment: what the exchange shows
//	-- config.json --     optional: fields of config.Config over the defaults
//	-- exec.json --       optional: the executor.Result the fake answers with
//	-- call NAME --       one JSON-RPC message, on one line
//	-- reply NAME --      the response to it, indented (none for notifications)
//
// Replies are compared with cmp.Diff (-want +got) as JSON values; go test
// -update rewrites them. Notifications the server sends (progress, logs)
// are not part of a transcript: their order relative to the reply is not
// fixed.
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no transcripts in testdata")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) { runTranscript(t, file) })
	}
}

func runTranscript(t *testing.T, file string) {
	ar, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	exec := &scriptedExec{result: executor.Result{Status: "ok"}, ended: make(chan error, 1), files: map[string][]byte{}}
	for _, f := range ar.Files {
		switch f.Name {
		case "config.json":
			if err := json.Unmarshal(f.Data, &cfg); err != nil {
				t.Fatalf("%s: config.json: %v", file, err)
			}
		case "exec.json":
			if err := json.Unmarshal(f.Data, &exec.result); err != nil {
				t.Fatalf("%s: exec.json: %v", file, err)
			}
		}
	}
	ts := startTranscript(t, cfg, exec)
	changed := false
	for i := 0; i < len(ar.Files); i++ {
		f := ar.Files[i]
		name, ok := strings.CutPrefix(f.Name, "call ")
		if !ok {
			continue
		}
		var msg struct {
			ID json.RawMessage `json:"id"`
		}
		if err := json.Unmarshal(f.Data, &msg); err != nil {
			t.Fatalf("%s: call %s: %v", file, name, err)
		}
		got := ts.send(t, f.Data, msg.ID)
		if got == nil {
			continue // a notification
		}
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, got, "", "  "); err != nil {
			t.Fatalf("%s: reply %s is not JSON: %v\n%s", file, name, err, got)
		}
		pretty.WriteByte('\n')
		j := i + 1
		if j >= len(ar.Files) || ar.Files[j].Name != "reply "+name {
			if !*update {
				t.Errorf("%s: call %s has no reply section (run go test -update to record it); got:\n%s", file, name, pretty.Bytes())
				continue
			}
			ar.Files = append(ar.Files[:j], append([]txtar.File{{Name: "reply " + name}}, ar.Files[j:]...)...)
		}
		if *update {
			if !bytes.Equal(ar.Files[j].Data, pretty.Bytes()) {
				ar.Files[j].Data, changed = pretty.Bytes(), true
			}
			continue
		}
		if diff := cmp.Diff(jsonValue(t, ar.Files[j].Data), jsonValue(t, got)); diff != "" {
			t.Errorf("%s: reply %s differs (-want +got):\n%s", file, name, diff)
		}
	}
	if changed {
		if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func jsonValue(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return v
}

// transcriptServer is the tool layer served over an in-process stdio pipe.
type transcriptServer struct {
	w     io.Writer
	lines chan []byte
}

func startTranscript(t *testing.T, cfg config.Config, exec *scriptedExec) *transcriptServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv := newServer(t, cfg, Deps{Exec: exec})
	cr, sw := io.Pipe() // server -> test
	sr, cw := io.Pipe() // test -> server
	t.Cleanup(func() { cw.Close(); sw.Close() })
	stdio := server.NewStdioServer(srv.MCP())
	stdio.SetContextFunc(func(ctx context.Context) context.Context {
		return auth.WithPrincipal(ctx, auth.Principal{Sub: "tester", Scopes: []string{"python:execute", "python:sessions"}})
	})
	go stdio.Listen(ctx, sr, sw)
	ts := &transcriptServer{w: cw, lines: make(chan []byte, 64)}
	go func() {
		sc := bufio.NewScanner(cr)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			ts.lines <- append([]byte(nil), sc.Bytes()...)
		}
		close(ts.lines)
	}()
	return ts
}

// send writes one message and returns the response with its id, skipping
// notifications; nil for a message without id.
func (ts *transcriptServer) send(t *testing.T, msg []byte, id json.RawMessage) []byte {
	t.Helper()
	if _, err := fmt.Fprintf(ts.w, "%s\n", bytes.TrimSpace(msg)); err != nil {
		t.Fatal(err)
	}
	if len(id) == 0 {
		return nil
	}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-ts.lines:
			if !ok {
				t.Fatalf("server closed the pipe before answering %s", id)
			}
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			if err := json.Unmarshal(line, &m); err != nil {
				t.Fatalf("server wrote a line that is not JSON: %v\n%s", err, line)
			}
			if bytes.Equal(m.ID, id) {
				return line
			}
		case <-timeout:
			t.Fatalf("no reply to %s", msg)
		}
	}
}

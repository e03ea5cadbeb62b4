package mcpserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/auth"
	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
)

// BenchmarkExecuteTransient is one execute-transient call with state
// through the mcp-go server (decode, argument validation, static gate,
// policy, the fake executor, rendering, output validation), not encoding
// the response.
func BenchmarkExecuteTransient(b *testing.B) {
	ctx := auth.WithPrincipal(context.Background(), auth.Principal{Sub: "bench", Scopes: []string{"python:execute"}})
	cfg := config.Default()
	r := "42"
	exec := &scriptedExec{result: executor.Result{Status: "ok", Stdout: "hi\n", Result: &r, State: json.RawMessage(`{"x":41,"y":[1,2]}`)}, files: map[string][]byte{}}
	srv := newServer(b, cfg, Deps{Exec: exec, Version: "bench", Logger: slog.New(slog.DiscardHandler)})
	msg := json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute-transient","arguments":{"code":"import json\nprint('hi')\nx + 1","state":{"x":41,"y":[1,2]},"timeout":5}}}`)
	b.ReportAllocs()
	for b.Loop() {
		res := srv.MCP().HandleMessage(ctx, msg)
		if r, ok := res.(mcp.JSONRPCResponse); !ok || r.Result.(*mcp.CallToolResult).IsError {
			b.Fatalf("%#v", res)
		}
		exec.requests = exec.requests[:0]
	}
}

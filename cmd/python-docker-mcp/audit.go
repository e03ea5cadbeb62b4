package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/auth"
	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/metrics"
	"github.com/python-docker-mcp/python-docker-mcp/policy"
)

// audit gives every tool call an id (the decision log's call_id, with its
// MCP session) and, after the call, writes its outcome (status, duration,
// sandbox session, cancelled) to the decision log.
func audit(gate *policy.Gate, log *slog.Logger) server.ToolHandlerMiddleware {
	return func(next server.ToolHandlerFunc) server.ToolHandlerFunc {
		return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			b := make([]byte, 8)
			_, _ = rand.Read(b)
			call := policy.Call{ID: hex.EncodeToString(b)}
			if cs := server.ClientSessionFromContext(ctx); cs != nil {
				call.MCPSession = cs.SessionID()
			}
			ctx = policy.WithCall(ctx, call)
			t0 := time.Now()
			res, err := next(ctx, req)
			o := metrics.Classify(ctx, res, err)
			sid := o.SessionID
			if sid == "" {
				sid = req.GetString("session_id", "")
			}
			var pp policy.Principal
			if p, ok := auth.PrincipalFrom(ctx); ok {
				pp = policy.Principal{Sub: p.Sub, Scopes: p.Scopes}
			}
			if pp.Scopes == nil {
				pp.Scopes = []string{}
			}
			if o.Status == "cancelled" {
				log.Info("tool call cancelled by the client; no reply is sent", "tool", req.Params.Name, "call_id", call.ID, "session_id", sid)
			}
			if lerr := gate.LogOutcome(context.WithoutCancel(ctx), policy.Outcome{
				Tool: req.Params.Name, Principal: pp, SessionID: sid, Status: o.Status, Duration: time.Since(t0),
			}); lerr != nil {
				log.Error("decision log: outcome not written", "tool", req.Params.Name, "call_id", call.ID, "err", lerr)
			}
			return res, err
		}
	}
}

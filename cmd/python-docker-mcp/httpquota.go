package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/auth"
	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/quota"
	"github.com/python-docker-mcp/python-docker-mcp/policy"
)

// quotaErrorCode is the JSON-RPC error code of a request a quota refused
// (implementation-defined server error range); its data is the
// quota.Error: quota, use, asked, max, key.
const quotaErrorCode = -32029

// quotasFunc returns the quotas of the request's principal, as the policy
// decides them; nil for none (no quota is enforced).
type quotasFunc func(ctx context.Context, p auth.Principal) policy.Quotas

// engineQuotas asks the gate's current engine for p's quotas; when the
// policy cannot judge, p gets the configured quotas.
func engineQuotas(g *policy.Gate) quotasFunc {
	return func(ctx context.Context, p auth.Principal) policy.Quotas {
		e := g.Engine()
		q, err := e.Quotas(ctx, policy.Principal{Sub: p.Sub, Scopes: p.Scopes})
		if err != nil {
			return e.ConfiguredQuotas()
		}
		return q
	}
}

// inflightBytes keeps the request bodies one principal has being handled
// at once within its quota (policy.QuotaInflightBytes): a body is counted
// from when it is read until its response is done. A request past the
// quota gets a JSON-RPC error (HTTP 200, so that clients show its
// message; a notification gets 429). It runs after authentication and
// server.max_body_bytes.
func inflightBytes(ledger *quota.Ledger, quotas quotasFunc, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil || quotas == nil {
			next.ServeHTTP(w, r)
			return
		}
		p, _ := auth.PrincipalFrom(r.Context())
		q, ok := quotas(r.Context(), p)[policy.QuotaInflightBytes]
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		release, err := ledger.Take(policy.QuotaInflightBytes, p.Sub, int64(len(body)), 0, q)
		if err != nil {
			qe := err.(*quota.Error)
			qe.Hint = "wait for the principal's other requests to be answered"
			var msg struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal(body, &msg) // only on refusal: the id as written
			writeQuotaError(w, msg.ID, qe)
			return
		}
		defer release()
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// writeQuotaError answers the request with id (nil or null for a
// notification) with qe.
func writeQuotaError(w http.ResponseWriter, id json.RawMessage, qe *quota.Error) {
	if idKey(id) == "" {
		http.Error(w, qe.Error(), http.StatusTooManyRequests)
		return
	}
	b, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      id,
		"error":   map[string]any{"code": quotaErrorCode, "message": qe.Error(), "data": qe},
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

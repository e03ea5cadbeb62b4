package main

import (
	"net/http"

	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/auth"
	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/quota"
)

// Pacing of each principal's POSTs (quota.Pace): after a burst of
// requestBurst, at most requestsPerSecond a second start (the others
// wait their turn), and the time a principal's requests hold one of the
// server's analysis slots counts workFactor times, so that one principal
// keeps the server's cores busy for at most a quarter of a core
// sustained.
const (
	requestsPerSecond = 50
	requestBurst      = 20
	workFactor        = 4
)

// newPace returns the pace of HTTP requests, charged with the time each
// principal holds a slot of analyses.
func newPace(analyses *quota.Fair) *quota.Pace {
	p := quota.NewPace(requestsPerSecond, requestBurst, workFactor)
	analyses.OnRelease(p.Charge)
	return p
}

// fairSlot makes each POST wait for its principal's turn (pace: a
// principal's requests start at most at its rate), then for one of the server's analysis slots
// for its principal (quota.Fair: a principal holds at most its share of
// them, and its requests wait behind its own, never behind another
// principal's) before its body is read: the server's own work on a
// request (reading and decoding its body, the scope check, the quotas,
// the MCP layer, the static analysis of its code) then runs on the
// principal's share of the cores, so a flood of requests or of costly
// code from one principal queues on its own slot while another
// principal's requests take the free one. The slot is handed to the
// request's analysis, or given back when its tool handler starts for a
// tool that analyses nothing (mcpserver.Deps.Analyses), and at the
// latest when the response is done. It runs after token verification
// (auth.Authenticator.Verify), which reads no body; a request whose
// client goes away while it waits gets 503.
func fairSlot(pace *quota.Pace, f *quota.Fair, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		p, _ := auth.PrincipalFrom(r.Context())
		if err := pace.Wait(r.Context(), p.Sub); err != nil {
			http.Error(w, "the request ended while it waited for its turn: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		ctx, held, err := f.Hold(r.Context(), p.Sub)
		if err != nil {
			http.Error(w, "the request ended while it waited for its turn: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		defer held.Release()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
)

// healthTimeout bounds one /healthz check of the backend.
const healthTimeout = 3 * time.Second

// health serves the HTTP transport's probes. /livez says only that the
// process serves HTTP (a liveness probe: restarting the server does not
// bring an unreachable backend back). /healthz also asks the backend
// (ping: the Docker daemon, or the Kubernetes API server) and answers 503
// while it does not answer (a readiness probe: a replica that cannot start
// sandboxes gets no calls). Neither needs a token nor says more than the
// status: the cause goes to the log, once per change.
type health struct {
	ping    func(context.Context) error
	backend string
	log     *slog.Logger

	mu   sync.Mutex
	down bool
}

func (h *health) livez(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintln(w, `{"status":"ok"}`)
}

func (h *health) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	err := h.ping(ctx)
	h.mu.Lock()
	changed := (err != nil) != h.down
	h.down = err != nil
	h.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		if changed {
			h.log.Warn("/healthz: the backend does not answer; reporting unavailable until it does", "backend", h.backend, "err", err)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, `{"status":"unavailable","backend":%q}`+"\n", h.backend)
		return
	}
	if changed {
		h.log.Info("/healthz: the backend answers again", "backend", h.backend)
	}
	fmt.Fprintln(w, `{"status":"ok"}`)
}

// resourceURL is the URL clients reach the MCP endpoint at: server.public_url,
// else http:// + the address listened on + server.path.
func resourceURL(s config.Server, listened net.Addr) string {
	if s.PublicURL != "" {
		return s.PublicURL
	}
	return "http://" + listened.String() + s.Path
}

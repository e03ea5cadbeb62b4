package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/auth"
	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/mcpserver"
	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/metrics"
	"github.com/python-docker-mcp/python-docker-mcp/cmd/python-docker-mcp/internal/quota"
	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
	"github.com/python-docker-mcp/python-docker-mcp/executor/docker"
	"github.com/python-docker-mcp/python-docker-mcp/executor/image"
	"github.com/python-docker-mcp/python-docker-mcp/executor/kubernetes"
	"github.com/python-docker-mcp/python-docker-mcp/policy"
)

// stdioWorkers is how many tool calls the stdio transport runs at once.
const stdioWorkers = 32

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// newLogger logs at cfg's level, held in level so that a reload can change
// it (log.level).
func newLogger(cfg config.Log, level *slog.LevelVar, w io.Writer) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(cfg.Level))
	level.Set(l)
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// newExecutor starts the executor on the configured backend.
func newExecutor(ctx context.Context, cfg config.Config, log *slog.Logger) (*executor.Executor, error) {
	if cfg.Backend != "kubernetes" {
		b, err := docker.Open(ctx, log)
		if err != nil {
			return nil, err
		}
		return executor.NewWithBackend(ctx, executor.ConfigFrom(cfg), b, log)
	}
	kubernetes.LogTo(log)
	kcfg := kubernetes.FromConfig(cfg.Kubernetes)
	kcfg.Log = log
	b, err := kubernetes.New(kcfg)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := b.Ping(pctx); err != nil {
		return nil, err
	}
	log.Info("sandboxes run as Kubernetes Pods", "namespace", b.Namespace())
	return executor.NewWithBackend(ctx, executor.ConfigFrom(cfg), b, log)
}

// runServe serves MCP until ctx ends (SIGINT/SIGTERM) or stdin closes, then
// removes every sandbox it started.
func runServe(ctx context.Context, g *global, l *config.Loaded, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		return usageError(stderr, fmt.Errorf("serve takes no arguments, got %q", args))
	}
	cfg := l.Config
	level := new(slog.LevelVar)
	log := newLogger(cfg.Log, level, stderr)
	slog.SetDefault(log)
	for _, w := range l.Warnings {
		log.Warn(w)
	}
	if l.File != "" {
		log.Info("config loaded", "file", l.File)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// The sandbox image is built and kept current on the local daemon;
	// Kubernetes nodes get it from their registry (or an import).
	var images mcpserver.ImageWaiter
	if cfg.Backend == "docker" {
		cli, err := docker.Connect(ctx)
		if err != nil {
			log.Error("cannot serve", "err", err)
			return exitDocker
		}
		defer cli.Close()
		recipe := image.RecipeFrom(cfg)
		why := image.Explain(ctx, cli, cfg.Docker.Image, recipe)
		if why != "" {
			log.Warn(why)
		}
		buildLine := func(line string) { log.Info("image build", "line", line) }
		w := &imageWaiter{m: image.Start(ctx, cli, cfg.Docker.Image, recipe, buildLine), log: log, why: why}
		w.retry = func() { w.m.Retry(ctx, cli, cfg.Docker.Image, recipe, buildLine) }
		go w.Wait(ctx, nil) // logs a missing image once, at start
		images = w
	}

	engine, err := policy.Load(ctx, cfg)
	if err != nil {
		log.Error("policy does not load", "err", err)
		return exitConfig
	}
	gate := policy.NewGate(engine)
	defer gate.Close()

	exec, err := newExecutor(ctx, cfg, log)
	if err != nil {
		log.Error("cannot start the executor", "err", err)
		return exitDocker
	}
	// The instance id names this process in the sandboxes' labels and, on
	// Kubernetes, in its Lease and the session records it holds.
	log.Info("server started", "instance", exec.Instance(), "version", version, "backend", cfg.Backend, "transport", cfg.Server.Transport)
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		log.Info("stopping: removing this server's sandboxes", "instance", exec.Instance())
		if err := exec.Close(cctx); err != nil {
			log.Error("removing sandboxes at shutdown", "err", err)
			return
		}
		log.Info("stopped: this server's sandboxes are removed (sessions others share stay with them)", "instance", exec.Instance())
	}()

	// One owner of the configuration in force: the policy, the executor
	// and the tool descriptions all take theirs from it, in one reload.
	run := newRunning(cfg, log, level)
	run.policy = gate.Reload
	run.exec = exec.Reload
	watcher := config.NewWatcher(g.options(), l)
	watcher.OnError(func(err error) {
		log.Error("config reload failed: the file does not load; nothing applied, the running configuration is kept", "err", err)
	})

	sessions := newHTTPSessions()
	if f := cfg.Server.SessionKeyFile; f != "" && cfg.Server.Transport == "http" {
		if err := sessions.loadKey(f); err != nil {
			fmt.Fprintf(stderr, "python-docker-mcp: server.session_key_file: %v\n", err)
			return exitConfig
		}
	}
	mcpSessions := func() int {
		if cfg.Server.Transport == "http" {
			return sessions.Live()
		}
		return 1
	}
	// One ledger for every quota the server counts; the policy decides
	// each principal's bounds.
	ledger := quota.New()
	ledger.Source(policy.QuotaSessions, func() quota.Use { return quota.Use{Total: int64(exec.Stats().Sessions), Top: -1} })
	sessions.ledger, sessions.quotas = ledger, engineQuotas(gate)
	m := metrics.New(metrics.Sources{Executor: exec.Stats, MCPSessions: mcpSessions,
		Quotas: func() []quota.Stat { return ledger.Stats(policy.QuotaNames) }})
	// The cores the server gives its own work on requests, shared
	// fairly between principals by the HTTP transport and the analysis.
	analyses := mcpserver.NewAnalyses()
	srv := mcpserver.New(mcpserver.Deps{
		Config:     run.Config,
		Gate:       gate,
		Exec:       exec,
		Installer:  exec,
		Image:      images,
		Logger:     log,
		Version:    version,
		Middleware: []server.ToolHandlerMiddleware{m.Middleware, audit(gate, log)},
		Quotas:     ledger,
		Analyses:   analyses,
	})
	run.told = func(old, cfg config.Config) {
		if srv.Reconfigured(old, cfg) {
			log.Info("config reload: the tools' descriptions changed; clients were told (notifications/tools/list_changed)")
		}
	}
	watcher.Subscribe(func(nl *config.Loaded) { run.apply(ctx, nl) })
	go watcher.Run(ctx)

	if addr := cfg.Server.MetricsAddr; addr != "" {
		stopMetrics, err := serveMetrics(ctx, addr, m, log)
		if err != nil {
			log.Error("cannot serve metrics", "err", err)
			return exitConfig
		}
		defer stopMetrics()
	}

	switch cfg.Server.Transport {
	case "http":
		err = serveHTTP(ctx, cfg, srv, sessions, analyses, m, exec.Ping, log)
	default:
		local := auth.Local(cfg.Auth.Scopes)
		stdio := server.NewStdioServer(srv.MCP())
		stdio.SetContextFunc(func(ctx context.Context) context.Context { return auth.WithPrincipal(ctx, local) })
		stdio.SetErrorLogger(slog.NewLogLogger(log.Handler(), slog.LevelError))
		// mcp-go runs 5 tool calls at once by default; more concurrent
		// clients would queue in the server rather than in the pool.
		server.WithWorkerPoolSize(stdioWorkers)(stdio)
		log.Info("serving MCP over stdio", "image", cfg.Docker.Image, "profile", cfg.Policy.Profile)
		announceStdio(stdin, stderr)
		// stdin: the size limit and exact ids first, then the cancellation
		// bookkeeping; stdout: replies to cancelled requests are dropped
		// before the original ids are put back.
		// A closed stdout ends the server as EOF on stdin does.
		survivePipes()
		client := &clientOutput{w: stdout, gone: func(err error) {
			log.Info("stdout is closed: the client is gone; cancelling its calls and stopping", "err", err)
			cancel()
		}}
		out := &stdoutFilter{w: client}
		cf := newCancelFilter(out)
		in := stdioTasks(auth.WithPrincipal(ctx, local), srv, filterStdin(stdin, int64(cfg.Server.MaxBodyBytes), out, log), out)
		err = stdio.Listen(ctx, cf.Reader(in), cf)
	}
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		log.Error("server stopped", "err", err)
		if errors.As(err, new(configError)) {
			return exitConfig
		}
		return exitFail
	}
	return exitOK
}

// configError marks a serving failure caused by the configuration (exit 3).
type configError struct{ err error }

func (e configError) Error() string { return e.err.Error() }
func (e configError) Unwrap() error { return e.err }

// serveHTTP serves Streamable HTTP at server.path, /healthz (ping: the
// backend answers), /livez, and the protected resource metadata (naming
// server.public_url, else the listen address), until ctx ends.
func serveHTTP(ctx context.Context, cfg config.Config, srv *mcpserver.Server, sessions *httpSessions, analyses *quota.Fair, m *metrics.Metrics, ping func(context.Context) error, log *slog.Logger) error {
	addr := cfg.Server.Addr
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return configError{fmt.Errorf("listen on %s (server.addr): %w", addr, err)}
	}
	resource := resourceURL(cfg.Server, ln.Addr())
	a, err := auth.New(ctx, cfg.Auth, auth.Options{
		ResourceURL: resource, ListenAddr: addr, Logger: log, MaxBodyBytes: int64(cfg.Server.MaxBodyBytes),
	})
	if err != nil {
		ln.Close()
		return configError{fmt.Errorf("auth: %w", err)}
	}
	if p := a.DevTokenPath(); p != "" {
		log.Info("dev mode: use the token in this file as the bearer token", "path", p)
	}
	mcpHTTP := server.NewStreamableHTTPServer(srv.MCP(), server.WithEndpointPath(cfg.Server.Path), server.WithStreamableHTTPLogger(log),
		server.WithSessionIdManagerResolver(sessions), server.WithSessionIdleTTL(httpSessionIdleTTL))
	mux := http.NewServeMux()
	// The token is checked before the principal's turn (fairSlot), the
	// body read only after it.
	mcp := inflightBytes(sessions.ledger, sessions.quotas, sessions.Middleware(taskRequests(srv, exactHTTPIDs(mcpHTTP))))
	mux.Handle(cfg.Server.Path, limitBody(int64(cfg.Server.MaxBodyBytes), a.Verify(fairSlot(newPace(analyses), analyses, a.Scopes(mcp)))))
	if cfg.Server.MetricsAddr == "" {
		mux.Handle("/metrics", m.Handler())
	}
	for _, p := range a.MetadataPaths() {
		mux.Handle(p, a.MetadataHandler())
	}
	h := &health{ping: ping, backend: cfg.Backend, log: log}
	mux.HandleFunc("/healthz", h.healthz)
	mux.HandleFunc("/livez", h.livez)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	log.Info("serving MCP over Streamable HTTP", "url", resource, "listen", ln.Addr().String(), "auth", cfg.Auth.Mode)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mcpHTTP.Shutdown(sctx)
	return hs.Shutdown(sctx)
}

// httpSessionIdleTTL ends a Streamable HTTP session that sent nothing for
// this long; its id then gets 404 and the client initializes again.
const httpSessionIdleTTL = 24 * time.Hour

// serveMetrics serves /metrics on its own listener (server.metrics_addr)
// until ctx ends or the returned stop is called.
func serveMetrics(ctx context.Context, addr string, m *metrics.Metrics, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (server.metrics_addr): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	log.Info("serving Prometheus metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}, nil
}

// limitBody caps request bodies; a larger one gets 413 from the reader.
func limitBody(n int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > n {
			http.Error(w, fmt.Sprintf("request body over %d bytes (server.max_body_bytes)", n), http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, n)
		next.ServeHTTP(w, r)
	})
}

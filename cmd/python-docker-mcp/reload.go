package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor"
)

// running owns the configuration in force: the one the policy engine was
// built from, the executor was given and the tool descriptions state. A
// reload puts a new one in force as a whole or not at all; what reads it
// (Config) sees one value, never a mix.
//
// A reload applies every changed key config.Reloads marks Live; a changed
// Restart key keeps its running value and is logged, by name, as needing
// a restart (the others still apply). A new configuration the policy
// cannot be built from is logged and nothing of it applies.
type running struct {
	cur   atomic.Pointer[config.Config]
	mu    sync.Mutex // serialises apply
	log   *slog.Logger
	level *slog.LevelVar // log.level

	// policy builds and swaps in the engine of a configuration.
	policy func(context.Context, config.Config) error
	// exec puts the executor's part of a configuration in force.
	exec func(executor.Config) error
	// told is called once a new configuration is in force (the tools'
	// descriptions, tools/list_changed); nil for none.
	told func(old, cfg config.Config)
}

func newRunning(cfg config.Config, log *slog.Logger, level *slog.LevelVar) *running {
	r := &running{log: log, level: level}
	r.cur.Store(&cfg)
	return r
}

// Config is the configuration in force. Safe for concurrent use.
func (r *running) Config() config.Config { return *r.cur.Load() }

// apply puts what it can of l in force (see running) and logs exactly
// what it did.
func (r *running) apply(ctx context.Context, l *config.Loaded) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.Config()
	cfg, live, restart := config.Split(old, l.Config)
	for _, k := range restart {
		was, _ := old.Value(k)
		now, _ := l.Config.Value(k)
		r.log.Warn("config reload: this key needs a restart to change; the running value is kept",
			"key", k, "running", show(was), "file", show(now))
	}
	if len(live) == 0 {
		if len(restart) == 0 {
			r.log.Info("config reload: nothing changed", "file", l.File)
		} else {
			r.log.Info("config reload: nothing applied; restart the server for the keys above", "file", l.File)
		}
		return
	}
	if err := r.policy(ctx, cfg); err != nil {
		r.log.Error("config reload failed: the policy does not load; nothing applied, the running configuration is kept",
			"file", l.File, "changed", strings.Join(live, ", "), "err", err)
		return
	}
	if err := r.exec(executor.ConfigFrom(cfg)); err != nil {
		if perr := r.policy(ctx, old); perr != nil {
			r.log.Error("config reload: the running policy could not be restored", "err", perr)
		}
		r.log.Error("config reload failed: the executor refused it; nothing applied, the running configuration is kept",
			"file", l.File, "changed", strings.Join(live, ", "), "err", err)
		return
	}
	if r.level != nil {
		var lv slog.Level
		if lv.UnmarshalText([]byte(cfg.Log.Level)) == nil {
			r.level.Set(lv)
		}
	}
	r.cur.Store(&cfg)
	msg := "configuration reloaded"
	if len(restart) > 0 {
		msg = "configuration reloaded, except the keys that need a restart"
	}
	r.log.Info(msg, "file", l.File, "applied", strings.Join(live, ", "))
	if r.told != nil {
		r.told(old, cfg)
	}
}

// show is a config value as a log shows it.
func show(v any) string {
	switch x := v.(type) {
	case fmt.Stringer:
		return x.String()
	case *bool:
		if x == nil {
			return "unset"
		}
		return fmt.Sprint(*x)
	}
	return fmt.Sprint(v)
}

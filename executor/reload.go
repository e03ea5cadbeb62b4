package executor

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

// config is the configuration in force. A call reads it once, when it
// begins, and keeps what it read.
func (e *Executor) config() *Config { return e.cfg.Load() }

// poolSet is the warm pools of one configuration: replaced as a whole when
// a reload changes what their sandboxes are.
type poolSet struct {
	t, s *sandboxPool  // transient sandboxes; sandboxes for new sessions (each may be nil)
	stop chan struct{} // closed when the set is retired or the executor closes
	once sync.Once
}

func (ps *poolSet) close() { ps.once.Do(func() { close(ps.stop) }) }

// pool is the transient pool in force (nil when pooling is off, and
// while the first set is being made: its fills may start sandboxes
// before it is stored).
func (e *Executor) pool() *sandboxPool {
	if ps := e.pools.Load(); ps != nil {
		return ps.t
	}
	return nil
}

// spool is the pool of sandboxes for new sessions (nil when off, or
// before the first set is stored).
func (e *Executor) spool() *sandboxPool {
	if ps := e.pools.Load(); ps != nil {
		return ps.s
	}
	return nil
}

// startPools makes cfg's pools and starts their upkeep; it ends when the
// set is retired or the executor closes.
func (e *Executor) startPools(cfg Config) *poolSet {
	ps := &poolSet{
		t:    newPool(e, cfg.Pool, backend.KindTransient, cfg.Pool.Size),
		s:    newPool(e, cfg.Pool, backend.KindPersistent, min(cfg.Pool.Size, 1)),
		stop: make(chan struct{}),
	}
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		select {
		case <-e.stop:
		case <-ps.stop:
		}
		ps.close()
	}()
	for _, p := range []*sandboxPool{ps.t, ps.s} {
		if p != nil {
			e.bg.Add(1)
			go func() {
				defer e.bg.Done()
				p.Run(ps.stop)
			}()
		}
	}
	return ps
}

// retire stops a replaced set's upkeep and removes its idle sandboxes,
// and for startupTimeout more those that join it late: creations it had
// under way, and cold starts that lost their race to a refill (they end
// within startupTimeout). Calls that took one of its sandboxes keep it.
// Close ends the wait (it removes every sandbox).
func (e *Executor) retire(ps *poolSet) {
	ps.close()
	for _, p := range []*sandboxPool{ps.t, ps.s} {
		if p == nil {
			continue
		}
		e.bg.Add(1)
		go func() {
			defer e.bg.Done()
			t := time.NewTicker(500 * time.Millisecond)
			defer t.Stop()
			end := time.After(startupTimeout + time.Second)
			for {
				for _, sb := range p.Drain() {
					e.destroy(sb)
				}
				select {
				case <-e.stop:
					return
				case <-end:
					return
				case <-t.C:
				}
			}
		}()
	}
}

// restartOnly are the executor's keys a reload cannot change: the
// sandbox's image and hardening, which every sandbox alive shares.
func restartOnly(old, cfg Config) []string {
	var out []string
	a := config.Config{Docker: old.Docker, Limits: old.Limits, Outputs: old.Outputs, Package: old.Package,
		Pool: old.Pool, Sessions: old.Sessions, AllowedModules: old.AllowedModules, BlockedModules: old.BlockedModules}
	b := config.Config{Docker: cfg.Docker, Limits: cfg.Limits, Outputs: cfg.Outputs, Package: cfg.Package,
		Pool: cfg.Pool, Sessions: cfg.Sessions, AllowedModules: cfg.AllowedModules, BlockedModules: cfg.BlockedModules}
	for _, k := range config.Changed(a, b) {
		if config.ReloadOf(k) != config.Live {
			out = append(out, k)
		}
	}
	return out
}

// Reload puts cfg in force for the calls that begin after it returns:
// their limits and maxima (docker.timeout, memory_limit, cpu_limit,
// pids_limit, tmp_size, workspace_size), the size caps (limits.*,
// outputs.*), installs (package.*), the module lists and session limits.
// Calls under way keep the limits they began with, and sessions the
// sandbox limits they started with. The warm pools follow: a new
// pool.size or pool.max_size resizes them; other pool keys or new sandbox
// limits replace them (their idle sandboxes are removed, the new pools
// fill). A cfg that changes a key config.Reloads marks Restart (the
// sandbox's image and hardening) is refused whole, naming the keys.
// Safe for concurrent use.
func (e *Executor) Reload(cfg Config) error {
	if err := checkConfig(cfg); err != nil {
		return err
	}
	e.reloadMu.Lock()
	defer e.reloadMu.Unlock()
	// e.mu is held throughout: Close waits for the pools' goroutines
	// only once no new ones can start.
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	old := e.config()
	if keys := restartOnly(*old, cfg); len(keys) > 0 {
		return fmt.Errorf("%s cannot change while the server runs: restart it", strings.Join(keys, ", "))
	}
	e.cfg.Store(&cfg)
	// Kept sandboxes were made with the old settings: none serves again.
	e.warm.Flush()
	oldLim, _ := resolveLimits(old.Docker, Limits{})
	newLim, _ := resolveLimits(cfg.Docker, Limits{})
	sameSandboxes := oldLim.Memory == newLim.Memory && oldLim.CPUs == newLim.CPUs && oldLim.Pids == newLim.Pids &&
		old.Docker.TmpSize == cfg.Docker.TmpSize && old.Docker.WorkspaceSize == cfg.Docker.WorkspaceSize
	op, np := old.Pool, cfg.Pool
	op.Size, op.MaxSize, np.Size, np.MaxSize = 0, 0, 0, 0
	ps := e.pools.Load()
	resizable := sameSandboxes && reflect.DeepEqual(op, np) &&
		(ps.t != nil) == (cfg.Pool.Enabled && cfg.Pool.Size > 0) &&
		(ps.s != nil) == (cfg.Pool.Enabled && min(cfg.Pool.Size, 1) > 0)
	if resizable {
		if ps.t != nil {
			ps.t.Resize(cfg.Pool.Size, cfg.Pool.MaxSize)
		}
		if ps.s != nil {
			ps.s.Resize(min(cfg.Pool.Size, 1), 0)
		}
		return nil
	}
	next := e.startPools(cfg)
	next.t.Carry(ps.t)
	next.s.Carry(ps.s)
	e.pools.Store(next)
	e.retire(ps)
	return nil
}

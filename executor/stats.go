package executor

import "sync/atomic"

// Stats are the executor's counters, read by the metrics endpoint. Counts
// are totals since New; Idle, Sandboxes and Sessions are current values.
type Stats struct {
	// Pools are the warm pools ("transient", and "persistent" for new
	// sessions); empty when pool.enabled is false.
	Pools []PoolStats
	// SandboxStarts counts sandbox starts attempted (pooled and cold);
	// SandboxStartFailures those that failed (Docker error, missing image,
	// runner not ready). A start refused because the executor is closing
	// is neither.
	SandboxStarts        int64
	SandboxStartFailures int64
	// RunnersLoaded counts sandboxes whose runner ran the code an earlier
	// sandbox compiled; RunnersCompiled those that compiled its source
	// (every sandbox until the executor has the code).
	RunnersLoaded   int64
	RunnersCompiled int64
	// Sandboxes are the containers running now (pooled, transient, sessions).
	Sandboxes int
	// Sessions are the persistent sessions held now.
	Sessions int
	// Reuse counts the sandboxes kept for their principal's transient
	// calls (pool.reuse: principal).
	Reuse ReuseStats
}

// PoolStats describe one warm pool.
type PoolStats struct {
	Kind string
	// Size is the number of sandboxes the pool keeps ready; Idle how many
	// are ready now.
	Size int
	Idle int
	// Hits are calls served from the pool; Misses calls the pool could not
	// serve (empty, or limits other than the pool's) that started cold.
	Hits   int64
	Misses int64
}

// startCounters count sandbox starts; embedded in Executor.
type startCounters struct {
	starts, failures atomic.Int64
}

// countStart records the outcome of one start.
func (c *startCounters) countStart(err error) {
	if err == ErrClosed {
		return
	}
	c.starts.Add(1)
	if err != nil {
		c.failures.Add(1)
	}
}

// Stats returns the executor's counters. Safe for concurrent use; cheap
// enough to call on every metrics scrape.
func (e *Executor) Stats() Stats {
	st := Stats{
		SandboxStarts:        e.counts.starts.Load(),
		SandboxStartFailures: e.counts.failures.Load(),
		RunnersLoaded:        e.runner.Loaded(),
		RunnersCompiled:      e.runner.Compiled(),
	}
	for _, p := range []*sandboxPool{e.pool(), e.spool()} {
		if p == nil {
			continue
		}
		var ps PoolStats
		ps.Kind, ps.Size, ps.Idle, ps.Hits, ps.Misses = p.Stats()
		st.Pools = append(st.Pools, ps)
	}
	if e.warm != nil {
		st.Reuse = e.warm.Stats()
	}
	e.mu.Lock()
	st.Sandboxes = len(e.live)
	e.mu.Unlock()
	st.Sessions = e.sessions.count()
	return st
}

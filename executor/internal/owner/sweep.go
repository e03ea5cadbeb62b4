package owner

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

// Sweep removes from a backend the sandboxes that no server would remove
// otherwise: those of servers that are gone (Orphans), and this server's
// own that it lost track of (Strays).
type Sweep struct {
	Backend backend.Backend
	// Instance is this server's executor instance id.
	Instance string
	// Named are the sandboxes that session records name: they outlive the
	// server that started them, and the records' expiry decides their end.
	Named func(context.Context) (map[string]bool, error)
	// Known says whether this server tracks sandbox id.
	Known func(id string) bool
	// Remove removes sandbox id (remembering a failure, to retry).
	Remove func(id string)
	Log    *slog.Logger
}

// Orphans removes the sandboxes whose server alive says is gone.
func (s Sweep) Orphans(ctx context.Context, alive func(labels map[string]string) bool) (int, error) {
	list, err := s.Backend.List(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("list sandboxes: %w", err)
	}
	named, err := s.Named(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range list {
		l := c.All()
		if l[backend.LabelKind] == "" || c.Removing || named[c.ID] || alive(l) {
			continue
		}
		s.Remove(c.ID)
		n++
	}
	return n, nil
}

// Strays removes the sandboxes of the given kinds labelled with this
// server's instance that it does not track and no session record names,
// created at least minAge ago. They come from a start whose clean-up
// failed: a Create that lost the backend half way (the Kubernetes API
// server restarted while a Pod started, say) and could not remove what it
// had made.
func (s Sweep) Strays(ctx context.Context, minAge time.Duration, kinds ...string) (int, error) {
	list, err := s.Backend.List(ctx, map[string]string{backend.LabelInstance: s.Instance})
	if err != nil {
		return 0, fmt.Errorf("list this server's sandboxes: %w", err)
	}
	named, err := s.Named(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range list {
		kind := c.Labels[backend.LabelKind]
		if !slices.Contains(kinds, kind) || c.Removing || named[c.ID] || s.Known(c.ID) || time.Since(c.Created) < minAge {
			continue
		}
		s.Log.Warn("removing a sandbox this server started and lost track of (its start failed and could not clean up)",
			"container", c.ID, "kind", kind, "created", c.Created.UTC().Format(time.RFC3339))
		s.Remove(c.ID)
		n++
	}
	return n, nil
}

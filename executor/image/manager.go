package image

import (
	"context"
	"sync"
)

// Manager ensures the image in the background while the server serves, and
// lets tool calls that need the image wait for it. Safe for concurrent use.
type Manager struct {
	done chan struct{}

	mu       sync.Mutex
	err      error
	last     string
	watchers map[int]Progress
	next     int
}

// Start begins ensuring ref in the background. A failed build is kept as
// the error of every Wait; Retry starts again (e.g. once Docker is back).
func Start(ctx context.Context, cli Docker, ref string, r Recipe, progress Progress) *Manager {
	m := &Manager{watchers: map[int]Progress{}}
	m.start(ctx, cli, ref, r, progress)
	return m
}

func (m *Manager) start(ctx context.Context, cli Docker, ref string, r Recipe, progress Progress) {
	done := make(chan struct{})
	m.mu.Lock()
	m.done, m.err = done, nil
	m.mu.Unlock()
	go func() {
		_, err := Ensure(ctx, cli, ref, r, func(line string) {
			if progress != nil {
				progress(line)
			}
			m.mu.Lock()
			m.last = line
			ws := make([]Progress, 0, len(m.watchers))
			for _, w := range m.watchers {
				ws = append(ws, w)
			}
			m.mu.Unlock()
			for _, w := range ws {
				w(line)
			}
		})
		m.mu.Lock()
		m.err = err
		m.mu.Unlock()
		close(done)
	}()
}

// Retry ensures again after a failure; it is a no-op while a build runs.
func (m *Manager) Retry(ctx context.Context, cli Docker, ref string, r Recipe, progress Progress) {
	m.mu.Lock()
	done := m.done
	m.mu.Unlock()
	select {
	case <-done:
		m.start(ctx, cli, ref, r, progress)
	default:
	}
}

// Ready reports whether the image is there (no error once done).
func (m *Manager) Ready() bool {
	select {
	case <-m.doneChan():
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.err == nil
	default:
		return false
	}
}

func (m *Manager) doneChan() chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.done
}

// Wait blocks until the image is ready or ctx ends. While it waits, each
// build line goes to progress (the last line first, so a late waiter knows
// where the build is).
func (m *Manager) Wait(ctx context.Context, progress Progress) error {
	done := m.doneChan()
	select {
	case <-done:
	default:
		m.mu.Lock()
		id := m.next
		m.next++
		last := m.last
		if progress != nil {
			m.watchers[id] = progress
		}
		m.mu.Unlock()
		if progress != nil && last != "" {
			progress(last)
		}
		defer func() {
			m.mu.Lock()
			delete(m.watchers, id)
			m.mu.Unlock()
		}()
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

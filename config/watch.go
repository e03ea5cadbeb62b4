package config

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watcher keeps the current configuration and reloads it when the file
// changes or the process gets SIGHUP. It watches the file's directory, not
// the file, so in-place writes, editors' rename-over and rm + recreate are
// all seen; events are debounced. A new file that does not load is reported
// to OnError and the running configuration is kept.
type Watcher struct {
	opts     Options
	debounce time.Duration
	cur      atomic.Pointer[Loaded]

	mu      sync.Mutex
	subs    []func(*Loaded)
	onError func(error)
}

// NewWatcher starts from an already loaded configuration.
func NewWatcher(opts Options, first *Loaded) *Watcher {
	w := &Watcher{opts: opts, debounce: 100 * time.Millisecond, onError: func(error) {}}
	w.cur.Store(first)
	return w
}

// Current returns the configuration in force. Safe for concurrent use.
func (w *Watcher) Current() *Loaded { return w.cur.Load() }

// Subscribe registers fn, called with each valid new configuration (in the
// watcher's goroutine, one at a time).
func (w *Watcher) Subscribe(fn func(*Loaded)) {
	w.mu.Lock()
	w.subs = append(w.subs, fn)
	w.mu.Unlock()
}

// OnError sets the function told about a reload that failed.
func (w *Watcher) OnError(fn func(error)) {
	w.mu.Lock()
	w.onError = fn
	w.mu.Unlock()
}

// Reload loads the configuration again now. On success the new one is
// stored and subscribers are told when it differs from the old one.
func (w *Watcher) Reload() error {
	l, err := Load(w.opts)
	if err != nil {
		w.mu.Lock()
		onErr := w.onError
		w.mu.Unlock()
		onErr(err)
		return err
	}
	old := w.cur.Swap(l)
	if old != nil && reflect.DeepEqual(old.Config, l.Config) {
		return nil
	}
	w.mu.Lock()
	subs := append([]func(*Loaded){}, w.subs...)
	w.mu.Unlock()
	for _, fn := range subs {
		fn(l)
	}
	return nil
}

// Run watches until ctx ends. With no config file (and no default file's
// directory) only SIGHUP triggers reloads.
func (w *Watcher) Run(ctx context.Context) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, sigHUP)
	defer signal.Stop(hup)

	var events <-chan fsnotify.Event
	var errs <-chan error
	path, _ := FileFor(w.opts)
	if path == "" {
		home := w.opts.Home
		if home == "" {
			home, _ = os.UserHomeDir()
		}
		if home != "" {
			path = DefaultFile(home)
		}
	}
	if path != "" {
		fw, err := fsnotify.NewWatcher()
		if err != nil {
			return err
		}
		defer fw.Close()
		if err := fw.Add(filepath.Dir(path)); err == nil {
			events, errs = fw.Events, fw.Errors
		}
	}
	name := filepath.Clean(path)
	var timer *time.Timer
	var fire <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			w.Reload()
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if filepath.Clean(ev.Name) != name {
				continue
			}
			if timer == nil {
				timer = time.NewTimer(w.debounce)
			} else {
				timer.Reset(w.debounce)
			}
			fire = timer.C
		case <-fire:
			fire = nil
			if _, err := os.Stat(name); err != nil {
				continue // removed: wait for it to come back
			}
			w.Reload()
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			w.mu.Lock()
			onErr := w.onError
			w.mu.Unlock()
			onErr(err)
		}
	}
}

var sigHUP os.Signal = syscall.SIGHUP

package config

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestWatchReload makes 25 changes in a row, mixing the ways files change
// on disk, with invalid files in between, and checks that each ends with
// the right configuration in force and that subscribers saw it.
func TestWatchReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	write := func(body string) {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("pool:\n  size: 0\n")
	opts := Options{File: path, Home: dir}
	first, err := Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWatcher(opts, first)
	var mu sync.Mutex
	var seen []int
	var reloadErrs int
	w.Subscribe(func(l *Loaded) {
		mu.Lock()
		seen = append(seen, l.Config.Pool.Size)
		mu.Unlock()
	})
	w.OnError(func(error) {
		mu.Lock()
		reloadErrs++
		mu.Unlock()
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	time.Sleep(50 * time.Millisecond) // let the watch start

	// eventually polls cond for up to 10 s.
	eventually := func(cond func() bool) bool {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if cond() {
				return true
			}
		}
		return cond()
	}
	waitFor := func(step int, want int) {
		t.Helper()
		if !eventually(func() bool { return w.Current().Config.Pool.Size == want }) {
			t.Fatalf("step %d: pool.size = %d, want %d", step, w.Current().Config.Pool.Size, want)
		}
	}
	body := func(n int) string { return fmt.Sprintf("pool:\n  size: %d\n", n) }
	for step := 1; step <= 25; step++ {
		switch step % 4 {
		case 0: // in-place write (truncate and write the same inode)
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(body(step))
			f.Close()
		case 1: // editor style: write a temp file, rename over
			tmp := filepath.Join(dir, ".config.yaml.swp")
			os.WriteFile(tmp, []byte(body(step)), 0o644)
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
		case 2: // rm + recreate
			os.Remove(path)
			time.Sleep(20 * time.Millisecond)
			write(body(step))
		case 3: // an invalid file first: the old config stays
			write("pool:\n  size: [broken\n")
			time.Sleep(300 * time.Millisecond)
			if got := w.Current().Config.Pool.Size; got != step-1 {
				t.Fatalf("step %d: invalid file replaced the config: pool.size = %d, want %d", step, got, step-1)
			}
			write(body(step))
		}
		waitFor(step, step)
	}
	// Current is swapped before subscribers are told, in the watcher's
	// goroutine: give the last notice time to arrive.
	ended := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) > 0 && seen[len(seen)-1] == 25
	}
	got := eventually(ended)
	mu.Lock()
	defer mu.Unlock()
	if !got {
		t.Errorf("subscribers saw %v, want it to end with 25", seen)
	}
	if reloadErrs == 0 {
		t.Errorf("no reload error reported for the invalid files")
	}
}

func TestSIGHUPReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	os.WriteFile(path, []byte("pool:\n  size: 1\n"), 0o644)
	opts := Options{File: path, Home: dir}
	first, err := Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWatcher(opts, first)
	w.debounce = time.Hour // only the signal may reload
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)
	time.Sleep(50 * time.Millisecond)
	os.WriteFile(path, []byte("pool:\n  size: 2\n"), 0o644)
	p, _ := os.FindProcess(os.Getpid())
	p.Signal(sigHUP)
	deadline := time.Now().Add(10 * time.Second)
	for w.Current().Config.Pool.Size != 2 {
		if time.Now().After(deadline) {
			t.Fatal("SIGHUP did not reload")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

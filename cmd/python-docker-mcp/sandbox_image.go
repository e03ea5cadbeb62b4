package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/python-docker-mcp/python-docker-mcp/executor/image"
)

// imageWaiter is what the tools wait on for the sandbox image. It logs a
// failure once, with the same text the tool results carry, and re-checks
// an operator's own image that was missing (after a `docker pull` the
// next call works without a restart).
type imageWaiter struct {
	m     *image.Manager
	retry func() // re-runs the check in the background
	log   *slog.Logger
	// why explains a build that started with the server (explainBuild);
	// calls that wait for it get it as their first progress message.
	why string

	mu     sync.Mutex
	logged string // the failure last logged ("" = none)
}

// imageUnavailable is the text of a missing or unbuildable image, in the
// log and in tool results alike.
func imageUnavailable(err error) string {
	return "the sandbox image is not available: " + err.Error()
}

func (w *imageWaiter) Wait(ctx context.Context, progress image.Progress) error {
	if w.why != "" && progress != nil && !w.m.Ready() {
		progress(w.why)
	}
	err := w.m.Wait(ctx, progress)
	if err != nil && errors.Is(err, image.ErrNotBuildable) {
		w.retry()
		err = w.m.Wait(ctx, progress)
	}
	if ctx.Err() == nil {
		w.report(err)
	}
	return err
}

// report logs a new failure once, and its end.
func (w *imageWaiter) report(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err == nil && w.logged != "":
		w.log.Info("the sandbox image is available now")
		w.logged = ""
	case err != nil && imageUnavailable(err) != w.logged:
		w.logged = imageUnavailable(err)
		w.log.Error(w.logged)
	}
}

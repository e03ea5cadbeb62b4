package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/moby/moby/client"

	"github.com/python-docker-mcp/python-docker-mcp/executor/image"
)

// explainBuild says, before a build starts, why the managed sandbox image
// docker.image is about to be built and what else the operator could do
// ("" when nothing will be built: the image is current or not managed).
// A new tag alone changes nothing in the image: image.packages does. When
// another tag of the managed repository already holds the same recipe, it
// says so, since the build would take minutes to make the same image.
func explainBuild(ctx context.Context, cli *client.Client, ref string, r image.Recipe) string {
	if !image.Managed(ref) {
		return ""
	}
	st, err := image.Check(ctx, cli, ref, r)
	if err != nil || st == image.Current {
		return ""
	}
	var same []string
	list, err := cli.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).
		Add("reference", image.ManagedRepository).Add("label", image.LabelRecipe+"="+r.Hash())})
	if err == nil {
		for _, img := range list.Items {
			for _, tag := range img.RepoTags {
				if tag != ref {
					same = append(same, tag)
				}
			}
		}
	}
	pk := strings.Join(r.Packages, " ")
	switch {
	case len(same) > 0:
		return fmt.Sprintf("docker.image is %s, which does not exist; %s was built from the same recipe (image.packages: %s), so building %s takes minutes and gives the same image. "+
			"To use it, set docker.image to %s (or remove docker.image); for a different image, change image.packages too. Building %s now.",
			ref, strings.Join(same, ", "), pk, ref, same[0], ref)
	case st == image.Missing:
		return fmt.Sprintf("docker.image %s does not exist: building it now from Debian %s with image.packages (%s); this takes minutes, once. "+
			"A tag alone does not change what is in the image: image.packages does.", ref, r.Release, pk)
	default:
		return fmt.Sprintf("docker.image %s was built from another recipe (image.packages, image.release, image.mirror, docker.user or docker.working_dir changed): "+
			"rebuilding it now with image.packages (%s); this takes minutes, and calls wait for it.", ref, pk)
	}
}

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

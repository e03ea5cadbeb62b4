package image

import (
	"context"
	"fmt"
	"strings"

	"github.com/moby/moby/client"
)

// Lister is the part of the Docker client Explain uses.
type Lister interface {
	Docker
	ImageList(ctx context.Context, options client.ImageListOptions) (client.ImageListResult, error)
}

// Explain says, before a build starts, why the managed sandbox image
// docker.image is about to be built and what else the operator could do
// ("" when nothing will be built: the image is current or not managed).
// A new tag alone changes nothing in the image: image.packages does. When
// another tag of the managed repository already holds the same recipe, it
// says so, since the build would take minutes to make the same image.
func Explain(ctx context.Context, cli Lister, ref string, r Recipe) string {
	if !Managed(ref) {
		return ""
	}
	st, err := Check(ctx, cli, ref, r)
	if err != nil || st == Current {
		return ""
	}
	var same []string
	list, err := cli.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).
		Add("reference", ManagedRepository).Add("label", LabelRecipe+"="+r.Hash())})
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
	case st == Missing:
		return fmt.Sprintf("docker.image %s does not exist: building it now from Debian %s with image.packages (%s); this takes minutes, once. "+
			"A tag alone does not change what is in the image: image.packages does.", ref, r.Release, pk)
	default:
		return fmt.Sprintf("docker.image %s was built from another recipe (image.packages, image.release, image.mirror, docker.user or docker.working_dir changed): "+
			"rebuilding it now with image.packages (%s); this takes minutes, and calls wait for it.", ref, pk)
	}
}

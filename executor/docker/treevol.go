package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

// Labels of a tree volume: the image it is a copy of and the directory.
const (
	LabelImage = "python-docker-mcp.image"
	LabelTree  = "python-docker-mcp.tree"
)

// PackagesDir is where a sandbox sees its package volume (the executor's
// PackagesDir): the tree volume is never mounted over it.
const PackagesDir = "/opt/pdm-packages"

// treeMarker is the file a filler writes into a tree volume once Docker
// has copied the image's directory into it: a volume without it is a fill
// that did not finish.
const treeMarker = ".python-docker-mcp-tree"

// treeVolume is a named volume holding a copy of the image's top-level
// directory that holds the interpreter, its libraries and its packages
// (/usr in the built-in image), which Docker sandboxes mount read-only
// over that directory. With the fuse-overlayfs storage driver (this
// machine's), each container's root filesystem is a new FUSE mount whose
// page cache starts cold, so every interpreter read its binary, its
// shared libraries and every module it imported through FUSE; a volume is
// a plain directory of the host, its pages cached across containers.
//
// A tree volume is one per image and directory, shared by every server
// of the daemon (a copy of 700 MB per server start would cost each start
// about 9 CPU seconds), and kept as long as its image exists: the reaper
// removes it once the image is gone.
type treeVolume struct {
	name string // the volume
	path string // the image's directory it is a copy of
}

// mountIn has spec mount the volume read-only over the image's
// directory; nothing (false) when v is nil.
func (v *treeVolume) mountIn(spec *backend.Spec) bool {
	if v == nil {
		return false
	}
	spec.Volumes = append(spec.Volumes, backend.Volume{Name: v.name, Path: v.path, ReadOnly: true})
	return true
}

// treeState is what the backend knows of its tree volume.
type treeState struct {
	vol   atomic.Pointer[treeVolume]
	tried atomic.Bool // made (or tried to make) once per backend
}

// DropTree stops mounting the tree volume: a sandbox that mounted it did
// not start. The volume may have been removed behind the backend's back
// (docker volume prune while no sandbox ran): Docker would then mount an
// empty one.
func (b *Backend) DropTree() bool {
	v := b.tree.vol.Load()
	if v == nil || !b.tree.vol.CompareAndSwap(v, nil) {
		return false
	}
	b.log.Warn("a sandbox that mounts the interpreter tree volume did not start; sandboxes read the image's own files from now on", "volume", v.name)
	return true
}

// treeVolumeName names the tree volume of an image ID and directory.
func treeVolumeName(imageID, dir string) string {
	id := strings.TrimPrefix(imageID, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	return "python-docker-mcp-tree-" + id + strings.ReplaceAll(dir, "/", "-")
}

// treeOf is the top-level directory that holds the image's standard
// library stdlib ("/usr" for "/usr/lib/python3.13"), or "" when no volume
// can be mounted there: stdlib must be an absolute, clean path at least
// three levels deep, and its top-level directory none of those the
// sandbox writes to or the system needs, nor one that holds the working
// directory or the package directory.
func treeOf(stdlib, workdir string) string {
	if !path.IsAbs(workdir) || path.Clean(workdir) == "/" || !path.IsAbs(stdlib) || path.Clean(stdlib) != stdlib || strings.Count(stdlib, "/") < 3 {
		return ""
	}
	top := "/" + strings.SplitN(stdlib[1:], "/", 2)[0]
	switch top {
	case "/tmp", "/proc", "/dev", "/sys", "/etc", "/run", "/var", "/boot", "/home", "/root", "/mnt", "/media", "/srv":
		return ""
	}
	for _, d := range []string{workdir, PackagesDir} {
		if d == top || strings.HasPrefix(d, top+"/") {
			return ""
		}
	}
	return top
}

// MakeTree has later sandboxes mount the tree volume of the directory
// that holds the image's standard library stdlib (as a fresh sandbox
// reported it), filling it first when no server has. Only once per
// backend; on any failure sandboxes keep reading the image's own files.
func (b *Backend) MakeTree(ctx context.Context, helper backend.Spec, stdlib string) {
	if !b.tree.tried.CompareAndSwap(false, true) {
		return
	}
	dir := treeOf(stdlib, helper.WorkingDir)
	if dir == "" {
		b.log.Warn("the sandbox's standard library is not under a directory a volume can be mounted over; sandboxes read the image's own files", "path", stdlib)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	start := time.Now()
	v, filled, err := b.fillTree(ctx, helper, dir)
	if err != nil {
		b.log.Warn("copy the image's interpreter tree into a volume; sandboxes read the image's own files", "path", dir, "err", err)
		return
	}
	b.tree.vol.Store(v)
	b.log.Debug("sandboxes mount the interpreter tree from a volume", "volume", v.name, "path", dir, "filled", filled, "took", time.Since(start))
}

// errTreeBusy is another server's fill in progress.
var errTreeBusy = errors.New("another server is filling the volume")

// fillTree returns the tree volume of dir for the configured image,
// filling it when no server has (filled says whether this call did). A
// filler container, named after the volume, is the lock: Docker copies
// the image's directory into the empty volume when it creates that
// container (keeping modes and times, so the image's .pyc files stay
// valid), the filler writes the marker, and the container is removed
// unstarted. A volume without the marker is a fill that a crash cut
// short: it is removed and filled again. While another server fills, this
// one waits for it, until ctx ends. Its own fill is not cut short by ctx
// (Docker would go on copying into a container nobody removes).
func (b *Backend) fillTree(ctx context.Context, helper backend.Spec, dir string) (*treeVolume, bool, error) {
	img, err := b.api.ImageInspect(ctx, helper.Image)
	if err != nil {
		return nil, false, fmt.Errorf("inspect image %s: %w", helper.Image, err)
	}
	name := treeVolumeName(img.ID, dir)
	own, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
	defer cancel()
	for attempt := 0; ; attempt++ {
		filled, err := b.fillTreeOnce(own, helper, img.ID, name, dir)
		switch {
		case err == nil:
			return &treeVolume{name: name, path: dir}, filled, nil
		case errors.Is(err, errTreeBusy) && ctx.Err() == nil:
			select {
			case <-ctx.Done():
				return nil, false, fmt.Errorf("%w: %s still there: %w", errTreeBusy, name+"-fill", ctx.Err())
			case <-time.After(time.Second):
			}
		case attempt < 2 && ctx.Err() == nil && errors.Is(err, errTreeCut):
			// refill
		default:
			return nil, false, err
		}
	}
}

// errTreeCut is a volume without the marker, now removed.
var errTreeCut = errors.New("a fill that did not finish")

// fillTreeOnce is one try of fillTree.
func (b *Backend) fillTreeOnce(ctx context.Context, spec backend.Spec, imageID, name, dir string) (filled bool, err error) {
	_, err = b.api.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	existed := err == nil
	if err != nil && !cerrdefs.IsNotFound(err) {
		return false, fmt.Errorf("inspect volume %s: %w", name, err)
	}
	spec.Labels = helperLabels(spec.Labels, backend.KindTree)
	spec.Image = imageID
	spec.Command = []string{"true"}
	spec.Args = nil
	spec.Volumes = nil
	spec.JoinNetwork = ""
	cfg, host := ContainerConfig(spec)
	cfg.AttachStdin, cfg.AttachStdout, cfg.AttachStderr, cfg.OpenStdin, cfg.StdinOnce = false, false, false, false, false
	host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeVolume, Source: name, Target: dir,
		VolumeOptions: &mount.VolumeOptions{NoCopy: false, Labels: map[string]string{backend.LabelKind: backend.KindTree, LabelImage: imageID, LabelTree: dir}}})
	created, err := b.api.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name + "-fill", Config: cfg, HostConfig: host})
	switch {
	case cerrdefs.IsConflict(err):
		return false, errTreeBusy
	case err != nil:
		if !existed {
			b.removeVolume(name)
		}
		return false, fmt.Errorf("create the filler of volume %s: %w", name, err)
	}
	filled, drop, err := b.markTree(ctx, created.ID, imageID, dir, existed)
	if err := b.Remove(ctx, created.ID); err != nil {
		b.log.Warn("remove the filler of a tree volume; the next start removes it", "container", shortID(created.ID), "err", err)
	}
	if drop {
		b.removeVolume(name)
	}
	if err != nil {
		return false, fmt.Errorf("volume %s: %w", name, err)
	}
	return filled, nil
}

// markTree looks for the marker in the volume that the filler container
// id mounts at dir, and writes it when this filler's create filled the
// volume (it did not exist before). drop says the volume must go: a fill
// that a crash cut short (errTreeCut), or one this call could not mark.
func (b *Backend) markTree(ctx context.Context, id, imageID, dir string, existed bool) (filled, drop bool, err error) {
	marker := path.Join(dir, treeMarker)
	if _, err := b.api.ContainerStatPath(ctx, id, client.ContainerStatPathOptions{Path: marker}); err == nil {
		return false, false, nil
	} else if !cerrdefs.IsNotFound(err) {
		return false, false, fmt.Errorf("look for %s: %w", marker, err)
	}
	if existed {
		return false, true, errTreeCut
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: treeMarker, Mode: 0o444, Size: int64(len(imageID) + 1), ModTime: time.Now()})
	tw.Write([]byte(imageID + "\n"))
	tw.Close()
	if _, err := b.api.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: dir, Content: &buf}); err != nil {
		return false, true, fmt.Errorf("mark it filled: %w", err)
	}
	return true, false, nil
}

// reapTreeVolumes removes the tree volumes whose image is gone; a volume
// still mounted stays (Docker refuses), and goes at a later start.
func (b *Backend) reapTreeVolumes(ctx context.Context) int {
	list, err := b.api.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", backend.LabelKind+"="+backend.KindTree)})
	if err != nil {
		b.log.Warn("list volumes", "err", err)
		return 0
	}
	n := 0
	for _, v := range list.Items {
		id := v.Labels[LabelImage]
		if id == "" {
			continue
		}
		if _, err := b.api.ImageInspect(ctx, id); !cerrdefs.IsNotFound(err) {
			continue
		}
		if _, err := b.api.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{}); err == nil {
			n++
		}
	}
	return n
}

// TreeVolume is the tree volume sandboxes mount now ("" = none), for tests
// and the bench.
func (b *Backend) TreeVolume() string {
	if v := b.tree.vol.Load(); v != nil {
		return v.name
	}
	return ""
}

// UseTreeVolume has later sandboxes mount volume name over dir, as if
// MakeTree had made it: for tests (of a volume that is gone, say).
func (b *Backend) UseTreeVolume(name, dir string) {
	b.tree.tried.Store(true)
	b.tree.vol.Store(&treeVolume{name: name, path: dir})
}

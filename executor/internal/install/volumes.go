package install

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/python-docker-mcp/python-docker-mcp/executor/backend"
)

// SessionVolume names a persistent session's package volume. Every
// persistent sandbox mounts it, so it exists from the session's start.
func SessionVolume(sessionID string) string { return "python-docker-mcp-pkgs-" + sessionID }

// Volumes are one executor's package volumes: the transient volume of
// each owner who installed into one, and the removal of volumes (a
// session's, when it ends; leftovers, by label). Safe for concurrent use.
type Volumes struct {
	pk       backend.Packages // nil: the backend has no package volumes
	instance string
	log      *slog.Logger

	mu     sync.Mutex
	owners map[string]*ownerVolume
}

// ownerVolume is the transient package volume of one owner.
type ownerVolume struct {
	name      string
	installed []string
	sem       chan struct{} // one install at a time into the volume
}

// NewVolumes returns the package volumes of the executor with this
// instance id on pk (nil for a backend without package volumes: then
// Remove and Reap do nothing).
func NewVolumes(pk backend.Packages, instance string, log *slog.Logger) *Volumes {
	return &Volumes{pk: pk, instance: instance, log: log, owners: map[string]*ownerVolume{}}
}

// ownerVolumeName names an owner's transient package volume; the
// executor's instance is part of it, so volumes never outlive it
// unnoticed.
func (v *Volumes) ownerVolumeName(owner string) string {
	h := sha256.Sum256([]byte(owner))
	return "python-docker-mcp-pkgs-" + v.instance + "-" + hex.EncodeToString(h[:8])
}

// Owner is the volume transient calls of owner mount: "" when owner
// installed nothing (the call may then take a pooled sandbox).
func (v *Volumes) Owner(owner string) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if o := v.owners[owner]; o != nil && len(o.installed) > 0 {
		return o.name
	}
	return ""
}

// Installed is how many packages were installed into owner's transient
// volume so far.
func (v *Volumes) Installed(owner string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	if o := v.owners[owner]; o != nil {
		return len(o.installed)
	}
	return 0
}

// Hold waits until no other install into owner's transient volume runs
// (or ctx ends), and holds the volume for an install: it returns the
// volume's name and release, which the caller calls once the install is
// over.
func (v *Volumes) Hold(ctx context.Context, owner string) (volume string, release func(), err error) {
	v.mu.Lock()
	o := v.owners[owner]
	if o == nil {
		o = &ownerVolume{name: v.ownerVolumeName(owner), sem: make(chan struct{}, 1)}
		v.owners[owner] = o
	}
	v.mu.Unlock()
	select {
	case o.sem <- struct{}{}:
	case <-ctx.Done():
		return "", nil, fmt.Errorf("waiting for your running install: %w", ctx.Err())
	}
	return o.name, func() { <-o.sem }, nil
}

// Add records requirement as installed into owner's transient volume
// (held with Hold): owner's transient calls mount it from now on.
func (v *Volumes) Add(owner, requirement string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if o := v.owners[owner]; o != nil {
		o.installed = append(o.installed, requirement)
	}
}

// Remove removes a package volume; one still in use (an installer
// running) or gone is left alone: the executor's Close sweeps its volumes
// and the next start reaps those of dead executors.
func (v *Volumes) Remove(name string) {
	if name == "" || v.pk == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := v.pk.RemoveVolume(ctx, name); err != nil {
		v.log.Warn("remove volume", "volume", name, "err", err)
	}
}

// Reap removes the volumes that carry the label key and whose labels
// leftover says yes to, and returns how many it removed.
func (v *Volumes) Reap(ctx context.Context, key string, leftover func(labels map[string]string) bool) int {
	if v.pk == nil {
		return 0
	}
	list, err := v.pk.Volumes(ctx, key)
	if err != nil {
		v.log.Warn("list volumes", "err", err)
		return 0
	}
	n := 0
	for _, vol := range list {
		if !leftover(vol.Labels) {
			continue
		}
		v.Remove(vol.Name)
		n++
	}
	return n
}

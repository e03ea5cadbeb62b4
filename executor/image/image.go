// Package image builds the default sandbox image without a container registry: debootstrap a
// Debian release with Python and the scientific stack from Debian's own
// packages, then import the root filesystem into Docker. No registry is
// needed. The image carries a label with the hash of its recipe; the same
// recipe is never built twice, a changed one is rebuilt.
//
// The image holds no code of the server's: the runner is passed in when a
// container starts, so a runner change never needs a rebuild.
package image

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/moby/moby/client"

	"github.com/python-docker-mcp/python-docker-mcp/config"
)

// LabelRecipe is the image label holding the recipe hash.
const LabelRecipe = "python-docker-mcp.recipe"

// ManagedRepository is the repository of images this package builds. An
// operator's own image (any other name) is used as it is and never built.
const ManagedRepository = "python-docker-mcp-sandbox"

// Env is the environment baked into the image. MPLCONFIGDIR points into /tmp
// because the root filesystem is read-only; /tmp is declared a volume so a
// plain `docker run --read-only` works too (the server mounts a tmpfs there).
var Env = []string{
	"MPLBACKEND=Agg",
	"MPLCONFIGDIR=/tmp/matplotlib",
	"OPENBLAS_NUM_THREADS=1",
	"OMP_NUM_THREADS=1",
	"MKL_NUM_THREADS=1",
	"PYTHONDONTWRITEBYTECODE=1",
	"PYTHONUNBUFFERED=1",
	"HOME=/workspace",
}

// Recipe is everything that decides the content of the image.
type Recipe struct {
	Release    string   `json:"release"`
	Mirror     string   `json:"mirror"`
	Packages   []string `json:"packages"`
	User       string   `json:"user"`
	WorkingDir string   `json:"working_dir"`
	Env        []string `json:"env"`
	// Version changes when the build steps themselves change.
	Version int `json:"version"`
}

// RecipeFrom derives the recipe from the configuration.
func RecipeFrom(cfg config.Config) Recipe {
	pk := append([]string(nil), cfg.Image.Packages...)
	sort.Strings(pk)
	return Recipe{
		Release:    cfg.Image.Release,
		Mirror:     cfg.Image.Mirror,
		Packages:   pk,
		User:       cfg.Docker.User,
		WorkingDir: cfg.Docker.WorkingDir,
		Env:        Env,
		Version:    1,
	}
}

// Hash is the hex SHA-256 of the recipe's canonical JSON.
func (r Recipe) Hash() string {
	b, _ := json.Marshal(r) // a struct of strings and ints: cannot fail
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Managed reports whether ref names an image this package builds.
func Managed(ref string) bool {
	repo := ref
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	return repo == ManagedRepository
}

// Docker is the part of the Docker client the builder uses.
type Docker interface {
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (client.ImageInspectResult, error)
	ImageImport(ctx context.Context, src client.ImageImportSource, ref string, opts client.ImageImportOptions) (client.ImageImportResult, error)
	ImageRemove(ctx context.Context, image string, opts client.ImageRemoveOptions) (client.ImageRemoveResult, error)
}

// State of an image with respect to a recipe.
type State int

const (
	Missing State = iota // no image of that name
	Stale                // built from another recipe
	Current              // built from this recipe, or not managed by us
)

func (s State) String() string {
	return [...]string{"missing", "stale", "current"}[s]
}

// Check tells whether ref exists and was built from recipe. An image that is
// not Managed counts as Current whenever it exists.
func Check(ctx context.Context, cli Docker, ref string, r Recipe) (State, error) {
	st, _, err := check(ctx, cli, ref, r)
	return st, err
}

// check is Check that also returns the image's ID when there is one.
func check(ctx context.Context, cli Docker, ref string, r Recipe) (State, string, error) {
	res, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		if isNotFound(err) {
			return Missing, "", nil
		}
		return Missing, "", fmt.Errorf("inspect image %s: %w", ref, err)
	}
	if !Managed(ref) {
		return Current, res.ID, nil
	}
	if res.Config != nil && res.Config.Labels[LabelRecipe] == r.Hash() {
		return Current, res.ID, nil
	}
	return Stale, res.ID, nil
}

func isNotFound(err error) bool {
	var nf interface{ NotFound() }
	if errors.As(err, &nf) {
		return true
	}
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "no such image") || strings.Contains(s, "not found")
}

// Progress receives one human-readable line per step of a build.
type Progress func(line string)

// ErrNotBuildable is returned for a missing image this package does not
// manage: the operator named their own image and must provide it.
var ErrNotBuildable = errors.New("python-docker-mcp builds only " + ManagedRepository + " images")

// Ensure makes sure ref exists and, for a managed image, matches the
// recipe, building it when missing or stale. It reports whether it built.
// Concurrent Ensure calls on one machine (server and CLI) are serialised by
// a lock file.
func Ensure(ctx context.Context, cli Docker, ref string, r Recipe, progress Progress) (bool, error) {
	if progress == nil {
		progress = func(string) {}
	}
	st, err := Check(ctx, cli, ref, r)
	if err != nil || st == Current {
		return false, err
	}
	if !Managed(ref) {
		return false, fmt.Errorf("image %s is missing (%w): pull it (`docker pull %s`) or build it yourself (docker.image names it), or remove docker.image to use the built-in %s:latest", ref, ErrNotBuildable, ref, ManagedRepository)
	}
	unlock, err := lock(ctx)
	if err != nil {
		return false, err
	}
	defer unlock()
	// Someone may have built it while we waited for the lock.
	st, old, err := check(ctx, cli, ref, r)
	if err != nil || st == Current {
		return false, err
	}
	progress(fmt.Sprintf("image %s is %s: building it from Debian %s (this takes a few minutes once)", ref, st, r.Release))
	if err := Build(ctx, cli, ref, r, progress); err != nil {
		return false, err
	}
	if st == Stale {
		removeReplaced(ctx, cli, ref, old, progress)
	}
	return true, nil
}

// removeReplaced removes the image a rebuild took ref from, which would
// otherwise stay on disk untagged (several hundred MB per recipe change).
// An image that still has another name stays; one that containers were
// made from stays too (the removal is not forced), and progress says how
// to remove it later.
func removeReplaced(ctx context.Context, cli Docker, ref, id string, progress Progress) {
	if id == "" {
		return
	}
	short := strings.TrimPrefix(id, "sha256:")
	if len(short) > 12 {
		short = short[:12]
	}
	res, err := cli.ImageInspect(ctx, id)
	if err != nil {
		return // gone already, or Docker is away: nothing to say
	}
	if len(res.RepoTags) > 0 {
		// Still named: the build did not move ref, or someone tagged it.
		if !slices.Contains(res.RepoTags, ref) {
			progress(fmt.Sprintf("kept the image %s built from the previous recipe: %s still names it", short, strings.Join(res.RepoTags, ", ")))
		}
		return
	}
	if _, err := cli.ImageRemove(ctx, id, client.ImageRemoveOptions{PruneChildren: true}); err != nil && !isNotFound(err) {
		progress(fmt.Sprintf("kept the image %s built from the previous recipe (%v): remove it with `docker image rm %s` once nothing uses it", short, err, short))
		return
	}
	progress(fmt.Sprintf("removed the image %s built from the previous recipe", short))
}

var lockMu sync.Mutex

// lock takes an exclusive flock on a file in the temp dir, honouring ctx.
func lock(ctx context.Context) (func(), error) {
	lockMu.Lock()
	path := filepath.Join(os.TempDir(), "python-docker-mcp-image.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		lockMu.Unlock()
		return nil, fmt.Errorf("image build lock %s: %w", path, err)
	}
	done := make(chan error, 1)
	go func() { done <- syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }()
	select {
	case err := <-done:
		if err != nil {
			f.Close()
			lockMu.Unlock()
			return nil, fmt.Errorf("image build lock %s: %w", path, err)
		}
	case <-ctx.Done():
		f.Close() // the pending flock fails or is released with the file
		lockMu.Unlock()
		return nil, ctx.Err()
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
		lockMu.Unlock()
	}, nil
}

// Build debootstraps the recipe into a temporary directory and imports it
// as ref, labelled with the recipe hash. It needs root and debootstrap; when
// debootstrap is missing it is installed with apt-get if running as root,
// else the error says what to install.
func Build(ctx context.Context, cli Docker, ref string, r Recipe, progress Progress) error {
	if os.Geteuid() != 0 {
		return errors.New("building the sandbox image needs root (debootstrap creates device nodes and chroots): run `sudo python-docker-mcp image build` once, or set docker.image to an image you provide")
	}
	if err := ensureDebootstrap(ctx, progress); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "python-docker-mcp-rootfs-")
	if err != nil {
		return fmt.Errorf("build image: %w", err)
	}
	defer os.RemoveAll(dir)
	root := filepath.Join(dir, "root")

	args := []string{"--variant=minbase", "--include=" + strings.Join(r.Packages, ",")}
	if cache := cacheDir(); cache != "" {
		args = append(args, "--cache-dir="+cache)
	}
	args = append(args, r.Release, root, r.Mirror)
	progress("debootstrap " + strings.Join(args, " "))
	if err := run(ctx, progress, "debootstrap", args...); err != nil {
		return fmt.Errorf("debootstrap %s from %s failed (is the mirror reachable? see the lines above): %w", r.Release, r.Mirror, err)
	}
	progress("cleaning the root filesystem")
	if err := finish(root, r); err != nil {
		return fmt.Errorf("prepare root filesystem: %w", err)
	}
	progress("importing into Docker as " + ref)
	return importRoot(ctx, cli, root, ref, r)
}

func cacheDir() string {
	base, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	d := filepath.Join(base, "python-docker-mcp", "debootstrap")
	if os.MkdirAll(d, 0o755) != nil {
		return ""
	}
	return d
}

func ensureDebootstrap(ctx context.Context, progress Progress) error {
	if _, err := exec.LookPath("debootstrap"); err == nil {
		return nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return errors.New("debootstrap is not installed and apt-get is not available: install debootstrap (Debian/Ubuntu package \"debootstrap\") and run `python-docker-mcp image build` again")
	}
	progress("debootstrap is missing: installing it with apt-get")
	if err := run(ctx, progress, "apt-get", "update", "-q"); err != nil {
		return fmt.Errorf("apt-get update (to install debootstrap): %w", err)
	}
	if err := run(ctx, progress, "apt-get", "install", "-y", "-q", "debootstrap"); err != nil {
		return fmt.Errorf("install debootstrap: %w: run `apt-get install debootstrap` yourself", err)
	}
	return nil
}

// run runs a command, sending each output line to progress.
func run(ctx context.Context, progress Progress, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return err
	}
	scanDone := make(chan struct{})
	var tail []string
	go func() {
		defer close(scanDone)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			progress(line)
			if tail = append(tail, line); len(tail) > 10 {
				tail = tail[1:]
			}
		}
		io.Copy(io.Discard, pr)
	}()
	err := cmd.Wait()
	pw.Close()
	<-scanDone
	if err != nil && len(tail) > 0 {
		return fmt.Errorf("%w; last output: %s", err, strings.Join(tail, " | "))
	}
	return err
}

// finish removes caches and documentation and adds the sandbox user.
func finish(root string, r Recipe) error {
	for _, p := range []string{"var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/info", "var/log"} {
		full := filepath.Join(root, p)
		entries, err := os.ReadDir(full)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.Name() == "lock" || e.Name() == "partial" {
				continue
			}
			if err := os.RemoveAll(filepath.Join(full, e.Name())); err != nil {
				return err
			}
		}
	}
	uid, gid, ok := strings.Cut(r.User, ":")
	if !ok {
		gid = uid
	}
	if err := appendLine(filepath.Join(root, "etc/passwd"), fmt.Sprintf("sandbox:x:%s:%s:sandbox:%s:/usr/sbin/nologin", uid, gid, r.WorkingDir)); err != nil {
		return err
	}
	if err := appendLine(filepath.Join(root, "etc/group"), fmt.Sprintf("sandbox:x:%s:", gid)); err != nil {
		return err
	}
	wd := filepath.Join(root, r.WorkingDir)
	if err := os.MkdirAll(wd, 0o755); err != nil {
		return err
	}
	return os.Chmod(wd, 0o1777)
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// importRoot streams a tar of root into Docker's image import.
func importRoot(ctx context.Context, cli Docker, root, ref string, r Recipe) error {
	cmd := exec.CommandContext(ctx, "tar", "--numeric-owner", "-C", root, "-c", ".")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("tar root filesystem: %w", err)
	}
	res, err := cli.ImageImport(ctx, client.ImageImportSource{Source: out, SourceName: "-"}, ref, client.ImageImportOptions{
		Message: "python-docker-mcp sandbox, recipe " + r.Hash(),
		Changes: Changes(r),
	})
	if err == nil {
		_, err = io.Copy(io.Discard, res)
		res.Close()
	}
	io.Copy(io.Discard, out) // let tar finish if the import stopped early
	werr := cmd.Wait()
	if err != nil {
		return fmt.Errorf("docker image import %s: %w", ref, err)
	}
	if werr != nil {
		return fmt.Errorf("tar root filesystem: %w: %s", werr, stderr.String())
	}
	return nil
}

// Changes are the Dockerfile instructions applied at import.
func Changes(r Recipe) []string {
	return []string{
		"USER " + r.User,
		"WORKDIR " + r.WorkingDir,
		`VOLUME ["/tmp"]`,
		"ENV " + strings.Join(quoteEnv(r.Env), " "),
		fmt.Sprintf("LABEL %s=%s", LabelRecipe, r.Hash()),
		`CMD ["python3"]`,
	}
}

func quoteEnv(env []string) []string {
	out := make([]string, len(env))
	for i, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		out[i] = k + "=" + strconvQuote(v)
	}
	return out
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

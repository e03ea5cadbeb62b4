// Package config holds the server's one configuration struct and loads it:
// defaults, then the YAML file, then PYTHON_DOCKER_MCP_* environment
// variables, then command-line flags. Unknown keys and bad values are errors
// that name the file (or variable, or flag), the key path, the bad value and
// what is allowed.
package config

import (
	"slices"
	"strings"
	"time"
)

// Config is the whole configuration. The zero value is not useful: start from
// Default() or Load.
type Config struct {
	// Backend is where sandboxes run: "docker" (the local daemon) or
	// "kubernetes" (Pods, see Kubernetes). The docker section's sandbox
	// settings (image, user, limits, sizes) apply to both.
	Backend    string     `koanf:"backend" json:"backend"`
	Kubernetes Kubernetes `koanf:"kubernetes" json:"kubernetes"`
	Docker     Docker     `koanf:"docker" json:"docker"`
	Image      Image      `koanf:"image" json:"image"`
	Package    Package    `koanf:"package" json:"package"`

	// AllowedModules, when non-empty, is an allowlist of top-level modules
	// (prefix semantics: "numpy" allows "numpy.linalg"). Relative imports are
	// the user's own code and are never judged.
	AllowedModules []string `koanf:"allowed_modules" json:"allowed_modules"`
	// BlockedModules are denied with prefix semantics ("os" blocks "os.path").
	BlockedModules []string `koanf:"blocked_modules" json:"blocked_modules"`
	// BlockedCalls are dotted call names matched after import-alias
	// resolution, e.g. "os.system".
	BlockedCalls []string `koanf:"blocked_calls" json:"blocked_calls"`

	Policy   Policy   `koanf:"policy" json:"policy"`
	Pool     Pool     `koanf:"pool" json:"pool"`
	Sessions Sessions `koanf:"sessions" json:"sessions"`
	// Tasks are calls run as MCP tasks (tools/call with params.task).
	Tasks Tasks `koanf:"tasks" json:"tasks"`
	// Languages other than Python the execute tools accept (off by default).
	Languages Languages `koanf:"languages" json:"languages"`
	Limits    Limits    `koanf:"limits" json:"limits"`
	Outputs   Outputs   `koanf:"outputs" json:"outputs"`
	Quotas    Quotas    `koanf:"quotas" json:"quotas"`
	Server    Server    `koanf:"server" json:"server"`
	Auth      Auth      `koanf:"auth" json:"auth"`
	Log       Log       `koanf:"log" json:"log"`
}

// Kubernetes configures the kubernetes backend (backend: kubernetes).
type Kubernetes struct {
	// Kubeconfig is the kubeconfig file; empty: in-cluster (the server's
	// Pod service account).
	Kubeconfig string `koanf:"kubeconfig" json:"kubeconfig"`
	// Namespace the sandbox Pods run in.
	Namespace string `koanf:"namespace" json:"namespace"`
	// RuntimeClass is the RuntimeClass of sandbox Pods (e.g. "gvisor");
	// empty: the cluster's default runtime.
	RuntimeClass string `koanf:"runtime_class" json:"runtime_class"`
	// RuntimeClasses are the other RuntimeClasses the policy may choose
	// for a call (its decision's runtime, e.g. "gvisor"); each must exist
	// in the cluster.
	RuntimeClasses []string `koanf:"runtime_classes" json:"runtime_classes"`
	// NodeSelector entries "key=value" every sandbox Pod's node must carry.
	NodeSelector []string `koanf:"node_selector" json:"node_selector"`
	// ImagePullPolicy of the sandbox image: IfNotPresent, Always or Never.
	ImagePullPolicy string `koanf:"image_pull_policy" json:"image_pull_policy"`
	// NodeName binds sandbox Pods to one node without the scheduler (test
	// clusters that run none); empty: scheduled.
	NodeName string `koanf:"node_name" json:"node_name"`
	// StartTimeout bounds a Pod's start (scheduling and image pull included).
	StartTimeout Duration `koanf:"start_timeout" json:"start_timeout"`
	// CPURequest is the CPU (in CPUs, fractions allowed) every sandbox Pod
	// requests, below its limit docker.cpu_limit: the node reserves this
	// much and the sandbox may burst to the limit when the node has idle
	// CPU. 0, or a value at or above the limit: the request equals the
	// limit (Guaranteed QoS).
	CPURequest float64 `koanf:"cpu_request" json:"cpu_request"`
}

// Docker describes the sandbox containers. Every limit here is the
// operator's maximum: a request may tighten it, never raise it.
type Docker struct {
	// Image is the sandbox image; any image with python3 works. The default
	// image is built offline by `python-docker-mcp image build`.
	Image string `koanf:"image" json:"image"`
	// WorkingDir is where the workspace tmpfs is mounted and code runs.
	WorkingDir string `koanf:"working_dir" json:"working_dir"`
	// MemoryLimit in bytes (memory+swap is set to the same value).
	MemoryLimit Size `koanf:"memory_limit" json:"memory_limit"`
	// CPULimit in CPUs (fractions allowed).
	CPULimit float64 `koanf:"cpu_limit" json:"cpu_limit"`
	// Timeout is the wall-clock limit of one call.
	Timeout Duration `koanf:"timeout" json:"timeout"`
	// NetworkDisabled runs sandboxes with network mode "none".
	NetworkDisabled bool `koanf:"network_disabled" json:"network_disabled"`
	// ReadOnly makes the container's root filesystem read-only.
	ReadOnly bool `koanf:"read_only" json:"read_only"`
	// Runtime is the OCI runtime of every sandbox whose decision names
	// none, e.g. "runsc"; empty: the daemon's default (runc).
	Runtime string `koanf:"runtime" json:"runtime"`
	// Runtimes are the other runtimes the policy may choose for a call
	// (its decision's runtime, e.g. "runsc"); each must be registered with
	// the Docker daemon.
	Runtimes []string `koanf:"runtimes" json:"runtimes"`
	// PidsLimit caps processes and threads in one sandbox.
	PidsLimit int64 `koanf:"pids_limit" json:"pids_limit"`
	// TmpSize caps the /tmp tmpfs in bytes.
	TmpSize Size `koanf:"tmp_size" json:"tmp_size"`
	// WorkspaceSize caps the working-directory tmpfs in bytes.
	WorkspaceSize Size `koanf:"workspace_size" json:"workspace_size"`
	// User is the non-root "uid:gid" the sandbox runs as.
	User string `koanf:"user" json:"user"`
}

// Image is the recipe of the default sandbox image built by `image build`.
// Its hash is stored as an image label: a changed recipe means a rebuild.
type Image struct {
	// Release is the Debian release debootstrap installs (trixie has Python 3.13).
	Release string `koanf:"release" json:"release"`
	// Mirror is the Debian mirror debootstrap downloads from.
	Mirror string `koanf:"mirror" json:"mirror"`
	// Packages are the Debian packages installed on top of minbase.
	Packages []string `koanf:"packages" json:"packages"`
}

// Package configures install-package.
type Package struct {
	// Installer is "pip" or "uv" (uv when the image has it, else pip).
	Installer string `koanf:"installer" json:"installer"`
	// IndexURL is an optional package index; empty means none (fully offline).
	IndexURL string `koanf:"index_url" json:"index_url"`
	// FindLinks are local wheelhouse directories on the host.
	FindLinks []string `koanf:"find_links" json:"find_links"`
	// TrustedHosts are passed to pip as --trusted-host.
	TrustedHosts []string `koanf:"trusted_hosts" json:"trusted_hosts"`
	// Allowed, when non-empty, is an allowlist of requirement strings
	// (PEP 503 normalised names, optionally with a version constraint).
	Allowed []string `koanf:"allowed" json:"allowed"`
	// Blocked package names (PEP 503 normalised).
	Blocked []string `koanf:"blocked" json:"blocked"`
	// RequirePinned demands an exact "==" version.
	RequirePinned bool `koanf:"require_pinned" json:"require_pinned"`
	// AllowedIndexes restricts which index URLs a request may name.
	AllowedIndexes []string `koanf:"allowed_indexes" json:"allowed_indexes"`
	// MaxPerSession caps installs into one session (0 = no cap).
	MaxPerSession int `koanf:"max_per_session" json:"max_per_session"`
	// AllowSdist lets pip build source distributions (runs setup.py).
	AllowSdist bool `koanf:"allow_sdist" json:"allow_sdist"`
	// Timeout of one install.
	Timeout Duration `koanf:"timeout" json:"timeout"`
}

// Policy configures the OPA engine.
type Policy struct {
	// Profile is "standard" or "strict".
	Profile string `koanf:"profile" json:"profile"`
	// Paths are extra directories of operator Rego, loaded beside rules/.
	Paths []string `koanf:"paths" json:"paths"`
	// DecisionLog is a file that receives one JSON line per decision ("" = off).
	DecisionLog string `koanf:"decision_log" json:"decision_log"`
	// DecisionLogCode also writes the code itself into the decision log.
	DecisionLogCode bool `koanf:"decision_log_code" json:"decision_log_code"`
	// Capabilities are the capability classes the sandbox enforces in the
	// kernel for every call (see Capabilities).
	Capabilities Capabilities `koanf:"capabilities" json:"capabilities"`
}

// Capabilities say which capability classes user code may use, whatever
// it imports. Each class is a tri-state: nil (the default) derives it
// from allowed_modules, blocked_modules and blocked_calls (rules/
// capabilities.rego holds the mapping: blocking subprocess means no
// processes, blocking socket means no sockets...); true or false is the
// operator's word and wins over the lists. Operator Rego may tighten the
// result per call, never loosen it.
type Capabilities struct {
	// Processes: fork, exec, spawn (subprocess, os.system, multiprocessing).
	Processes *bool `koanf:"processes" json:"processes"`
	// Sockets: socket(2) and socketpair(2) in the families SocketFamilies.
	Sockets *bool `koanf:"sockets" json:"sockets"`
	// PTY: pseudo-terminals (pty, os.openpty, os.forkpty).
	PTY *bool `koanf:"pty" json:"pty"`
	// NativeCode: loading native code the image does not already map
	// (ctypes, cffi, extension modules from writable directories).
	NativeCode *bool `koanf:"native_code" json:"native_code"`
	// SocketFamilies are the families allowed when sockets are: any of
	// unix, inet, inet6.
	SocketFamilies []string `koanf:"socket_families" json:"socket_families"`
}

// SocketFamilies are the values of policy.capabilities.socket_families.
var SocketFamilies = []string{"unix", "inet", "inet6"}

// Pool configures the warm pool of pre-started sandboxes and the sandboxes
// kept for their principal's next transient calls.
type Pool struct {
	Enabled bool `koanf:"enabled" json:"enabled"`
	// Size is the floor: sandboxes kept ready when no calls come.
	Size int `koanf:"size" json:"size"`
	// MaxSize caps the transient pool when demand grows it past Size (a
	// value below Size counts as Size).
	MaxSize                int      `koanf:"max_size" json:"max_size"`
	MaxAge                 Duration `koanf:"max_age" json:"max_age"`
	MaxConcurrentCreations int      `koanf:"max_concurrent_creations" json:"max_concurrent_creations"`
	// Preload are modules imported before a pooled sandbox waits for code:
	// the persistent pool's sandboxes, and the transient pool's first
	// guess before it has seen any call (then it follows the imports of
	// recent calls).
	Preload []string `koanf:"preload" json:"preload"`
	// Reuse says whether a transient call may run in a sandbox that served
	// earlier calls of the same principal: "principal" (each call still
	// gets a fresh process; the sandbox is reset and checked between
	// calls, see executor/README.md "Reused sandboxes") or "never" (a
	// fresh container per call). The policy may say "never" per call.
	Reuse string `koanf:"reuse" json:"reuse"`
	// ReuseMaxCalls and ReuseMaxAge bound a reused sandbox's life: after
	// that many calls, or that long after it started, it is replaced.
	ReuseMaxCalls int      `koanf:"reuse_max_calls" json:"reuse_max_calls"`
	ReuseMaxAge   Duration `koanf:"reuse_max_age" json:"reuse_max_age"`
	// MaxPerPrincipal caps the sandboxes kept for one principal's
	// transient calls (idle or serving a call); a call that finds all of
	// them busy waits for one briefly, then runs in a fresh one, which is
	// not kept. ReuseMaxIdle caps the idle ones of all principals
	// together: past it the least recently used is removed.
	MaxPerPrincipal int `koanf:"max_per_principal" json:"max_per_principal"`
	ReuseMaxIdle    int `koanf:"reuse_max_idle" json:"reuse_max_idle"`
}

// Reuse values (Pool.Reuse).
const (
	ReusePrincipal = "principal"
	ReuseNever     = "never"
)

// Languages enables languages other than Python for the execute tools.
// An enabled language is still judged by the policy (input.language).
type Languages struct {
	// Bash runs code with `bash -c CODE` in the same sandbox; it needs the
	// processes capability.
	Bash Language `koanf:"bash" json:"bash"`
}

// Language is one optional language's settings.
type Language struct {
	Enabled bool `koanf:"enabled" json:"enabled"`
}

// Sessions configures persistent sessions.
type Sessions struct {
	// IdleTTL counts from the end of a session's last call.
	IdleTTL     Duration `koanf:"idle_ttl" json:"idle_ttl"`
	MaxLifetime Duration `koanf:"max_lifetime" json:"max_lifetime"`
	MaxPerOwner int      `koanf:"max_per_owner" json:"max_per_owner"`
	MaxTotal    int      `koanf:"max_total" json:"max_total"`
}

// Tasks configures calls run as MCP tasks. The policy decides both bounds
// (rules/tasks.rego, rules/limits.rego).
type Tasks struct {
	// MaxDuration is the longest time limit a task's call may ask for
	// (its timeout argument), above docker.timeout if larger.
	MaxDuration Duration `koanf:"max_duration" json:"max_duration"`
	// MaxPerPrincipal caps the tasks one principal has running at once.
	MaxPerPrincipal int `koanf:"max_per_principal" json:"max_per_principal"`
	// TTL is how long a task and its result are kept after it ended (a
	// client's smaller ttl wins).
	TTL Duration `koanf:"ttl" json:"ttl"`
}

// Limits caps sizes of what flows through the server, in bytes, and the
// size of one expression of the code, in tokens (see
// analyze.Options.MaxExpressionTokens: it bounds what the static gate
// spends on operator chains).
type Limits struct {
	MaxOutputBytes Size `koanf:"max_output_bytes" json:"max_output_bytes"`
	MaxStateBytes  Size `koanf:"max_state_bytes" json:"max_state_bytes"`
	MaxImageBytes  Size `koanf:"max_image_bytes" json:"max_image_bytes"`
	MaxCodeBytes   Size `koanf:"max_code_bytes" json:"max_code_bytes"`
	// MaxFileBytes caps a file that read-file and write-file move in and
	// out of a session's working directory, over all the calls (chunks)
	// that move it.
	MaxFileBytes Size `koanf:"max_file_bytes" json:"max_file_bytes"`
	// MaxExpressionTokens bounds one expression of the code, in tokens
	// (default 10000): the static gate refuses a longer one before parsing.
	MaxExpressionTokens int `koanf:"max_expression_tokens" json:"max_expression_tokens"`
}

// Outputs configures the full text of truncated output streams: a stream
// longer than limits.max_output_bytes is shown as its head and tail, and up
// to MaxStreamBytes of it are kept as a resource of the call (readable by
// the caller only) for TTL, within MaxTotalBytes for the whole server
// (oldest evicted first).
type Outputs struct {
	MaxStreamBytes Size     `koanf:"max_stream_bytes" json:"max_stream_bytes"`
	MaxTotalBytes  Size     `koanf:"max_total_bytes" json:"max_total_bytes"`
	TTL            Duration `koanf:"ttl" json:"ttl"`
}

// Quotas bound what one principal (a token's subject; the local user over
// stdio) may hold at once, so that one cannot starve the others. The
// policy hands them to the server per principal (rules may lower them,
// never raise them); the server refuses what would go past one. The
// persistent sessions a principal holds are bounded by
// sessions.max_per_owner.
type Quotas struct {
	// Sandboxes caps the sandboxes one principal uses at once: its
	// running execute calls that start a sandbox plus the containers of
	// its persistent sessions.
	Sandboxes int `koanf:"sandboxes" json:"sandboxes"`
	// TransportSessions caps the Streamable HTTP sessions (Mcp-Session-Id,
	// protocol versions before 2026-07-28) one subject holds.
	TransportSessions int `koanf:"transport_sessions" json:"transport_sessions"`
	// OutputBytes caps the kept outputs (sandbox-output:// resources) of
	// one principal; its oldest go first, never another principal's.
	OutputBytes Size `koanf:"output_bytes" json:"output_bytes"`
	// InflightBytes caps the request bodies of one principal being handled
	// at once over HTTP.
	InflightBytes Size `koanf:"inflight_bytes" json:"inflight_bytes"`
	// Analyses caps the execute calls of one principal whose code is being
	// analysed (static step and policy) or waits for it. The server runs
	// as many analyses at once as it has cores (GOMAXPROCS), one principal
	// at most half of them (at least one), and hands a free one to the
	// waiting principal that runs the fewest.
	Analyses int `koanf:"analyses" json:"analyses"`
}

// Server configures the MCP transport.
type Server struct {
	// Transport is "stdio" or "http".
	Transport string `koanf:"transport" json:"transport"`
	// Addr is the HTTP listen address.
	Addr string `koanf:"addr" json:"addr"`
	// Path is the Streamable HTTP endpoint.
	Path string `koanf:"path" json:"path"`
	// MaxBodyBytes caps an HTTP request body.
	MaxBodyBytes Size `koanf:"max_body_bytes" json:"max_body_bytes"`
	// MetricsAddr is a separate listen address for the Prometheus /metrics
	// endpoint ("" = none; the HTTP transport then serves /metrics itself).
	MetricsAddr string `koanf:"metrics_addr" json:"metrics_addr"`
	// SessionKeyFile holds a secret (at least 32 bytes) that signs the
	// Streamable HTTP session ids of protocol versions before 2026-07-28,
	// so that every replica given the same file accepts the ids any of
	// them issued ("" = ids are known only to the replica that issued
	// them).
	SessionKeyFile string `koanf:"session_key_file" json:"session_key_file"`
	// PublicURL is the URL clients reach the MCP endpoint at, e.g.
	// https://mcp.example.com/mcp behind an ingress or a Service: the
	// resource named in the OAuth protected resource metadata and in the
	// 401 challenges ("" = http:// + the listen address + server.path,
	// right only when clients connect to the listener directly).
	PublicURL string `koanf:"public_url" json:"public_url"`
}

// Auth configures bearer-token authentication of the HTTP transport.
type Auth struct {
	// Mode is "jwt", "dev" or "off" ("off" only for stdio or a loopback address).
	Mode          string   `koanf:"mode" json:"mode"`
	JWKSURI       string   `koanf:"jwks_uri" json:"jwks_uri"`
	Issuer        string   `koanf:"issuer" json:"issuer"`
	Audience      string   `koanf:"audience" json:"audience"`
	Algorithm     string   `koanf:"algorithm" json:"algorithm"`
	PublicKeyPath string   `koanf:"public_key_path" json:"public_key_path"`
	Leeway        Duration `koanf:"leeway" json:"leeway"`
	Scopes        Scopes   `koanf:"scopes" json:"scopes"`
}

// Scopes names the scope each group of tools needs.
type Scopes struct {
	Execute  string `koanf:"execute" json:"execute"`
	Install  string `koanf:"install" json:"install"`
	Sessions string `koanf:"sessions" json:"sessions"`
}

// Log configures the server's log (always stderr: stdout carries MCP).
type Log struct {
	// Level is "debug", "info", "warn" or "error".
	Level string `koanf:"level" json:"level"`
	// Format is "text" or "json".
	Format string `koanf:"format" json:"format"`
}

// SandboxRuntimes are the runtimes a call's sandbox may run under on the
// configured backend, the default first: docker.runtime then
// docker.runtimes, or kubernetes.runtime_class then
// kubernetes.runtime_classes ("" is the daemon's or the cluster's own
// default), without repeats. A policy decision names one of them (or none:
// the default). Keys names the config keys they come from, for messages.
func (c Config) SandboxRuntimes() (names []string, keys string) {
	def, more, keys := c.Docker.Runtime, c.Docker.Runtimes, "docker.runtime, docker.runtimes"
	if c.Backend == "kubernetes" {
		def, more, keys = c.Kubernetes.RuntimeClass, c.Kubernetes.RuntimeClasses, "kubernetes.runtime_class, kubernetes.runtime_classes"
	}
	names = []string{def}
	for _, r := range more {
		if r = strings.TrimSpace(r); !slices.Contains(names, r) {
			names = append(names, r)
		}
	}
	return names, keys
}

// Default returns the built-in configuration: the server runs with no file.
func Default() Config {
	return Config{
		Backend: "docker",
		Kubernetes: Kubernetes{
			Namespace:       "python-docker-mcp-sandboxes",
			NodeSelector:    []string{},
			RuntimeClasses:  []string{},
			ImagePullPolicy: "IfNotPresent",
			StartTimeout:    Duration(2 * time.Minute),
			CPURequest:      0.1,
		},
		Docker: Docker{
			Image:           "python-docker-mcp-sandbox:latest",
			WorkingDir:      "/workspace",
			MemoryLimit:     512 << 20,
			CPULimit:        1,
			Timeout:         Duration(30 * time.Second),
			NetworkDisabled: true,
			ReadOnly:        true,
			PidsLimit:       128,
			TmpSize:         64 << 20,
			WorkspaceSize:   128 << 20,
			User:            "1000:1000",
			Runtimes:        []string{},
		},
		Image: Image{
			Release: "trixie",
			Mirror:  "http://deb.debian.org/debian",
			Packages: []string{
				"python3", "python3-numpy", "python3-pandas", "python3-scipy",
				"python3-matplotlib", "python3-sklearn", "python3-sympy", "python3-pip",
			},
		},
		Package: Package{
			Installer:      "pip",
			FindLinks:      []string{},
			TrustedHosts:   []string{},
			Allowed:        []string{},
			Blocked:        []string{},
			AllowedIndexes: []string{},
			Timeout:        Duration(120 * time.Second),
		},
		AllowedModules: []string{},
		BlockedModules: []string{},
		BlockedCalls:   []string{},
		Policy: Policy{Profile: "standard", Paths: []string{},
			Capabilities: Capabilities{SocketFamilies: []string{"unix", "inet", "inet6"}}},
		Pool: Pool{
			Enabled:                true,
			Size:                   2,
			MaxSize:                8,
			MaxAge:                 Duration(10 * time.Minute),
			MaxConcurrentCreations: 2,
			Preload:                []string{"numpy", "pandas", "matplotlib.pyplot"},
			Reuse:                  ReusePrincipal,
			ReuseMaxCalls:          100,
			ReuseMaxAge:            Duration(10 * time.Minute),
			MaxPerPrincipal:        4,
			ReuseMaxIdle:           16,
		},
		Sessions: Sessions{
			IdleTTL:     Duration(30 * time.Minute),
			MaxLifetime: Duration(4 * time.Hour),
			MaxPerOwner: 5,
			MaxTotal:    20,
		},
		Tasks: Tasks{
			MaxDuration:     Duration(time.Hour),
			MaxPerPrincipal: 4,
			TTL:             Duration(time.Hour),
		},
		Limits: Limits{
			MaxOutputBytes:      64 << 10,
			MaxStateBytes:       1 << 20,
			MaxImageBytes:       4 << 20,
			MaxCodeBytes:        1 << 20,
			MaxFileBytes:        64 << 20,
			MaxExpressionTokens: 10000,
		},
		Outputs: Outputs{
			MaxStreamBytes: 4 << 20,
			MaxTotalBytes:  64 << 20,
			TTL:            Duration(30 * time.Minute),
		},
		Quotas: Quotas{
			Sandboxes:         8,
			TransportSessions: 64,
			OutputBytes:       16 << 20,
			InflightBytes:     8 << 20,
			Analyses:          16,
		},
		Server: Server{
			Transport:    "stdio",
			Addr:         "127.0.0.1:8000",
			Path:         "/mcp",
			MaxBodyBytes: 4 << 20,
		},
		Auth: Auth{
			Mode:      "off",
			Audience:  "mcp-pyexec",
			Algorithm: "RS256",
			Leeway:    Duration(30 * time.Second),
			Scopes: Scopes{
				Execute:  "python:execute",
				Install:  "python:install",
				Sessions: "python:sessions",
			},
		},
		Log: Log{Level: "info", Format: "text"},
	}
}

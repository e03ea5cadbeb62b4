package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
)

// EnvPrefix starts every environment variable of the server.
const EnvPrefix = "PYTHON_DOCKER_MCP_"

// EnvConfigFile names the config file when --config is not given.
const EnvConfigFile = EnvPrefix + "CONFIG"

// Options says where Load looks. The zero value loads defaults, the default
// file if present and nothing else.
type Options struct {
	// File is the --config flag; it must exist when given.
	File string
	// Env is the environment as os.Environ gives it (nil = none).
	Env []string
	// Flags are flag values by key path, e.g. "server.transport": "http".
	Flags map[string]string
	// Home is the home directory for the default file (empty = os.UserHomeDir).
	Home string
}

// FromOS returns Options with the process environment.
func FromOS(file string, flags map[string]string) Options {
	return Options{File: file, Env: os.Environ(), Flags: flags}
}

// Loaded is a loaded configuration and where each value came from.
type Loaded struct {
	Config Config
	// File is the config file read ("" when none).
	File string
	// Origin maps every key path to "default", "file", "env NAME" or
	// "flag --NAME".
	Origin map[string]string
	// Warnings are things worth logging that are not errors (unknown
	// PYTHON_DOCKER_MCP_* variables).
	Warnings []string
}

// FieldError is one bad input: where it came from, which key, the bad
// value and what is allowed.
type FieldError struct {
	Source string // "file /path/config.yaml", "env PYTHON_DOCKER_MCP_X", "flag --x"
	Key    string // key path, e.g. "pool.size"
	Value  string // the bad value as written ("" when not applicable)
	Msg    string // what is wrong and what is allowed
}

func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	if e.Key != "" {
		b.WriteString(": " + e.Key)
	}
	if e.Value != "" {
		fmt.Fprintf(&b, " = %q", e.Value)
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// Errors is every error of one Load, in a stable order.
type Errors []*FieldError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// DefaultFile is ~/.python-docker-mcp/config.yaml under home.
func DefaultFile(home string) string {
	return filepath.Join(home, ".python-docker-mcp", "config.yaml")
}

// FileFor resolves which file Load reads: --config, else
// $PYTHON_DOCKER_MCP_CONFIG, else the default file if it exists, else "".
// explicit is true when the file was named and so must exist.
func FileFor(o Options) (path string, explicit bool) {
	if o.File != "" {
		return o.File, true
	}
	for _, kv := range o.Env {
		if v, ok := strings.CutPrefix(kv, EnvConfigFile+"="); ok && v != "" {
			return v, true
		}
	}
	home := o.Home
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	if home != "" {
		p := DefaultFile(home)
		if _, err := os.Stat(p); err == nil {
			return p, false
		}
	}
	return "", false
}

// Load builds the configuration: defaults, then the file, then the
// environment, then flags. Every bad input is reported (as Errors), not
// just the first.
func Load(o Options) (*Loaded, error) {
	cfg := Default()
	l := &Loaded{Origin: map[string]string{}}
	for _, k := range keyPaths() {
		l.Origin[k] = "default"
	}
	var errs Errors

	path, explicit := FileFor(o)
	if path != "" {
		l.File = path
		fileErrs := loadFile(&cfg, l, path, explicit)
		errs = append(errs, fileErrs...)
	}
	envVals, envErrs, warnings := envValues(o.Env)
	errs = append(errs, envErrs...)
	l.Warnings = warnings
	for _, ev := range envVals {
		if e := set(&cfg, ev.key, ev.value, "env "+ev.name); e != nil {
			errs = append(errs, e)
			continue
		}
		l.Origin[ev.key] = "env " + ev.name
	}
	flagKeys := make([]string, 0, len(o.Flags))
	for k := range o.Flags {
		flagKeys = append(flagKeys, k)
	}
	sort.Strings(flagKeys)
	for _, k := range flagKeys {
		src := "flag --" + flagName(k)
		if _, ok := fieldFor(k); !ok {
			errs = append(errs, &FieldError{Source: src, Key: k, Msg: "unknown key" + suggest(k)})
			continue
		}
		if e := set(&cfg, k, o.Flags[k], src); e != nil {
			errs = append(errs, e)
			continue
		}
		l.Origin[k] = src
	}
	errs = append(errs, validate(cfg, func(key string) string {
		if o := l.Origin[key]; o != "file" {
			return o
		}
		return "file " + l.File
	})...)
	if len(errs) > 0 {
		return nil, errs
	}
	l.Config = cfg
	return l, nil
}

// flagName is the command-line flag of a key path: server.transport →
// transport for the few dedicated flags, else set key=value.
func flagName(key string) string {
	for name, k := range FlagKeys {
		if k == key {
			return name
		}
	}
	return "set " + key
}

// FlagKeys are the dedicated command-line flags and the key each sets; any
// key can also be set with --set key=value.
var FlagKeys = map[string]string{
	"transport":    "server.transport",
	"addr":         "server.addr",
	"metrics-addr": "server.metrics_addr",
	"image":        "docker.image",
	"profile":      "policy.profile",
	"log-level":    "log.level",
}

func loadFile(cfg *Config, l *Loaded, path string, explicit bool) Errors {
	src := "file " + path
	st, err := os.Stat(path)
	if err != nil {
		what := "cannot read the config file"
		if errors.Is(err, os.ErrNotExist) {
			what = "config file does not exist"
		}
		how := "check the path given to --config or " + EnvConfigFile
		if !explicit {
			how = "fix its permissions or remove it"
		}
		return Errors{{Source: src, Msg: fmt.Sprintf("%s (%v): %s", what, err, how)}}
	}
	if st.IsDir() {
		return Errors{{Source: src, Msg: "is a directory, want a YAML file"}}
	}
	k := koanf.New(".")
	if err := k.Load(file.Provider(path), yaml.Parser()); err != nil {
		msg := err.Error()
		if i := strings.Index(msg, "yaml: "); i >= 0 {
			msg = msg[i:]
		}
		return Errors{{Source: src, Msg: "not valid YAML: " + msg + " (fix the syntax at that line)"}}
	}
	var errs Errors
	raw := k.Raw()
	for _, key := range flatten("", raw) {
		val := k.Get(key)
		if _, ok := fieldFor(key); !ok {
			if isSection(key) {
				errs = append(errs, &FieldError{Source: src, Key: key, Value: fmt.Sprint(val), Msg: "is a section: want a mapping of its keys"})
				continue
			}
			errs = append(errs, &FieldError{Source: src, Key: key, Msg: "unknown key " + strconv.Quote(lastPart(key)) + suggest(key)})
			continue
		}
		if e := set(cfg, key, val, src); e != nil {
			errs = append(errs, e)
			continue
		}
		l.Origin[key] = "file"
	}
	return errs
}

// flatten lists the key paths of a YAML mapping, stopping at known leaves
// (a list or a value) and at unknown keys.
func flatten(prefix string, m map[string]any) []string {
	var out []string
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		if sub, ok := m[k].(map[string]any); ok && isSection(p) {
			out = append(out, flatten(p, sub)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

func lastPart(key string) string {
	if i := strings.LastIndex(key, "."); i >= 0 {
		return key[i+1:]
	}
	return key
}

type envValue struct{ name, key, value string }

// LegacyEnv are python-docker-mcp's environment names and the keys they set.
var LegacyEnv = map[string]string{
	EnvPrefix + "MAX_CONCURRENT_CREATIONS": "pool.max_concurrent_creations",
	EnvPrefix + "MEMORY_LIMIT":             "docker.memory_limit",
	EnvPrefix + "CPU_LIMIT":                "docker.cpu_limit",
	"MCP_JWKS_URI":                         "auth.jwks_uri",
	"MCP_ISSUER":                           "auth.issuer",
	"MCP_AUDIENCE":                         "auth.audience",
	"MCP_ALGORITHM":                        "auth.algorithm",
	"MCP_PUBLIC_KEY_PATH":                  "auth.public_key_path",
}

// EnvName is the environment variable of a key path.
func EnvName(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

func envValues(env []string) ([]envValue, Errors, []string) {
	byName := map[string]string{}
	for _, k := range keyPaths() {
		byName[EnvName(k)] = k
	}
	for n, k := range LegacyEnv {
		byName[n] = k
	}
	var out []envValue
	var warnings []string
	for _, kv := range env {
		name, val, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if key, ok := byName[name]; ok {
			out = append(out, envValue{name, key, val})
			continue
		}
		if strings.HasPrefix(name, EnvPrefix) && name != EnvConfigFile {
			warnings = append(warnings, fmt.Sprintf("environment variable %s is not a setting of python-docker-mcp and is ignored%s", name, suggest(strings.ToLower(strings.TrimPrefix(name, EnvPrefix)))))
		}
	}
	// Canonical names win over legacy ones: apply legacy first.
	sort.SliceStable(out, func(i, j int) bool {
		li, lj := LegacyEnv[out[i].name] != "", LegacyEnv[out[j].name] != ""
		if li != lj {
			return li
		}
		return out[i].name < out[j].name
	})
	return out, nil, warnings
}

// --- reflection over the Config struct ---

type field struct {
	index []int
	typ   reflect.Type
}

var (
	fieldsByKey map[string]field
	sections    map[string]bool
	keyOrder    []string
)

func init() {
	fieldsByKey = map[string]field{}
	sections = map[string]bool{}
	walkType(reflect.TypeOf(Config{}), "", nil)
}

var (
	sizeType     = reflect.TypeOf(Size(0))
	durationType = reflect.TypeOf(Duration(0))
	switchType   = reflect.TypeOf((*bool)(nil))
)

func walkType(t reflect.Type, prefix string, index []int) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := f.Tag.Get("koanf")
		if name == "" {
			continue
		}
		p := name
		if prefix != "" {
			p = prefix + "." + name
		}
		idx := append(append([]int(nil), index...), i)
		if f.Type.Kind() == reflect.Struct {
			sections[p] = true
			walkType(f.Type, p, idx)
			continue
		}
		fieldsByKey[p] = field{index: idx, typ: f.Type}
		keyOrder = append(keyOrder, p)
	}
}

func keyPaths() []string { return keyOrder }

func fieldFor(key string) (field, bool) {
	f, ok := fieldsByKey[key]
	return f, ok
}

func isSection(key string) bool { return sections[key] }

// suggest names the closest known key, or lists a section's keys.
func suggest(key string) string {
	best, bestD := "", 4
	for _, k := range keyOrder {
		if d := distance(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best != "" {
		return "; did you mean " + strconv.Quote(best) + "?"
	}
	sec := ""
	if i := strings.LastIndex(key, "."); i >= 0 {
		sec = key[:i]
	}
	var ks []string
	for _, k := range keyOrder {
		if strings.HasPrefix(k, sec+".") && !strings.Contains(k[len(sec)+1:], ".") {
			ks = append(ks, k[len(sec)+1:])
		}
	}
	if sec != "" && len(ks) > 0 {
		return "; the keys of " + sec + " are: " + strings.Join(ks, ", ")
	}
	return "; see `python-docker-mcp config show` for every key"
}

func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// set parses val (a YAML value or a string) into the field at key.
func set(cfg *Config, key string, val any, src string) *FieldError {
	f, _ := fieldFor(key)
	v := reflect.ValueOf(cfg).Elem().FieldByIndex(f.index)
	fe := func(msg string) *FieldError {
		return &FieldError{Source: src, Key: key, Value: show(val), Msg: msg}
	}
	if val == nil { // YAML null: the zero value (index_url: null)
		v.Set(reflect.Zero(f.typ))
		return nil
	}
	switch {
	case f.typ == sizeType:
		s, ok := scalar(val)
		if !ok {
			return fe("want a size: " + sizeHint)
		}
		n, err := ParseSize(s)
		if err != nil {
			return fe(err.Error())
		}
		v.SetInt(int64(n))
	case f.typ == durationType:
		s, ok := scalar(val)
		if !ok {
			return fe("want " + durationHint)
		}
		d, err := ParseDuration(s)
		if err != nil {
			return fe(err.Error())
		}
		v.SetInt(int64(d))
	case f.typ == switchType:
		// A tri-state: true, false, or unset (null in YAML, "" or "auto"
		// in the environment and flags).
		s, ok := scalar(val)
		if !ok {
			return fe("want true, false, or null (unset: derived from the module and call lists)")
		}
		if s = strings.ToLower(strings.TrimSpace(s)); s == "" || s == "auto" || s == "null" {
			v.Set(reflect.Zero(f.typ))
			return nil
		}
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fe("want true, false, or null (unset: derived from the module and call lists)")
		}
		v.Set(reflect.ValueOf(&b))
	case f.typ.Kind() == reflect.String:
		s, ok := scalar(val)
		if !ok {
			return fe("want a string")
		}
		v.SetString(s)
	case f.typ.Kind() == reflect.Bool:
		s, ok := scalar(val)
		b, err := strconv.ParseBool(strings.ToLower(s))
		if !ok || err != nil {
			return fe("want true or false")
		}
		v.SetBool(b)
	case f.typ.Kind() == reflect.Int || f.typ.Kind() == reflect.Int64:
		s, ok := scalar(val)
		n, err := strconv.ParseInt(s, 10, 64)
		if !ok || err != nil {
			return fe("want a whole number")
		}
		v.SetInt(n)
	case f.typ.Kind() == reflect.Float64:
		s, ok := scalar(val)
		x, err := strconv.ParseFloat(s, 64)
		if !ok || err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return fe("want a number")
		}
		v.SetFloat(x)
	case f.typ.Kind() == reflect.Slice:
		var items []string
		switch t := val.(type) {
		case []any:
			for _, it := range t {
				s, ok := scalar(it)
				if !ok {
					return fe("want a list of strings")
				}
				items = append(items, s)
			}
		case string: // env and flags: comma-separated
			for _, p := range strings.Split(t, ",") {
				if p = strings.TrimSpace(p); p != "" {
					items = append(items, p)
				}
			}
		default:
			return fe("want a list of strings")
		}
		if items == nil {
			items = []string{}
		}
		v.Set(reflect.ValueOf(items))
	default:
		return fe("unsupported type " + f.typ.String())
	}
	return nil
}

// scalar renders a YAML scalar as a string; maps and lists are not scalars.
func scalar(v any) (string, bool) {
	switch t := v.(type) {
	case string:
		return t, true
	case bool:
		return strconv.FormatBool(t), true
	case int:
		return strconv.Itoa(t), true
	case int64:
		return strconv.FormatInt(t, 10), true
	case uint64:
		return strconv.FormatUint(t, 10), true
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64), true
	case time.Time:
		return t.Format(time.RFC3339), true
	}
	return "", false
}

func show(v any) string {
	if s, ok := scalar(v); ok {
		return s
	}
	return fmt.Sprint(v)
}

// validate checks values that parse but are not allowed.
func validate(c Config, source func(key string) string) Errors {
	var errs Errors
	bad := func(key string, val any, msg string) {
		src := source(key)
		errs = append(errs, &FieldError{Source: src, Key: key, Value: fmt.Sprint(val), Msg: msg})
	}
	oneOf := func(key, val string, allowed ...string) {
		for _, a := range allowed {
			if val == a {
				return
			}
		}
		bad(key, val, "want one of: "+strings.Join(allowed, ", "))
	}
	oneOf("backend", c.Backend, "docker", "kubernetes")
	if c.Backend == "kubernetes" {
		if c.Kubernetes.Namespace == "" {
			bad("kubernetes.namespace", "", "want the namespace sandbox Pods run in, e.g. python-docker-mcp-sandboxes")
		}
		oneOf("kubernetes.image_pull_policy", c.Kubernetes.ImagePullPolicy, "IfNotPresent", "Always", "Never")
		for _, e := range c.Kubernetes.NodeSelector {
			if k, _, ok := strings.Cut(e, "="); !ok || strings.TrimSpace(k) == "" {
				bad("kubernetes.node_selector", e, `want entries "key=value", e.g. "kubernetes.io/os=linux"`)
			}
		}
		if r := c.Kubernetes.CPURequest; r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			bad("kubernetes.cpu_request", r, "want CPUs at least 0 (fractions allowed, e.g. 0.25; 0 = request the whole limit)")
		}
		if c.Kubernetes.StartTimeout.D() <= 0 {
			bad("kubernetes.start_timeout", c.Kubernetes.StartTimeout, "want a positive duration, e.g. 2m")
		}
		if c.Docker.Runtime != "" {
			bad("docker.runtime", c.Docker.Runtime, "is Docker's runtime; with backend: kubernetes set kubernetes.runtime_class instead")
		}
		if len(c.Docker.Runtimes) > 0 {
			bad("docker.runtimes", strings.Join(c.Docker.Runtimes, ","), "are Docker's runtimes; with backend: kubernetes set kubernetes.runtime_classes instead")
		}
	}
	for key, list := range map[string][]string{"docker.runtimes": c.Docker.Runtimes, "kubernetes.runtime_classes": c.Kubernetes.RuntimeClasses} {
		for _, r := range list {
			if strings.TrimSpace(r) == "" || strings.ContainsAny(strings.TrimSpace(r), " \t,") {
				bad(key, r, "want runtime names, e.g. [runsc] (docker) or [gvisor] (kubernetes)")
			}
		}
	}
	if c.Docker.Image == "" {
		bad("docker.image", "", "must not be empty")
	}
	if !strings.HasPrefix(c.Docker.WorkingDir, "/") || c.Docker.WorkingDir == "/" {
		bad("docker.working_dir", c.Docker.WorkingDir, "want an absolute directory other than /, e.g. /workspace")
	}
	if c.Docker.MemoryLimit < 6<<20 {
		bad("docker.memory_limit", c.Docker.MemoryLimit, "want at least 6m (Docker's minimum)")
	}
	if c.Docker.CPULimit <= 0 {
		bad("docker.cpu_limit", c.Docker.CPULimit, "want a positive number of CPUs, e.g. 0.5 or 2")
	}
	if c.Docker.PidsLimit <= 0 {
		bad("docker.pids_limit", c.Docker.PidsLimit, "want a positive number of processes, e.g. 128")
	}
	if c.Docker.TmpSize <= 0 {
		bad("docker.tmp_size", c.Docker.TmpSize, "want a positive size, e.g. 64m")
	}
	if c.Docker.WorkspaceSize <= 0 {
		bad("docker.workspace_size", c.Docker.WorkspaceSize, "want a positive size, e.g. 128m")
	}
	if uid, gid, ok := strings.Cut(c.Docker.User, ":"); !ok || !numeric(uid) || !numeric(gid) || uid == "0" {
		bad("docker.user", c.Docker.User, `want a numeric non-root "uid:gid", e.g. "1000:1000"`)
	}
	if c.Image.Release == "" {
		bad("image.release", "", "want a Debian release name, e.g. trixie")
	}
	if len(c.Image.Packages) == 0 {
		bad("image.packages", "[]", "want at least python3")
	}
	oneOf("package.installer", c.Package.Installer, "pip", "uv")
	if c.Package.MaxPerSession < 0 {
		bad("package.max_per_session", c.Package.MaxPerSession, "want 0 (no cap) or more")
	}
	oneOf("policy.profile", c.Policy.Profile, "standard", "strict")
	for _, fam := range c.Policy.Capabilities.SocketFamilies {
		if !slices.Contains(SocketFamilies, fam) {
			bad("policy.capabilities.socket_families", fam, "want a list of socket families among: "+strings.Join(SocketFamilies, ", "))
		}
	}
	if c.Pool.Size < 0 || c.Pool.Size > 64 {
		bad("pool.size", c.Pool.Size, "want 0 to 64")
	}
	if c.Pool.MaxSize < 0 || c.Pool.MaxSize > 64 {
		bad("pool.max_size", c.Pool.MaxSize, "want 0 to 64")
	}
	oneOf("pool.reuse", c.Pool.Reuse, ReusePrincipal, ReuseNever)
	if c.Pool.ReuseMaxAge.D() <= 0 {
		bad("pool.reuse_max_age", c.Pool.ReuseMaxAge, "want a positive duration, e.g. 10m")
	}
	for key, v := range map[string]int{
		"pool.reuse_max_calls":          c.Pool.ReuseMaxCalls,
		"pool.max_per_principal":        c.Pool.MaxPerPrincipal,
		"pool.reuse_max_idle":           c.Pool.ReuseMaxIdle,
		"pool.max_concurrent_creations": c.Pool.MaxConcurrentCreations,
		"sessions.max_per_owner":        c.Sessions.MaxPerOwner,
		"sessions.max_total":            c.Sessions.MaxTotal,
		"tasks.max_per_principal":       c.Tasks.MaxPerPrincipal,
		"limits.max_expression_tokens":  c.Limits.MaxExpressionTokens,
		"quotas.sandboxes":              c.Quotas.Sandboxes,
		"quotas.transport_sessions":     c.Quotas.TransportSessions,
		"quotas.analyses":               c.Quotas.Analyses,
	} {
		if v < 1 {
			bad(key, v, "want 1 or more")
		}
	}
	for key, v := range map[string]Size{
		"limits.max_output_bytes":  c.Limits.MaxOutputBytes,
		"limits.max_state_bytes":   c.Limits.MaxStateBytes,
		"limits.max_image_bytes":   c.Limits.MaxImageBytes,
		"limits.max_code_bytes":    c.Limits.MaxCodeBytes,
		"limits.max_file_bytes":    c.Limits.MaxFileBytes,
		"server.max_body_bytes":    c.Server.MaxBodyBytes,
		"outputs.max_stream_bytes": c.Outputs.MaxStreamBytes,
		"outputs.max_total_bytes":  c.Outputs.MaxTotalBytes,
	} {
		if v <= 0 {
			bad(key, v, "want a positive size")
		}
	}
	if c.Outputs.MaxStreamBytes < c.Limits.MaxOutputBytes {
		bad("outputs.max_stream_bytes", c.Outputs.MaxStreamBytes, fmt.Sprintf("want at least limits.max_output_bytes (%d bytes): it is what is kept of a stream that was cut for display", int64(c.Limits.MaxOutputBytes)))
	}
	if c.Quotas.OutputBytes <= 0 {
		bad("quotas.output_bytes", c.Quotas.OutputBytes, "want a positive size, e.g. 16m")
	}
	if c.Quotas.InflightBytes < c.Server.MaxBodyBytes {
		bad("quotas.inflight_bytes", c.Quotas.InflightBytes, fmt.Sprintf("want at least server.max_body_bytes (%d bytes), or no request of that size could ever be handled", int64(c.Server.MaxBodyBytes)))
	}
	if c.Outputs.TTL.D() <= 0 {
		bad("outputs.ttl", c.Outputs.TTL, "want a positive duration, e.g. 30m")
	}
	if c.Tasks.MaxDuration.D() <= 0 {
		bad("tasks.max_duration", c.Tasks.MaxDuration, "want a positive duration, e.g. 1h")
	}
	if c.Tasks.TTL.D() <= 0 {
		bad("tasks.ttl", c.Tasks.TTL, "want a positive duration, e.g. 1h")
	}
	oneOf("server.transport", c.Server.Transport, "stdio", "http")
	if !strings.HasPrefix(c.Server.Path, "/") {
		bad("server.path", c.Server.Path, `want a path starting with "/", e.g. /mcp`)
	}
	if a := c.Server.MetricsAddr; a != "" {
		if _, _, err := net.SplitHostPort(a); err != nil {
			bad("server.metrics_addr", a, "want HOST:PORT, e.g. 127.0.0.1:9090 (\"\" for none)")
		}
	}
	if u := c.Server.PublicURL; u != "" {
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "https" && pu.Scheme != "http") || pu.Host == "" || pu.RawQuery != "" || pu.Fragment != "" {
			bad("server.public_url", u, "want the absolute http(s) URL clients reach the MCP endpoint at, without query or fragment, e.g. https://mcp.example.com/mcp (\"\" = the listen address)")
		}
	}
	oneOf("auth.mode", c.Auth.Mode, "jwt", "dev", "off")
	oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")
	oneOf("log.format", c.Log.Format, "text", "json")
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Key < errs[j].Key })
	return errs
}

func numeric(s string) bool {
	_, err := strconv.ParseUint(s, 10, 32)
	return err == nil
}

// Keys lists every key path in declaration order.
func Keys() []string { return append([]string(nil), keyOrder...) }

// Value returns the value at a key path, for `config show`.
func (c Config) Value(key string) (any, bool) {
	f, ok := fieldFor(key)
	if !ok {
		return nil, false
	}
	return reflect.ValueOf(c).FieldByIndex(f.index).Interface(), true
}

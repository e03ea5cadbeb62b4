package policy

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/python-docker-mcp/python-docker-mcp/config"
)

// Profiles are the values of policy.profile.
var Profiles = []string{"standard", "strict"}

var (
	// A dotted Python name; identifiers may be non-ASCII (PEP 3131).
	dottedName = regexp.MustCompile(`^[\p{L}_][\p{L}\p{N}_]*(\.[\p{L}_][\p{L}\p{N}_]*)*$`)
	// PEP 508 distribution name.
	packageName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)
	// The same PEP 440 version pattern as rules/lib.rego (on lower case).
	pep440 = regexp.MustCompile(`^v?(?:(\d+)!)?(\d+(?:\.\d+)*)(?:[-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?(\d*))?(?:-(\d+)|[-_.]?(post|rev|r)[-_.]?(\d*))?(?:[-_.]?(dev)[-_.]?(\d*))?(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?$`)
	// One specifier clause, as rules/lib.rego parses it.
	specClause = regexp.MustCompile(`^(~=|===|==|!=|<=|>=|<|>)\s*([^\s,;<>=!~]+)$`)
	separators = regexp.MustCompile(`[-_.]+`)
	// name, optional extras, the rest.
	requirement = regexp.MustCompile(`^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*?)\s*$`)
)

// NormalizePackage is the PEP 503 normal form of a package name:
// "Scikit_Learn" and "scikit.learn" are both "scikit-learn".
func NormalizePackage(name string) string {
	return strings.ToLower(separators.ReplaceAllString(name, "-"))
}

// ParseRequirement reads a requirement string such as "numpy",
// "numpy==1.26.4" or "pandas>=2,<3" into a Package (Index left empty).
// Extras, environment markers and direct URL references are errors: the
// policy could not judge what they pull in.
func ParseRequirement(s string) (Package, error) {
	m := requirement.FindStringSubmatch(s)
	if m == nil || !packageName.MatchString(m[1]) {
		return Package{}, fmt.Errorf("%q is not a requirement: want a package name with an optional version specifier, e.g. numpy==1.26.4", s)
	}
	if m[2] != "" {
		return Package{}, fmt.Errorf("%q: extras (%s) are not supported: request the extra packages by name", s, m[2])
	}
	spec := m[3]
	if strings.ContainsAny(spec, ";@") {
		return Package{}, fmt.Errorf("%q: environment markers and direct references are not supported: want a name and a version specifier", s)
	}
	if err := checkSpecifier(spec); err != nil {
		return Package{}, fmt.Errorf("%q: %w", s, err)
	}
	return Package{Name: m[1], Specifier: spec}, nil
}

// checkSpecifier accepts what rules/lib.rego's valid_specifier accepts.
func checkSpecifier(spec string) error {
	if strings.TrimSpace(spec) == "" {
		return nil
	}
	for _, c := range strings.Split(spec, ",") {
		m := specClause.FindStringSubmatch(strings.TrimSpace(c))
		if m == nil {
			return fmt.Errorf("%q is not a version clause: want an operator (==, !=, <=, >=, <, >, ~=, ===) and a version, e.g. >=1.26", strings.TrimSpace(c))
		}
		op, v := m[1], m[2]
		if op == "===" {
			continue
		}
		if (op == "==" || op == "!=") && strings.HasSuffix(v, ".*") {
			v = strings.TrimSuffix(v, ".*")
		}
		if !pep440.MatchString(strings.ToLower(v)) {
			return fmt.Errorf("%q is not a PEP 440 version", m[2])
		}
	}
	return nil
}

// limitKeys names each limit in the input, in the data and in the config.
var limitKeys = []struct{ name, key string }{
	{"timeout_seconds", "docker.timeout"},
	{"memory_bytes", "docker.memory_limit"},
	{"cpus", "docker.cpu_limit"},
	{"pids", "docker.pids_limit"},
}

// configData turns the configuration into data.pydocker.config: module
// and call lists stay sorted lists (matched by prefix), package lists
// become lookup objects (normalised name -> entry), names are checked,
// package requirements are split into name and specifier, limits carry
// their config key and their text for messages. Errors name the config key.
func configData(cfg config.Config) (map[string]any, Limits, error) {
	profile := cfg.Policy.Profile
	if profile == "" {
		profile = "standard"
	}
	if profile != "standard" && profile != "strict" {
		return nil, Limits{}, fmt.Errorf("policy.profile: %q is not a profile: want standard or strict", profile)
	}
	allowedModules, err := nameList("allowed_modules", cfg.AllowedModules)
	if err != nil {
		return nil, Limits{}, err
	}
	blockedModules, err := nameList("blocked_modules", cfg.BlockedModules)
	if err != nil {
		return nil, Limits{}, err
	}
	blockedCalls, err := nameList("blocked_calls", cfg.BlockedCalls)
	if err != nil {
		return nil, Limits{}, err
	}
	pkg, err := packageData(cfg.Package)
	if err != nil {
		return nil, Limits{}, err
	}
	caps, err := capabilitiesData(cfg.Policy.Capabilities)
	if err != nil {
		return nil, Limits{}, err
	}

	max := Limits{
		Timeout: cfg.Docker.Timeout.D().Seconds(),
		Memory:  int64(cfg.Docker.MemoryLimit),
		CPUs:    cfg.Docker.CPULimit,
		Pids:    cfg.Docker.PidsLimit,
	}
	values := map[string]any{
		"timeout_seconds": max.Timeout,
		"memory_bytes":    max.Memory,
		"cpus":            max.CPUs,
		"pids":            max.Pids,
	}
	texts := map[string]string{
		"timeout_seconds": cfg.Docker.Timeout.String(),
		"memory_bytes":    cfg.Docker.MemoryLimit.String(),
		"cpus":            strconv.FormatFloat(max.CPUs, 'g', -1, 64),
		"pids":            strconv.FormatInt(max.Pids, 10),
	}
	positive := map[string]bool{
		"timeout_seconds": max.Timeout > 0,
		"memory_bytes":    max.Memory > 0,
		"cpus":            max.CPUs > 0,
		"pids":            max.Pids > 0,
	}
	limits := map[string]any{}
	for _, l := range limitKeys {
		if !positive[l.name] {
			return nil, Limits{}, fmt.Errorf("%s: %s: the maximum must be positive, requests are bounded by it", l.key, texts[l.name])
		}
		limits[l.name] = map[string]any{"max": values[l.name], "key": l.key, "text": texts[l.name]}
	}

	regex := map[string]any{
		"blocked_modules": listRegex("blocked_modules", blockedModules),
		"allowed_modules": listRegex("allowed_modules", allowedModules),
		"blocked_calls":   listRegex("blocked_calls", blockedCalls),
	}

	runtimes, runtimeKeys := cfg.SandboxRuntimes()
	allowedRuntimes := make(map[string]any, len(runtimes))
	for _, r := range runtimes {
		allowedRuntimes[r] = true
	}

	return map[string]any{
		"runtimes":              map[string]any{"default": runtimes[0], "allowed": allowedRuntimes, "keys": runtimeKeys},
		"profile":               profile,
		"reuse":                 cfg.Pool.Reuse,
		"regex":                 regex,
		"allowed_modules":       allowedModules,
		"blocked_modules":       blockedModules,
		"blocked_calls":         blockedCalls,
		"package":               pkg,
		"capabilities":          caps,
		"limits":                limits,
		"max_code_bytes":        int64(cfg.Limits.MaxCodeBytes),
		"max_expression_tokens": cfg.Limits.MaxExpressionTokens,
		"sessions":              map[string]any{"max_per_owner": cfg.Sessions.MaxPerOwner},
		"tasks": map[string]any{"max_duration_seconds": cfg.Tasks.MaxDuration.D().Seconds(), "max_duration_text": cfg.Tasks.MaxDuration.String(),
			"max_per_principal": cfg.Tasks.MaxPerPrincipal},
		"quotas":    quotasData(configuredQuotas(cfg)),
		"languages": map[string]any{"bash": map[string]any{"enabled": cfg.Languages.Bash.Enabled}},
	}, max, nil
}

// configuredQuotas are the quotas the configuration gives every principal.
func configuredQuotas(cfg config.Config) Quotas {
	return Quotas{
		QuotaSandboxes:         {Max: int64(cfg.Quotas.Sandboxes), Key: "quotas.sandboxes"},
		QuotaSessions:          {Max: int64(cfg.Sessions.MaxPerOwner), Key: "sessions.max_per_owner"},
		QuotaTransportSessions: {Max: int64(cfg.Quotas.TransportSessions), Key: "quotas.transport_sessions"},
		QuotaOutputBytes:       {Max: int64(cfg.Quotas.OutputBytes), Key: "quotas.output_bytes"},
		QuotaInflightBytes:     {Max: int64(cfg.Quotas.InflightBytes), Key: "quotas.inflight_bytes"},
		QuotaAnalyses:          {Max: int64(cfg.Quotas.Analyses), Key: "quotas.analyses"},
	}
}

// quotasData is data.pydocker.config.quotas: NAME -> {max, key}.
func quotasData(q Quotas) map[string]any {
	out := make(map[string]any, len(q))
	for name, v := range q {
		out[name] = map[string]any{"max": v.Max, "key": v.Key}
	}
	return out
}

// nameList checks dotted names and returns them sorted, without
// duplicates. The rules match them with prefix semantics
// (strings.any_prefix_match on "name."), which needs a list, not a set.
func nameList(key string, names []string) ([]any, error) {
	list := make([]string, len(names))
	for i, n := range names {
		list[i] = strings.TrimSpace(n)
		if !dottedName.MatchString(list[i]) {
			return nil, fmt.Errorf("%s[%d]: %q is not a dotted Python name (e.g. os or os.path)", key, i, n)
		}
	}
	return sortedSet(list), nil
}

// sortedSet is names sorted, without duplicates, as a list for the rules
// (names itself is left as it is).
func sortedSet(names []string) []any {
	list := slices.Clone(names)
	slices.Sort(list)
	return anyList(slices.Compact(list))
}

// listRegex builds the regular expression rules/lib.rego's list_regex
// builds for a config list (the Go copy saves the rules doing it on every
// decision; TestListRegex checks they agree). Names are dotted
// identifiers: "." is the only character to escape.
func listRegex(key string, names []any) string {
	if len(names) == 0 {
		return ""
	}
	alternatives := func(names []string) string {
		quoted := make([]string, len(names))
		for i, n := range names {
			quoted[i] = strings.ReplaceAll(n, ".", `\.`)
		}
		return strings.Join(quoted, "|")
	}
	list := make([]string, len(names))
	for i, n := range names {
		list[i] = n.(string)
	}
	switch key {
	case "blocked_modules":
		seen := map[string]bool{}
		var parents []string
		for _, n := range list {
			parts := strings.Split(n, ".")
			for i := 1; i < len(parts); i++ {
				p := strings.Join(parts[:i], ".")
				if !seen[p] {
					seen[p] = true
					parents = append(parents, p)
				}
			}
		}
		sort.Strings(parents)
		re := `(?m)^(?:` + alternatives(list) + `)\.`
		if len(parents) > 0 {
			re += `|^(?:` + alternatives(parents) + `)\.$`
		}
		return re
	case "allowed_modules":
		return `(?m)^(?:` + alternatives(list) + `|__future__)\.[^\n]*\n`
	default: // blocked_calls
		for i, n := range list {
			list[i] = strings.TrimPrefix(n, "builtins.")
		}
		return `(?m)^(?:builtins\.)?(?:` + alternatives(list) + `)\.`
	}
}

// capabilitiesData is data.pydocker.config.capabilities: each class the
// operator's true or false, or null to derive it from the lists (rules/
// capabilities.rego), and the allowed socket families, sorted.
func capabilitiesData(c config.Capabilities) (map[string]any, error) {
	word := func(b *bool) any {
		if b == nil {
			return nil
		}
		return *b
	}
	for i, f := range c.SocketFamilies {
		if !slices.Contains(config.SocketFamilies, f) {
			return nil, fmt.Errorf("policy.capabilities.socket_families[%d]: %q is not a socket family: want %s", i, f, strings.Join(config.SocketFamilies, ", "))
		}
	}
	return map[string]any{
		"processes":       word(c.Processes),
		"sockets":         word(c.Sockets),
		"pty":             word(c.PTY),
		"native_code":     word(c.NativeCode),
		"socket_families": sortedSet(c.SocketFamilies),
	}, nil
}

func packageData(p config.Package) (map[string]any, error) {
	allowed := make(map[string]any, len(p.Allowed))
	for i, s := range p.Allowed {
		r, err := ParseRequirement(s)
		if err != nil {
			return nil, fmt.Errorf("package.allowed[%d]: %w", i, err)
		}
		name := NormalizePackage(r.Name)
		if prev, ok := allowed[name]; ok {
			return nil, fmt.Errorf("package.allowed[%d]: %q names %s again (also %q): merge the constraints into one entry", i, s, name, prev.(map[string]any)["requirement"])
		}
		allowed[name] = map[string]any{"requirement": strings.TrimSpace(s), "specifier": r.Specifier}
	}
	blocked := make(map[string]any, len(p.Blocked))
	for i, s := range p.Blocked {
		t := strings.TrimSpace(s)
		if !packageName.MatchString(t) {
			return nil, fmt.Errorf("package.blocked[%d]: %q is not a package name", i, s)
		}
		blocked[NormalizePackage(t)] = true
	}
	indexes := make(map[string]any, len(p.AllowedIndexes)+1)
	for i, u := range p.AllowedIndexes {
		t := strings.TrimRight(strings.TrimSpace(u), "/")
		if t == "" {
			return nil, fmt.Errorf("package.allowed_indexes[%d]: empty URL", i)
		}
		indexes[t] = true
	}
	if t := strings.TrimRight(strings.TrimSpace(p.IndexURL), "/"); t != "" {
		indexes[t] = true
	}
	if p.MaxPerSession < 0 {
		return nil, fmt.Errorf("package.max_per_session: %d is negative: want 0 (no cap) or more", p.MaxPerSession)
	}
	return map[string]any{
		"allowed":         allowed,
		"blocked":         blocked,
		"require_pinned":  p.RequirePinned,
		"allowed_indexes": indexes,
		"max_per_session": p.MaxPerSession,
	}, nil
}

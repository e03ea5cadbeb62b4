package install

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/python-docker-mcp/python-docker-mcp/config"
)

// Resolved is one package an install adds: the requested package or one of
// its dependencies, as pip's resolver chose it from the configured
// wheelhouses and index.
type Resolved struct {
	// Name as the distribution's metadata spells it.
	Name string `json:"name"`
	// Version is the exact version that is installed.
	Version string `json:"version"`
	// RequiredBy names the packages of the same install whose dependencies
	// (without extras; environment markers evaluated in the sandbox) name
	// this one; empty for the requested package.
	RequiredBy []string `json:"required_by"`
}

// The resolver prints one line per package it would install, then a count,
// so a lost line is noticed; "pdm-satisfied" when the request needs no
// install (the image or an earlier install already has it).
const (
	resolvedPrefix  = "pdm-resolved "
	countPrefix     = "pdm-resolved-count "
	satisfiedPrefix = "pdm-satisfied "
	reportPath      = "/tmp/pdm-report.json"
)

// resolverScript runs pip's resolver in the installer container (the
// bootstrap execs it as docker.user): `pip install --dry-run --report`
// against the same sources as the install, with the package volume
// appended to sys.path as the runner appends it, so what the image or an
// earlier install already provides is not installed again. It then prints
// the report's packages with the packages of the set that require each
// (pip's own packaging library evaluates the markers; requirements behind
// an extra are not followed, as pip does not follow them).
// argv[1] is pip's arguments as JSON, argv[2] the requested name.
const resolverScript = `import json, runpy, sys
sys.path.append("` + Dir + `")
args, wanted = json.loads(sys.argv[1]), sys.argv[2]
sys.argv = ["pip"] + args
try:
    runpy.run_module("pip", run_name="__main__", alter_sys=True)
    code = 0
except SystemExit as e:
    code = e.code
if code:
    sys.exit(code if isinstance(code, int) else 1)
try:
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.utils import canonicalize_name
except ImportError:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
with open("` + reportPath + `") as f:
    items = [i["metadata"] for i in json.load(f).get("install", [])]
needs = {canonicalize_name(m["name"]): [] for m in items}
for m in items:
    for r in m.get("requires_dist") or []:
        try:
            req = Requirement(r)
        except Exception:
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        dep = canonicalize_name(req.name)
        if dep in needs and dep != canonicalize_name(m["name"]) and m["name"] not in needs[dep]:
            needs[dep].append(m["name"])
for m in items:
    print("` + resolvedPrefix + `" + json.dumps({"name": m["name"], "version": m["version"], "required_by": needs[canonicalize_name(m["name"])]}), flush=True)
print("` + countPrefix + `%d" % len(items), flush=True)
if not items:
    import importlib.metadata as md
    try:
        print("` + satisfiedPrefix + `" + md.version(wanted), flush=True)
    except Exception:
        pass
`

// resolverArgs is the resolver's command line: pip in dry-run mode, with
// the install's sources and --upgrade (the requested package is looked up
// again; its dependencies only when what is there does not satisfy them).
func resolverArgs(p config.Package, wheelhouses int, requirement, name string) []string {
	pip := []string{"--no-cache-dir", "--disable-pip-version-check", "--no-input", "install", "--dry-run", "--report", reportPath, "--upgrade"}
	pip, _ = sourceArgs(p, wheelhouses, pip, nil)
	pip = append(pip, "--", requirement)
	args, _ := json.Marshal(pip)
	return []string{"python3", "-I", "-c", resolverScript, string(args), name}
}

// resolverLines collects the resolver's data lines.
type resolverLines struct {
	mu        sync.Mutex
	plan      []Resolved
	bad       []string
	count     int // -1 until the count line came
	satisfied string
}

func (l *resolverLines) take(line string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case strings.HasPrefix(line, resolvedPrefix):
		var r Resolved
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, resolvedPrefix)), &r); err != nil {
			l.bad = append(l.bad, line)
		} else {
			l.plan = append(l.plan, r)
		}
	case strings.HasPrefix(line, countPrefix):
		n, err := strconv.Atoi(strings.TrimPrefix(line, countPrefix))
		if err != nil {
			l.bad = append(l.bad, line)
		}
		l.count = n
	case strings.HasPrefix(line, satisfiedPrefix):
		l.satisfied = strings.TrimPrefix(line, satisfiedPrefix)
	default:
		return false
	}
	return true
}

// resolvedVersion is what a resolved version may look like (PEP 440,
// normalised or not): it becomes part of the installer's argv.
var resolvedVersion = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.+!_-]*$`)

// result checks the collected lines: every package came, with a name and
// a version that can go into a requirement.
func (l *resolverLines) result() ([]Resolved, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case len(l.bad) > 0:
		return nil, fmt.Errorf("unreadable resolver line %.200q", l.bad[0])
	case l.count < 0:
		return nil, errors.New("the resolver printed no package count")
	case l.count != len(l.plan):
		return nil, fmt.Errorf("the resolver announced %d packages and listed %d", l.count, len(l.plan))
	}
	for i, r := range l.plan {
		if r.RequiredBy == nil {
			l.plan[i].RequiredBy = []string{}
		}
		if err := Check(r.Name, ""); err != nil {
			return nil, fmt.Errorf("resolved package: %v", err)
		}
		if len(r.Version) > 64 || !resolvedVersion.MatchString(r.Version) {
			return nil, fmt.Errorf("resolved package %s: %q is not a version", r.Name, r.Version)
		}
	}
	return l.plan, nil
}

// missingRequirement reads pip's "Could not find a version that satisfies
// the requirement pdmc (from pdmb)" into "pdmc (required by pdmb)".
var missingRequirement = regexp.MustCompile(`satisfies the requirement (\S+)(?: \(from ([^)]+)\))?`)

// Run installs one package and the dependencies it lacks into s's
// package volume: it resolves req with its dependencies in an installer
// container, has req.Approve judge the resolved set, then installs exactly
// that set (name==version each, --no-deps) in a second one. The caller
// has checked req (Check, CheckSources) and holds the volume: one install
// at a time into it. An installer failure is a Result (see Status); an
// error means the install could not run, or req.Approve's error as is.
func Run(ctx context.Context, s Setup, req Request) (*Result, error) {
	requirement := req.Name + strings.ReplaceAll(req.Specifier, " ", "")
	lines := &resolverLines{count: -1}
	resolved, err := run(ctx, s, req, job{
		verb: "resolving", what: requirement,
		pip:     resolverArgs(s.Package, len(s.Package.FindLinks), requirement, req.Name),
		capture: lines.take,
	})
	if err != nil {
		return nil, err
	}
	resolved.Packages = []Resolved{}
	switch resolved.Status {
	case "ok":
	case "not_found":
		if m := missingRequirement.FindStringSubmatch(resolved.Output); m != nil && !strings.EqualFold(m[1], requirement) {
			what := m[1]
			if m[2] != "" {
				what += " (required by " + m[2] + ")"
			}
			resolved.Message = fmt.Sprintf("%s needs %s, and no distribution of it is available from %s; nothing was installed", requirement, what, sources(s.Package))
		}
		return resolved, nil
	default:
		return resolved, nil
	}
	plan, err := lines.result()
	if err != nil {
		resolved.Status = "error"
		resolved.Message = fmt.Sprintf("resolving %s: %v; nothing was installed", requirement, err)
		return resolved, nil
	}
	if len(plan) == 0 {
		resolved.Version = lines.satisfied
		resolved.Message = fmt.Sprintf("%s %s is already installed (in the image or by an earlier install); nothing to install", req.Name, lines.satisfied)
		return resolved, nil
	}
	pins := make([]string, len(plan))
	for i, r := range plan {
		pins[i] = r.Name + "==" + r.Version
		req.progress("resolved " + describeResolved(r))
	}
	if req.Approve != nil {
		if err := req.Approve(ctx, plan); err != nil {
			return nil, err
		}
	}
	pip, uv := installerArgs(s.Package, len(s.Package.FindLinks), pins...)
	res, err := run(ctx, s, req, job{verb: "installing", what: strings.Join(pins, " "), pip: pip, uv: uv})
	if err != nil {
		return nil, err
	}
	res.Packages = plan
	res.DurationMS += resolved.DurationMS
	res.Output = resolved.Output + res.Output
	res.OutputTruncated = res.OutputTruncated || resolved.OutputTruncated
	if res.Status != "ok" {
		return res, nil
	}
	var deps []string
	for _, r := range plan {
		if normalizeName(r.Name) == normalizeName(req.Name) {
			res.Version = r.Version
		} else {
			deps = append(deps, r.Name+" "+r.Version)
		}
	}
	switch {
	case res.Version == "":
		res.Message = fmt.Sprintf("%s was already installed; installed the dependencies it lacked: %s", req.Name, strings.Join(deps, ", "))
	case len(deps) == 0:
		res.Message = fmt.Sprintf("installed %s %s", req.Name, res.Version)
	default:
		res.Message = fmt.Sprintf("installed %s %s with its dependencies %s", req.Name, res.Version, strings.Join(deps, ", "))
	}
	return res, nil
}

// describeResolved is "pdmb 1.0 (required by pdma)" or "pdma 1.0
// (requested)".
func describeResolved(r Resolved) string {
	if len(r.RequiredBy) == 0 {
		return r.Name + " " + r.Version + " (requested)"
	}
	return r.Name + " " + r.Version + " (required by " + strings.Join(r.RequiredBy, ", ") + ")"
}

var nameSeparators = regexp.MustCompile(`[-_.]+`)

// normalizeName is the PEP 503 form of a distribution name.
func normalizeName(s string) string { return strings.ToLower(nameSeparators.ReplaceAllString(s, "-")) }

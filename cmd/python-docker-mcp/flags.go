package main

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/python-docker-mcp/python-docker-mcp/config"
)

// global holds the flags every command accepts.
type global struct {
	configFile string
	flags      map[string]string // key path -> value
}

func (g *global) options() config.Options {
	return config.FromOS(g.configFile, g.flags)
}

type setFlag struct{ g *global }

func (s setFlag) String() string { return "" }
func (s setFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, e.g. pool.size=4")
	}
	s.g.flags[strings.TrimSpace(k)] = val
	return nil
}

type keyFlag struct {
	g   *global
	key string
}

func (k keyFlag) String() string     { return "" }
func (k keyFlag) Set(v string) error { k.g.flags[k.key] = v; return nil }

// register adds the global flags to fs.
func (g *global) register(fs *flag.FlagSet) {
	fs.StringVar(&g.configFile, "config", g.configFile, "config file")
	fs.Var(setFlag{g}, "set", "set KEY=VALUE (repeatable)")
	for name, key := range config.FlagKeys {
		fs.Var(keyFlag{g, key}, name, "sets "+key)
	}
}

// parseGlobal reads the global flags before the command and returns the
// rest (command and its arguments). --config, --set and the dedicated
// flags (--transport, --image, ...) are also taken from after the command,
// as operators write `policy check --config F x.py` or `config show --set
// k=v`; a command's own flag of the same name (policy's --profile) wins.
func parseGlobal(name string, args []string, stderr io.Writer) (*global, []string, error) {
	g := &global{flags: map[string]string{}}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	g.register(fs)
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	var rest []string
	tail := fs.Args()
	for i := 0; i < len(tail); i++ {
		a := tail[i]
		switch {
		case a == "--":
			rest = append(rest, tail[i:]...)
			i = len(tail)
		case a == "--config" || a == "-config":
			if i+1 >= len(tail) {
				return nil, nil, fmt.Errorf("flag needs an argument: %s", a)
			}
			g.configFile = tail[i+1]
			i++
		case strings.HasPrefix(a, "--config=") || strings.HasPrefix(a, "-config="):
			g.configFile = a[strings.Index(a, "=")+1:]
		case len(rest) > 0 && laterFlag(rest[0], a):
			name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if !hasVal {
				if i+1 >= len(tail) {
					return nil, nil, fmt.Errorf("flag needs an argument: %s", a)
				}
				val = tail[i+1]
				i++
			}
			if name == "set" {
				if err := (setFlag{g}).Set(val); err != nil {
					return nil, nil, fmt.Errorf("invalid value %q for flag -set: %v", val, err)
				}
			} else {
				g.flags[config.FlagKeys[name]] = val
			}
		default:
			rest = append(rest, a)
		}
	}
	return g, rest, nil
}

// laterFlag says whether arg, found after command, is a global flag:
// --set or a dedicated key flag the command does not define itself.
func laterFlag(command, arg string) bool {
	if !strings.HasPrefix(arg, "-") {
		return false
	}
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	if name == "set" {
		return true
	}
	if _, ok := config.FlagKeys[name]; !ok {
		return false
	}
	return !(command == "policy" && name == "profile")
}

// serverArgs are the arguments that make this binary serve with the same
// config file and overrides as g (the bench starts its server so).
func serverArgs(g *global) []string {
	var args []string
	if g.configFile != "" {
		args = append(args, "--config", g.configFile)
	}
	keys := make([]string, 0, len(g.flags))
	for k := range g.flags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--set", k+"="+g.flags[k])
	}
	return append(args, "serve")
}

package executor

import (
	"sort"
	"strings"
)

// CallGuard is one blocked call the runner's audit hook enforces at run
// time, besides the static gate: Name is the call (as the gate spells it,
// no builtins. prefix), Entry the blocked_calls entry that covers it (as
// written), Event what the runner watches for it: a CPython audit event
// ("os.system", "shutil.rmtree", …), "open" (builtins.open, io.open and
// what calls them, such as pathlib), "os.open", or "builtins.exec" /
// "builtins.eval" (wrappers the runner puts in builtins). Direct guards
// judge only calls made by user code itself (a library's own exec or
// compile, as dataclasses and namedtuple make, passes); the others judge
// every call while user code is on the stack, library code called on its
// behalf included (imports excepted).
type CallGuard struct {
	Name   string `json:"name"`
	Entry  string `json:"entry"`
	Event  string `json:"event"`
	Direct bool   `json:"direct,omitempty"`
}

// runtimeCalls maps each call the runner can observe at run time to what
// it watches. Calls missing here are judged by the static gate only.
var runtimeCalls = map[string]CallGuard{
	"open": {Event: "open"}, "io.open": {Event: "open"}, "_io.open": {Event: "open"},
	"os.open":    {Event: "os.open"},
	"exec":       {Event: "builtins.exec", Direct: true},
	"eval":       {Event: "builtins.eval", Direct: true},
	"compile":    {Event: "compile", Direct: true},
	"input":      {Event: "builtins.input"},
	"breakpoint": {Event: "builtins.breakpoint"},
	"os.system":  {Event: "os.system"},
	"os.remove":  {Event: "os.remove"}, "os.unlink": {Event: "os.remove"},
	"os.rename": {Event: "os.rename"}, "os.replace": {Event: "os.rename"},
	"os.rmdir": {Event: "os.rmdir"}, "os.mkdir": {Event: "os.mkdir"},
	"os.chmod": {Event: "os.chmod"}, "os.chown": {Event: "os.chown"},
	"os.listdir": {Event: "os.listdir"}, "os.scandir": {Event: "os.scandir"},
	"os.kill": {Event: "os.kill"}, "os.killpg": {Event: "os.killpg"},
	"os.truncate": {Event: "os.truncate"}, "os.symlink": {Event: "os.symlink"},
	"os.link": {Event: "os.link"}, "os.utime": {Event: "os.utime"},
	"os.chdir": {Event: "os.chdir"}, "os.putenv": {Event: "os.putenv"},
	"os.unsetenv": {Event: "os.unsetenv"}, "os.fork": {Event: "os.fork"},
	"os.forkpty": {Event: "os.forkpty"}, "os.posix_spawn": {Event: "os.posix_spawn"},
	"os.posix_spawnp": {Event: "os.posix_spawn"},
	"os.execv":        {Event: "os.exec"}, "os.execve": {Event: "os.exec"}, "os.execl": {Event: "os.exec"},
	"os.execle": {Event: "os.exec"}, "os.execlp": {Event: "os.exec"}, "os.execlpe": {Event: "os.exec"},
	"os.execvp": {Event: "os.exec"}, "os.execvpe": {Event: "os.exec"},
	"os.spawnv": {Event: "os.spawn"}, "os.spawnve": {Event: "os.spawn"}, "os.spawnl": {Event: "os.spawn"},
	"os.spawnle": {Event: "os.spawn"}, "os.spawnlp": {Event: "os.spawn"}, "os.spawnlpe": {Event: "os.spawn"},
	"os.spawnvp": {Event: "os.spawn"}, "os.spawnvpe": {Event: "os.spawn"},
	"shutil.rmtree": {Event: "shutil.rmtree"}, "shutil.copyfile": {Event: "shutil.copyfile"},
	"shutil.copytree": {Event: "shutil.copytree"}, "shutil.move": {Event: "shutil.move"},
	"shutil.chown": {Event: "shutil.chown"}, "shutil.make_archive": {Event: "shutil.make_archive"},
	"shutil.unpack_archive": {Event: "shutil.unpack_archive"},
	"subprocess.Popen":      {Event: "subprocess.Popen"}, "subprocess.run": {Event: "subprocess.Popen"},
	"subprocess.call": {Event: "subprocess.Popen"}, "subprocess.check_call": {Event: "subprocess.Popen"},
	"subprocess.check_output": {Event: "subprocess.Popen"}, "subprocess.getoutput": {Event: "subprocess.Popen"},
	"subprocess.getstatusoutput": {Event: "subprocess.Popen"},
	"socket.socket":              {Event: "socket.__new__"}, "socket.create_connection": {Event: "socket.__new__"},
	"socket.getaddrinfo": {Event: "socket.getaddrinfo"}, "socket.gethostbyname": {Event: "socket.gethostbyname"},
	"urllib.request.urlopen": {Event: "urllib.Request"},
	"pty.spawn":              {Event: "pty.spawn"},
}

// CallGuards splits blocked_calls into what the runner enforces at run
// time (one guard per call an entry covers, prefix semantics as in the
// gate: "subprocess" covers subprocess.run) and the entries, or the parts
// of entries, enforced by the static gate only: an entry none of whose
// calls can be observed is gate-only whole; an entry that covers some
// ("os") is reported as "os (other than os.system, …)".
func CallGuards(blocked []string) (guards []CallGuard, gateOnly []string) {
	names := make([]string, 0, len(runtimeCalls))
	for n := range runtimeCalls {
		names = append(names, n)
	}
	sort.Strings(names)
	seen := map[string]bool{}
	for _, entry := range blocked {
		e := strings.TrimPrefix(entry, "builtins.")
		var covered []string
		for _, n := range names {
			if n == e || strings.HasPrefix(n, e+".") {
				covered = append(covered, n)
				if !seen[n] {
					seen[n] = true
					g := runtimeCalls[n]
					g.Name, g.Entry = n, entry
					guards = append(guards, g)
				}
			}
		}
		switch {
		case len(covered) == 0:
			gateOnly = append(gateOnly, entry)
		case len(covered) > 1 || covered[0] != e:
			// A module or prefix: its other calls are the gate's alone.
			gateOnly = append(gateOnly, entry+" (other than "+strings.Join(covered, ", ")+")")
		}
	}
	return guards, gateOnly
}

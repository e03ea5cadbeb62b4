# METADATA
# title: Capability classes
# description: |
#   What the call's code may do whatever it imports or however it spells
#   it: create processes, open sockets (by family), open pseudo-terminals,
#   load native code. The sandbox enforces them in the kernel (a seccomp
#   filter in the user-code process), so every route to fork or socket(2)
#   fails alike: C twins (_posixsubprocess), modules reached as attributes
#   of allowed ones (matplotlib.subprocess), library helpers.
#
#   This file is the one place that maps the configuration's module and
#   call lists onto the classes. data.pydocker.config.capabilities holds
#   the operator's word per class (true, false or null = derive) and
#   socket_families. A class left null is derived:
#   - denied when a blocked_modules entry covers one of the class's
#     modules (an entry "concurrent" covers concurrent.futures.process),
#     or a blocked_calls entry names one of its calls (by pattern:
#     os.spawnvp like os.spawnv) or covers one (an entry "os" covers
#     os.system);
#   - with an allowlist (allowed_modules not empty), denied unless an
#     allowed entry covers one of the class's modules: code that may not
#     import any of them has no business with the class.
#   `configured` is the result, the ceiling of every decision. Rules in any
#   package under data.pydocker.rules may tighten it per call with
#   `capability_denied contains NAME` (processes, sockets, sockets.unix,
#   sockets.inet, sockets.inet6, pty, native_code); nothing can loosen it.
#   The engine evaluates `configured` once per configuration and passes it
#   in data.pydocker.config.capabilities.configured.
package pydocker.rules.capabilities

import data.pydocker.lib

classes := ["processes", "sockets", "pty", "native_code"]

# The modules through which code reaches each class.
modules := {
	"processes": [
		"subprocess", "_posixsubprocess", "multiprocessing", "_multiprocessing",
		"os", "posix", "pty", "concurrent.futures.process", "asyncio.subprocess",
	],
	"sockets": ["socket", "_socket", "socketserver", "ssl", "_ssl", "asyncio"],
	"pty": ["pty", "os", "posix"],
	"native_code": ["ctypes", "_ctypes", "cffi", "_cffi_backend"],
}

# The calls of each class: a blocked_calls entry that matches the pattern,
# or covers one of the names, takes the class away.
call_patterns := {
	"processes": `^(?:os|posix)\.(?:system|fork|forkpty|vfork|exec[a-z]*|spawn[a-z]*|posix_spawnp?|popen|startfile)$|^(?:subprocess|_posixsubprocess|multiprocessing|_multiprocessing|pty)(?:\..+)?$|^asyncio\.create_subprocess_(?:exec|shell)$|^concurrent\.futures\.(?:process\.)?ProcessPoolExecutor$`,
	"sockets": `^_?socket\.(?:socket|socketpair|create_connection|create_server|fromfd|SocketType)$|^asyncio\.(?:open_connection|start_server|open_unix_connection|start_unix_server)$`,
	"pty": `^(?:os|posix)\.(?:openpty|forkpty|login_tty)$|^pty(?:\..+)?$`,
	"native_code": `^_?ctypes(?:\..+)?$|^(?:cffi|_cffi_backend)(?:\..+)?$`,
}

call_names := {
	"processes": [
		"os.system", "os.fork", "os.execv", "os.spawnv", "os.posix_spawn", "os.popen",
		"posix.system", "subprocess.Popen", "multiprocessing.Process", "pty.spawn",
		"asyncio.create_subprocess_exec", "concurrent.futures.ProcessPoolExecutor",
	],
	"sockets": ["socket.socket", "socket.socketpair", "socket.create_connection", "asyncio.open_connection"],
	"pty": ["os.openpty", "os.forkpty", "pty.openpty"],
	"native_code": ["ctypes.CDLL", "ctypes.cdll.LoadLibrary", "cffi.FFI"],
}

config := c if {
	c := data.pydocker.config
} else := {}

conf := object.get(config, "capabilities", {})

blocked_modules := object.get(config, "blocked_modules", [])

allowed_modules := object.get(config, "allowed_modules", [])

blocked_calls := object.get(config, "blocked_calls", [])

# covers(entry, name): entry is name or a dotted prefix of it.
covers(entry, name) if startswith(lib.dotted(name), lib.dotted(entry))

# why_denied[class] is the first reason the lists take the class away.
why_denied[class] := reasons[0] if {
	some class in classes
	reasons := array.concat(
		array.concat(
			[sprintf("blocked_modules lists %q", [e]) | some e in blocked_modules; some m in modules[class]; covers(e, m)],
			[sprintf("blocked_calls lists %q", [e]) | some e in blocked_calls; call_of(class, e)],
		),
		[sprintf("allowed_modules covers none of %s", [concat(", ", modules[class])]) | count(allowed_modules) > 0; not any_allowed(class)],
	)
	count(reasons) > 0
}

call_of(class, entry) if regex.match(call_patterns[class], entry)

call_of(class, entry) if {
	some n in call_names[class]
	covers(entry, n)
}

any_allowed(class) if {
	some e in allowed_modules
	some m in modules[class]
	covers(e, m)
}

# derived[class] is the class's value from the lists alone.
derived[class] := false if {
	some class in classes
	why_denied[class]
}

derived[class] := true if {
	some class in classes
	not why_denied[class]
}

# explicit[class] is the operator's word (true or false), when given.
explicit[class] := v if {
	some class in classes
	v := conf[class]
	is_boolean(v)
}

# allowed_class[class] is the configured value of a class.
allowed_class[class] := v if {
	some class in classes
	v := object.get(explicit, class, derived[class])
}

default_families := ["unix", "inet", "inet6"]

families := sort({f | some f in object.get(conf, "socket_families", default_families)})

# The configured capabilities: the ceiling of every decision. Computed
# once by the engine (data.pydocker.config.capabilities.configured), here
# when that is missing.
configured := c if {
	c := conf.configured
} else := {
	"processes": allowed_class.processes,
	"sockets": sockets,
	"pty": allowed_class.pty,
	"native_code": allowed_class.native_code,
}

sockets := families if allowed_class.sockets

sockets := [] if not allowed_class.sockets

# Names operator rules may add to capability_denied.
names := {"processes", "sockets", "sockets.unix", "sockets.inet", "sockets.inet6", "pty", "native_code"}

# A name not known is a mistake in an operator rule: deny rather than
# leave a class open that the author meant to close.
deny contains v if {
	some n in data.pydocker.capability_denied
	not names[n]
	v := lib.violation("capabilities.unknown", sprintf("capability_denied names %q, which is not a capability: want one of %s", [n, concat(", ", sort(names))]), {})
}

# capability_denied must be a set (or array) of names: anything else is a
# mistake that would leave every class open.
deny contains v if {
	some p in data.pydocker.config.capability_packages
	d := data.pydocker.rules[p].capability_denied
	not is_set(d)
	not is_array(d)
	v := lib.violation("capabilities.unknown", sprintf("data.pydocker.rules.%s.capability_denied is a %s: want a set of capability names", [p, type_name(d)]), {})
}

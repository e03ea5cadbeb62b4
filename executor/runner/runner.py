# python-docker-mcp sandbox runner.
#
# Started as `python3 -I -B -c <bootstrap> pdm-runner` as the sandbox
# container's process 1; the bootstrap reads a preamble from stdin first:
# this source and, when the executor has it, the code an earlier sandbox
# compiled from it (see runnerBootstrap in executor/spec.go). After it,
# the runner speaks length-prefixed JSON frames (4-byte
# big-endian length, then UTF-8 JSON) on the stdin/stdout the container was
# started with. Runner diagnostics go to the original stderr.
#
# Frames in:  {"op": "run"|"preload"|"parse"|"read"|"write"|"list"|"interrupt"|"exit", "id": n, "nonce": s, ...}
# Frames out: {"op": "ready", ...} once, then one response per request,
#             carrying the request's id and nonce.
#
# Two processes (the container is the security boundary, not this file):
#
#   the runner (this process, pid 1): single-threaded, non-dumpable (so
#     /proc/1/mem, /proc/1/fd and ptrace are refused to everything else in
#     the container), holds the protocol, the time limit and the caps. It
#     never runs user code; a poll loop serves the protocol, drains the
#     worker's output pipes into capped buffers and reads its result pipe
#     with a size cap.
#
#   the worker (a forked child): user code runs here, with fd 0 = /dev/null,
#     fd 1/2 = capture pipes, a result pipe, and nothing else of the runner's.
#     It stays non-dumpable too (its filter refuses PR_SET_DUMPABLE), so
#     its own /proc/self/mem cannot write past its page protections.
#     Before the first user code it installs PR_SET_NO_NEW_PRIVS and a
#     seccomp filter built from the request's capabilities, and a CPython
#     audit hook (PEP 578, cannot be removed) that enforces the capability
#     classes, the module rules and the blocked calls it can observe. Transient sandboxes use one worker for
#     their one call; a persistent session keeps its worker (and so its
#     globals) across calls, stopped by the runner (SIGSTOP) between them.

import ast
import base64
import builtins
import ctypes
import errno
import gc
import importlib
import importlib.util
import io
import json
import linecache
import os
import select
import signal
import struct
import sys
import sysconfig
import time
import traceback
import types
import warnings

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_MM = 35

# Nothing else in the container may read this process's memory or file
# descriptors: non-dumpable makes /proc/1/{mem,fd,environ,...} root-owned
# and ptrace needs CAP_SYS_PTRACE, which no process here has.
if _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
    os.write(2, b"runner: prctl(PR_SET_DUMPABLE, 0) failed\n")
    os._exit(70)

# Process 1 only gets signals it handles: keep it that way (SIGINT would
# otherwise raise KeyboardInterrupt here).
signal.signal(signal.SIGINT, signal.SIG_IGN)

_PID = os.getpid()
_MAX_FRAME = 256 << 20

# Private copies of the protocol streams (not inheritable, closed in workers).
_PROTO_IN = os.dup(0)
_PROTO_OUT = os.dup(1)
_DIAG = os.dup(2)
_DEVNULL = os.open(os.devnull, os.O_RDWR)
os.dup2(_DEVNULL, 0)
os.dup2(_DEVNULL, 1)
os.dup2(_DEVNULL, 2)

_WORKDIR = os.getcwd()
_GRACE = 1.0  # seconds the worker gets to stop after its time limit or a cancel (default)

# Output limits of the result a worker sends (the runner re-applies them).
_MAX_ERROR_TEXT = 64 << 10
_MAX_DROPPED = 1000
_MAX_FILES = 1000
_MAX_FILES_BYTES = 256 << 10


def _diag(msg):
    try:
        os.write(_DIAG, ("runner: %s\n" % msg).encode("utf-8", "replace"))
    except OSError:
        pass


def _encode(obj):
    data = json.dumps(obj, ensure_ascii=False, allow_nan=False, default=str).encode("utf-8", "surrogatepass")
    return struct.pack(">I", len(data)) + data


def _write_all(fd, buf):
    view = memoryview(buf)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _send(obj):
    _write_all(_PROTO_OUT, _encode(obj))


def _read_reply(reader):
    """Feeds the worker's result pipe into reader and returns (reply, fail):
    the first complete frame, or why the worker's reply is invalid."""
    reader.feed()
    try:
        for data in reader.frames():
            return data, None
    except ValueError as e:
        return None, ("killed", "SandboxKilled", "%s: %s" % (_INVALID, e))
    return None, None


class _FrameReader:
    """Accumulates length-prefixed frames from a non-blocking fd; refuses a
    frame longer than cap before reading it."""

    def __init__(self, fd, cap):
        self.fd = fd
        self.cap = cap
        self.buf = bytearray()
        self.eof = False

    def feed(self):
        try:
            b = os.read(self.fd, 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            b = b""
        if not b:
            self.eof = True
            return
        self.buf += b

    def frames(self):
        """Yields complete frames; raises ValueError for an oversized one."""
        while len(self.buf) >= 4:
            (n,) = struct.unpack(">I", self.buf[:4])
            if n > self.cap:
                raise ValueError("a frame of %d bytes exceeds the limit of %d bytes" % (n, self.cap))
            if len(self.buf) < 4 + n:
                return
            data = bytes(self.buf[4:4 + n])
            del self.buf[:4 + n]
            yield data


# ---------------------------------------------------------------- output


class _Capture:
    """Keeps the head and the tail of at most cap bytes of one stream and
    counts the rest."""

    def __init__(self, cap):
        self.half = max(cap // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, b):
        self.total += len(b)
        room = self.half - len(self.head)
        if room > 0:
            self.head += b[:room]
            b = b[room:]
        if b:
            self.tail += b
            extra = len(self.tail) - self.half
            if extra > 0:
                del self.tail[:extra]

    def text(self):
        dropped = self.total - len(self.head) - len(self.tail)
        if dropped > 0:
            data = bytes(self.head) + ("\n... [%d bytes dropped] ...\n" % dropped).encode() + bytes(self.tail)
        else:
            data = bytes(self.head) + bytes(self.tail)
        return data.decode("utf-8", "replace"), dropped > 0


# ---------------------------------------------------------------- packages

# Packages installed by install-package live on a read-only volume mounted
# here (absent in sandboxes without one). The directory is appended, so an
# installed package never shadows the standard library or the image's
# packages, and .pth files in it are not processed (it is no site dir).
# Every run of a session calls importlib.invalidate_caches(), so a package
# installed into a running session is importable in its next call. A
# transient sandbox (PDM_TRANSIENT=1) serves one call and nothing is
# installed while it lives, so it skips that: its first invalidation would
# import importlib.metadata (email, zipfile, pathlib), 20-40 ms of CPU per
# sandbox.
_TRANSIENT = os.environ.get("PDM_TRANSIENT") == "1"
_PACKAGES = "/opt/pdm-packages"
if _PACKAGES not in sys.path:
    sys.path.append(_PACKAGES)


def _trusted_dirs():
    dirs = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            dirs.add(os.path.realpath(p))
    for p in sys.path:
        if p and os.path.isdir(p):
            dirs.add(os.path.realpath(p))
    dirs.discard(os.path.realpath(_WORKDIR))
    # What install-package brought in is the caller's choice, not the
    # image's: its code counts as user code.
    dirs.discard(os.path.realpath(_PACKAGES))
    dirs.discard("/")
    return tuple(sorted(d.rstrip("/") + "/" for d in dirs))


_TRUSTED = _trusted_dirs()


# ---------------------------------------------------------------- facts


def _fmt_fact(f):
    module, level, frm, names, alias, line = f
    mod = "." * level + module
    if frm:
        ns = ", ".join(n + (" as " + a if a else "") for n, a in names)
        return "from %s import %s (line %d)" % (mod, ns, line)
    return "import %s%s (line %d)" % (mod, " as " + alias if alias else "", line)


def _derive_imports(tree):
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out.append((a.name, 0, False, (), a.asname or "", node.lineno))
        elif isinstance(node, ast.ImportFrom):
            names = tuple((a.name, a.asname or "") for a in node.names)
            out.append((node.module or "", node.level or 0, True, names, "", node.lineno))
    return sorted(out)


def _gate_imports(facts):
    out = []
    for f in facts or ():
        names = tuple((n.get("name", ""), n.get("asname", "") or "") for n in (f.get("names") or ()))
        out.append((f.get("module", "") or "", int(f.get("level", 0) or 0), bool(f.get("from", False)),
                    names, f.get("alias", "") or "", int(f.get("line", 0) or 0)))
    return sorted(out)


def _diff(a, b):
    rest = list(b)
    only = []
    for x in a:
        if x in rest:
            rest.remove(x)
        else:
            only.append(x)
    return only


def _check_facts(req, cell_name):
    """Parses the code and compares the gate's import facts with CPython's.
    Returns None when the code may run, else the error response."""
    code = req.get("code") or ""
    try:
        tree = ast.parse(code, filename=cell_name, mode="exec")
    except SyntaxError as e:
        # The gate parsed what CPython does not: a syntax error all the
        # same, found before anything ran.
        info = _syntax_info(e)
        return {"status": "syntax_error", "error": {"type": info["type"], "message": info["message"], "line": info["line"],
                                                    "col": info["col"], "traceback": info["detail"]}}
    except (ValueError, RecursionError, MemoryError) as e:
        return {"status": "error", "error": {"type": type(e).__name__, "message": str(e), "line": 0, "traceback": ""}}
    want = _gate_imports(req.get("imports"))
    got = _derive_imports(tree)
    if want == got:
        return None
    parts = []
    missing = _diff(got, want)
    extra = _diff(want, got)
    if missing:
        parts.append("CPython sees " + "; ".join(_fmt_fact(f) for f in missing) + " which the gate did not report")
    if extra:
        parts.append("the gate reported " + "; ".join(_fmt_fact(f) for f in extra) + " which CPython does not see")
    return {"status": "refused", "error": {"type": "FactMismatch", "line": (missing or extra)[0][5],
                                           "message": "refusing to run: the static gate and CPython disagree about the imports: " + "; ".join(parts),
                                           "traceback": ""}}


# ---------------------------------------------------------------- policy messages

_MSG = types.MappingProxyType({
    "processes": "process creation is not allowed by the sandbox policy (policy.capabilities.processes is false)",
    "sockets": "opening sockets is not allowed by the sandbox policy (policy.capabilities.sockets is empty)",
    "pty": "pseudo-terminals are not allowed by the sandbox policy (policy.capabilities.pty is false)",
    "native_code": "loading native code is not allowed by the sandbox policy (policy.capabilities.native_code is false)",
})
_FAMILIES = types.MappingProxyType({"unix": 1, "inet": 2, "inet6": 10})
_FAMILY_NAMES = types.MappingProxyType({1: "unix", 2: "inet", 10: "inet6"})


def _socket_msg(family, allowed):
    name = _FAMILY_NAMES.get(family, "family %d" % family if isinstance(family, int) else "this family")
    if not allowed:
        return _MSG["sockets"]
    return "%s sockets are not allowed by the sandbox policy (policy.capabilities.sockets allows %s)" % (
        name, ", ".join(allowed))


def _denied_classes(caps):
    if caps is None:
        return ()
    out = []
    if not caps.get("processes"):
        out.append("processes")
    if not caps.get("sockets"):
        out.append("sockets")
    else:
        # Families the policy leaves out, for the messages ("sockets.unix").
        out.extend("sockets." + f for f in _FAMILIES if f not in caps.get("sockets"))
    if not caps.get("pty"):
        out.append("pty")
    if not caps.get("native_code"):
        out.append("native_code")
    return tuple(out)


# ---------------------------------------------------------------- seccomp

_AUDIT_ARCH_X86_64 = 0xC000003E
_AUDIT_ARCH_AARCH64 = 0xC00000B7
_SYSCALLS = {
    "x86_64": dict(arch=_AUDIT_ARCH_X86_64, seccomp=317, fork=57, vfork=58, execve=59, execveat=322, clone=56,
                   clone3=435, socket=41, socketpair=53, ioctl=16, memfd_create=319, mmap=9, mprotect=10,
                   pkey_mprotect=329, ptrace=101, process_vm_readv=310, process_vm_writev=311, kcmp=312,
                   personality=135, io_uring_setup=425, io_uring_enter=426, io_uring_register=427,
                   pidfd_getfd=438, userfaultfd=323, shmat=30, prctl=157),
    "aarch64": dict(arch=_AUDIT_ARCH_AARCH64, seccomp=277, execve=221, execveat=281, clone=220, clone3=435,
                    socket=198, socketpair=199, ioctl=29, memfd_create=279, mmap=222, mprotect=226,
                    pkey_mprotect=288, ptrace=117, process_vm_readv=270, process_vm_writev=271, kcmp=272,
                    personality=92, io_uring_setup=425, io_uring_enter=426, io_uring_register=427,
                    pidfd_getfd=438, userfaultfd=282, shmat=196, prctl=167),
}

_LD_W_ABS = 0x20
_JEQ = 0x15
_JGE = 0x35
_JSET = 0x45
_RET = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_KILL = 0x80000000
_OFF_NR, _OFF_ARCH = 0, 4


def _ret_errno(e):
    return 0x00050000 | e


def _arg(i):
    return 16 + 8 * i  # low 32 bits of args[i] (little-endian)


def _seccomp_program(caps, machine):
    """The BPF program for a worker: the always-denied calls that could
    reach the runner, plus the denied capability classes (caps None = only
    the former)."""
    sc = _SYSCALLS[machine]
    prog = []

    def add(code, k, jt=0, jf=0):
        prog.append((code, jt, jf, k))

    def deny(nr, err=errno.EPERM):
        if nr is None:
            return
        add(_LD_W_ABS, _OFF_NR)
        add(_JEQ, nr, 0, 1)
        add(_RET, _ret_errno(err))

    add(_LD_W_ABS, _OFF_ARCH)
    add(_JEQ, sc["arch"], 1, 0)
    add(_RET, _RET_KILL)
    if machine == "x86_64":  # x32 system calls share the arch value
        add(_LD_W_ABS, _OFF_NR)
        add(_JGE, 0x40000000, 0, 1)
        add(_RET, _ret_errno(errno.EPERM))
    for name in ("ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "userfaultfd",
                 "io_uring_setup", "io_uring_enter", "io_uring_register"):
        deny(sc[name])
    # The worker stays non-dumpable, so its /proc/self/mem (which writes
    # past page protections) stays root's: no PR_SET_DUMPABLE, and no
    # PR_SET_MM to rewrite its memory map's bookkeeping.
    add(_LD_W_ABS, _OFF_NR)
    add(_JEQ, sc["prctl"], 0, 4)
    add(_LD_W_ABS, _arg(0))
    add(_JEQ, _PR_SET_DUMPABLE, 1, 0)
    add(_JEQ, _PR_SET_MM, 0, 1)
    add(_RET, _ret_errno(errno.EPERM))
    if caps is not None:
        if not caps.get("processes"):
            for name in ("fork", "vfork", "execve", "execveat"):
                deny(sc.get(name))
            deny(sc["clone3"], errno.ENOSYS)  # glibc falls back to clone for threads
            # clone without CLONE_THREAD makes a process; threads keep working.
            add(_LD_W_ABS, _OFF_NR)
            add(_JEQ, sc["clone"], 0, 3)
            add(_LD_W_ABS, _arg(0))
            add(_JSET, 0x00010000, 1, 0)
            add(_RET, _ret_errno(errno.EPERM))
        fams = sorted({_FAMILIES[f] for f in (caps.get("sockets") or ()) if f in _FAMILIES})
        for name in ("socket", "socketpair"):
            n = len(fams)
            add(_LD_W_ABS, _OFF_NR)
            add(_JEQ, sc[name], 0, n + 3)
            add(_LD_W_ABS, _arg(0))
            for i, fam in enumerate(fams):
                add(_JEQ, fam, n - i, 0)
            add(_RET, _ret_errno(errno.EPERM))
            add(_RET, _RET_ALLOW)
        if not caps.get("pty"):
            reqs = (0x80045430, 0x40045431, 0x5441)  # TIOCGPTN, TIOCSPTLCK, TIOCGPTPEER
            n = len(reqs)
            add(_LD_W_ABS, _OFF_NR)
            add(_JEQ, sc["ioctl"], 0, n + 3)
            add(_LD_W_ABS, _arg(1))
            for i, r in enumerate(reqs):
                add(_JEQ, r, n - i, 0)
            add(_RET, _RET_ALLOW)
            add(_RET, _ret_errno(errno.EPERM))
        if not caps.get("native_code"):
            deny(sc["memfd_create"])
            deny(sc["personality"])  # READ_IMPLIES_EXEC would make every mapping executable
            # mmap(PROT_EXEC) only of a file, private and not writable:
            # code the image holds, as the dynamic loader maps it. Refused:
            # PROT_WRITE with it, MAP_ANONYMOUS, and MAP_SHARED (a shared
            # mapping of /dev/zero or shared memory can be mapped a second
            # time, writable, with mremap).
            add(_LD_W_ABS, _OFF_NR)
            add(_JEQ, sc["mmap"], 0, 7)
            add(_LD_W_ABS, _arg(2))
            add(_JSET, 0x4, 0, 3)  # PROT_EXEC
            add(_JSET, 0x2, 3, 0)  # PROT_WRITE
            add(_LD_W_ABS, _arg(3))
            add(_JSET, 0x21, 1, 0)  # MAP_ANONYMOUS, MAP_SHARED(_VALIDATE)
            add(_RET, _RET_ALLOW)
            add(_RET, _ret_errno(errno.EPERM))
            for name in ("mprotect", "pkey_mprotect"):
                add(_LD_W_ABS, _OFF_NR)
                add(_JEQ, sc[name], 0, 3)
                add(_LD_W_ABS, _arg(2))
                add(_JSET, 0x4, 0, 1)
                add(_RET, _ret_errno(errno.EPERM))
            add(_LD_W_ABS, _OFF_NR)
            add(_JEQ, sc["shmat"], 0, 3)
            add(_LD_W_ABS, _arg(2))
            add(_JSET, 0o100000, 0, 1)  # SHM_EXEC
            add(_RET, _ret_errno(errno.EPERM))
    add(_RET, _RET_ALLOW)
    return prog


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _install_seccomp(caps):
    machine = os.uname().machine
    if machine not in _SYSCALLS:
        raise OSError("no seccomp table for architecture %s" % machine)
    prog = _seccomp_program(caps, machine)
    raw = b"".join(struct.pack("=HBBI", c, jt, jf, k) for c, jt, jf, k in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))
    fprog = _SockFprog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    syscall = _libc.syscall
    syscall.restype = ctypes.c_long
    # SECCOMP_SET_MODE_FILTER with SECCOMP_FILTER_FLAG_TSYNC: every thread.
    if syscall(ctypes.c_long(_SYSCALLS[machine]["seccomp"]), ctypes.c_ulong(1), ctypes.c_ulong(1),
               ctypes.byref(fprog)) != 0:
        raise OSError(ctypes.get_errno(), "seccomp(SECCOMP_SET_MODE_FILTER): " + os.strerror(ctypes.get_errno()))


# ---------------------------------------------------------------- runtime guard

# A module and its C implementation are one module for the rules.
_TWINS = types.MappingProxyType({
    "_socket": "socket", "_posixsubprocess": "subprocess", "_ctypes": "ctypes", "posix": "os",
    "_multiprocessing": "multiprocessing", "_ssl": "ssl", "_pickle": "pickle", "_posixshmem": "multiprocessing",
    "_asyncio": "asyncio", "_sqlite3": "sqlite3", "_signal": "signal", "_thread": "threading",
    "_io": None,
})


class ModuleBlockedError(ImportError):
    """An import made for user code that the sandbox's module rules forbid."""


class CallBlockedError(PermissionError):
    """A call made by user code, or by a library on its behalf, that
    blocked_calls forbids (rule calls.blocked), refused at run time."""


def _module_denied(mod, allowed, blocked):
    names = [mod]
    top = mod.split(".", 1)[0]
    twin = _TWINS.get(top)
    if twin:
        names.append(twin + mod[len(top):])
    for m in names:
        for b in blocked:
            if m == b or m.startswith(b + "."):
                if m != mod:
                    return "module %r is the C implementation of %r, which is blocked (blocked_modules: %s)" % (mod, m, b)
                return "module %r is blocked (blocked_modules: %s)" % (mod, b)
    if allowed and not any(m == a or m.startswith(a + ".") for m in names for a in allowed):
        return "module %r is not in allowed_modules (%s)" % (mod, ", ".join(allowed))
    return None


def _install_guard(caps, allowed, blocked, main_ident, runner_globals, calls=()):
    """Installs the audit hook. Its state lives in default arguments of
    functions that nothing else references, so user code cannot reach it
    (closure cells and module globals can be reached by a frame walk).
    calls are the blocked calls enforced at run time: {"name", "entry",
    "event", "direct"} (executor.CallGuard)."""
    import _thread
    import importlib._bootstrap as _bs
    import importlib._bootstrap_external as _bse
    import opcode

    allowed = tuple(allowed)
    blocked = tuple(blocked)
    denied = frozenset(_denied_classes(caps))
    fams = frozenset(_FAMILIES[f] for f in ((caps or {}).get("sockets") or ()) if f in _FAMILIES)
    sock_names = tuple(f for f in ((caps or {}).get("sockets") or ()) if f in _FAMILIES)
    # Frames of the import system (skipped to find who imports) and of the
    # runner (its import wrappers); only the former run module code.
    machinery = frozenset((id(_bs.__dict__), id(_bse.__dict__)))
    skipped = frozenset((id(_bs.__dict__), id(_bse.__dict__), id(importlib.__dict__), id(runner_globals)))
    import_name = opcode.opmap["IMPORT_NAME"]
    proc_events = frozenset(("os.system", "os.exec", "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn",
                             "subprocess.Popen", "pty.spawn", "os.startfile"))
    introspection = frozenset(("gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames",
                               "sys._current_exceptions", "sys.settrace", "sys.setprofile",
                               "sys.monitoring.register_callback", "threading.settrace",
                               "threading.setprofile"))
    in_hook_denied = frozenset(("sys._getframe", "object.__getattr__", "sys._current_frames"))
    # Files of blocked pure-Python modules: loading one by path is judged
    # like importing it by name.
    origins = []
    for b in blocked:
        top = b.split(".", 1)[0]
        mod = sys.modules.get(top)
        spec = getattr(mod, "__spec__", None) if mod is not None else None
        if spec is None:
            try:
                spec = importlib.util.find_spec(top) if hasattr(importlib, "util") else None
            except Exception:
                spec = None
        if spec is None:
            continue
        locs = list(spec.submodule_search_locations or ())
        if locs:
            origins.extend((os.path.realpath(p).rstrip("/") + "/", top) for p in locs)
        elif spec.origin and os.path.isabs(spec.origin):
            origins.append((os.path.realpath(spec.origin), top))
    origins = tuple(origins)
    # The runner's /proc entries, except what ps shows (cmdline, stat,
    # status): the kernel refuses the rest too (the runner is
    # non-dumpable), this names the reason.
    proc_prefixes = ("/proc/1/", "/proc/%d/" % os.getppid())
    proc_public = frozenset(p + n for p in proc_prefixes for n in ("cmdline", "stat", "status", "comm"))
    ptmx = ("/dev/ptmx", "/dev/pts/ptmx")
    # The blocked calls: audit event (or "os.open": the open event of
    # os.open; "builtins.exec"/"builtins.eval": the runner's wrappers) ->
    # (message, direct). The first guard of an event wins.
    call_events = {}
    for g in calls or ():
        if not isinstance(g, dict):
            continue
        ev, name, entry = g.get("event"), g.get("name"), g.get("entry")
        if type(ev) is str and type(name) is str and type(entry) is str and ev not in call_events:
            call_events[ev] = ("call to %s is blocked (blocked_calls lists %s) [calls.blocked, refused at run time]"
                               % (name, json.dumps(entry)), bool(g.get("direct")))
    call_events = types.MappingProxyType(call_events)
    tainted = {}
    depth = {}
    ours = set()
    kept = []  # the guard's functions, alive for good: their ids must stay theirs

    def strval(x, _str=str, _join="".join):
        t = type(x)
        if t is _str:
            return x
        if isinstance(x, _str):
            return _join((x,))
        return None

    def taint(code, _tainted=tainted, _code=types.CodeType, _id=id):
        stack = [code]
        while stack:
            c = stack.pop()
            if _id(c) in _tainted:
                continue
            _tainted[_id(c)] = c
            for k in c.co_consts:
                if type(k) is _code:
                    stack.append(k)

    def is_user(f, _tainted=tainted, _id=id):
        return f is not None and _id(f.f_code) in _tainted

    def user_on_stack(f, _is_user=is_user, _main=main_ident, _ident=_thread.get_ident):
        if _ident() != _main:
            return True
        while f is not None:
            if _is_user(f):
                return True
            f = f.f_back
        return False

    def importer(f, _skipped=skipped, _id=id):
        while f is not None and _id(f.f_globals) in _skipped:
            f = f.f_back
        return f

    def judge(f, name, fromlist, static, via_c=False, _is_user=is_user, _allowed=allowed, _blocked=blocked,
              _strval=strval, _denied=_module_denied, _no_ffi="native_code" in denied,
              _dynamic=frozenset(("__import__", "import_module", "_gcd_import", "_bootstrap"))):
        user = _is_user(f)
        if _no_ffi:
            # FFI is native code: ctypes is refused to user code and to a
            # library's computed import; cffi has no audit events to judge
            # its calls by, so it is refused to libraries too. A library's
            # own import of ctypes (numpy's statement, scipy's C code)
            # passes; every ctypes call it makes is refused in the hook.
            top = name.split(".", 1)[0]
            own = static or (via_c and f is not None and _dynamic.isdisjoint(f.f_code.co_names))
            if top in ("cffi", "_cffi_backend") or (top in ("ctypes", "_ctypes") and (user or not own)):
                raise ModuleBlockedError("import of %r refused at run time: %s" % (name, _MSG["native_code"]), name=name)
        if not (_allowed or _blocked):
            return
        if not user:
            # A library's import statement is the library's own; so is an
            # import by C code it called, seen through builtins.__import__
            # (via_c: its code names no import function).
            if static or f is None or (via_c and _dynamic.isdisjoint(f.f_code.co_names)):
                return
            pkg = _strval(dict.get(f.f_globals, "__name__"))
            if pkg and name.split(".", 1)[0] == pkg.split(".", 1)[0]:
                return  # the calling package's own submodule
        why = _denied(name, _allowed, _blocked)
        if why is None and fromlist and user:
            for n in fromlist:
                n = _strval(n)
                if n and n != "*":
                    why = _denied(name + "." + n, _allowed, _blocked)
                    if why:
                        break
        if why:
            raise ModuleBlockedError("import of %r refused at run time: %s" % (name, why), name=name)

    def static_import(f, _op=import_name):
        try:
            return f.f_code.co_code[f.f_lasti] == _op
        except Exception:
            return False

    def check_path(path, _proc=proc_prefixes, _public=proc_public, _ptmx=ptmx, _denied=denied, _trusted=_TRUSTED,
                   _strval=strval, _realpath=os.path.realpath):
        if type(path) is bytes:
            path = path.decode("utf-8", "surrogateescape")
        path = _strval(path)
        if path is None:
            return
        if path.startswith(_trusted) and "/.." not in path:
            return
        real = _realpath(path)
        if (real.startswith(_proc) or real + "/" in _proc) and real not in _public:
            raise PermissionError(errno.EACCES, "opening %s is not allowed in the sandbox (it belongs to the sandbox's runner)" % path)
        if real.startswith("/proc/") and (real.endswith("/mem") or "/map_files/" in real + "/"):
            # The kernel refuses them too: the worker is non-dumpable.
            raise PermissionError(errno.EACCES, "opening %s is not allowed in the sandbox: no process may read or "
                                  "write the code's memory through /proc (the worker is kept non-dumpable)" % path)
        if "pty" in _denied and real in _ptmx:
            raise PermissionError(errno.EPERM, _MSG["pty"])

    # The wrappers of exec and eval (put in builtins when blocked_calls
    # lists them) keep no state in arguments a caller could pass: they
    # read the originals from their private globals (priv, below).
    def guarded_exec(source, globals=None, locals=None, *, closure=None):
        f = _pdm_getframe(1)
        _pdm_audit("builtins.exec", f)
        if globals is None:
            globals, locals = f.f_globals, f.f_locals
        if closure is not None:
            return _pdm_exec(source, globals, locals, closure=closure)
        return _pdm_exec(source, globals, locals)

    def guarded_eval(source, globals=None, locals=None):
        f = _pdm_getframe(1)
        _pdm_audit("builtins.eval", f)
        if globals is None:
            globals, locals = f.f_globals, f.f_locals
        return _pdm_eval(source, globals, locals)

    def judge_call(event, args, f, _calls=call_events, _is_user=is_user, _machinery=machinery, _id=id, _static=static_import,
                   _main=main_ident, _ident=_thread.get_ident, _strval=strval, _trusted=_TRUSTED,
                   _realpath=os.path.realpath, _err=CallBlockedError):
        if event == "open":
            if len(args) > 1 and args[1] is None:
                event = "os.open"
        g = _calls.get(event)
        if g is None:
            return
        msg, direct = g
        if direct:
            if _is_user(f):
                raise _err(msg)
            return
        # User code on the stack, not under an import (an import is the
        # module rules' to judge): the call is made for the user.
        u = f
        while u is not None:
            if _id(u.f_globals) in _machinery:
                while u is not None and _id(u.f_globals) in _machinery:
                    u = u.f_back
                if u is None or not _is_user(u) or _static(u):
                    return
                break  # user code called the import system's functions itself
            if _is_user(u):
                break
            u = u.f_back
        if u is None and _ident() == _main:
            return
        if event == "open" and not _is_user(f):
            # A library reading a file of the image (linecache for a
            # warning, its own data) on the user's behalf.
            mode = _strval(args[1]) if len(args) > 1 else None
            path = args[0] if args else None
            if type(path) is bytes:
                path = path.decode("utf-8", "surrogateescape")
            path = _strval(path)
            if mode is not None and path is not None and not any(c in mode for c in "wax+"):
                if _realpath(path).startswith(_trusted):
                    return
        raise _err(msg)

    def hook(event, args, _depth=depth, _ident=_thread.get_ident, _getframe=sys._getframe, _denied=denied,
             _proc_events=proc_events, _fams=fams, _sock_names=sock_names, _introspection=introspection,
             _in_hook=in_hook_denied, _taint=taint, _is_user=is_user, _user_on_stack=user_on_stack,
             _importer=importer, _judge=judge, _static=static_import, _check_path=check_path,
             _blocked=blocked, _allowed=allowed, _origins=origins, _strval=strval,
             _ours=ours, _code=types.CodeType, _machinery=machinery, _id=id, _tainted=tainted,
             _main=main_ident, _runner_id=id(runner_globals), _frame_type=types.FrameType,
             _realpath=os.path.realpath, _kept=kept, _trusted=_TRUSTED,
             _frozen_exec=_bs.FrozenImporter.exec_module.__code__, _calls=call_events, _judge_call=judge_call,
             _wrapped=(guarded_exec.__code__, guarded_eval.__code__)):
        if type(event) is not str:
            return
        tid = _ident()
        d = _depth.get(tid)
        if d:
            # An event raised while this hook runs: its own frame lookups
            # pass; user code run meanwhile (a finalizer run by the garbage
            # collector) must not see the hook's frames.
            if d == 1 and event in _in_hook:
                _depth[tid] = 2
                try:
                    f = _getframe(1)
                    bad = f is not None and _id(f.f_code) in _tainted
                finally:
                    _depth[tid] = 1
                if bad:
                    raise PermissionError(errno.EPERM, "frame introspection is not allowed here")
            return
        _depth[tid] = 1
        try:
            if _calls and (event in _calls or event == "open"):
                if event.startswith("builtins.e"):
                    # the runner's wrapper of exec/eval, with its caller
                    f = args[0] if args and type(args[0]) is _frame_type else None
                else:
                    f = _getframe(1)
                _judge_call(event, args, f)
            if event in _proc_events:
                if "processes" in _denied:
                    raise PermissionError(errno.EPERM, _MSG["processes"])
            elif event == "socket.__new__":
                if "sockets" in _denied or _fams:
                    fam = args[1] if len(args) > 1 else None
                    if type(fam) is not int:
                        fam = -1
                    if fam != -1 and fam not in _fams:
                        raise PermissionError(errno.EPERM, _socket_msg(fam, _sock_names))
            elif event == "exec":
                code = args[0] if args else None
                if type(code) is _code:
                    caller = _getframe(1)
                    if caller is not None and caller.f_code in _wrapped:
                        caller = caller.f_back  # the runner's exec/eval wrapper is its caller's call
                    back = caller.f_back if caller is not None else None
                    library = False
                    if caller is not None and _id(caller.f_globals) in _machinery:
                        if caller.f_code is _frozen_exec:
                            library = True  # a frozen standard module
                        elif back is not None and _id(back.f_globals) in _machinery:
                            # A loader of the import system runs a module
                            # it read from a file: library code if the
                            # file is one of the image's.
                            real = _realpath(code.co_filename)
                            library = real.startswith(_trusted)
                            imp = _importer(caller)
                            if library and _origins and imp is not None and (_is_user(imp) or not _static(imp)):
                                # a blocked module's file loaded for user code
                                for origin, name in _origins:
                                    if real == origin or real.startswith(origin):
                                        _judge(imp, name, (), False)
                    if not library:
                        _taint(code)
            elif event == "function.__new__":
                code = args[0] if args else None
                if type(code) is _code:
                    _taint(code)
            elif event == "object.__setattr__":
                if len(args) > 2 and _id(args[0]) in _ours:
                    raise PermissionError(errno.EPERM, "the sandbox's guard cannot be changed")
                if len(args) > 2 and type(args[1]) is str and args[1] == "__code__" and type(args[2]) is _code:
                    _taint(args[2])
            elif event == "import":
                # A module not imported yet. Through the runner's
                # __import__ it was judged already; otherwise the caller
                # used the interpreter's own (a library that kept it): an
                # import statement is static, a call is computed.
                name = _strval(args[0]) if args else None
                f = _getframe(1)
                if name and f is not None and _id(f.f_globals) != _runner_id:
                    imp = _importer(f)
                    _judge(imp, name, (), _static(imp) if imp is not None else True)
            elif event == "pdm.import":
                name = _strval(args[0]) if args else None
                f = args[2] if len(args) > 2 else None
                # Called from the import system's own frames: C code of a
                # module being loaded (an extension's init) imports.
                if name and type(f) is _frame_type and _id(f.f_globals) not in _machinery:
                    fl = args[1] if type(args[1]) in (list, tuple) else ()
                    _judge(f, name, fl, _static(f), True)
            elif event == "open":
                if args:
                    _check_path(args[0])
            elif event == "pickle.find_class":
                name = _strval(args[0]) if args else None
                if name and (_blocked or _allowed):
                    why = _module_denied(name, _allowed, _blocked)
                    if why:
                        raise ModuleBlockedError("unpickling refused at run time: %s" % why, name=name)
            elif event in _introspection:
                if _user_on_stack(_getframe(1)):
                    raise PermissionError(errno.EPERM, "%s is not allowed in the sandbox" % event)
            elif event == "object.__getattr__":
                if len(args) > 1 and _id(args[0]) in _ours:
                    raise PermissionError(errno.EPERM, "the sandbox's guard cannot be inspected")
            elif event.startswith("ctypes."):
                if "native_code" in _denied and not (event == "ctypes.dlopen" and args and args[0] is None):
                    # Every foreign call, load, symbol and raw address,
                    # whichever frame makes it: a library's frame proves
                    # nothing (functools.singledispatch, string.Formatter
                    # and numpy.ctypeslib.ctypes call for the user). A
                    # handle on the program itself loads nothing: ctypes
                    # takes one when it is imported (pythonapi), and
                    # numpy imports ctypes.
                    raise PermissionError(errno.EPERM, "%s is refused at run time: %s" % (event, _MSG["native_code"]))
                if _blocked or _allowed:
                    why = _module_denied("ctypes", _allowed, _blocked)
                    # ctypes' own Python code is part of a ctypes call: the
                    # frame that called into ctypes is judged.
                    f = _getframe(1)
                    while f is not None and not _is_user(f):
                        mod = _strval(dict.get(f.f_globals, "__name__"))
                        if not mod or not (mod == "ctypes" or mod.startswith("ctypes.")):
                            break
                        f = f.f_back
                    if why and (_is_user(f) or _ident() != _main):
                        raise PermissionError(errno.EPERM, "%s is refused at run time: %s" % (event, why))
        finally:
            _depth[tid] = 0

    _orig_import = builtins.__import__
    _orig_import_module = importlib.import_module

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0, _audit=sys.audit,
                       _getframe=sys._getframe, _imp=_orig_import):
        if level == 0:
            _audit("pdm.import", name, fromlist or (), _getframe(1))
        return _imp(name, globals, locals, fromlist, level)

    def guarded_import_module(name, package=None, _audit=sys.audit, _getframe=sys._getframe,
                              _imp=_orig_import_module):
        if type(name) is str and not name.startswith("."):
            _audit("pdm.import", name, (), _getframe(1))
        return _imp(name, package)

    guarded_import_module.__doc__ = _orig_import_module.__doc__
    # The guard's functions get globals of their own, with a copy of the
    # builtins: user code that rebinds a builtin or a runner global (a frame
    # walk reaches the runner's globals) does not change them.
    priv = dict(runner_globals)
    priv["__builtins__"] = dict(builtins.__dict__)
    rebuilt = {}

    def rebind(fn):
        if fn.__code__.co_freevars:
            raise RuntimeError("guard function %s must not close over variables" % fn.__name__)
        defaults = tuple(rebuilt.get(id(d), d) if isinstance(d, types.FunctionType) else d
                         for d in (fn.__defaults__ or ()))
        new = types.FunctionType(fn.__code__, priv, fn.__name__, defaults or None)
        rebuilt[id(fn)] = new
        return new

    for name in ("_module_denied", "_socket_msg"):
        priv[name] = rebind(runner_globals[name])
    priv.update(_pdm_getframe=sys._getframe, _pdm_audit=sys.audit, _pdm_exec=builtins.exec, _pdm_eval=builtins.eval)
    guarded_exec, guarded_eval = rebind(guarded_exec), rebind(guarded_eval)
    guarded_exec.__kwdefaults__ = {"closure": None}
    guarded_exec.__doc__ = builtins.exec.__doc__
    guarded_eval.__doc__ = builtins.eval.__doc__
    strval, taint, is_user, user_on_stack, importer, static_import, judge, check_path, judge_call, hook = (
        rebind(f) for f in (strval, taint, is_user, user_on_stack, importer, static_import, judge, check_path,
                            judge_call, hook))
    keep = (hook, taint, is_user, user_on_stack, importer, judge, static_import, check_path, strval, judge_call,
            priv["_module_denied"], priv["_socket_msg"], guarded_import, guarded_import_module, guarded_exec,
            guarded_eval)
    ours.update(id(fn) for fn in keep)
    kept.append(keep)
    sys.addaudithook(hook)
    # Blocked modules already imported (by the runner, or a preload) are
    # forgotten, so that importing one by name goes through the import
    # system, where the hook sees it, even through an __import__ a library
    # kept. Modules that hold them keep their reference. The interpreter's
    # core modules stay: the runner's __import__ judges them.
    if blocked:
        for name in list(sys.modules):
            top = name.split(".", 1)[0]
            if top in _CORE or (top.startswith("_") and name in sys.builtin_module_names):
                continue
            if _module_denied(name, (), blocked):
                sys.modules.pop(name, None)
    builtins.__import__ = guarded_import
    importlib.import_module = guarded_import_module
    if "builtins.exec" in call_events:
        builtins.exec = guarded_exec
    if "builtins.eval" in call_events:
        builtins.eval = guarded_eval
    importlib.__import__ = guarded_import
    if "native_code" in denied:
        _refuse_package_extensions()


class _RefusedExtension:
    """The loader of an extension module found in the package volume while
    native code is denied: its import fails naming the policy."""

    def __init__(self, fullname, path):
        self.name, self.path = fullname, path

    def create_module(self, spec):
        raise ModuleBlockedError("import of %r refused at run time: %s is native code from %s, and %s" % (
            self.name, os.path.basename(self.path), _PACKAGES, _MSG["native_code"]), name=self.name)

    def exec_module(self, module):
        pass


def _refuse_package_extensions():
    """Directories under the package volume get finders whose extension
    modules (.so) are refused: what install-package brought in runs as
    Python only while native code is denied."""
    from importlib.machinery import (BYTECODE_SUFFIXES, EXTENSION_SUFFIXES, SOURCE_SUFFIXES, FileFinder,
                                     SourceFileLoader, SourcelessFileLoader)
    root = os.path.realpath(_PACKAGES)
    loaders = ((_RefusedExtension, EXTENSION_SUFFIXES), (SourceFileLoader, SOURCE_SUFFIXES),
               (SourcelessFileLoader, BYTECODE_SUFFIXES))

    def packages_hook(path, _root=root, _realpath=os.path.realpath, _finder=FileFinder, _loaders=loaders):
        real = _realpath(path)
        if real == _root or real.startswith(_root + "/"):
            return _finder(path, *_loaders)
        raise ImportError("not in the package volume", path=path)

    sys.path_hooks.insert(0, packages_hook)
    for p in list(sys.path_importer_cache):
        real = os.path.realpath(p)
        if real == root or real.startswith(root + "/"):
            del sys.path_importer_cache[p]


_CORE = frozenset(("os", "sys", "posix", "builtins", "io", "_io", "abc", "_abc", "codecs", "_codecs", "encodings",
                   "importlib", "_imp", "_thread", "threading", "_weakref", "weakref", "marshal", "time", "zipimport",
                   "posixpath", "genericpath", "stat", "_stat", "signal", "_signal", "errno", "_warnings", "warnings",
                   "types", "functools", "collections", "json", "ast", "struct", "_struct", "select", "traceback",
                   "linecache", "opcode", "sysconfig", "base64", "_collections_abc", "site", "math", "gc"))


def _explain_eperm(e, denied):
    """The policy message for an EPERM that a denied capability class
    caused in C code (seccomp), or None. pty.openpty's own error after
    os.openpty failed ("out of pty devices": it tried the BSD devices
    next) is one too."""
    if not denied or not isinstance(e, OSError):
        return None
    text = str(e)
    if "sandbox policy" in text:
        return None
    names = set()
    tb = e.__traceback__
    while tb is not None:
        names.add(tb.tb_frame.f_code.co_name)
        names.add(linecache.getline(tb.tb_frame.f_code.co_filename, tb.tb_lineno).strip())
        tb = tb.tb_next
    if e.errno is None and "pty" in denied and text == "out of pty devices" and "_open_terminal" in names:
        return _MSG["pty"]
    if e.errno != errno.EPERM:
        return None
    # A socket pair is AF_UNIX: denied with sockets, or with the unix family.
    pair = None
    if "sockets" in denied:
        pair = _MSG["sockets"]
    elif "sockets.unix" in denied:
        pair = _socket_msg(_FAMILIES["unix"], [f for f in _FAMILIES if "sockets." + f not in denied])
    if pair and "_make_self_pipe" in names:
        return pair + ": an asyncio event loop needs a socket pair to start, so asyncio cannot run here"
    hints = " ".join(names) + " " + text
    if pair and "sockets" not in denied and "socketpair" in hints:
        return pair
    # The failing call names the class (the kernel's EPERM does not).
    for cls, words in (("pty", ("openpty", "forkpty", "ptmx")),
                       ("processes", ("fork", "spawn", "Popen", "_execute_child", "execv", "system(")),
                       ("sockets", ("socket", "socketpair")),
                       ("native_code", ("mmap", "memfd", "dlopen", "CDLL", "mprotect"))):
        if cls in denied and any(w in hints for w in words):
            return _MSG[cls]
    return None


# ---------------------------------------------------------------- worker


class SandboxTimeout(BaseException):
    """Raised in user code when the run exceeds its time limit."""


class SandboxInterrupt(BaseException):
    """Raised in user code when the caller cancels the run."""


class _Run:
    running = False
    reason = None


_RUN = _Run()


def _on_signal(signum, frame):
    if not _RUN.running or _RUN.reason is not None:
        return
    if signum == signal.SIGUSR1:
        _RUN.reason = "timeout"
        raise SandboxTimeout("execution exceeded the time limit")
    _RUN.reason = "interrupt"
    raise SandboxInterrupt("execution was cancelled")


def _user_traceback(tb):
    entries = [fs for fs in traceback.extract_tb(tb) if fs.filename != "<pdm-runner>"]
    i = 0
    while i < len(entries) and not entries[i].filename.startswith("<cell"):
        i += 1
    return entries[i:] if i < len(entries) else entries


def _clip(s, n=_MAX_ERROR_TEXT):
    s = s if isinstance(s, str) else str(s)
    if len(s) > n:
        return s[: n // 2] + "\n... [%d characters dropped] ...\n" % (len(s) - n) + s[-(n // 2):]
    return s


def _error_info(e, cell_name, denied=()):
    try:
        msg = str(e)
    except BaseException:  # noqa: BLE001 - a user exception's __str__ may raise
        msg = "<str() failed>"
    info = {"type": type(e).__name__, "message": msg, "line": 0, "traceback": ""}
    if isinstance(e, SyntaxError):
        info["line"] = e.lineno or 0
        info["message"] = e.msg or msg
        info["traceback"] = "".join(traceback.format_exception_only(type(e), e))
        return info
    policy = _explain_eperm(e, denied)
    if policy:
        info["message"] = "%s [%s]" % (policy, msg)
    else:
        # A library may wrap the refusal (logging.config: "Unable to
        # configure handler"): name the refusal it wraps.
        seen, c = 0, e.__cause__ or e.__context__
        while c is not None and seen < 10:
            text = _explain_eperm(c, denied) or (str(c) if isinstance(c, (PermissionError, ImportError)) and (
                "sandbox policy" in str(c) or "refused at run time" in str(c)) else None)
            if text:
                info["message"] = "%s (caused by %s: %s)" % (msg, type(c).__name__, text)
                break
            seen, c = seen + 1, c.__cause__ or c.__context__
    entries = _user_traceback(e.__traceback__)
    for fs in entries:
        if fs.filename == cell_name:
            info["line"] = fs.lineno or 0
    tb = "Traceback (most recent call last):\n" + "".join(traceback.format_list(entries))
    if info["message"] != msg:
        # A refusal the policy explains: the traceback's last line, what
        # a reader sees first, says so too, not only the raw OS error.
        tb += "%s: %s\n" % (type(e).__name__, info["message"])
    else:
        try:
            tb += "".join(traceback.format_exception_only(type(e), e))
        except BaseException:  # noqa: BLE001
            tb += "%s\n" % type(e).__name__
    info["traceback"] = tb
    info["message"] = _clip(info["message"])
    info["traceback"] = _clip(info["traceback"])
    return info


def _round_trips(v):
    try:
        enc = json.dumps(v, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError, OverflowError):
        return None
    try:
        if json.loads(enc) != v:
            return None
    except Exception:
        return None
    return enc


def _type_name(v):
    t = type(v)
    mod = t.__module__
    if mod in ("builtins", "__main__"):
        return t.__qualname__
    return mod + "." + t.__qualname__


_JSON_TYPES = (type(None), bool, int, float, str, list, dict)  # tuples do not round-trip
_MAX_UNRETURNED = 100  # names of globals listed as not returned


def _collect_state(ns, max_bytes, names):
    """The state a transient run returns: the globals named in names (the
    keys the call sent, then the names it asked for), or every global when
    names is None ("*"). Returns (state, dropped, too_large, missing,
    unreturned): values that are not JSON round-trippable are dropped
    (named with their type); when the state would exceed max_bytes the
    largest values are left out until the rest fits, each named with its
    size (of its JSON); names asked for that are not defined are missing; unreturned
    names the other globals of JSON types, for the caller to ask for."""
    state, dropped, missing, sizes, values = {}, [], [], {}, {}
    if names is None:
        names = [n for n, v in list(ns.items()) if not n.startswith("_") and not isinstance(v, types.ModuleType)]
    for name in dict.fromkeys(names):
        if name not in ns:
            if len(missing) < _MAX_DROPPED:
                missing.append(name[:256])
            continue
        v = ns[name]
        enc = _round_trips(v)
        if enc is None:
            if len(dropped) < _MAX_DROPPED:
                dropped.append({"name": name[:256], "type": _type_name(v)[:256]})
            continue
        n = len(enc.encode("utf-8"))
        values[name] = n
        sizes[name] = len(json.dumps(name, ensure_ascii=False).encode("utf-8")) + 1 + n + 1
        state[name] = v
    total = 2 + sum(sizes.values())
    too_large = []
    for name in sorted(sizes, key=lambda n: -sizes[n]):
        if total <= max_bytes:
            break
        total -= sizes[name]
        del state[name]
        if len(too_large) < _MAX_DROPPED:
            too_large.append({"name": name[:256], "bytes": values[name]})
    unreturned = []
    for name, v in list(ns.items()):
        if len(unreturned) >= _MAX_UNRETURNED:
            break
        if name in sizes or name.startswith("_") or type(v) not in _JSON_TYPES:
            continue
        if any(d["name"] == name for d in dropped):
            continue
        unreturned.append(name[:256])
    return state, dropped, too_large, missing, unreturned


def _figures(max_images, max_bytes):
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return [], 0
    images, total, skipped = [], 0, 0
    try:
        nums = list(plt.get_fignums())
        for num in nums:
            if len(images) >= max_images:
                skipped += 1
                continue
            try:
                fig = plt.figure(num)
                buf = io.BytesIO()
                fig.savefig(buf, format="png")
                data = buf.getvalue()
            except (SandboxTimeout, SandboxInterrupt):
                raise
            except Exception as e:
                _diag("figure %s: %r" % (num, e))
                skipped += 1
                continue
            if total + len(data) > max_bytes or data[:8] != b"\x89PNG\r\n\x1a\n":
                skipped += 1
                continue
            w, h = struct.unpack(">II", data[16:24])
            total += len(data)
            images.append({"png": base64.b64encode(data).decode("ascii"), "width": w, "height": h})
    finally:
        try:
            plt.close("all")
        except Exception:
            pass
    return images, skipped


def _fresh_stdio():
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True)
    sys.__stdout__ = sys.stdout
    sys.__stderr__ = sys.stderr


def _flush_stdio():
    for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if s is not None:
                s.flush()
        except BaseException:  # noqa: BLE001
            pass


class _Worker:
    """The runner's view of one worker process."""

    def __init__(self):
        ctrl_r, ctrl_w = os.pipe()
        res_r, res_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        # The runner's objects stay out of the worker's garbage collection,
        # which would otherwise touch (and so copy) every page it inherits.
        gc.freeze()
        try:
            pid = os.fork()
        except OSError:
            for fd in (ctrl_r, ctrl_w, res_r, res_w, out_r, out_w, err_r, err_w):
                os.close(fd)
            raise
        if pid == 0:
            code = 70
            try:
                _worker_main(ctrl_r, res_w, out_w, err_w)
                code = 0
            except BaseException:  # noqa: BLE001
                try:  # fd 2 is the run's stderr capture by now
                    os.write(2, ("sandbox worker failed: %s" % traceback.format_exc()).encode("utf-8", "replace"))
                except BaseException:  # noqa: BLE001
                    pass
            os._exit(code)
        for fd in (ctrl_r, res_w, out_w, err_w):
            os.close(fd)
        for fd in (ctrl_w, res_r, out_r, err_r):
            os.set_blocking(fd, False)
        self.pid = pid
        self.ctrl = ctrl_w
        self.res = res_r
        self.out = out_r
        self.err = err_r
        try:
            self.pidfd = os.pidfd_open(pid)
        except (OSError, AttributeError):
            self.pidfd = -1  # the poll loop then looks every 100 ms
        self.key = None  # capabilities and module rules, fixed at the first run
        self.armed = False  # installed them before its first run (a pooled spare)
        self.hung_up = set()  # output pipes whose every writer is gone
        self.runs = 0
        self.dead = False
        self.status = None
        # Between calls of a session: {pid: (start time, cpu ticks)} of the
        # processes the runner stopped, and what it found left running.
        self.frozen = None
        self.left = []

    def kill(self, wait=True):
        # wait=False leaves the process's teardown (about a millisecond for
        # a forked interpreter) to finish beside whatever comes next; it can
        # run no more user code once SIGKILL is sent, and _reap collects it.
        if not self.dead:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if wait:
                try:
                    os.waitpid(self.pid, 0)
                except ChildProcessError:
                    pass
            self.dead = True
        for fd in (self.ctrl, self.res, self.out, self.err, self.pidfd):
            if fd < 0:
                continue
            try:
                os.close(fd)
            except OSError:
                pass
        self.ctrl = self.res = self.out = self.err = self.pidfd = -1


def _worker_main(ctrl_r, res_w, out_w, err_w):
    # Only what the worker needs: no protocol, no diagnostics channel.
    global _PROTO_IN, _PROTO_OUT, _DIAG, _libc
    _PROTO_IN = _PROTO_OUT = _DIAG = -1
    _OOM_FD.clear()  # the runner's, closed below
    os.dup2(_DEVNULL, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    null = os.open("/dev/null", os.O_RDWR)
    keep = {0, 1, 2, ctrl_r, res_w, null}
    for fd in range(3, 1024):
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    # The OOM killer takes the worker first: its oom_score_adj is written
    # while it is dumpable for a moment (its /proc files are the user's
    # then), before any user code. Then it is non-dumpable for good (the
    # capability filter refuses PR_SET_DUMPABLE): its /proc/self/mem,
    # which writes past page protections, is root's, and so are its fd,
    # environ and map_files.
    _libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    if _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        os._exit(70)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGUSR1, _on_signal)
    signal.signal(signal.SIGUSR2, _on_signal)
    _fresh_stdio()

    def not_the_worker():
        # A process that user code forks is not the worker: it must
        # neither take the next call's request nor answer for this one (a
        # fork bomb's stray would otherwise write a stale reply into a
        # later call). Its control pipe reads EOF, so it exits where the
        # worker would wait for a request; its replies go nowhere.
        try:
            os.dup2(null, ctrl_r)
            os.dup2(null, res_w)
        except OSError:
            os._exit(70)

    os.register_at_fork(after_in_child=not_the_worker)
    reader = _FrameReader(ctrl_r, _MAX_FRAME)
    os.set_blocking(ctrl_r, True)
    guarded = False
    denied = ()
    while True:
        req = None
        while req is None:
            for data in reader.frames():
                req = json.loads(data)
                break
            if req is None:
                reader.feed()
                if reader.eof:
                    os._exit(0)
        arm = req.get("op") == "arm"
        if arm and guarded:
            continue
        if not guarded:
            caps = req.get("capabilities")
            mods = req.get("modules") or {}
            try:
                _install_seccomp(caps if isinstance(caps, dict) else None)
            except Exception as e:
                if arm:
                    # Installed ahead of a call: the call's own attempt
                    # (same guard) reports the failure.
                    continue
                resp = {"status": "error", "error": {"type": "SandboxError", "line": 0, "traceback": "",
                                                     "message": "could not install the sandbox's capability filter: %s" % e}}
                _write_all(res_w, _encode(resp))
                os._exit(71)
            # The runner's handle on libc (its function pointers call past
            # the audit hook) is not left for user code to find.
            _libc = None
            _install_guard(caps if isinstance(caps, dict) else None, mods.get("allowed") or (),
                           mods.get("blocked") or (), threading_ident(), globals(), mods.get("calls") or ())
            denied = _denied_classes(caps if isinstance(caps, dict) else None)
            guarded = True
            if arm:
                continue
        resp = _worker_run(req, denied)
        resp["nonce"] = req.get("nonce")
        _write_all(res_w, _encode(resp))
        if req.get("transient"):
            os._exit(0)


def threading_ident():
    import _thread
    return _thread.get_ident()


_USER = types.ModuleType("__main__")
_USER.__dict__["__builtins__"] = builtins
sys.modules["__main__"] = _USER
if _WORKDIR not in sys.path:
    sys.path.append(_WORKDIR)

warnings.filterwarnings("ignore", message=".*non-interactive.*")
warnings.filterwarnings("ignore", message=".*More than .* figures have been opened.*")


def _bash_run(req, denied):
    """Runs bash code as `bash -c CODE` from the worker: the child inherits
    the capture pipes (fd 1 and 2), /dev/null as stdin, the seccomp filter
    and the working directory; a timeout or interrupt kills its process
    group. Exit status 0 is ok, anything else an error naming it."""
    code = req.get("code") or ""
    timeout = float((req.get("limits") or {}).get("timeout_ms") or 30000) / 1000.0
    resp = {"status": "ok"}
    pid = 0
    _RUN.reason = None
    try:
        _RUN.running = True
        try:
            pid = os.fork()
            if pid == 0:
                try:
                    os.setpgid(0, 0)
                    # Python ignores SIGPIPE and SIGXFSZ; a shell expects
                    # the defaults (so `yes | head -1` ends quietly).
                    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
                        signal.signal(sig, signal.SIG_DFL)
                    os.execv("/bin/bash", ["bash", "-c", code])
                finally:
                    os._exit(127)
            _, st = os.waitpid(pid, 0)
            pid = 0
            rc = os.waitstatus_to_exitcode(st)
            if rc != 0:
                resp["status"] = "error"
                what = "exit status %d" % rc if rc > 0 else "signal %d" % -rc
                resp["error"] = {"type": "BashError", "message": "bash ended with %s" % what, "line": 0, "traceback": ""}
        finally:
            _RUN.running = False
    except (SandboxTimeout, SandboxInterrupt) as e:
        if isinstance(e, SandboxTimeout):
            resp["status"] = "timeout"
            resp["error"] = {"type": "SandboxTimeout", "message": "execution exceeded the time limit of %gs" % timeout,
                             "line": 0, "traceback": ""}
        else:
            resp["status"] = "killed"
            resp["error"] = {"type": "SandboxInterrupt", "message": "execution was cancelled", "line": 0, "traceback": ""}
    except OSError as e:
        info = _error_info(e, "<cell>", denied)
        resp["status"] = "error"
        resp["error"] = info
    finally:
        if pid > 0:
            for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
                try:
                    target()
                except OSError:
                    pass
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
    _flush_stdio()
    return resp


def _worker_run(req, denied):
    if req.get("language") == "bash":
        return _bash_run(req, denied)
    lim = req.get("limits") or {}
    max_out = int(lim.get("max_output_bytes") or (1 << 20))
    max_state = int(lim.get("max_state_bytes") or (1 << 20))
    max_img = int(lim.get("max_image_bytes") or (4 << 20))
    max_images = int(lim.get("max_images") or 16)
    timeout = float(lim.get("timeout_ms") or 30000) / 1000.0
    transient = bool(req.get("transient"))
    code = req.get("code") or ""
    cell_name = req.get("cell") or "<cell>"
    resp = {"status": "ok"}
    if not _TRANSIENT:
        importlib.invalidate_caches()
    tree = ast.parse(code, filename=cell_name, mode="exec")
    ns = _USER.__dict__
    state_names = []
    if transient and isinstance(req.get("state"), dict):
        ns.update(req["state"])
        state_names.extend(req["state"])
    asked = req.get("state_keys") or ()
    if "*" in asked:
        state_names = None
    else:
        state_names.extend(str(n) for n in asked)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    linecache.cache[cell_name] = (len(code), None, code.splitlines(True), cell_name)
    body = compile(tree, cell_name, "exec", dont_inherit=True)
    tail = compile(last, cell_name, "eval", dont_inherit=True) if last is not None else None

    exc = None
    value = None
    images, skipped = [], 0
    state = None
    _RUN.reason = None
    try:
        _RUN.running = True
        try:
            exec(body, ns)
            if tail is not None:
                value = eval(tail, ns)
        except BaseException as e:  # noqa: BLE001 - everything user code raises is reported
            exc = e
        _flush_stdio()
        # Figures, the result's repr and the state are the call's work too:
        # they happen inside its time limit.
        if not isinstance(exc, (SandboxTimeout, SandboxInterrupt)):
            images, skipped = _figures(max_images, max_img)
            if value is not None and exc is None:
                try:
                    r = repr(value)
                except (SandboxTimeout, SandboxInterrupt):
                    raise
                except BaseException as e:  # noqa: BLE001
                    r = "<repr failed: %s: %s>" % (type(e).__name__, e)
                b = r.encode("utf-8", "backslashreplace")
                if len(b) > max_out:
                    half = max_out // 2
                    r = (b[:half].decode("utf-8", "replace") + "\n... [%d bytes dropped] ...\n" % (len(b) - max_out)
                         + b[-half:].decode("utf-8", "replace"))
                resp["result"] = r
            if transient:
                state = _collect_state(ns, max_state, state_names)
    except BaseException as e:  # noqa: BLE001 - a timeout while rendering or collecting
        if exc is None or isinstance(e, (SandboxTimeout, SandboxInterrupt)):
            exc = e
    finally:
        _RUN.running = False
    _flush_stdio()
    if skipped:
        try:
            os.write(2, ("[%d figure(s) not returned: limit of %d images / %d bytes]\n" % (skipped, max_images, max_img)).encode())
        except OSError:
            pass
    if images:
        resp["images"] = images

    if exc is not None:
        resp.pop("result", None)
        info = _error_info(exc, cell_name, denied)
        if isinstance(exc, SandboxTimeout):
            resp["status"] = "timeout"
            info["message"] = "execution exceeded the time limit of %gs" % timeout
        elif isinstance(exc, SandboxInterrupt):
            resp["status"] = "killed"
        elif isinstance(exc, SystemExit) and exc.code in (0, None):
            info = None
        elif isinstance(exc, MemoryError):
            resp["status"] = "oom"
        else:
            resp["status"] = "error"
        if info is not None:
            resp["error"] = info
    if state is not None:
        resp["state"], dropped, too_large, missing, unreturned = state
        for k, v in (("dropped_state", dropped), ("state_too_large", too_large), ("missing_state", missing),
                     ("unreturned_globals", unreturned)):
            if v:
                resp[k] = v
    return resp


# ---------------------------------------------------------------- runner side


_CLK_TCK = os.sysconf("SC_CLK_TCK")
# The signals a worker handles itself (see _worker_main): any other handler
# was installed by user code.
_WORKER_SIGS = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGUSR1 - 1)) | (1 << (signal.SIGUSR2 - 1))


def _pstat(pid):
    """(state, start time, utime+stime in ticks) of a process from
    /proc/PID/stat, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return fields[0].decode(), int(fields[19]), int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


def _pstatus(pid):
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                out[k] = v.strip()
    except OSError:
        pass
    return out


def _sig_names(mask):
    names = []
    for n in range(1, 65):
        if mask & (1 << (n - 1)):
            try:
                names.append(signal.Signals(n).name)
            except ValueError:
                names.append("signal %d" % n)
    return ", ".join(names)


def _others():
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != _PID and not _zombie(p)]


def _left_running(w):
    """What the session's worker has running besides its main thread
    waiting for the next request, seen from outside it: extra threads,
    signal handlers user code installed, pending signals."""
    left = []
    try:
        n = len(os.listdir("/proc/%d/task" % w.pid))
    except OSError:
        n = 1
    if n > 1:
        left.append("%d thread%s besides the main one" % (n - 1, "s" if n > 2 else ""))
    st = _pstatus(w.pid)
    try:
        extra = int(st.get("SigCgt", "0"), 16) & ~_WORKER_SIGS
        pending = int(st.get("SigPnd", "0"), 16) | int(st.get("ShdPnd", "0"), 16)
    except ValueError:
        extra = pending = 0
    if extra:
        left.append("a handler for %s (a timer or signal can run code in it)" % _sig_names(extra))
    if pending & ~(1 << (signal.SIGSTOP - 1)) & ~(1 << (signal.SIGCONT - 1)):
        left.append("pending %s" % _sig_names(pending))
    return left


def _freeze(w):
    """Stops every process of the sandbox but the runner after a session's
    call (SIGSTOP: the worker can neither catch, block nor undo it; only the
    runner sends SIGCONT) and checks each is stopped. Records each one's
    start time and CPU time for _thaw. False when one would not stop."""
    w.left = _left_running(w)
    pids = _others()
    for p in pids:
        try:
            os.kill(p, signal.SIGSTOP)
        except OSError:
            pass
    frozen = {}
    deadline = time.monotonic() + 2
    for p in pids:
        while True:
            st = _pstat(p)
            if st is None:
                break
            tasks = []
            try:
                tasks = os.listdir("/proc/%d/task" % p)
            except OSError:
                pass
            if st[0] == "T" and all((_pstat_task(p, t) or "T") == "T" for t in tasks):
                frozen[p] = (st[1], st[2])
                break
            if time.monotonic() > deadline:
                return False
            time.sleep(0.001)
    w.frozen = frozen
    return w.pid in frozen


def _pstat_task(pid, tid):
    try:
        with open("/proc/%d/task/%s/stat" % (pid, tid), "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return None


def _thaw(w):
    """Checks that the processes are the ones _freeze stopped (same pid,
    same start time, still stopped, nothing new) and resumes them. Returns
    (ok, CPU milliseconds they used while frozen, what is wrong)."""
    frozen, w.frozen = w.frozen, None
    idle = 0
    for p, (start, cpu) in frozen.items():
        st = _pstat(p)
        if st is None or st[1] != start:
            return False, 0, "process %d is not the one frozen after the last call" % p
        if st[0] != "T":
            return False, 0, "process %d was not stopped (state %s)" % (p, st[0])
        idle += st[2] - cpu
    new = [p for p in _others() if p not in frozen]
    if new:
        return False, 0, "process%s %s appeared while the session was frozen" % ("es" if len(new) > 1 else "", ", ".join(map(str, new[:10])))
    # A signal that came while frozen (a timer's) is delivered on SIGCONT,
    # before the worker reads this call's request.
    st = _pstatus(w.pid)
    try:
        pending = (int(st.get("SigPnd", "0"), 16) | int(st.get("ShdPnd", "0"), 16)) & ~(1 << (signal.SIGCONT - 1))
    except ValueError:
        pending = 0
    if pending:
        w.left.append("%s, which came while it was frozen" % _sig_names(pending))
    for p in frozen:
        try:
            os.kill(p, signal.SIGCONT)
        except OSError:
            pass
    return True, idle * 1000.0 / _CLK_TCK, ""


def _new_worker():
    """A new worker. While the sandbox's pids are used up (what a killed
    call started is still dying: a fork bomb) it kills the strays and tries
    again, for up to 3 s."""
    deadline = time.monotonic() + 3
    while True:
        try:
            return _Worker()
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise
            _kill_strays(None)
            time.sleep(0.01)


def _kill_strays(keep):
    """Kills every process of the sandbox except the runner and keep (the
    session's worker): what a call started does not outlive it. A fork bomb
    forks while it is being killed, so this goes on until none is left, for
    up to 2 s: with nothing to keep, the runner (process 1 of the sandbox)
    signals them all at once with kill(-1); otherwise each is stopped first
    (a stopped process cannot fork), then killed."""
    deadline = time.monotonic() + 2
    while True:
        others = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (_PID, keep) and not _zombie(p)]
        if not others or time.monotonic() > deadline:
            break
        if keep is None and _PID == 1:
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
        else:
            for sig in (signal.SIGSTOP, signal.SIGKILL):
                for p in others:
                    try:
                        os.kill(p, sig)
                    except OSError:
                        pass
        _reap(None)
        time.sleep(0.002)


def _zombie(pid):
    try:
        with open("/proc/%s/stat" % pid, "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def _reap(worker):
    try:
        while True:
            pid, st = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            if worker is not None and pid == worker.pid:
                worker.dead = True
                worker.status = st
    except ChildProcessError:
        pass


def _snapshot(limit=10000):
    seen = {}
    stack = [_WORKDIR]
    while stack and len(seen) < limit:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                for ent in it:
                    try:
                        st = ent.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if ent.is_dir(follow_symlinks=False):
                        stack.append(ent.path)
                    else:
                        seen[os.path.relpath(ent.path, _WORKDIR)] = (st.st_mtime_ns, st.st_size)
                    if len(seen) >= limit:
                        break
        except OSError:
            continue
    return seen


_OOM_FD = []  # the cgroup file that counts OOM kills, once opened


def _cgroup_oom_kills():
    # The file is opened once and read again from its start: every open
    # walks from the root directory, which on some storage drivers (FUSE)
    # costs a round trip to the driver's process. Workers close it.
    if not _OOM_FD:
        for path in ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"):
            try:
                _OOM_FD.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
                break
            except OSError:
                continue
        else:
            _OOM_FD.append(-1)
    fd = _OOM_FD[0]
    if fd < 0:
        return None
    try:
        data = os.pread(fd, 4096, 0)
    except OSError:
        return None
    for line in data.decode("ascii", "replace").splitlines():
        k, _, v = line.partition(" ")
        if k == "oom_kill":
            try:
                return int(v)
            except ValueError:
                return None
    return None


_STATUSES = ("ok", "error", "timeout", "oom", "killed")
_INVALID = "the sandbox sent an invalid reply"


def _clean_reply(raw, nonce, transient, max_out, max_state, max_img, max_images):
    """Validates a worker's result and re-applies every cap to it: the
    worker runs user code, so its reply is untrusted."""
    r = json.loads(raw)
    if not isinstance(r, dict):
        raise ValueError("the result is not an object")
    if r.get("nonce") != nonce:
        raise ValueError("the result does not carry this call's nonce")
    out = {}
    status = r.get("status")
    if status not in _STATUSES:
        raise ValueError("unknown status %.40r" % (status,))
    out["status"] = status
    err = r.get("error")
    if err is not None:
        if not isinstance(err, dict):
            raise ValueError("error is not an object")
        line = err.get("line")
        out["error"] = {"type": _clip(str(err.get("type") or "Error"), 256), "message": _clip(str(err.get("message") or "")),
                        "line": line if isinstance(line, int) and not isinstance(line, bool) and 0 <= line < 1 << 31 else 0,
                        "traceback": _clip(str(err.get("traceback") or ""))}
    res = r.get("result")
    if res is not None:
        if not isinstance(res, str):
            raise ValueError("result is not a string")
        b = res.encode("utf-8", "surrogatepass")
        if len(b) > max_out + 256:
            half = max_out // 2
            res = b[:half].decode("utf-8", "replace") + "\n... [%d bytes dropped] ...\n" % (len(b) - max_out) + b[-half:].decode("utf-8", "replace")
        out["result"] = res
    if transient and "state" in r:
        st = r["state"]
        if not isinstance(st, dict):
            raise ValueError("state is not an object")
        too_large = r.get("state_too_large")
        too_large = [{"name": str(d.get("name", ""))[:256], "bytes": d["bytes"]} for d in too_large[:_MAX_DROPPED]
                     if isinstance(d, dict) and type(d.get("bytes")) is int and 0 <= d["bytes"] < 1 << 62] if isinstance(too_large, list) else []
        if len(json.dumps(st, ensure_ascii=False).encode("utf-8", "surrogatepass")) > max_state:
            # The worker trims the state to its cap; a worker that did not
            # loses all of it, named, and the run keeps its outcome.
            too_large = [{"name": str(k)[:256], "bytes": len(json.dumps(v, ensure_ascii=False).encode("utf-8", "surrogatepass"))}
                         for k, v in list(st.items())[:_MAX_DROPPED]] + too_large
            st = {}
        out["state"] = st
        if too_large:
            out["state_too_large"] = too_large[:_MAX_DROPPED]
        dropped = r.get("dropped_state")
        if isinstance(dropped, list):
            out["dropped_state"] = [{"name": str(d.get("name", ""))[:256], "type": str(d.get("type", ""))[:256]}
                                    for d in dropped[:_MAX_DROPPED] if isinstance(d, dict)]
        for k, n in (("missing_state", _MAX_DROPPED), ("unreturned_globals", _MAX_UNRETURNED)):
            names = r.get(k)
            if isinstance(names, list):
                names = [str(x)[:256] for x in names[:n] if isinstance(x, str)]
                if names:
                    out[k] = names
    imgs = r.get("images")
    if imgs is not None:
        if not isinstance(imgs, list):
            raise ValueError("images is not a list")
        kept, total = [], 0
        for im in imgs:
            if len(kept) >= max_images or not isinstance(im, dict) or not isinstance(im.get("png"), str):
                continue
            n = len(im["png"]) * 3 // 4
            if total + n > max_img:
                continue
            w, h = im.get("width"), im.get("height")
            if not (isinstance(w, int) and isinstance(h, int)):
                continue
            total += n
            kept.append({"png": im["png"], "width": w, "height": h})
        if kept:
            out["images"] = kept
    return out


def _result_cap(max_out, max_state, max_img, max_images):
    # JSON may escape a character into 6 bytes.
    return 6 * (max_out + 2 * _MAX_ERROR_TEXT + _MAX_DROPPED * 1200 + _MAX_UNRETURNED * 300) + 6 * max_state + (max_img * 4) // 3 + max_images * 256 + (64 << 10)


def _worker_key(req):
    """What a worker is fixed to at its first run: the capabilities (its
    seccomp filter) and the module rules (its audit hook), normalized."""
    caps = req.get("capabilities")
    if isinstance(caps, dict):
        caps = {"processes": bool(caps.get("processes")), "pty": bool(caps.get("pty")),
                "native_code": bool(caps.get("native_code")),
                "sockets": sorted({str(f) for f in (caps.get("sockets") or ())})}
    else:
        caps = None
    mods = req.get("modules") or {}
    rules = [sorted({str(m) for m in (mods.get(k) or ())}) for k in ("allowed", "blocked")]
    calls = mods.get("calls") or []
    return json.dumps([caps, rules, calls if isinstance(calls, list) else []], sort_keys=True)


_PARSE_TEXT = 8 << 10  # cap of each text field of a parse answer
_PARSE_LINE = 400  # a longer source line is shown around the error


def _parse(req):
    """Answers a "parse" request here, in the runner: CPython's parser builds
    the AST only (ast.PyCF_ONLY_AST, dont_inherit) and nothing of the code
    runs; no worker is involved. The answer has "syntax" when the code does
    not parse: CPython's message, position and its rendering with a caret."""
    code = req.get("code")
    if not isinstance(code, str):
        return {"status": "error", "error": {"type": "RunnerError", "message": "parse: code must be a string"}}
    try:
        compile(code, "<cell>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as e:  # IndentationError and TabError too
        return {"status": "ok", "syntax": _syntax_info(e)}
    except (ValueError, RecursionError, MemoryError) as e:
        # A NUL byte (ValueError), or code nested too deeply for the parser.
        return {"status": "ok", "syntax": {"type": type(e).__name__, "message": str(e)[:_PARSE_TEXT], "line": 0, "col": 0,
                                           "end_line": 0, "end_col": 0, "text": "", "detail": ""}}
    return {"status": "ok"}


def _syntax_info(e):
    """CPython's SyntaxError e as the server reports it: message, position,
    the source line and CPython's rendering with a caret (file <cell>)."""
    text = e.text or ""
    off, end = e.offset or 0, e.end_offset or 0
    if len(text) > _PARSE_LINE:
        # One huge line: show a window around the error, so the caret
        # stays in what is shown.
        lo = max(0, (off or 1) - 1 - _PARSE_LINE // 2)
        hi = lo + _PARSE_LINE
        text = ("..." if lo else "") + text[lo:hi] + ("..." if hi < len(e.text) else "")
        shift = (3 if lo else 0) - lo
        off = off + shift if off else 0
        end = min(end + shift, len(text) + 1) if end and e.end_lineno == e.lineno else 0
    shown = type(e)(e.msg, ("<cell>", e.lineno, off or None, text, e.end_lineno, end or None))
    detail = "".join(traceback.format_exception_only(type(e), shown))
    return {"type": type(e).__name__, "message": (e.msg or str(e))[:_PARSE_TEXT],
            "line": e.lineno or 0, "col": e.offset or 0,
            "end_line": e.end_lineno or 0, "end_col": e.end_offset or 0,
            "text": text.rstrip("\n")[:_PARSE_TEXT], "detail": detail[:_PARSE_TEXT]}


class _Runner:
    def __init__(self):
        self.worker = None
        self.inbuf = _FrameReader(_PROTO_IN, _MAX_FRAME)
        os.set_blocking(_PROTO_IN, False)
        self.pending = []  # requests read but not served yet
        self.cells = 0
        self.exit = False
        # A sandbox whose stdin outlives its server's attach (a session on a
        # backend shared by several servers) never sees EOF: it ends by
        # itself once no request came for PDM_IDLE_EXIT seconds.
        try:
            self.idle_exit = float(os.environ.get("PDM_IDLE_EXIT") or 0)
        except ValueError:
            self.idle_exit = 0.0
        self.last_input = time.monotonic()

    # Protocol input: called whenever the protocol fd is readable.
    def read_protocol(self, on_interrupt=None):
        self.inbuf.feed()
        self.last_input = time.monotonic()
        try:
            for data in self.inbuf.frames():
                msg = json.loads(data)
                op = msg.get("op")
                if op == "exit":
                    os._exit(0)
                if op == "interrupt":
                    if on_interrupt is not None:
                        on_interrupt()
                    continue
                self.pending.append(msg)
        except ValueError as e:
            _diag("bad frame: %r" % (e,))
            os._exit(0)
        if self.inbuf.eof:
            # The server went away: nobody is left to read a result.
            os._exit(0)

    def serve(self):
        # "runner": whether the bootstrap loaded the executor's compiled
        # code or compiled the source itself.
        _send({"op": "ready", "pid": _PID, "python": sys.version.split()[0],
               "runner": globals().get("_pdm_runner", "compiled")})
        # What every session worker's first call would otherwise pay (the
        # metadata finder's import), paid once here.
        if not _TRANSIENT:
            importlib.invalidate_caches()
        self.spare()
        while True:
            if not self.pending:
                self.idle_wait()
                continue
            req = self.pending.pop(0)
            op = req.get("op")
            try:
                if op == "run":
                    resp = self.run(req)
                elif op == "preload":
                    resp = self.preload(req)
                elif op == "parse":
                    resp = _parse(req)
                elif op == "ping":
                    resp = {"status": "ok"}
                else:
                    resp = _file_op(req)
            except Exception as e:  # noqa: BLE001 - the loop must survive
                _diag("internal error: %s" % traceback.format_exc())
                resp = {"status": "error", "error": {"type": "RunnerError", "message": "%s: %s" % (type(e).__name__, e)}}
            resp["id"] = req.get("id")
            resp["nonce"] = req.get("nonce")
            _send(resp)
            if (self.worker is None or self.worker.dead) and not (op == "run" and req.get("transient")):
                self.spare()

    arm = None  # the guard a spare worker installs ahead of its call (from preload)

    def spare(self):
        """Forks a worker before it is needed, off the call's path; if that
        fails, the next call forks one (and reports why it cannot). With a
        guard from the server (the pool's latest call), the worker installs
        it now, so a call with the same guard does not wait for it."""
        if self.worker is not None:
            self.worker.kill()
            self.worker = None
        try:
            self.worker = _new_worker()
        except OSError as e:
            _diag("spare worker: %s" % e)
            return
        if self.arm is None:
            return
        w = self.worker
        frame = dict(self.arm)
        frame["op"] = "arm"
        try:
            os.set_blocking(w.ctrl, True)
            _write_all(w.ctrl, _encode(frame))
            os.set_blocking(w.ctrl, False)
        except OSError as e:
            _diag("arming the spare worker: %s" % e)
            w.kill()
            self.worker = None
            return
        w.key = _worker_key(frame)
        w.armed = True

    def idle_wait(self):
        p = select.poll()
        p.register(_PROTO_IN, select.POLLIN)
        w = self.worker
        if w is not None and not w.dead:
            for fd in (w.out, w.err):
                if fd not in w.hung_up:
                    p.register(fd, select.POLLIN)
            if w.pidfd >= 0:
                p.register(w.pidfd, select.POLLIN)
            if w.res not in w.hung_up:
                p.register(w.res, select.POLLIN)
        for fd, _ in p.poll(1000 if w is None or w.pidfd >= 0 else 100):
            if fd == _PROTO_IN:
                self.read_protocol()
            elif w is not None and fd in (w.out, w.err, w.res):
                try:
                    if not os.read(fd, 1 << 16):  # written between calls (threads of a session): dropped
                        w.hung_up.add(fd)
                except BlockingIOError:
                    pass
                except OSError:
                    w.hung_up.add(fd)
        _reap(w)
        if w is not None and w.dead:
            w.kill()
            self.worker = None
            self.lost = True
        if self.idle_exit > 0 and not self.pending and time.monotonic() - self.last_input > self.idle_exit:
            _diag("no request for %g s: exiting" % self.idle_exit)
            os._exit(0)

    lost = False

    def preload(self, req):
        """Imports the operator's preload modules into the runner before the
        sandbox waits for code (a pooled sandbox): workers forked later
        inherit them. Module rules do not apply: the list comes from the
        server's configuration, not from a request."""
        failed = []
        resp = {"status": "ok", "failed": failed}
        if req.get("runner_code"):
            # The executor asks a fresh sandbox, before anything else has
            # run in it, for the code its bootstrap compiled, and hands it
            # to later sandboxes: this Python's magic number, then the
            # marshalled code. Taken before the imports below.
            code = globals().get("_pdm_code")
            if isinstance(code, types.CodeType):
                import marshal
                magic = sys.modules["_frozen_importlib_external"].MAGIC_NUMBER
                resp["runner_code"] = base64.b64encode(magic + marshal.dumps(code)).decode("ascii")
            # Where this image keeps its standard library: the executor may
            # mount a copy of the directory that holds it from a volume
            # (see treevol.go).
            resp["stdlib"] = os.path.dirname(os.__file__)
        if self.worker is not None:
            self.worker.kill()
            self.worker = None
        arm = req.get("arm")
        self.arm = arm if isinstance(arm, dict) else None
        for name in req.get("modules") or ():
            try:
                importlib.import_module(name)
            except BaseException as e:  # noqa: BLE001
                failed.append("%s: %s: %s" % (name, type(e).__name__, e))
        _reap(None)
        return resp

    def run(self, req):
        t0 = time.perf_counter()
        lim = req.get("limits") or {}
        max_out = int(lim.get("max_output_bytes") or (1 << 20))
        max_state = int(lim.get("max_state_bytes") or (1 << 20))
        max_img = int(lim.get("max_image_bytes") or (4 << 20))
        max_images = int(lim.get("max_images") or 16)
        timeout = float(lim.get("timeout_ms") or 30000) / 1000.0
        grace = min(max(float(lim.get("grace_ms") or _GRACE * 1000) / 1000.0, 0.1), 10.0)
        transient = bool(req.get("transient"))
        self.cells += 1
        cell_name = "<cell-%d>" % self.cells

        refused = None if req.get("language") == "bash" else _check_facts(req, cell_name)
        if refused is not None:
            refused["duration_ms"] = (time.perf_counter() - t0) * 1000
            return refused

        key = _worker_key(req)
        lost = self.lost
        self.lost = False
        note = ""
        _reap(self.worker)
        w = self.worker
        armed = w is not None and w.armed and not w.dead and w.runs == 0 and w.key == key
        if w is not None and (w.dead or (w.key is not None and w.key != key)):
            # (A spare armed with another guard has run nothing: no note.)
            if w.key is not None and w.key != key and not w.dead and w.runs > 0:
                note = "[the session's interpreter was restarted: this call's capabilities or module rules differ from the ones it ran with]\n"
                lost = True
            if w.dead:
                lost = True
            w.kill()
            w = self.worker = None
        idle_ms, thaw_fail = 0.0, ""
        if w is not None and w.frozen is not None:
            ok, idle_ms, thaw_fail = _thaw(w)
            if not ok:
                w.kill()
                _kill_strays(None)
                w = self.worker = None
                lost = True
        if w is None:
            w = self.worker = _new_worker()
        integrity, why = "verified", []
        if thaw_fail:
            why.append("the session's interpreter was replaced: " + thaw_fail)
        if w.runs > 0:
            integrity = "unverified"
            if w.left:
                why.append("the last call left running: %s (frozen between calls, resumed for this one)" % "; ".join(w.left))
            if idle_ms > 0:
                why.append("the session used %.0f ms of CPU time between calls" % idle_ms)
            why.append("earlier calls' code ran in this interpreter and can change how it reads its requests, "
                       "so the runner cannot show that this reply came only from this call's code")
        w.key = key
        w.runs += 1

        self.drain(w.res, _Capture(1))  # anything a session's thread wrote between calls
        before = _snapshot()
        oom_before = _cgroup_oom_kills()
        out, err = _Capture(max_out), _Capture(max_out)
        child = dict(req)
        child["cell"] = cell_name
        child["nonce"] = nonce = os.urandom(16).hex()
        child.pop("imports", None)
        pending = bytearray(_encode(child))
        reader = _FrameReader(w.res, _result_cap(max_out, max_state, max_img, max_images))
        deadline = time.monotonic() + timeout
        kill_at = None
        signalled = [False]
        reply = None
        fail = None  # (status, type, message) when the worker gave no valid reply

        def interrupt():
            if not signalled[0]:
                signalled[0] = True
                try:
                    os.kill(w.pid, signal.SIGUSR2)
                except OSError:
                    pass
            nonlocal kill_at
            kill_at = time.monotonic() + grace

        while reply is None and fail is None:
            now = time.monotonic()
            if kill_at is None and now >= deadline:
                signalled[0] = True
                try:
                    os.kill(w.pid, signal.SIGUSR1)
                except OSError:
                    pass
                kill_at = now + grace
            if kill_at is not None and now >= kill_at:
                if now >= deadline:
                    fail = ("timeout", "Timeout", "execution exceeded the time limit of %gs and did not stop within %gs; its interpreter was killed" % (timeout, grace))
                else:
                    fail = ("killed", "SandboxKilled", "the run was cancelled and did not stop within %gs; its interpreter was killed" % grace)
                break
            wait = (kill_at if kill_at is not None else deadline) - now
            p = select.poll()
            p.register(_PROTO_IN, select.POLLIN)
            p.register(w.res, select.POLLIN)
            for fd in (w.out, w.err):
                if fd not in w.hung_up:
                    p.register(fd, select.POLLIN)
            if w.pidfd >= 0:
                p.register(w.pidfd, select.POLLIN)
            if pending:
                p.register(w.ctrl, select.POLLOUT)
            try:
                events = p.poll(max(min(int(wait * 1000) + 1, 100 if w.pidfd < 0 else 1 << 30), 1))
            except InterruptedError:
                continue
            for fd, ev in events:
                if fd == _PROTO_IN:
                    self.read_protocol(interrupt)
                elif fd == w.ctrl:
                    try:
                        n = os.write(w.ctrl, pending)
                        del pending[:n]
                    except BlockingIOError:
                        pass
                    except OSError:
                        pending.clear()
                elif fd == w.out or fd == w.err:
                    if not self.drain(fd, out if fd == w.out else err):
                        w.hung_up.add(fd)
                elif fd == w.res:
                    reply, fail = _read_reply(reader)
            if reply is None and fail is None:
                _reap(w)
                if w.dead or reader.eof:
                    # One more look: the reply may be in the pipe already.
                    reply, fail = _read_reply(reader)
                    if reply is None and fail is None:
                        _reap(w)
                        st = w.status
                        how = ""
                        if st is not None and os.WIFSIGNALED(st):
                            how = " (signal %d)" % os.WTERMSIG(st)
                        elif st is not None and os.WIFEXITED(st):
                            how = " (exit code %d)" % os.WEXITSTATUS(st)
                        fail = ("killed", "SandboxKilled", "the process running the code ended without a result%s" % how)

        # Output written before the reply is in the pipes already.
        for fd, cap in ((w.out, out), (w.err, err)):
            self.drain(fd, cap)
        resp = None
        if reply is not None:
            try:
                resp = _clean_reply(reply, nonce, transient, max_out, max_state, max_img, max_images)
            except (ValueError, TypeError, RecursionError) as e:
                fail = ("killed", "SandboxKilled", "%s: %s" % (_INVALID, e))
        if resp is None:
            w.kill()
            lost = True
            status, typ, msg = fail
            resp = {"status": status, "error": {"type": typ, "message": msg, "line": 0, "traceback": ""}}
        if transient:
            # Its sandbox is removed after this call: nothing to wait for.
            w.kill(wait=False)
        elif not w.dead:
            strays = len([p for p in _others() if p != w.pid])
            _kill_strays(w.pid)
            # Nothing of the session runs until its next call.
            if not _freeze(w):
                w.kill()
                _kill_strays(None)
                self.lost = True
                why.append("the session's interpreter did not stop after the call and was killed")
            else:
                left = list(w.left)
                if strays:
                    left.append("%d process%s (killed)" % (strays, "es" if strays > 1 else ""))
                if left:
                    why.append("this call left running: %s; the next call's result says unverified" % "; ".join(left))
        else:
            # The session's interpreter was killed: what it started goes
            # with it, before a new one is forked.
            _kill_strays(None)
        resp["stdout"], resp["stdout_truncated"] = out.text()
        resp["stderr"], resp["stderr_truncated"] = err.text()
        if note:
            resp["stderr"] = note + resp["stderr"]
        oom_after = _cgroup_oom_kills()
        if oom_before is not None and oom_after is not None and oom_after > oom_before and resp["status"] in ("ok", "error", "killed"):
            if resp["status"] == "killed" or resp["status"] == "ok" or resp.get("error") is None:
                resp["status"] = "oom"
                resp["error"] = {"type": "OutOfMemory", "line": 0, "traceback": "",
                                 "message": "a process in the sandbox was killed for exceeding the memory limit"}
        after = _snapshot()
        changed = sorted(p for p, v in after.items() if before.get(p) != v)
        if changed:
            files, size = [], 0
            for f in changed[:_MAX_FILES]:
                size += len(f)
                if size > _MAX_FILES_BYTES:
                    break
                files.append(f)
            resp["files"] = files
        if lost and not transient:
            resp["state_lost"] = True
        if not transient:
            resp["integrity"] = integrity
            resp["integrity_reason"] = "; ".join(why)
            resp["idle_cpu_ms"] = idle_ms
        resp["duration_ms"] = (time.perf_counter() - t0) * 1000
        if armed:
            resp["armed"] = True  # the worker had installed the call's guard before it came
        linecache.cache.pop(cell_name, None)
        return resp

    def drain(self, fd, cap):
        """Reads what is in fd now into cap; False once every writer is gone."""
        while True:
            try:
                b = os.read(fd, 1 << 16)
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not b:
                return False
            cap.add(b)


# ---------------------------------------------------------------- files


class PathError(Exception):
    pass


def _resolve(path):
    if not isinstance(path, str) or "\x00" in path:
        raise PathError("invalid path")
    if any(part == ".." for part in path.split("/")):
        raise PathError("path %r contains '..'" % path)
    root = os.path.realpath(_WORKDIR)
    p = path if os.path.isabs(path) else os.path.join(root, path)
    real = os.path.realpath(p)
    if real != root and not real.startswith(root + "/"):
        raise PathError("path %r is outside the working directory %s" % (path, _WORKDIR))
    return root, real


_MAX_LIST_BYTES = 8 << 20


def _too_large(file_size, msg):
    """A read's file, or a write's file before the call, is file_size
    bytes; the read or write would pass the cap msg names."""
    return {"status": "error", "file_size": file_size, "error": {"type": "FileTooLarge", "message": msg}}


def _no_space(want, free, file_size):
    return {"status": "error", "file_size": file_size, "error": {"type": "NoSpace", "message":
            "%d bytes do not fit, %d bytes are free" % (want, max(free, 0))}}


def _file_op(req):
    op = req["op"]
    try:
        root, real = _resolve(req.get("path") or ".")
        if op == "read":
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                st = os.fstat(fd)
                if not (st.st_mode & 0o170000 == 0o100000):
                    raise PathError("%r is not a regular file" % req.get("path"))
                cap = int(req.get("max_bytes") or (1 << 20))
                if "length" not in req:
                    # The whole file, or nothing when it is larger than cap.
                    if st.st_size > cap:
                        return _too_large(st.st_size, "%r is %d bytes; the maximum is %d bytes" % (req.get("path"), st.st_size, cap))
                    offset, want = 0, cap
                else:
                    # A part: up to length bytes from offset, of a file of
                    # at most max_file_bytes.
                    limit = int(req.get("max_file_bytes") or 0)
                    if limit and st.st_size > limit:
                        return _too_large(st.st_size, "%r is %d bytes; the maximum is %d bytes" % (req.get("path"), st.st_size, limit))
                    offset, want = int(req.get("offset") or 0), min(int(req["length"]), cap)
                    if offset < 0 or offset > st.st_size:
                        return {"status": "error", "file_size": st.st_size, "error": {"type": "BadOffset",
                                "message": "offset %d is past the end of %r (%d bytes)" % (offset, req.get("path"), st.st_size)}}
                chunks, n = [], 0
                while n < want:
                    b = os.pread(fd, min(1 << 20, want - n), offset + n)
                    if not b:
                        break
                    n += len(b)
                    chunks.append(b)
                if "length" not in req and n == want and os.pread(fd, 1, n):
                    return _too_large(n + 1, "%r grew past the maximum of %d bytes" % (req.get("path"), cap))
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            return {"status": "ok", "data": base64.b64encode(b"".join(chunks)).decode("ascii"), "file_size": max(size, offset + n)}
        if op == "write":
            if real == root:
                raise PathError("cannot write the working directory itself")
            data = base64.b64decode(req.get("data") or "")
            append = bool(req.get("append"))
            limit = int(req.get("max_file_bytes") or 0)
            if limit and len(data) > limit:
                return _too_large(0, "%d bytes; the maximum is %d bytes" % (len(data), limit))
            os.makedirs(os.path.dirname(real), exist_ok=True)
            _resolve(os.path.relpath(os.path.dirname(real), root))
            existed = os.path.lexists(real)
            fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | (os.O_APPEND if append else 0), 0o644)
            refused = None
            try:
                st = os.fstat(fd)
                if not (st.st_mode & 0o170000 == 0o100000):
                    raise PathError("%r is not a regular file" % req.get("path"))
                before = st.st_size if append else 0
                vfs = os.fstatvfs(fd)
                free = vfs.f_bavail * vfs.f_frsize + (0 if append else st.st_size)
                if limit and before + len(data) > limit:
                    refused = _too_large(before, "%r is %d bytes; with these %d bytes it would be %d bytes; the maximum is %d bytes"
                                         % (req.get("path"), before, len(data), before + len(data), limit))
                elif len(data) > free:
                    refused = _no_space(len(data), free, st.st_size)
                else:
                    if not append:
                        os.ftruncate(fd, 0)
                    try:
                        _write_all(fd, data)
                    except OSError as e:
                        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                            raise
                        os.ftruncate(fd, before)
                        vfs = os.fstatvfs(fd)
                        refused = _no_space(len(data), vfs.f_bavail * vfs.f_frsize, before)
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            if refused is not None:
                if not existed:
                    os.unlink(real)
                return refused
            return {"status": "ok", "file_size": size}
        if op == "list":
            entries = []
            if not os.path.isdir(real):
                st = os.lstat(real)
                entries.append({"path": os.path.relpath(real, root), "size": st.st_size, "dir": False,
                                "mtime_ns": st.st_mtime_ns})
                return {"status": "ok", "entries": entries}
            stack = [real]
            size = 0
            while stack and len(entries) < 10000 and size < _MAX_LIST_BYTES:
                d = stack.pop()
                with os.scandir(d) as it:
                    for ent in sorted(it, key=lambda e: e.name):
                        st = ent.stat(follow_symlinks=False)
                        is_dir = ent.is_dir(follow_symlinks=False)
                        rel = os.path.relpath(ent.path, root)
                        size += len(rel) + 100
                        entries.append({"path": rel, "size": st.st_size, "dir": is_dir, "mtime_ns": st.st_mtime_ns})
                        if is_dir:
                            stack.append(ent.path)
            entries.sort(key=lambda e: e["path"])
            return {"status": "ok", "entries": entries}
        raise PathError("unknown operation %r" % op)
    except PathError as e:
        return {"status": "error", "error": {"type": "PathError", "message": str(e)}}
    except FileNotFoundError:
        return {"status": "error", "error": {"type": "FileNotFoundError", "message": "%r does not exist" % req.get("path")}}
    except OSError as e:
        return {"status": "error", "error": {"type": type(e).__name__, "message": "%r: %s" % (req.get("path"), e.strerror or e)}}


_Runner().serve()

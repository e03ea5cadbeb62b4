# python-docker-mcp sandbox runner.
#
# Started as `python3 -I -B -c <bootstrap> <this source>` inside the sandbox container. It
# speaks length-prefixed JSON frames (4-byte big-endian length, then UTF-8
# JSON) on the stdin/stdout the container was started with, and keeps both
# away from user code: fd 0 becomes /dev/null, fd 1 and fd 2 become capture
# pipes during a run. Runner diagnostics go to the original stderr.
#
# Frames in:  {"op": "run"|"preload"|"read"|"write"|"list"|"interrupt"|"exit", "id": n, ...}
# Frames out: {"op": "ready", ...} once, then one response per request id.
#
# Defence in depth (the container is the security boundary, not this file):
#   1. the gate's import facts are derived again with CPython's ast from the
#      exact source and the run is refused when they differ;
#   2. an import guard applies the request's module rules to imports made by
#      user code at run time (__import__, importlib, exec'd code, unpickling).

import ast
import base64
import builtins
import importlib
import io
import json
import linecache
import os
import pickle
import queue
import select
import signal
import struct
import sys
import sysconfig
import threading
import time
import traceback
import types
import warnings

_G = globals()
_PID = os.getpid()
_MAX_FRAME = 256 << 20

# Private copies of the protocol streams; fds from os.dup are not inherited
# by child processes.
_PROTO_IN = os.dup(0)
_PROTO_OUT = os.dup(1)
_DIAG = os.dup(2)
_DEVNULL = os.open(os.devnull, os.O_RDWR)
os.dup2(_DEVNULL, 0)
os.dup2(_DEVNULL, 1)
os.dup2(_DEVNULL, 2)
os.set_inheritable(0, True)
os.set_inheritable(1, True)
os.set_inheritable(2, True)

_WORKDIR = os.getcwd()
_SEND_LOCK = threading.Lock()


def _diag(msg):
    try:
        os.write(_DIAG, ("runner: %s\n" % msg).encode("utf-8", "replace"))
    except OSError:
        pass


def _after_fork_in_child():
    # A process forked by user code must never speak the protocol.
    for fd in (_PROTO_IN, _PROTO_OUT):
        try:
            os.close(fd)
        except OSError:
            pass


os.register_at_fork(after_in_child=_after_fork_in_child)


def _in_child():
    return os.getpid() != _PID


def _send(obj):
    data = json.dumps(obj, ensure_ascii=False, allow_nan=False, default=str).encode("utf-8", "surrogatepass")
    buf = struct.pack(">I", len(data)) + data
    with _SEND_LOCK:
        view = memoryview(buf)
        while view:
            n = os.write(_PROTO_OUT, view)
            view = view[n:]


def _read_exact(n):
    chunks = []
    while n > 0:
        b = os.read(_PROTO_IN, min(n, 1 << 20))
        if not b:
            return None
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


def _recv():
    head = _read_exact(4)
    if head is None:
        return None
    (n,) = struct.unpack(">I", head)
    if n > _MAX_FRAME:
        raise ValueError("frame of %d bytes exceeds %d" % (n, _MAX_FRAME))
    data = _read_exact(n)
    if data is None:
        return None
    return json.loads(data)


# ---------------------------------------------------------------- output


class _Capture:
    """Captures one file descriptor into a pipe drained by a thread, keeping
    the head and the tail of at most `cap` bytes and counting the rest."""

    def __init__(self, fd, cap):
        self.fd = fd
        self.half = max(cap // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.stopping = False
        self.r, w = os.pipe()
        self.wake_r, self.wake_w = os.pipe()
        os.dup2(w, fd)
        os.close(w)
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _add(self, b):
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

    def _drain(self):
        p = select.poll()
        p.register(self.r, select.POLLIN)
        p.register(self.wake_r, select.POLLIN)
        while True:
            try:
                events = p.poll(0 if self.stopping else -1)
            except InterruptedError:
                continue
            got = False
            for fd, ev in events:
                if fd == self.wake_r:
                    self.stopping = True
                    os.read(self.wake_r, 16)
                    continue
                b = os.read(self.r, 1 << 16)
                if not b:
                    return
                self._add(b)
                got = True
            if self.stopping and not got and not any(fd == self.r for fd, _ in events):
                return

    def finish(self):
        """Detaches the descriptor (it becomes /dev/null), drains what was
        written so far and returns (text, truncated)."""
        os.dup2(_DEVNULL, self.fd)
        os.write(self.wake_w, b"x")
        self.thread.join()
        for fd in (self.r, self.wake_r, self.wake_w):
            os.close(fd)
        dropped = self.total - len(self.head) - len(self.tail)
        if dropped > 0:
            data = bytes(self.head) + ("\n... [%d bytes dropped] ...\n" % dropped).encode() + bytes(self.tail)
        else:
            data = bytes(self.head) + bytes(self.tail)
        return data.decode("utf-8", "replace"), dropped > 0


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
        except Exception:
            pass


# ---------------------------------------------------------------- interrupts


class SandboxTimeout(BaseException):
    """Raised in user code when the run exceeds its time limit."""


class SandboxInterrupt(BaseException):
    """Raised in user code when the caller cancels the run."""


class _Run:
    running = False
    reason = None
    done = None


_RUN = _Run()
_MAIN_IDENT = threading.main_thread().ident
_INTERRUPT_SIGNAL = signal.SIGUSR1


def _on_interrupt(signum, frame):
    if _in_child() or not _RUN.running:
        return
    if _RUN.reason == "timeout":
        raise SandboxTimeout("execution exceeded the time limit")
    if _RUN.reason == "interrupt":
        raise SandboxInterrupt("execution was cancelled")


signal.signal(_INTERRUPT_SIGNAL, _on_interrupt)


def _kick(reason):
    if _RUN.running and _RUN.reason is None:
        _RUN.reason = reason
        try:
            signal.pthread_kill(_MAIN_IDENT, _INTERRUPT_SIGNAL)
        except Exception as e:  # pragma: no cover
            _diag("interrupt failed: %r" % (e,))


def _watchdog(done, timeout):
    if not done.wait(timeout):
        _kick("timeout")


# ---------------------------------------------------------------- packages

# Packages installed by install-package live on a read-only volume mounted
# here (absent in sandboxes without one). The directory is appended, so an
# installed package never shadows the standard library or the image's
# packages, and .pth files in it are not processed (it is no site dir).
# Every run calls importlib.invalidate_caches(), so a package installed
# into a running session is importable in its next call.
_PACKAGES = "/opt/pdm-packages"
if _PACKAGES not in sys.path:
    sys.path.append(_PACKAGES)


# ---------------------------------------------------------------- import guard


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
    dirs.discard("/")
    return tuple(sorted(d.rstrip("/") + "/" for d in dirs))


_TRUSTED = _trusted_dirs()


class _Rules:
    active = False
    allowed = ()
    blocked = ()


_RULES = _Rules()


class ModuleBlockedError(ImportError):
    """An import made by user code that the sandbox's module rules forbid."""


def _is_user_frame(f):
    if f is None:
        return False
    if f.f_globals is _G:
        return False
    fn = f.f_code.co_filename or ""
    if fn.startswith("<frozen "):
        return False
    if fn.startswith("<"):
        return True
    user = _FILE_IS_USER.get(fn)
    if user is None:
        real = os.path.realpath(fn)
        user = not any(real.startswith(d) for d in _TRUSTED)
        if len(_FILE_IS_USER) < 100000:
            _FILE_IS_USER[fn] = user
    return user


_FILE_IS_USER = {}


def _module_denied(mod):
    for b in _RULES.blocked:
        if mod == b or mod.startswith(b + "."):
            return "module %r is blocked (blocked_modules: %s)" % (mod, b)
    if _RULES.allowed and not any(mod == a or mod.startswith(a + ".") for a in _RULES.allowed):
        return "module %r is not in allowed_modules (%s)" % (mod, ", ".join(_RULES.allowed))
    return None


def _check_import(name, fromlist=()):
    why = _module_denied(name)
    if why is None and fromlist:
        for n in fromlist:
            if isinstance(n, str) and n != "*":
                why = _module_denied(name + "." + n)
                if why:
                    break
    if why:
        raise ModuleBlockedError("import of %r refused at run time: %s" % (name, why), name=name)


_orig_import = builtins.__import__


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    if _RULES.active and level == 0 and _is_user_frame(sys._getframe(1)):
        _check_import(name, fromlist or ())
    return _orig_import(name, globals, locals, fromlist, level)


_orig_import_module = importlib.import_module


def _guarded_import_module(name, package=None):
    if _RULES.active and not name.startswith(".") and _is_user_frame(sys._getframe(1)):
        _check_import(name)
    return _orig_import_module(name, package)


_guarded_import_module.__doc__ = _orig_import_module.__doc__
builtins.__import__ = _guarded_import
importlib.import_module = _guarded_import_module
importlib.__import__ = _guarded_import

_OrigUnpickler = pickle.Unpickler


class _GuardedUnpickler(_OrigUnpickler):
    def find_class(self, module, name):
        if _RULES.active:
            _check_import(module)
        return super().find_class(module, name)


def _guarded_loads(data, /, *, fix_imports=True, encoding="ASCII", errors="strict", buffers=None):
    return _GuardedUnpickler(io.BytesIO(data), fix_imports=fix_imports, encoding=encoding,
                             errors=errors, buffers=buffers).load()


def _guarded_load(file, *, fix_imports=True, encoding="ASCII", errors="strict", buffers=None):
    return _GuardedUnpickler(file, fix_imports=fix_imports, encoding=encoding,
                             errors=errors, buffers=buffers).load()


pickle.Unpickler = _GuardedUnpickler
pickle.loads = _guarded_loads
pickle.load = _guarded_load


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


# ---------------------------------------------------------------- runs

_USER = types.ModuleType("__main__")
_USER.__dict__["__builtins__"] = builtins
sys.modules["__main__"] = _USER
if _WORKDIR not in sys.path:
    sys.path.append(_WORKDIR)
_CELL = [0]

warnings.filterwarnings("ignore", message=".*non-interactive.*")
warnings.filterwarnings("ignore", message=".*More than .* figures have been opened.*")


def _user_traceback(tb):
    entries = [fs for fs in traceback.extract_tb(tb) if fs.filename != "<pdm-runner>"]
    i = 0
    while i < len(entries) and not entries[i].filename.startswith("<cell"):
        i += 1
    return entries[i:] if i < len(entries) else entries


def _kill_strays():
    """Kills every process of the sandbox except the init process and the
    runner: what a call started does not outlive it in a session."""
    for _ in range(10):
        others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, _PID)]
        if not others:
            break
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
        time.sleep(0.01)


def _error_info(e, cell_name):
    info = {"type": type(e).__name__, "message": str(e), "line": 0, "traceback": ""}
    if isinstance(e, SyntaxError):
        info["line"] = e.lineno or 0
        info["message"] = e.msg or str(e)
        info["traceback"] = "".join(traceback.format_exception_only(type(e), e))
        return info
    entries = _user_traceback(e.__traceback__)
    for fs in entries:
        if fs.filename == cell_name:
            info["line"] = fs.lineno or 0
    tb = "Traceback (most recent call last):\n" + "".join(traceback.format_list(entries))
    tb += "".join(traceback.format_exception_only(type(e), e))
    info["traceback"] = tb
    return info


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


def _round_trips(v):
    try:
        enc = json.dumps(v, allow_nan=False)
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


def _collect_state(ns, max_bytes):
    state, dropped, size = {}, [], 2
    for name, v in list(ns.items()):
        if name.startswith("_") or isinstance(v, types.ModuleType):
            continue
        enc = _round_trips(v)
        if enc is None:
            dropped.append({"name": name, "type": _type_name(v)})
            continue
        size += len(json.dumps(name)) + 1 + len(enc.encode("utf-8")) + 1
        state[name] = v
    if size > max_bytes:
        raise OverflowError("state out is %d bytes; the maximum is %d bytes (limits.max_state_bytes)" % (size, max_bytes))
    return state, dropped


def _figures(max_images, max_bytes):
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return [], 0
    images, total, skipped = [], 0, 0
    try:
        nums = list(plt.get_fignums())
        for num in nums:
            try:
                fig = plt.figure(num)
                buf = io.BytesIO()
                fig.savefig(buf, format="png")
                data = buf.getvalue()
            except Exception as e:
                _diag("figure %s: %r" % (num, e))
                skipped += 1
                continue
            if len(images) >= max_images or total + len(data) > max_bytes:
                skipped += 1
                continue
            w, h = struct.unpack(">II", data[16:24])
            total += len(data)
            images.append({"png": base64.b64encode(data).decode("ascii"), "width": w, "height": h})
        plt.close("all")
    except Exception as e:
        _diag("figures: %r" % (e,))
    return images, skipped


def _cgroup_oom_kills():
    for path, key in (("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill"),
                      ("/sys/fs/cgroup/memory.events", "oom_kill")):
        try:
            with open(path) as f:
                for line in f:
                    k, _, v = line.partition(" ")
                    if k == key:
                        return int(v)
        except (OSError, ValueError):
            continue
    return None


def _run(req):
    t0 = time.perf_counter()
    rid = req.get("id")
    lim = req.get("limits") or {}
    max_out = int(lim.get("max_output_bytes") or (1 << 20))
    max_state = int(lim.get("max_state_bytes") or (1 << 20))
    max_img = int(lim.get("max_image_bytes") or (4 << 20))
    max_images = int(lim.get("max_images") or 16)
    timeout = float(lim.get("timeout_ms") or 30000) / 1000.0
    transient = bool(req.get("transient"))
    code = req.get("code") or ""
    resp = {"id": rid, "status": "ok", "stdout": "", "stderr": ""}
    importlib.invalidate_caches()

    _CELL[0] += 1
    cell_name = "<cell-%d>" % _CELL[0]
    try:
        tree = ast.parse(code, filename=cell_name, mode="exec")
    except (SyntaxError, ValueError) as e:
        resp["status"] = "error"
        resp["error"] = _error_info(e, cell_name) if isinstance(e, SyntaxError) else {
            "type": type(e).__name__, "message": str(e), "line": 0, "traceback": ""}
        resp["duration_ms"] = (time.perf_counter() - t0) * 1000
        return resp

    want = _gate_imports(req.get("imports"))
    got = _derive_imports(tree)
    if want != got:
        parts = []
        missing = _diff(got, want)
        extra = _diff(want, got)
        if missing:
            parts.append("CPython sees " + "; ".join(_fmt_fact(f) for f in missing) + " which the gate did not report")
        if extra:
            parts.append("the gate reported " + "; ".join(_fmt_fact(f) for f in extra) + " which CPython does not see")
        resp["status"] = "refused"
        resp["error"] = {"type": "FactMismatch", "line": (missing or extra)[0][5],
                         "message": "refusing to run: the static gate and CPython disagree about the imports: " + "; ".join(parts),
                         "traceback": ""}
        resp["duration_ms"] = (time.perf_counter() - t0) * 1000
        return resp

    ns = _USER.__dict__
    if transient and isinstance(req.get("state"), dict):
        ns.update(req["state"])

    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    linecache.cache[cell_name] = (len(code), None, code.splitlines(True), cell_name)

    mods = req.get("modules") or {}
    _RULES.allowed = tuple(mods.get("allowed") or ())
    _RULES.blocked = tuple(mods.get("blocked") or ())
    _RULES.active = bool(_RULES.allowed or _RULES.blocked)

    before = _snapshot()
    oom_before = _cgroup_oom_kills()
    out = _Capture(1, max_out)
    err = _Capture(2, max_out)
    _fresh_stdio()
    value = None
    exc = None
    done = threading.Event()
    _RUN.reason = None
    _RUN.done = done
    watchdog = threading.Thread(target=_watchdog, args=(done, timeout), daemon=True)
    try:
        try:
            _RUN.running = True
            watchdog.start()
            exec(compile(tree, cell_name, "exec", dont_inherit=True), ns)
            if last is not None:
                value = eval(compile(last, cell_name, "eval", dont_inherit=True), ns)
        finally:
            _RUN.running = False
            done.set()
    except BaseException as e:  # noqa: BLE001 - everything user code raises is reported
        exc = e
    if _in_child():
        _flush_stdio()
        os._exit(0 if exc is None or (isinstance(exc, SystemExit) and exc.code in (0, None)) else 1)
    reason = _RUN.reason
    _flush_stdio()
    images, skipped = _figures(max_images, max_img)
    if skipped:
        try:
            sys.stderr.write("[%d figure(s) not returned: limit of %d images / %d bytes]\n" % (skipped, max_images, max_img))
        except Exception:
            pass
        _flush_stdio()
    resp["stdout"], resp["stdout_truncated"] = out.finish()
    resp["stderr"], resp["stderr_truncated"] = err.finish()
    sys.stdout = sys.__stdout__
    sys.stderr = sys.__stderr__
    _RULES.active = False
    if images:
        resp["images"] = images

    if exc is not None:
        info = _error_info(exc, cell_name)
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
    elif reason == "timeout":
        resp["status"] = "timeout"
    elif value is not None:
        try:
            r = repr(value)
        except BaseException as e:  # noqa: BLE001
            r = "<repr failed: %s: %s>" % (type(e).__name__, e)
        if len(r) > max_out:
            r = r[: max_out // 2] + "\n... [%d characters dropped] ...\n" % (len(r) - max_out) + r[-(max_out // 2):]
        resp["result"] = r

    oom_after = _cgroup_oom_kills()
    if oom_before is not None and oom_after is not None and oom_after > oom_before and resp["status"] in ("ok", "error"):
        resp["status"] = "oom"
        resp.setdefault("error", {"type": "OutOfMemory", "line": 0, "traceback": "",
                                  "message": "a process in the sandbox was killed for exceeding the memory limit"})

    if transient:
        try:
            state, dropped = _collect_state(ns, max_state)
            resp["state"] = state
            if dropped:
                resp["dropped_state"] = dropped
        except OverflowError as e:
            if resp["status"] == "ok":
                resp["status"] = "error"
            resp["error"] = {"type": "StateTooLarge", "message": str(e), "line": 0, "traceback": ""}

    if not transient:
        _kill_strays()
    after = _snapshot()
    changed = sorted(p for p, v in after.items() if before.get(p) != v)
    if changed:
        resp["files"] = changed[:1000]
    resp["duration_ms"] = (time.perf_counter() - t0) * 1000
    return resp


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


def _file_op(req):
    op = req["op"]
    rid = req.get("id")
    try:
        root, real = _resolve(req.get("path") or ".")
        if op == "read":
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW)
            try:
                st = os.fstat(fd)
                if not (st.st_mode & 0o170000 == 0o100000):
                    raise PathError("%r is not a regular file" % req.get("path"))
                cap = int(req.get("max_bytes") or (1 << 20))
                if st.st_size > cap:
                    raise PathError("%r is %d bytes; the maximum is %d bytes" % (req.get("path"), st.st_size, cap))
                chunks, n = [], 0
                while True:
                    b = os.read(fd, 1 << 20)
                    if not b:
                        break
                    n += len(b)
                    if n > cap:
                        raise PathError("%r grew past the maximum of %d bytes" % (req.get("path"), cap))
                    chunks.append(b)
            finally:
                os.close(fd)
            return {"id": rid, "status": "ok", "data": base64.b64encode(b"".join(chunks)).decode("ascii")}
        if op == "write":
            if real == root:
                raise PathError("cannot write the working directory itself")
            data = base64.b64decode(req.get("data") or "")
            os.makedirs(os.path.dirname(real), exist_ok=True)
            _resolve(os.path.relpath(os.path.dirname(real), root))
            fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            return {"id": rid, "status": "ok"}
        if op == "list":
            entries = []
            if not os.path.isdir(real):
                st = os.lstat(real)
                entries.append({"path": os.path.relpath(real, root), "size": st.st_size, "dir": False,
                                "mtime_ns": st.st_mtime_ns})
                return {"id": rid, "status": "ok", "entries": entries}
            stack = [real]
            while stack and len(entries) < 10000:
                d = stack.pop()
                with os.scandir(d) as it:
                    for ent in sorted(it, key=lambda e: e.name):
                        st = ent.stat(follow_symlinks=False)
                        is_dir = ent.is_dir(follow_symlinks=False)
                        entries.append({"path": os.path.relpath(ent.path, root), "size": st.st_size,
                                        "dir": is_dir, "mtime_ns": st.st_mtime_ns})
                        if is_dir:
                            stack.append(ent.path)
            entries.sort(key=lambda e: e["path"])
            return {"id": rid, "status": "ok", "entries": entries}
        raise PathError("unknown operation %r" % op)
    except PathError as e:
        return {"id": rid, "status": "error", "error": {"type": "PathError", "message": str(e)}}
    except FileNotFoundError:
        return {"id": rid, "status": "error", "error": {"type": "FileNotFoundError",
                                                       "message": "%r does not exist" % req.get("path")}}
    except OSError as e:
        return {"id": rid, "status": "error", "error": {"type": type(e).__name__,
                                                       "message": "%r: %s" % (req.get("path"), e.strerror or e)}}


# ---------------------------------------------------------------- preload


def _preload(req):
    """Imports the operator's preload modules before the sandbox waits for
    code (a pooled sandbox). Module rules do not apply: the list comes from
    the server's configuration, not from a request."""
    failed = []
    for name in req.get("modules") or ():
        try:
            _orig_import_module(name)
        except BaseException as e:  # noqa: BLE001
            failed.append("%s: %s: %s" % (name, type(e).__name__, e))
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass
    # One empty run walks every path a real run takes (capture threads,
    # figures, state, workspace snapshot) so their first-use costs are paid
    # here and not by the sandbox's one real call.
    _run({"id": None, "code": "pass", "transient": True, "imports": []})
    linecache.cache.pop("<cell-%d>" % _CELL[0], None)
    _CELL[0] = 0
    return {"id": req.get("id"), "status": "ok", "failed": failed}


# ---------------------------------------------------------------- loop


def _reader(q):
    while True:
        try:
            msg = _recv()
        except Exception as e:
            _diag("bad frame: %r" % (e,))
            msg = None
        if msg is None:
            # The server went away: nobody is left to read a result.
            os._exit(0)
        op = msg.get("op")
        if op == "interrupt":
            _kick("interrupt")
        elif op == "exit":
            os._exit(0)
        else:
            q.put(msg)


def _main():
    q = queue.Queue()
    threading.Thread(target=_reader, args=(q,), daemon=True).start()
    _send({"op": "ready", "pid": _PID, "python": sys.version.split()[0]})
    while True:
        req = q.get()
        op = req.get("op")
        try:
            if op == "run":
                resp = _run(req)
            elif op == "preload":
                resp = _preload(req)
            else:
                resp = _file_op(req)
        except BaseException as e:  # noqa: BLE001 - the loop must survive
            if _in_child():
                os._exit(1)
            _diag("internal error: %s" % traceback.format_exc())
            resp = {"id": req.get("id"), "status": "error",
                    "error": {"type": "RunnerError", "message": "%s: %s" % (type(e).__name__, e)}}
        if _in_child():
            os._exit(0)
        _send(resp)


_main()

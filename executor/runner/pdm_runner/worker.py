# worker.py: the worker: the forked process that runs user code (python or
# bash), its signals, and the runner's handle on it.
# A part of the sandbox runner; see ../README.md.

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


class _Worker:
    """The runner's view of one worker process."""

    def __init__(self, warm=None):
        # warm: a spare, forked ahead of its call, warms itself up for the
        # modules listed (warm.py) while it waits; None: a call waits now.
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
                _worker_main(ctrl_r, res_w, out_w, err_w, warm)
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


def _worker_main(ctrl_r, res_w, out_w, err_w, warm=None):
    # Only what the worker needs: no protocol, no diagnostics channel.
    global _PROTO_IN, _PROTO_OUT, _DIAG, _libc
    _PROTO_IN = _PROTO_OUT = _DIAG = -1
    _OOM_FD.clear()  # the runner's, closed below
    _TOPS.clear()  # likewise
    # The runner's /proc, kept only to write oom_score_adj below (a path
    # from / would ask the root's file system first: see _proc_dir).
    proc = _PROC_FD[0] if _PROC_FD else -1
    _PROC_FD.clear()
    os.dup2(_DEVNULL, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    null = os.dup(_DEVNULL)
    # Everything else the runner held is closed: one close_range per gap
    # between the kept descriptors, not a close per descriptor number.
    lo = 3
    for fd in sorted({ctrl_r, res_w, null, proc} - {-1}):
        if fd >= lo:
            os.closerange(lo, fd)
            lo = fd + 1
    os.closerange(lo, 1024)
    # The OOM killer takes the worker first: its oom_score_adj is written
    # while it is dumpable for a moment (its /proc files are the user's
    # then), before any user code. Then it is non-dumpable for good (the
    # capability filter refuses PR_SET_DUMPABLE): its /proc/self/mem,
    # which writes past page protections, is root's, and so are its fd,
    # environ and map_files.
    _libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
    try:
        if proc < 0:
            f = open("/proc/self/oom_score_adj", "w")
        else:
            f = open("self/oom_score_adj", "w", opener=lambda path, flags: os.open(path, flags, dir_fd=proc))
        with f:
            f.write("1000")
    except OSError:
        pass
    if proc >= 0:
        os.close(proc)
    if _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        os._exit(70)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGUSR1, _on_signal)
    signal.signal(signal.SIGUSR2, _on_signal)
    _fresh_stdio()
    _reseed()

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
    if warm is not None:
        _warm(ctrl_r, warm, reader)
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


def _reseed():
    """Every worker draws its own random streams: workers are forked from
    one runner, whose generators (seeded once, at import) they would
    otherwise all continue alike."""
    rnd = sys.modules.get("random")
    if rnd is not None:
        rnd.seed()
    nprnd = sys.modules.get("numpy.random")
    if nprnd is not None:
        try:
            nprnd.seed()
        except Exception:  # noqa: BLE001 - a numpy without the legacy global
            pass


def threading_ident():
    import _thread
    return _thread.get_ident()


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


def _compile_cell(code, cell_name):
    """A cell compiled as a call runs it: its body, and its last
    expression (None when the cell does not end in one), evaluated apart
    for the call's result. The spare's warm-up takes this path too."""
    tree = ast.parse(code, filename=cell_name, mode="exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    body = compile(tree, cell_name, "exec", dont_inherit=True)
    return body, compile(last, cell_name, "eval", dont_inherit=True) if last is not None else None


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
    body = tail = refused = None
    try:
        body, tail = _compile_cell(code, cell_name)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        # What CPython's compiler refuses after its parser (the runner's
        # facts check) accepted it: 'return' outside a function, 'nonlocal'
        # at module level. The call's error, raised before any of its code
        # runs; the worker (a session's interpreter) lives on.
        refused = e
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
    linecache.cache[cell_name] = (len(code), None, code.splitlines(True), cell_name)

    builtins.input = _no_input
    builtins.display = _display
    _RICH.reset(max_images, max_img)
    exc = None
    value = None
    images, skipped = [], 0
    state = None
    _RUN.reason = None
    try:
        _RUN.running = True
        try:
            if refused is not None:
                raise refused
            exec(body, ns)
            if tail is not None:
                value = eval(tail, ns)
        except BaseException as e:  # noqa: BLE001 - everything user code raises is reported
            exc = e
        _flush_stdio()
        # Figures, the result's repr and the state are the call's work too:
        # they happen inside its time limit.
        if not isinstance(exc, (SandboxTimeout, SandboxInterrupt)):
            if value is not None and exc is None:
                _RICH.add(value, "result")
            # Figures get what the rich PNGs left of the image limits.
            images, skipped = _figures(max_images - _RICH.pngs, max_img - _RICH.png)
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
    if _RICH.items:
        resp["rich"] = _RICH.items
    if _RICH.dropped:
        resp["rich_dropped"] = _RICH.dropped
    _RICH.reset()  # the reply holds them now

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

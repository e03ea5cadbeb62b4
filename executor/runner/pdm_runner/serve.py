# serve.py: the runner's loop (process 1): requests in, the worker driven
# through one call under its time limit, replies out.
# A part of the sandbox runner; see ../README.md.

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
                if self.forked:
                    # Before waiting: the pages this fork shared (warm.py).
                    # Stopped by a request: again once it is served.
                    self.forked = not _warm_runner()
                self.idle_wait()
                continue
            req = self.pending.pop(0)
            op = req.get("op")
            if op != "reset":
                self.early = None  # made for a reset that did not come next: reset again
            try:
                if op == "run":
                    resp = self.run(req)
                elif op == "preload":
                    resp = self.preload(req)
                elif op == "parse":
                    resp = _parse(req)
                elif op == "ping":
                    resp = {"status": "ok"}
                elif op == "reset":
                    resp = self.reset(req)
                else:
                    resp = _file_op(req)
            except Exception as e:  # noqa: BLE001 - the loop must survive
                _diag("internal error: %s" % traceback.format_exc())
                resp = {"status": "error", "error": {"type": "RunnerError", "message": "%s: %s" % (type(e).__name__, e)}}
            resp["id"] = req.get("id")
            resp["nonce"] = req.get("nonce")
            _send(resp)
            if op == "run" and self.early_reset(req, resp):
                continue
            if (self.worker is None or self.worker.dead) and not (op == "run" and req.get("transient")):
                self.spare()

    early = None  # the reset made right after a kept call's reply, for the server's reset request

    def early_reset(self, req, resp):
        """The reset made right after a kept call's reply (reset.py)."""
        return _early_reset(self, req, resp)

    arm = None  # the guard a spare worker installs ahead of its call (from preload)
    warm = ()  # the modules of the last call here that a spare worker warms up for

    forked = False  # a worker was forked since the runner's last warm-up

    def spare(self):
        """Forks a worker before it is needed, off the call's path; if that
        fails, the next call forks one (and reports why it cannot). With a
        guard from the server (the pool's latest call), the worker installs
        it now, so a call with the same guard does not wait for it."""
        if self.worker is not None:
            self.worker.kill()
            self.worker = None
        if self.arm is not None:
            try:
                caps = self.arm.get("capabilities")
                _seccomp_filter(caps if isinstance(caps, dict) else None)
            except (OSError, TypeError, ValueError):
                pass  # the worker builds it, and reports what fails
        try:
            self.worker = _new_worker(self.warm)
        except OSError as e:
            _diag("spare worker: %s" % e)
            return
        self.forked = True
        self.arm_spare()

    def arm_spare(self):
        """Sends the spare worker the guard to install ahead of its call
        (self.arm), if there is one and the spare has none yet."""
        w = self.worker
        if self.arm is None or w is None or w.dead or w.armed or w.runs:
            return
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
        if req.get("modules"):
            _collapse_memory()  # warm.py: cheaper forks of what they left
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

        if transient and req.get("keep") and self.base is None and not self.base_error:
            # Before the first call's code: what a reset restores (only
            # in a sandbox the server may keep: the walk costs a call
            # about a millisecond).
            try:
                self.base = _Baseline(self.worker)
            except (_ResetFailed, OSError) as e:
                self.base_error = str(e)
        refused = None if req.get("language") == "bash" else _check_facts(req, cell_name)
        if refused is not None:
            refused["duration_ms"] = (time.perf_counter() - t0) * 1000
            return refused

        key = _worker_key(req)
        self.warm = _warm_modules(req.get("imports"))
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
        # With "stream", output frames carry the streams while the code
        # runs (live.py); the reply still holds them whole, capped.
        live = {}
        if req.get("stream"):
            live = {w.out: _Live("stdout", req), w.err: _Live("stderr", req)}
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
            for lv in live.values():
                d = lv.due()
                if d is not None:
                    wait = min(wait, d)
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
                    if not self.drain(fd, out if fd == w.out else err, live.get(fd)):
                        w.hung_up.add(fd)
                elif fd == w.res:
                    reply, fail = _read_reply(reader)
            for lv in live.values():
                if lv.due() == 0.0:
                    lv.flush()
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
            self.drain(fd, cap, live.get(fd))
        for lv in live.values():
            lv.flush(True)  # before the reply: the frames carry the streams in order
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

    base = None  # the sandbox before its first call (a _Baseline), once taken
    base_error = ""  # why none could be taken

    def reset(self, req):
        """Op "reset" (reset.py)."""
        return _reset_op(self, req)

    def drain(self, fd, cap, lv=None):
        """Reads what is in fd now into cap (and lv, a _Live: the run's
        output frames); False once every writer is gone."""
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
            if lv is not None:
                lv.add(b)

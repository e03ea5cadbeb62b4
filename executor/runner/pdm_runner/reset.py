# reset.py: a transient sandbox made ready for its principal's next call
# (op "reset", see executor/README.md "Reused sandboxes"): what a call left
# is removed and every restoration is checked, never assumed. The state
# the sandbox is restored to is taken before its first call's request
# reaches the worker (_baseline), when no user code has run in it.
# A part of the sandbox runner; see ../README.md.

# ---------------------------------------------------------------- reset

_IPC_RMID = 0
_MAX_BASELINE = 20000  # entries of the writable paths a baseline holds
# File systems whose contents go with the processes that made them (or
# that nothing here writes): not walked.
_NOT_WALKED = ("proc", "sysfs", "cgroup", "cgroup2", "devpts", "securityfs", "debugfs", "bpf", "tracefs")


class _ResetFailed(Exception):
    """The sandbox cannot be shown to be as it was: it is not reused."""


def _unescape(s):
    # mountinfo escapes space, tab, newline and backslash as \ooo.
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)


def _mounts(mountinfo="/proc/self/mountinfo"):
    """(mount point, its options, file system type) of each mount."""
    with open(mountinfo) as f:
        for line in f:
            parts = line.split()
            if "-" not in parts:
                continue
            sep = parts.index("-")
            yield _unescape(parts[4]), parts[5].split(","), parts[sep + 1]


def _writable_mounts(mountinfo="/proc/self/mountinfo"):
    """The sandbox's read-write mount points whose contents outlive a
    process (tmpfs /tmp, /workspace, /dev/shm, /dev and the like), outside
    /proc and /sys. A writable root file system cannot be walked: it
    fails the reset."""
    out = []
    for mnt, opts, fstype in _mounts(mountinfo):
        if "rw" not in opts or fstype in _NOT_WALKED:
            continue
        if mnt in ("/proc", "/sys") or mnt.startswith("/proc/") or mnt.startswith("/sys/"):
            continue
        if mnt == "/":
            raise _ResetFailed("the root file system is writable (docker.read_only is false), so what a call "
                               "wrote anywhere cannot be found and removed")
        out.append(mnt)
    return sorted(set(out))


def _walk(mounts, limit=_MAX_BASELINE):
    """{path: facts} of everything under mounts, not crossing into other
    mounts. A file's facts include its inode change time, which a process
    cannot set: content or metadata changed since is seen even when size
    and modification time were put back. A directory's are its type,
    mode and owner (its times change with its entries, which are listed
    themselves).

    Each mount is walked from one descriptor of its top, with names
    relative to it, and that top is opened relative to the descriptor the
    baseline holds (_hold_tops): no lookup starts at /, whose file system,
    on a FUSE storage driver, answers each from its own process (a round
    trip per path, tens of them per reset before)."""
    seen = {}
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    for root in mounts:
        try:
            held = _TOPS.get(root, -1)
            top = os.open(".", flags, dir_fd=held) if held >= 0 else os.open(root, flags)
        except PermissionError:
            raise _ResetFailed("%s cannot be read (its mode was changed)" % root)
        except OSError:
            continue
        try:
            dev = os.fstat(top).st_dev
            stack = [""]  # directories to list, relative to top
            while stack:
                rel = stack.pop()
                d = root + "/" + rel if rel else root
                try:
                    fd = os.open(rel, flags, dir_fd=top) if rel else top
                except PermissionError:
                    raise _ResetFailed("%s cannot be read (its mode was changed)" % d)
                except OSError:
                    continue
                try:
                    _walk_dir(fd, rel, d, dev, stack, seen, limit)
                finally:
                    if fd != top:
                        os.close(fd)
            st = os.fstat(top)
            seen[root] = ("d", st.st_mode, st.st_uid, st.st_gid)
        finally:
            os.close(top)
    return seen


_TOPS = {}  # {mount point: a descriptor of its top}, held from the baseline on


def _hold_tops(mounts):
    """Opens the top of each mount once, for _walk to open it again
    relative to that descriptor rather than by a path from /. Workers
    close them."""
    for mnt in mounts:
        if mnt not in _TOPS:
            try:
                _TOPS[mnt] = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                pass  # walked by its path


def _walk_dir(fd, rel, d, dev, stack, seen, limit):
    """The entries of directory d (open as fd, rel from its mount's top)
    into seen, its subdirectories onto stack."""
    try:
        it = os.scandir(fd)  # entries are stat'ed relative to fd: it stays open until the end
    except PermissionError:
        raise _ResetFailed("%s cannot be read (its mode was changed)" % d)
    except OSError:
        return
    with it:
        for ent in it:
            try:
                st = ent.stat(follow_symlinks=False)
            except OSError:
                continue
            path = d + "/" + ent.name
            if stat.S_ISDIR(st.st_mode):
                if st.st_dev != dev:
                    continue  # another mount: walked on its own, or not at all
                seen[path] = ("d", st.st_mode, st.st_uid, st.st_gid)
                stack.append(rel + "/" + ent.name if rel else ent.name)
            else:
                seen[path] = ("f", st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_ino,
                              st.st_ctime_ns, st.st_rdev)
            if len(seen) > limit:
                raise _ResetFailed("more than %d entries in the writable paths" % limit)


def _sysv_ids():
    """{kind: [id, ...]} of the IPC namespace's System V objects."""
    out = {}
    for kind in ("shm", "sem", "msg"):
        ids = []
        try:
            with _proc_open("sysvipc/" + kind) as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    if len(fields) > 1:
                        ids.append(int(fields[1]))
        except OSError:
            pass
        out[kind] = ids
    return out


def _abstract_sockets():
    """Names of the network namespace's abstract unix sockets."""
    names = set()
    try:
        with _proc_open("net/unix") as f:
            next(f, None)
            for line in f:
                fields = line.split()
                if len(fields) >= 8 and fields[7].startswith("@"):
                    names.add(fields[7])
    except OSError:
        pass
    return names


def _process_facts():
    import resource
    mask = os.umask(0o022)
    os.umask(mask)
    limits = {}
    for name in dir(resource):
        if name.startswith("RLIMIT_"):
            try:
                limits[name] = resource.getrlimit(getattr(resource, name))
            except (ValueError, OSError):
                pass
    return {"cwd": os.getcwd(), "umask": mask, "env": dict(os.environ), "rlimits": limits}


def _fds(worker):
    """{fd: what it is} of the runner's descriptors but worker's (read
    through one descriptor of /proc/self/fd, not a path from / each)."""
    fds = {}
    try:
        if _proc_dir() < 0:
            listing = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        else:
            listing = os.open("self/fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=_proc_dir())
    except OSError:
        return fds
    try:
        for fd in os.listdir(listing):
            if fd == str(listing):
                continue  # the listing's own
            try:
                fds[fd] = os.readlink(fd, dir_fd=listing)
            except OSError:
                pass  # the listing's duplicate, closed by now
    finally:
        os.close(listing)
    if worker is not None:
        for fd in (worker.ctrl, worker.res, worker.out, worker.err, worker.pidfd):
            fds.pop(str(fd), None)
    return fds


class _Baseline:
    """The sandbox before its first call: what reset restores and checks."""

    def __init__(self, worker):
        _cgroup_oom_kills()  # opens its file for good: not a call's descriptor
        _proc_dir()  # so does /proc
        self.mounts = _writable_mounts()
        _hold_tops(self.mounts)  # and the mounts' tops
        self.paths = _walk(self.mounts)
        self.fds = _fds(worker)
        self.process = _process_facts()
        self.sockets = _abstract_sockets()
        self.sysv = _sysv_ids()


def _remove(path, facts):
    """Removes path (a file or an emptied directory) that the baseline
    does not have, making its directory writable again if a call took
    that away (the runner runs as the same user as the call did)."""
    for attempt in (0, 1):
        try:
            if facts[0] == "d":
                os.rmdir(path)
            else:
                os.unlink(path)
            return
        except FileNotFoundError:
            return
        except PermissionError:
            if attempt:
                raise _ResetFailed("%s cannot be removed" % path)
            try:
                os.chmod(os.path.dirname(path), 0o700)
            except OSError:
                raise _ResetFailed("%s cannot be removed: its directory's mode cannot be restored" % path)
        except OSError as e:
            raise _ResetFailed("%s cannot be removed: %s" % (path, e.strerror))


def _restore_paths(base):
    """Puts the writable paths back as the baseline has them: what is new
    goes (deepest first), a directory's mode comes back; a file of the
    baseline that changed cannot be put back and fails the reset."""
    # Directories a call made unreadable are opened again first, so the
    # walk sees everything in them.
    for _ in range(64):
        try:
            now = _walk(base.mounts)
            break
        except _ResetFailed as e:
            d = str(e).split(" cannot be read", 1)[0]
            if d not in base.paths and not any(d.startswith(m + "/") or d == m for m in base.mounts):
                raise
            try:
                os.chmod(d, 0o700 if d not in base.paths else base.paths[d][1] & 0o7777)
            except OSError:
                raise _ResetFailed("%s cannot be read and its mode cannot be restored" % d)
    else:
        raise _ResetFailed("directories that cannot be read keep appearing in the writable paths")
    touched = False
    for path in sorted((p for p in now if p not in base.paths), key=lambda p: -p.count("/")):
        _remove(path, now[path])
        touched = True
    for path, was in base.paths.items():
        cur = now.get(path)
        if cur is None:
            raise _ResetFailed("%s was removed" % path)
        if was[0] == "d" and cur[0] == "d" and cur[1] != was[1]:
            try:
                os.chmod(path, was[1] & 0o7777)
            except OSError:
                raise _ResetFailed("%s's mode cannot be restored" % path)
            touched = True
    # Nothing runs but this process: with nothing removed or changed, a
    # second walk would see what the first saw.
    after = _walk(base.mounts) if touched else now
    for path in sorted(set(after) | set(base.paths)):
        if after.get(path) != base.paths.get(path):
            what = "appeared" if path not in base.paths else "was removed" if path not in after else "changed"
            raise _ResetFailed("%s %s and cannot be put back" % (path, what))
    return len(after)


def _clear_sysv():
    fns = {"shm": lambda i: _libc.shmctl(i, _IPC_RMID, None),
           "sem": lambda i: _libc.semctl(i, 0, _IPC_RMID),
           "msg": lambda i: _libc.msgctl(i, _IPC_RMID, None)}
    for kind, ids in _sysv_ids().items():
        for i in ids:
            fns[kind](i)
    left = {k: v for k, v in _sysv_ids().items() if v}
    if left:
        raise _ResetFailed("System V IPC objects cannot be removed: %s" % ", ".join(
            "%s %s" % (k, v[:5]) for k, v in sorted(left.items())))


def _reset(runner, base):
    """Ends every process but this one, restores what the baseline holds
    and checks each; returns the checks made, or raises _ResetFailed.

    A process all of whose threads are exiting counts as ended (see
    _exiting): a worker's exit frees its memory for milliseconds after it
    has sent its reply, and the checks need not wait for that. What such a
    process still holds (an abstract socket, a System V segment it had
    attached) may still show when a check looks: then the checks are made
    again once it is gone."""
    if runner.worker is not None:
        runner.worker.kill(wait=False)
        runner.worker = None
    for exiting_ok in (True, False):
        _kill_strays(None, exiting_ok=exiting_ok)
        _reap(None)
        left = [p for p in _others() if not (exiting_ok and _exiting(p))]
        if left:
            raise _ResetFailed("processes %s are still running" % ", ".join(map(str, left[:10])))
        try:
            return ["processes: none but the runner"] + _restore(base)
        except _ResetFailed:
            if not (exiting_ok and _others()):
                raise


def _restore(base):
    """_reset's checks once no process but the runner runs."""
    checked = []
    _clear_sysv()
    checked.append("System V IPC: no shared memory, semaphores or message queues")
    n = _restore_paths(base)
    checked.append("writable paths %s: as before the first call (%d entries)" % (", ".join(base.mounts), n))
    extra = _abstract_sockets() - base.sockets
    if extra:
        raise _ResetFailed("abstract unix sockets are still bound: %s" % ", ".join(sorted(extra)[:5]))
    checked.append("abstract unix sockets: none new")
    fds = _fds(None)
    if fds != base.fds:
        diff = sorted(set(fds.items()) ^ set(base.fds.items()))[:10]
        raise _ResetFailed("the runner's descriptors changed: %s (before: %s)" % (
            ", ".join("%s %s" % (fd, fds.get(fd, "closed")) for fd, _ in diff),
            ", ".join("%s %s" % (fd, base.fds.get(fd, "none")) for fd, _ in diff)))
    checked.append("runner descriptors: as before")
    facts = _process_facts()
    for k in ("cwd", "umask", "env", "rlimits"):
        if facts[k] != base.process[k]:
            raise _ResetFailed("the runner's %s changed" % k)
    checked.append("runner cwd, umask, environment, resource limits: as before")
    return checked


def _reset_op(runner, req):
    """Makes a transient sandbox ready for its principal's next call
    (op "reset"), or says why it cannot be: then it must not serve
    another call. Made early (early_reset) and nothing asked since: that
    one's answer, and the spare it forked installs req's guard now."""
    early, runner.early = runner.early, None
    if early is not None and req.get("op") == "reset":
        arm = req.get("arm")
        runner.arm = arm if isinstance(arm, dict) else None
        w = runner.worker
        if early.get("status") == "ok":
            if runner.arm is not None and w is not None and w.armed and w.key != _worker_key(runner.arm):
                runner.spare()  # armed with another guard than the server's: a fresh one
            else:
                runner.arm_spare()
        return early
    t0 = time.perf_counter()
    if runner.base is None:
        return {"status": "error", "reason": runner.base_error or "no call has run in this sandbox yet"}
    try:
        checked = _reset(runner, runner.base)
    except _ResetFailed as e:
        return {"status": "error", "reason": str(e)}
    except OSError as e:
        return {"status": "error", "reason": "reset: %s" % e}
    runner.cells = 0
    runner.lost = False
    arm = req.get("arm")
    runner.arm = arm if isinstance(arm, dict) else None
    # The next call's worker is forked once this reply is sent (see
    # serve), while the server hands the sandbox to that call.
    return {"status": "ok", "checked": checked, "duration_ms": (time.perf_counter() - t0) * 1000}


def _early_reset(runner, req, resp):
    """After the reply of a transient call in a sandbox the server may
    keep, makes the reset it will ask for next, and forks the next
    call's spare worker, while the reply travels to the server and the
    principal's next call comes: op "reset" then answers with this one.
    Not after a reply that names files (the server reads them before it
    asks for the reset) or that retires the sandbox (timeout, OOM,
    kill). Any other request first drops it (see reset)."""
    if not (req.get("transient") and req.get("keep") and runner.base is not None) or runner.pending:
        return False
    if resp.get("files") or resp.get("status") in ("timeout", "oom", "killed"):
        return False
    runner.early = runner.reset({})
    if runner.early.get("status") == "ok":
        # Armed with this call's guard: the one the server's reset
        # request brings (the principal's last call's).
        runner.arm = {"capabilities": req.get("capabilities"), "modules": req.get("modules")}
        runner.spare()
    return True

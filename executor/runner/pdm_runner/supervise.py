# supervise.py: the runner's watch over the sandbox's processes: freezing a
# session between calls and checking it after, killing strays, reaping,
# the working directory's snapshot and the cgroup's OOM count.
# A part of the sandbox runner; see ../README.md.

# ---------------------------------------------------------------- runner side


_CLK_TCK = os.sysconf("SC_CLK_TCK")
# The signals a worker handles itself (see _worker_main): any other handler
# was installed by user code.
_WORKER_SIGS = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGUSR1 - 1)) | (1 << (signal.SIGUSR2 - 1))


def _pstat(pid):
    """(state, start time, utime+stime in ticks) of a process from
    /proc/PID/stat, or None when it is gone."""
    try:
        with _proc_open("%d/stat" % pid, "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return fields[0].decode(), int(fields[19]), int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


def _pstatus(pid):
    out = {}
    try:
        with _proc_open("%d/status" % pid) as f:
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
    return [int(p) for p in _proc_list() if p.isdigit() and int(p) != _PID and not _zombie(p)]


def _left_running(w):
    """What the session's worker has running besides its main thread
    waiting for the next request, seen from outside it: extra threads,
    signal handlers user code installed, pending signals."""
    left = []
    try:
        n = len(_proc_list("%d/task" % w.pid))
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
                tasks = _proc_list("%d/task" % p)
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
        with _proc_open("%d/task/%s/stat" % (pid, tid), "rb") as f:
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


def _new_worker(warm=None):
    """A new worker (a spare that warms up for the modules warm lists, see
    _Worker). While the sandbox's pids are used up (what a killed
    call started is still dying: a fork bomb) it kills the strays and tries
    again, for up to 3 s."""
    deadline = time.monotonic() + 3
    _note_stable_paths()
    while True:
        try:
            return _Worker(warm)
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise
            _kill_strays(None)
            time.sleep(0.01)


def _kill_strays(keep, exiting_ok=False):
    """Kills every process of the sandbox except the runner and keep (the
    session's worker): what a call started does not outlive it. A fork bomb
    forks while it is being killed, so this goes on until none is left, for
    up to 2 s: with nothing to keep, the runner (process 1 of the sandbox)
    signals them all at once with kill(-1); otherwise each is stopped first
    (a stopped process cannot fork), then killed. With exiting_ok, a
    process all of whose threads are exiting (_exiting) counts as gone: it
    runs no more code, and what it still frees (its memory, a few
    milliseconds for a worker that ran pandas) is freed beside the next
    step."""
    deadline = time.monotonic() + 2
    while True:
        others = [int(p) for p in _proc_list() if p.isdigit() and int(p) not in (_PID, keep) and not _zombie(p)]
        if exiting_ok:
            others = [p for p in others if not _exiting(p)]
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


_PF_EXITING = 0x4  # the kernel's task flag, set as a thread begins to exit


def _exiting(pid):
    """Whether process pid is gone or every one of its threads is exiting:
    the kernel has set PF_EXITING (in the flags of /proc/PID/task/TID/stat),
    which it does once a thread has left its last system call for good and
    runs no more user code. False when a thread's flags cannot be read or
    do not have it (gVisor shows none): then it is waited for."""
    try:
        tids = _proc_list("%d/task" % pid)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    for tid in tids:
        try:
            with _proc_open("%d/task/%s/stat" % (pid, tid), "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except FileNotFoundError:
            continue  # that thread has ended
        except OSError:
            return False
        # After the command: state, ppid, pgrp, session, tty_nr, tpgid, flags.
        try:
            if not int(fields[6]) & _PF_EXITING:
                return False
        except (IndexError, ValueError):
            return False
    return True


def _zombie(pid):
    """Whether process pid has ended (or is gone): its first thread is a
    zombie and no other thread is left. A first thread that ended alone
    (pthread_exit) shows as a zombie while the others run on."""
    try:
        with _proc_open("%s/stat" % pid, "rb") as f:
            if f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X"):
                return False
        return len(_proc_list("%s/task" % pid)) <= 1
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
    # Walked from the runner's working directory (in a sandbox it is the
    # working directory, and never changes), not from its absolute path: a
    # path from / asks the root's file system first, which on a FUSE
    # storage driver is a round trip to its process on every call.
    top = "." if os.getcwd() == _WORKDIR else _WORKDIR
    seen = {}
    stack = [top]
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
                        seen[os.path.relpath(ent.path, top)] = (st.st_mtime_ns, st.st_size)
                    if len(seen) >= limit:
                        break
        except OSError:
            continue
    return seen


_PROC_FD = []  # a descriptor of /proc, once opened


def _proc_dir():
    """A descriptor of /proc, opened once: the runner's paths under /proc
    are looked up relative to it, not from / each (every lookup from / asks
    the root's file system first, which on a FUSE storage driver is a
    round trip to the driver's process). Workers close it. -1 when /proc
    cannot be opened: paths from / then."""
    if not _PROC_FD:
        try:
            _PROC_FD.append(os.open("/proc", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        except OSError:
            _PROC_FD.append(-1)
    return _PROC_FD[0]


def _proc_open(rel, mode="r"):
    """open() of /proc/REL."""
    fd = _proc_dir()
    if fd < 0:
        return open("/proc/" + rel, mode)
    return open(rel, mode, opener=lambda path, flags: os.open(path, flags | os.O_CLOEXEC, dir_fd=fd))


def _proc_list(rel="."):
    """os.listdir() of /proc/REL (a fresh descriptor each time, so the
    listing is of now)."""
    fd = _proc_dir()
    if fd < 0:
        return os.listdir(os.path.normpath("/proc/" + rel))
    d = os.open(rel, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
    try:
        return os.listdir(d)
    finally:
        os.close(d)


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

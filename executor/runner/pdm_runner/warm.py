# warm.py: what a spare worker does while it waits for its call. A worker
# is a fork of the runner: the first time it touches a page of the runner's
# memory (reference counts, caches) the kernel copies it, and a call into
# pandas or matplotlib touches thousands. A spare worker pays for that
# before its call comes, by running a fixed exercise of the interpreter and
# of the modules the sandbox's last call imported. Only modules the runner
# already imported (its preload) are exercised, never imported here (the
# guard judges every import the call makes); nothing is printed, drawn with
# pyplot, written to a file or drawn from a random stream, so the call finds
# the same modules and streams as in a worker that skipped this. Each step
# (or sub-step) ends before the next starts; a request that is waiting
# stops the rest.
#
# And the runner's part of it: after its preload, the runner asks the
# kernel to map its anonymous memory with huge pages (_collapse_memory),
# so each fork copies a few entries per 2 MiB instead of 512 page-table
# entries; and after each fork, a walk of the runner's own part of a call on
# a sample call (_warm_runner), which copies the pages the runner's next
# call would write before that call comes.
# A part of the sandbox runner; see ../README.md.

# ---------------------------------------------------------------- warm-up


def _warm_interpreter():
    # The path of a call's code in _worker_run: the cell compiled as a call
    # compiles it (_compile_cell), run, the value's repr, the state
    # collected and the reply encoded.
    buf = io.StringIO()
    ns = {"print": lambda *a: print(*a, file=buf)}
    body, tail = _compile_cell("x = [i * 2 for i in range(10)]\nprint(x, {'k': 1.5})\nx\n", "<warm-up>")
    exec(body, ns)
    value = eval(tail, ns)
    state = _collect_state({"x": value, "y": {"k": 1.5}, "s": None}, 1 << 20, ["x", "y"])
    _encode({"status": "ok", "result": repr(value), "state": state[0], "nonce": "0" * 32})


def _warm_numpy():
    np = sys.modules["numpy"]
    a = np.arange(1000.0)
    (a * 2).sum()
    yield
    a.reshape(10, 100).mean(axis=0)
    repr(a[:5])


def _warm_pandas():
    # Ordered by what a call gains: after the frame and the group-by, a
    # pandas group-by call took 1.3-1.8 ms in a fresh fork, against 5-13 ms
    # without; describe() and repr() warm the printing a call often does.
    pd = sys.modules["pandas"]
    df = pd.DataFrame({"k": [i % 7 for i in range(300)], "v": [float(i) for i in range(300)]})
    yield
    df.groupby("k")["v"].sum()
    yield
    df["v"].describe()
    yield
    repr(df.head())


def _warm_matplotlib():
    figure = sys.modules.get("matplotlib.figure")
    if figure is None:
        return
    fig = figure.Figure(figsize=(2, 2), dpi=50)  # not pyplot's: no figure number is taken
    yield
    fig.subplots().plot([1, 2, 3], [1, 4, 9])
    yield
    fig.savefig(io.BytesIO(), format="png")


# Module (top-level name) -> its exercise, in the order they run. An
# exercise is a generator: each yield ends a sub-step (at most a few ms in
# the sandbox image; pandas' whole exercise is 11-15 ms, matplotlib's
# 42-60), after which a waiting call stops it.
_WARM_STEPS = (("numpy", _warm_numpy), ("pandas", _warm_pandas), ("matplotlib", _warm_matplotlib))


def _warm_modules(imports):
    """The top-level modules of a run request's import facts that have an
    exercise: what the next spare worker of this sandbox warms."""
    names = set()
    for f in imports or ():
        if isinstance(f, dict) and not f.get("level"):
            names.add(str(f.get("module") or "").split(".")[0])
    return tuple(m for m, _ in _WARM_STEPS if m in names)


def _call_waiting(ctrl, reader):
    """Whether a request other than an arm frame (the guard a spare
    installs ahead, which waits for the warm-up) has come: what ctrl holds
    now is read into reader, whose frames stay for the worker's loop."""
    while select.select([ctrl], [], [], 0)[0]:
        n = len(reader.buf)
        reader.feed()
        if reader.eof or len(reader.buf) == n:
            break
    held, partial = reader.peek()
    for data in held:
        try:
            if json.loads(data).get("op") != "arm":
                return True
        except (ValueError, AttributeError):
            return True  # the loop reports it
    return partial or reader.eof  # more of a frame is coming, or nothing will


def _warm(ctrl, modules, reader):
    """Runs the interpreter's exercise and those of modules (already
    imported by the runner), until a call waits on ctrl."""
    steps = [_warm_interpreter] + [f for m, f in _WARM_STEPS if m in modules and m in sys.modules]
    for step in steps:
        if _call_waiting(ctrl, reader):
            return
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                substeps = step()
                for _ in substeps or ():
                    if _call_waiting(ctrl, reader):
                        substeps.close()
                        return
        except Exception:  # noqa: BLE001 - an exercise that fails only warms less
            pass


# ---------------------------------------------------------------- cheaper forks

_MADV_COLLAPSE = 25  # Linux 6.1 and later
_HUGE = 2 << 20


def _collapse_memory():
    """Asks the kernel to back the 2 MiB-aligned parts of this process's
    anonymous read-write mappings (the heap and the allocator's arenas,
    most of what a preload leaves) with huge pages, now: a fork then
    copies one entry per 2 MiB, not 512 (measured in the sandbox image
    with numpy, pandas and matplotlib imported: 28-30 of 59 MiB collapsed,
    fork to a running child 4.2 -> 3.1 ms, fork and exit 4.0 -> 3.3 ms).
    A worker's writes still copy 4 KiB pages: the kernel splits a shared
    huge page on its first write. Returns how many ranges collapsed;
    where the kernel cannot (older than 6.1, gVisor, no memory), none."""
    madvise = getattr(_libc, "madvise", None)
    if madvise is None:
        return 0
    done = 0
    try:
        with open("/proc/self/maps") as f:
            maps = f.read().splitlines()
    except OSError:
        return 0
    for line in maps:
        parts = line.split()
        # address perms offset dev inode [name]: anonymous private rw only
        if len(parts) < 5 or parts[4] != "0" or not parts[1].startswith("rw-p"):
            continue
        if len(parts) > 5 and parts[5] != "[heap]":
            continue  # [stack], [vdso] and the like
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        start, end = (lo + _HUGE - 1) & ~(_HUGE - 1), hi & ~(_HUGE - 1)
        if end > start and madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), _MADV_COLLAPSE) == 0:
            done += 1
    return done


# ---------------------------------------------------------------- the runner's own warm-up

# A transient call as the server sends it, and its worker's reply: what the
# runner's warm-up walks (_warm_runner).
_WARM_CALL = {"op": "run", "id": "warm-up", "nonce": "0" * 32, "transient": True, "keep": True,
              "code": "import json\nfrom os import path as p\nprint(json.dumps([1, 'a']))\n",
              "imports": [{"module": "json", "line": 1},
                          {"module": "os", "from": True, "names": [{"name": "path", "asname": "p"}], "line": 2}],
              "limits": {"timeout_ms": 30000, "max_output_bytes": 1 << 20, "max_state_bytes": 1 << 20},
              "capabilities": {"processes": False, "pty": False, "native_code": False, "sockets": []},
              "modules": {"allowed": ["json", "os"], "blocked": ["subprocess"], "calls": ["os.system"]}}
_WARM_REPLY = {"status": "ok", "result": None, "error": None, "state": {"x": 1}, "dropped_state": [], "images": []}


def _warm_runner_facts():
    return _check_facts(json.loads(_encode(_WARM_CALL)[4:]), "<warm-up>")


def _warm_runner_request():
    return _worker_key(_WARM_CALL), _encode(dict(_WARM_CALL, imports=None)), _snapshot()


def _warm_runner_reply():
    nonce = _WARM_CALL["nonce"]
    out = _Capture(1 << 20)
    out.add(b"1\n")
    resp = _clean_reply(_encode(dict(_WARM_REPLY, nonce=nonce))[4:], nonce, True, 1 << 20, 1 << 20, 4 << 20, 16)
    resp["stdout"], resp["stdout_truncated"] = out.text()
    return _encode(resp)


# The runner's part of a call, step by step, in the order a call takes it.
_WARM_RUNNER_STEPS = (_warm_runner_facts, _warm_runner_request, _warm_runner_reply)


def _warm_runner():
    """The runner's part of a call, once, on a sample call, while no
    request waits: after each fork the runner shares its pages with the
    new worker, and its first write to each (a reference count of the
    parser's or the encoder's objects, a block of the allocator's) copies
    it. On a spaced call's path that was about 100 pages, 1-2 ms of the
    call's time in the runner on a machine with slow page faults (the
    facts check alone: 48 pages, 1.0 ms; after this warm-up 1 page,
    0.15 ms); walked here, they are copied before the call comes. Nothing
    is sent, written, kept or left open. Each step ends before the next
    starts; a request that has come stops the rest, and the runner's loop
    calls this again once it is served. Returns whether every step ran."""
    for step in _WARM_RUNNER_STEPS:
        if select.select([_PROTO_IN], [], [], 0)[0]:
            return False
        try:
            step()
        except Exception:  # noqa: BLE001 - a step that fails only warms less
            pass
    return True

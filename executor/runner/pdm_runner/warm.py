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
# ends before the next starts; a request that is waiting stops the rest.
# A part of the sandbox runner; see ../README.md.

# ---------------------------------------------------------------- warm-up


def _warm_interpreter():
    buf = io.StringIO()
    ns = {"print": lambda *a: print(*a, file=buf)}
    exec(compile("x = [i * 2 for i in range(10)]\nprint(x, {'k': 1.5})\n", "<warm-up>", "exec"), ns)
    json.dumps({"a": [1, 2.5, "s", None, True]})
    repr(ns["x"])


def _warm_numpy():
    np = sys.modules["numpy"]
    a = np.arange(1000.0)
    (a * 2).sum()
    a.reshape(10, 100).mean(axis=0)
    repr(a[:5])


def _warm_pandas():
    pd = sys.modules["pandas"]
    df = pd.DataFrame({"k": [i % 7 for i in range(300)], "v": [float(i) for i in range(300)]})
    df.groupby("k")["v"].sum()
    df["v"].describe()
    repr(df.head())


def _warm_matplotlib():
    figure = sys.modules.get("matplotlib.figure")
    if figure is None:
        return
    fig = figure.Figure(figsize=(2, 2), dpi=50)  # not pyplot's: no figure number is taken
    fig.subplots().plot([1, 2, 3], [1, 4, 9])
    fig.savefig(io.BytesIO(), format="png")


# Module (top-level name) -> its exercise, in the order they run.
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
                step()
        except Exception:  # noqa: BLE001 - an exercise that fails only warms less
            pass

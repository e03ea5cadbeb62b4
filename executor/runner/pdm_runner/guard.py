# guard.py: the import guard: the CPython audit hook (PEP 578) a worker installs
# after its kernel filter, enforcing module rules, blocked calls and what
# the filter cannot see.
# A part of the sandbox runner; see ../README.md.

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
                   _strval=strval, _realpath=os.path.realpath, _abspath=os.path.abspath):
        if type(path) is bytes:
            path = path.decode("utf-8", "surrogateescape")
        path = _strval(path)
        if path is None:
            return
        if path.startswith(_trusted) and "/.." not in path:
            return
        real = _realpath(path)
        # The path as written counts too: where the kernel lets
        # /proc/1/fd/<n> be read (gVisor), its real path is the file the
        # runner holds, e.g. /dev/null.
        lex = _abspath(path) if path.startswith("/proc") or not path.startswith("/") else real
        for p in (real, lex):
            if (p.startswith(_proc) or p + "/" in _proc) and p not in _public:
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


_CORE = frozenset(("os", "sys", "posix", "builtins", "io", "_io", "abc", "_abc", "codecs", "_codecs", "encodings",
                   "importlib", "_imp", "_thread", "threading", "_weakref", "weakref", "marshal", "time", "zipimport",
                   "posixpath", "genericpath", "stat", "_stat", "signal", "_signal", "errno", "_warnings", "warnings",
                   "types", "functools", "collections", "json", "ast", "struct", "_struct", "select", "traceback",
                   "linecache", "opcode", "sysconfig", "base64", "_collections_abc", "site", "math", "gc"))

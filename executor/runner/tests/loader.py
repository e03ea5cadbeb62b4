"""Loads the runner's parts into a namespace the way the sandbox runs them
(one program, one namespace, file name <pdm-runner>), minus what only
process 1 of a sandbox may do to its process: process.py's protection of
the process and its fd shuffling are left out (the names they define are
given stand-ins) and main.py, which starts the loop, is not run."""

import ast
import atexit
import builtins
import os
import shutil
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
PARTS = os.path.join(os.path.dirname(HERE), "pdm_runner")
TESTDATA = os.path.join(os.path.dirname(os.path.dirname(HERE)), "protocol", "testdata")

# Names process.py binds from the process's own state (its fds, its pid,
# its working directory): the loader binds them to stand-ins instead.
STAND_INS = ("_PID", "_PROTO_IN", "_PROTO_OUT", "_DIAG", "_DEVNULL", "_WORKDIR")

_codes = {}


def order():
    with open(os.path.join(PARTS, "ORDER")) as f:
        return f.read().split()


def source(name):
    with open(os.path.join(PARTS, name), encoding="utf-8") as f:
        return f.read()


def left_out(node):
    """Whether a top-level statement of process.py is process 1's only: a
    call for its effect (prctl, signal, dup2) or a binding of a stand-in."""
    if isinstance(node, (ast.If, ast.Expr)):
        return True
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id in STAND_INS for t in node.targets)
    return False


def _code(name):
    if name not in _codes:
        src = source(name)
        if name == "process.py":
            tree = ast.parse(src, "<pdm-runner>")
            tree.body = [n for n in tree.body if not left_out(n)]
            _codes[name] = compile(tree, "<pdm-runner>", "exec", dont_inherit=True)
        else:
            _codes[name] = compile(src, "<pdm-runner>", "exec", dont_inherit=True)
    return _codes[name]


def load(workdir=None):
    """A fresh namespace of the runner. _WORKDIR is workdir (a new
    temporary directory by default); the protocol fds are -1 until a test
    sets them."""
    if workdir is None:
        workdir = tempfile.mkdtemp(prefix="pdm-runner-test-")
        atexit.register(shutil.rmtree, workdir, True)
    ns = {"__name__": "__pdm_runner__", "__builtins__": builtins}
    ns.update(_PID=os.getpid(), _PROTO_IN=-1, _PROTO_OUT=-1, _DIAG=-1, _DEVNULL=-1, _WORKDIR=workdir)
    for name in order():
        if name == "main.py":
            continue
        exec(_code(name), ns)
    # main.py's __main__ for user code, without putting it in sys.modules.
    user = types.ModuleType("__main__")
    user.__dict__["__builtins__"] = builtins
    ns["_USER"] = user
    return ns


def golden(name):
    import json
    with open(os.path.join(TESTDATA, name + ".json"), encoding="utf-8") as f:
        return json.load(f)

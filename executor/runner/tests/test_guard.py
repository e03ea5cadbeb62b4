import json
import subprocess
import sys
import textwrap
import unittest

import loader

R = loader.load()


class ModuleRulesTest(unittest.TestCase):
    def test_module_denied(self):
        d = R["_module_denied"]
        self.assertIsNone(d("json", (), ("subprocess",)))
        self.assertEqual(d("subprocess", (), ("subprocess",)), "module 'subprocess' is blocked (blocked_modules: subprocess)")
        self.assertIn("blocked", d("os.path", (), ("os",)))
        self.assertIsNone(d("osx", (), ("os",)))  # a prefix of the name is not the module
        # A C implementation is its module's twin.
        self.assertEqual(d("_socket", (), ("socket",)),
                         "module '_socket' is the C implementation of 'socket', which is blocked (blocked_modules: socket)")
        self.assertIn("not in allowed_modules (json, math)", d("os", ("json", "math"), ()))
        self.assertIsNone(d("json.decoder", ("json",), ()))


# The guard in a child process of its own (an audit hook cannot be
# removed): user code runs through the worker's own _worker_run, after
# _install_guard, as in a sandbox's worker (whose kernel filter is left out
# here: test_capabilities installs it).
CHILD = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, %r)
    import loader
    R = loader.load()
    caps = {"processes": False, "sockets": [], "pty": False, "native_code": False}
    calls = [{"name": "eval", "entry": "eval", "event": "builtins.eval", "direct": True}]
    R["_install_guard"](caps, (), ("subprocess", "socket"), R["threading_ident"](), R, calls)
    denied = R["_denied_classes"](caps)
    out = []
    for code in json.loads(sys.stdin.read()):
        r = R["_worker_run"]({"code": code, "limits": {"timeout_ms": 10000}}, denied)
        err = r.get("error") or {}
        out.append([r["status"], err.get("type", ""), err.get("message", ""), r.get("result")])
    sys.__stdout__.write("\\n" + json.dumps(out))
""") % loader.HERE


# A file the test process holds open: the guarded child is its child.
PARENT_FILE = open(__file__)


class AuditHookTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.snippets = {
            "blocked import": "import subprocess",
            "blocked C twin": "import _socket",
            "computed import": "__import__('importlib').import_module('subprocess')",
            "allowed import": "import json\njson.dumps([1])",
            "ctypes": "import ctypes",
            "blocked call": "eval('1 + 1')",
            "runner's proc files": "open('/proc/1/environ').read()",
            # The parent's descriptor of a file resolves to the file where
            # /proc/<pid>/fd can be read (gVisor): the path as written counts.
            "runner's descriptor": "import os\nopen('/proc/%%d/fd/%d' %% os.getppid()).read()" % PARENT_FILE.fileno(),
            "introspection": "import gc\ngc.get_objects()",
            # The runner's globals can be reached by a frame walk; the
            # guard's functions keep their own copies.
            "rebound runner global": "import sys\ng = sys._getframe(0).f_back.f_globals\n"
                                     "g['_module_denied'] = lambda *a: None\nimport subprocess",
            "library call allowed": "import textwrap\ntextwrap.dedent('  x')",
        }
        p = subprocess.run([sys.executable, "-I", "-B", "-c", CHILD], input=json.dumps(list(cls.snippets.values())),
                           capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            raise AssertionError("the guarded child failed: %s" % p.stderr[-2000:])
        cls.results = dict(zip(cls.snippets, json.loads(p.stdout.rsplit("\n", 1)[-1])))

    def check(self, name, status, typ, text=""):
        got = self.results[name]
        self.assertEqual(got[0], status, (name, got))
        self.assertEqual(got[1], typ, (name, got))
        self.assertIn(text, got[2], (name, got))
        return got

    def test_blocked_imports_are_refused(self):
        self.check("blocked import", "error", "ModuleBlockedError", "module 'subprocess' is blocked")
        self.check("blocked C twin", "error", "ModuleBlockedError", "C implementation of 'socket'")
        self.check("computed import", "error", "ModuleBlockedError", "subprocess")

    def test_allowed_import_and_library_code_run(self):
        self.assertEqual(self.check("allowed import", "ok", "")[3], "'[1]'")
        self.assertEqual(self.check("library call allowed", "ok", "")[3], "'x'")

    def test_native_code_denied(self):
        self.check("ctypes", "error", "ModuleBlockedError", "policy.capabilities.native_code is false")

    def test_blocked_call_refused_at_run_time(self):
        self.check("blocked call", "error", "CallBlockedError", "call to eval is blocked")

    def test_runner_files_introspection_and_frames_refused(self):
        self.check("runner's proc files", "error", "PermissionError", "belongs to the sandbox's runner")
        self.check("runner's descriptor", "error", "PermissionError", "belongs to the sandbox's runner")
        self.check("introspection", "error", "PermissionError", "gc.get_objects is not allowed in the sandbox")
        self.check("rebound runner global", "error", "ModuleBlockedError", "module 'subprocess' is blocked")


if __name__ == "__main__":
    unittest.main()

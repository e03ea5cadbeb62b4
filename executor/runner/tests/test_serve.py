"""One transient call through the runner's own loop code (_Runner.run):
a real worker is forked, installs the golden run's kernel filter and audit
hook, runs the code and answers through its result pipe; the runner checks
and caps the reply. A session's calls are left to the Docker tests: between
calls the runner stops and kills every other process it can see, which
only a sandbox's pid namespace makes safe."""

import json
import os
import re
import unittest

import loader


def reply_fields():
    with open(os.path.join(os.path.dirname(loader.TESTDATA), "protocol.go"), encoding="utf-8") as f:
        src = f.read()
    body = src[src.index("type Reply struct {"):]
    body = body[:body.index("\n}\n")]
    return set(re.findall(r'json:"([a-z_]+)"', body))


class TransientCallTest(unittest.TestCase):
    def setUp(self):
        self.R = loader.load()

        def no_strays(keep):
            raise AssertionError("_kill_strays outside a sandbox")
        self.R["_kill_strays"] = no_strays
        self.r, self.w = os.pipe()
        self.null = os.open(os.devnull, os.O_RDWR)
        self.R["_PROTO_IN"], self.R["_DEVNULL"] = self.r, self.null
        self.runner = self.R["_Runner"]()

    def tearDown(self):
        if self.runner.worker is not None:
            self.runner.worker.kill()
        for fd in (self.r, self.w, self.null):
            os.close(fd)

    def call(self, **change):
        req = loader.golden("run")
        req.update(change)
        resp = self.runner.run(req)
        unknown = set(resp) - reply_fields()
        self.assertFalse(unknown, "reply fields protocol.Reply does not have: %s" % sorted(unknown))
        return resp

    def test_golden_run(self):
        resp = self.call()
        self.assertEqual(resp["status"], "ok", resp)
        self.assertEqual(resp["result"], repr(json.dumps({"s": 3})))
        self.assertEqual(resp["state"], {"y": 2, "x": 1})
        self.assertEqual((resp["stdout"], resp["stdout_truncated"]), ("", False))
        self.assertNotIn("integrity", resp)  # transient: no session to vouch for

    def test_output_files_and_the_worker_is_gone(self):
        # (The worker's working directory is the test's: the path is given.)
        path = os.path.join(self.R["_WORKDIR"], "made.txt")
        resp = self.call(code="print('hi')\nopen(%r, 'w').write('x')\n" % path, imports=[], state=None, state_keys=[])
        self.assertEqual((resp["status"], resp["stdout"]), ("ok", "hi\n"), resp)
        self.assertEqual(resp["files"], ["made.txt"])
        self.R["_reap"](self.runner.worker)
        self.assertTrue(self.runner.worker.dead)

    def test_the_filter_and_the_hook_are_in_force(self):
        resp = self.call(code="import os\nos.fork()\n", imports=[{"module": "os", "level": 0, "from": False, "line": 1}])
        self.assertEqual(resp["status"], "error", resp)
        self.assertIn("process creation is not allowed by the sandbox policy", resp["error"]["message"])
        resp = self.call(code="import subprocess\n", imports=[{"module": "subprocess", "level": 0, "from": False, "line": 1}])
        self.assertEqual(resp["error"]["type"], "ModuleBlockedError", resp)

    def test_input_fails_with_a_clear_message(self):
        resp = self.call(code="name = input('name? ')\n", imports=[], state=None, state_keys=[])
        self.assertEqual((resp["status"], resp["error"]["type"]), ("error", "EOFError"), resp)
        self.assertIn("input() is not available", resp["error"]["message"])

    def test_display_shows_each_value(self):
        resp = self.call(code="display(1, 'a')\nx = 2\n", imports=[], state=None, state_keys=[])
        self.assertEqual((resp["status"], resp["stdout"]), ("ok", "1\n'a'\n"), resp)

    def test_time_limit(self):
        resp = self.call(code="while True:\n    pass\n", imports=[], limits={"timeout_ms": 200, "grace_ms": 500})
        self.assertEqual(resp["status"], "timeout", resp)
        self.assertIn("time limit of 0.2s", resp["error"]["message"])

    def test_refused_before_a_worker_runs(self):
        resp = self.call(imports=[])
        self.assertEqual(resp["status"], "refused")
        self.assertIsNone(self.runner.worker)  # no worker was forked for it


if __name__ == "__main__":
    unittest.main()

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

    def test_the_reset_baseline_only_in_a_sandbox_the_server_may_keep(self):
        self.call()
        self.assertIsNone(self.runner.base)
        self.assertEqual(self.runner.base_error, "")
        self.call(keep=True)
        # Taken, or refused with its reason (a host's writable root is).
        self.assertTrue(self.runner.base is not None or self.runner.base_error)

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

    def test_what_only_the_compiler_refuses_is_the_calls_error(self):
        # CPython's parser (the facts check) accepts these; its compiler
        # does not. The worker reports it as the call's error, with its
        # line, and hands the state back: it does not die.
        for code, msg in (("x = 1\nreturn 1\n", "'return' outside function"),
                          ("x = 1\nnonlocal y\n", "nonlocal declaration not allowed at module level")):
            resp = self.call(code=code, imports=[], state={"a": 1}, state_keys=[])
            self.assertEqual(resp["status"], "error", resp)
            self.assertEqual((resp["error"]["type"], resp["error"]["line"]), ("SyntaxError", 2), resp)
            self.assertIn(msg, resp["error"]["message"])
            self.assertEqual(resp["state"], {"a": 1})
            self.assertEqual(resp["stderr"], "")

    def test_refused_before_a_worker_runs(self):
        resp = self.call(imports=[])
        self.assertEqual(resp["status"], "refused")
        self.assertIsNone(self.runner.worker)  # no worker was forked for it


class EarlyResetTest(unittest.TestCase):
    """The reset made right after a kept call's reply (_Runner.early_reset)
    answers the server's reset request, with the spare it forked armed
    with that call's guard; never after a reply that names files or
    retires the sandbox. _reset and the fork are stand-ins here (a reset
    kills every process it can see: Docker tests only)."""

    GUARD = {"capabilities": {"processes": False}, "modules": {"allowed": ["json"], "blocked": []}}

    def setUp(self):
        self.R = loader.load()
        self.resets, self.forks = [], []
        self.R["_reset"] = lambda runner, base: self.resets.append(1) or ["checked"]
        self.R["_new_worker"] = self.fork
        self.runner = self.R["_Runner"].__new__(self.R["_Runner"])
        self.runner.worker, self.runner.pending, self.runner.base = None, [], object()

    def fork(self, warm=None):
        r, w = os.pipe()
        self.addCleanup(os.close, r)
        self.addCleanup(os.close, w)
        worker = type("W", (), {"dead": False, "armed": False, "runs": 0, "key": None, "ctrl": w,
                                "kill": lambda self, wait=True: setattr(self, "dead", True)})()
        self.forks.append(worker)
        return worker

    def after(self, **resp):
        req = dict(self.GUARD, op="run", transient=True, keep=True)
        return self.runner.early_reset(req, dict({"status": "ok"}, **resp))

    def test_the_server_s_reset_is_answered_by_the_early_one(self):
        self.assertTrue(self.after())
        self.assertEqual((len(self.resets), len(self.forks)), (1, 1))
        spare = self.forks[0]
        self.assertTrue(spare.armed)
        self.assertEqual(spare.key, self.R["_worker_key"](self.GUARD))
        resp = self.runner.reset({"op": "reset", "arm": self.GUARD})
        self.assertEqual(resp["status"], "ok")
        self.assertEqual((len(self.resets), len(self.forks)), (1, 1), "no second reset, no second spare")
        self.assertIs(self.runner.worker, spare)
        # Used once: the next reset is made again.
        self.runner.reset({"op": "reset", "arm": self.GUARD})
        self.assertEqual(len(self.resets), 2)

    def test_a_reset_request_with_another_guard_gets_a_spare_of_it(self):
        self.after()
        other = {"capabilities": {"processes": True}, "modules": {"allowed": [], "blocked": []}}
        self.runner.reset({"op": "reset", "arm": other})
        self.assertEqual((len(self.resets), len(self.forks)), (1, 2))
        self.assertTrue(self.forks[0].dead)
        self.assertEqual(self.runner.worker.key, self.R["_worker_key"](other))

    def test_not_after_files_or_a_retiring_status(self):
        self.assertFalse(self.after(files=["out.csv"]))  # the server reads them first
        for status in ("timeout", "oom", "killed"):
            self.assertFalse(self.after(status=status))
        self.runner.pending = [{"op": "reset"}]
        self.assertFalse(self.after())  # a request already waits: it is served as it comes
        self.assertEqual((self.resets, self.forks), ([], []))
        self.assertIsNone(self.runner.early)

    def test_not_in_a_sandbox_that_is_not_kept(self):
        self.assertFalse(self.runner.early_reset({"op": "run", "transient": True}, {"status": "ok"}))
        self.runner.base = None  # no baseline: the reset would fail anyway
        self.assertFalse(self.after())
        self.assertEqual(self.resets, [])


class LiveOutputTest(unittest.TestCase):
    """A run with "stream": output frames go out on the protocol stream
    before the reply, each the next bytes of a stream at its offset."""

    def setUp(self):
        TransientCallTest.setUp(self)
        self.out_r, self.out_w = os.pipe()
        os.set_blocking(self.out_r, False)
        self.R["_PROTO_OUT"] = self.out_w
        self.frames = bytearray()

    def tearDown(self):
        TransientCallTest.tearDown(self)
        os.close(self.out_r)
        os.close(self.out_w)

    def sent(self):
        """The frames the runner sent so far, decoded."""
        while True:
            try:
                b = os.read(self.out_r, 1 << 20)
            except BlockingIOError:
                break
            if not b:
                break
            self.frames += b
        out = []
        while len(self.frames) >= 4:
            n = int.from_bytes(self.frames[:4], "big")
            if len(self.frames) < 4 + n:
                break
            out.append(json.loads(bytes(self.frames[4:4 + n])))
            del self.frames[:4 + n]
        return out

    def live_call(self, code, modules=(), **change):
        req = loader.golden("run_live")
        req["imports"] = [{"module": m, "level": 0, "from": False, "line": 1} for m in modules]
        req.update(change)
        req["code"], req["transient"] = code, True
        frames = []
        # The pipe holds 64 KiB: a reader thread keeps it drained.
        import threading
        stop = threading.Event()

        def read():
            while not stop.is_set():
                frames.extend(self.sent())
                stop.wait(0.01)
        t = threading.Thread(target=read)
        t.start()
        try:
            resp = self.runner.run(req)
        finally:
            stop.set()
            t.join()
        frames.extend(self.sent())
        return resp, frames

    def test_frames_carry_the_streams_in_order(self):
        golden = loader.golden("output")
        code = ("import sys, time\n"
                "for i in range(5):\n"
                "    print('line', i, 'é' * 3, flush=True)\n"
                "    print('err', i, file=sys.stderr, flush=True)\n"
                "    time.sleep(0.06)\n")
        resp, frames = self.live_call(code, ("sys", "time"))
        self.assertEqual(resp["status"], "ok", resp)
        got = {"stdout": "", "stderr": ""}
        end = {"stdout": 0, "stderr": 0}
        for f in frames:
            self.assertEqual(set(f), set(golden), f)
            self.assertEqual((f["op"], f["id"], f["nonce"]), ("output", golden["id"], golden["nonce"]))
            self.assertEqual(f["offset"], end[f["stream"]], "frames of a stream are contiguous")
            end[f["stream"]] += f["bytes"]
            self.assertEqual(len(f["data"].encode()), f["bytes"])
            got[f["stream"]] += f["data"]
        self.assertEqual(got["stdout"], resp["stdout"])
        self.assertEqual(got["stderr"], resp["stderr"])
        self.assertGreater(len([f for f in frames if f["stream"] == "stdout"]), 1, "sent while running, not at the end only")

    def test_without_stream_no_frames(self):
        resp, frames = self.live_call("print('x')\n", stream=False)
        self.assertEqual((resp["status"], resp["stdout"], frames), ("ok", "x\n", []))

    def test_a_flood_is_skipped_not_buffered(self):
        code = "import sys\nfor _ in range(400):\n    sys.stdout.write('x' * 65536)\n"
        resp, frames = self.live_call(code, ("sys",), limits=dict(loader.golden("run_live")["limits"], max_output_bytes=1 << 16))
        self.assertEqual(resp["status"], "ok", resp)
        total = 400 * 65536
        sent = sum(f["bytes"] for f in frames)
        ends = [0]
        for f in frames:
            self.assertGreaterEqual(f["offset"], ends[-1], "offsets only grow")
            ends.append(f["offset"] + f["bytes"])
            self.assertLessEqual(f["bytes"], 64 << 10)
        self.assertLessEqual(ends[-1], total)
        print("\nflood: %d bytes written, %d frames carried %d bytes" % (total, len(frames), sent))
        self.assertIn("bytes dropped", resp["stdout"])


if __name__ == "__main__":
    unittest.main()

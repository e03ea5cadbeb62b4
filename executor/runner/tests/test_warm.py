"""A spare worker's warm-up (warm.py): which modules it exercises, and that
it gives way to a call: a waiting request stops it before the next step,
while the guard the runner sends ahead (an arm frame) does not, and stays
for the worker's loop to read."""

import ctypes
import json
import mmap
import os
import resource
import signal
import struct
import sys
import time
import unittest

import loader


def frame(obj):
    data = json.dumps(obj).encode()
    return struct.pack(">I", len(data)) + data


class WarmTest(unittest.TestCase):
    def setUp(self):
        self.R = loader.load()
        self.r, self.w = os.pipe()
        self.reader = self.R["_FrameReader"](self.r, 1 << 20)
        self.ran = []
        # Exercises that record their run: "json" is imported here, "nonesuch" is not.
        self.R["_WARM_STEPS"] = (("json", lambda: self.ran.append("json")),
                                 ("nonesuch", lambda: self.ran.append("nonesuch")))
        self.R["_warm_interpreter"] = lambda: self.ran.append("interpreter")

    def tearDown(self):
        for fd in (self.r, self.w):
            try:
                os.close(fd)
            except OSError:
                pass

    def test_modules_of_the_last_call(self):
        imports = [{"module": "pandas", "level": 0}, {"module": "matplotlib.pyplot", "level": 0},
                   {"module": "numpy", "level": 1}, {"module": "sympy", "level": 0}, "junk"]
        R = loader.load()  # the real exercises
        self.assertEqual(R["_warm_modules"](imports), ("pandas", "matplotlib"))
        self.assertEqual(R["_warm_modules"](None), ())

    def test_only_modules_the_runner_imported(self):
        self.assertNotIn("nonesuch", sys.modules)
        self.R["_warm"](self.r, ("json", "nonesuch"), self.reader)
        self.assertEqual(self.ran, ["interpreter", "json"])
        self.assertNotIn("nonesuch", sys.modules)

    def test_a_waiting_call_stops_it(self):
        os.write(self.w, frame({"op": "run", "code": "print(1)"}))
        self.R["_warm"](self.r, ("json",), self.reader)
        self.assertEqual(self.ran, [])
        # The call's frame is the loop's to read.
        self.assertEqual([json.loads(f)["op"] for f in self.reader.frames()], ["run"])

    def test_an_arm_frame_does_not_stop_it(self):
        os.write(self.w, frame({"op": "arm", "capabilities": {}}))
        self.R["_warm"](self.r, ("json",), self.reader)
        self.assertEqual(self.ran, ["interpreter", "json"])
        self.assertEqual([json.loads(f)["op"] for f in self.reader.frames()], ["arm"])

    def test_a_call_behind_an_arm_frame_stops_it(self):
        os.write(self.w, frame({"op": "arm"}) + frame({"op": "run"}))
        self.R["_warm"](self.r, ("json",), self.reader)
        self.assertEqual(self.ran, [])

    def test_a_call_stops_it_between_sub_steps(self):
        # An exercise's sub-steps (yields): the call that comes during the
        # first is served before the second runs.
        def exercise():
            self.ran.append("frame")
            os.write(self.w, frame({"op": "run"}))
            yield
            self.ran.append("group-by")
            yield
        self.R["_WARM_STEPS"] = (("json", exercise),)
        self.R["_warm"](self.r, ("json",), self.reader)
        self.assertEqual(self.ran, ["interpreter", "frame"])
        self.assertEqual([json.loads(f)["op"] for f in self.reader.frames()], ["run"])

    def test_nothing_waiting_a_partial_frame_a_closed_pipe(self):
        self.assertFalse(self.R["_call_waiting"](self.r, self.reader))
        os.write(self.w, frame({"op": "run"})[:6])
        self.assertTrue(self.R["_call_waiting"](self.r, self.reader))
        r, w = os.pipe()
        os.close(w)
        reader = self.R["_FrameReader"](r, 1 << 20)
        self.assertTrue(self.R["_call_waiting"](r, reader))
        os.close(r)

    def test_the_interpreters_exercise_prints_nothing(self):
        R = loader.load()
        r, w = os.pipe()
        saved = os.dup(1)
        os.dup2(w, 1)
        try:
            R["_warm_interpreter"]()
            sys.stdout.flush()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            os.close(w)
        self.assertEqual(os.read(r, 100), b"")
        os.close(r)


class WorkerPathTest(unittest.TestCase):
    """The interpreter's exercise takes the path a call's code takes in the
    worker (_worker_run): in a fresh fork, a call's parse and compile then
    copy few of the pages they would copy without it."""

    def faults_in_a_fork(self, R, warm):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            n = -1
            try:
                if warm:
                    R["_warm_interpreter"]()
                before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                R["_compile_cell"]("import math\ny = [math.sqrt(i) for i in range(3)]\nprint(y)\ny\n", "<cell-1>")
                n = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
            finally:
                os.write(w, str(n).encode())
                os._exit(0)
        os.close(w)
        try:
            return int(os.read(r, 100))
        finally:
            os.close(r)
            os.waitpid(pid, 0)

    def test_a_calls_parse_and_compile_after_the_exercise(self):
        R = loader.load()
        cold = self.faults_in_a_fork(R, False)
        if cold < 20:
            self.skipTest("this kernel shows no copy-on-write faults of a fork (%d)" % cold)
        warm = self.faults_in_a_fork(R, True)
        self.assertLessEqual(warm * 5, cold, "page faults of a cell's parse and compile: %d after the exercise, %d without" % (warm, cold))


class RunnerWarmTest(unittest.TestCase):
    """The runner's own warm-up after a fork (warm.py, _warm_runner): it
    walks a call's path in the runner on a sample call, so that the pages
    the runner shares with its new worker are copied before a call comes,
    not during it."""

    def setUp(self):
        self.R = loader.load()
        self.r, self.w = os.pipe()
        self.R["_PROTO_IN"] = self.r

    def tearDown(self):
        for fd in (self.r, self.w):
            os.close(fd)

    def test_each_step_walks_the_path_a_call_takes(self):
        # A step that failed would only warm less, silently: each one is
        # run here on its own. The sample's facts agree with CPython's, so
        # the check takes an accepted call's path, not a refusal's.
        self.assertIsNone(self.R["_warm_runner_facts"]())
        key, child, snapshot = self.R["_warm_runner_request"]()
        self.assertIn("os.system", key)
        self.assertNotIn(b"imports\": [", child)
        self.assertIsInstance(snapshot, dict)
        frame = self.R["_warm_runner_reply"]()
        self.assertEqual(struct.unpack(">I", frame[:4])[0], len(frame) - 4)
        resp = json.loads(frame[4:])
        self.assertEqual((resp["status"], resp["state"], resp["stdout"]), ("ok", {"x": 1}, "1\n"))

    def test_it_runs_every_step_and_leaves_nothing_open(self):
        ran = []
        self.R["_WARM_RUNNER_STEPS"] = tuple((lambda i=i: ran.append(i)) for i in range(3)) + (lambda: 1 / 0,)
        fds = sorted(os.listdir("/proc/self/fd"))
        self.assertTrue(self.R["_warm_runner"]())
        self.assertEqual(ran, [0, 1, 2])
        self.R = loader.load()
        self.R["_PROTO_IN"] = self.r
        self.assertTrue(self.R["_warm_runner"]())  # the real steps
        self.assertEqual(sorted(os.listdir("/proc/self/fd")), fds)

    def test_a_waiting_request_stops_it_and_stays_to_be_read(self):
        ran = []
        def step():
            ran.append("facts")
            os.write(self.w, frame({"op": "run"}))
        self.R["_WARM_RUNNER_STEPS"] = (step, lambda: ran.append("reply"))
        self.assertFalse(self.R["_warm_runner"]())
        self.assertEqual(ran, ["facts"])
        reader = self.R["_FrameReader"](self.r, 1 << 20)
        reader.feed()
        self.assertEqual([json.loads(f)["op"] for f in reader.frames()], ["run"])

    def test_the_loop_warms_up_after_a_fork_and_again_when_stopped(self):
        runner = self.R["_Runner"]()
        self.R["_send"] = lambda msg: None
        self.assertFalse(runner.forked)
        runner.spare = lambda: setattr(runner, "forked", True)  # the fork serve() starts with
        seen, stopped = [], [True]

        def warm():
            seen.append("warm")
            was, stopped[0] = stopped[0], False
            return not was  # the first is stopped by a request

        def wait():
            seen.append("wait")
            if len(seen) >= 5:
                raise StopIteration
        self.R["_warm_runner"] = warm
        runner.idle_wait = wait
        with self.assertRaises(StopIteration):
            runner.serve()
        self.assertEqual(seen, ["warm", "wait", "warm", "wait", "wait"])

    def test_a_spare_worker_asks_for_it(self):
        null = os.open(os.devnull, os.O_RDWR)
        self.R["_DEVNULL"] = null
        runner = self.R["_Runner"]()
        try:
            runner.spare()
            self.assertIsNotNone(runner.worker)
            self.assertTrue(runner.forked)
        finally:
            if runner.worker is not None:
                runner.worker.kill()
            os.close(null)

    def test_after_a_fork_a_calls_facts_check_copies_few_pages(self):
        # The reason it exists: a call's facts check after a fork, with
        # and without the warm-up before it. Page faults are counted, not
        # time: the same on a busy machine.
        def faults_of_a_check(warm):
            pid = os.fork()
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            try:
                if warm:
                    self.assertTrue(self.R["_warm_runner"]())
                req = json.loads(json.dumps({"op": "run", "code": "import math\nprint(math.pi)\n",
                                             "imports": [{"module": "math", "line": 1}]}))
                before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                self.assertIsNone(self.R["_check_facts"](req, "<cell-1>"))
                return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
            finally:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        cold = faults_of_a_check(False)
        if cold < 20:
            self.skipTest("this kernel shows no copy-on-write faults of a fork (%d)" % cold)
        warm = faults_of_a_check(True)
        self.assertLessEqual(warm * 4, cold, "page faults of the facts check: %d warmed up, %d not" % (warm, cold))


class CollapseTest(unittest.TestCase):
    """The runner's anonymous memory mapped with huge pages after its
    preload (warm.py, _collapse_memory): cheaper forks."""

    @staticmethod
    def anon_huge_kib():
        with open("/proc/self/smaps_rollup") as f:
            for line in f:
                if line.startswith("AnonHugePages:"):
                    return int(line.split()[1])
        return 0

    @staticmethod
    def kernel_collapses():
        """Whether MADV_COLLAPSE works here, tried on a mapping of its own."""
        libc = ctypes.CDLL(None, use_errno=True)
        probe = mmap.mmap(-1, 4 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        probe.write(b"p" * len(probe))
        addr = ctypes.addressof(ctypes.c_char.from_buffer(probe))
        start = (addr + (2 << 20) - 1) & ~((2 << 20) - 1)
        ok = libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(2 << 20), 25) == 0
        probe.close()
        return ok

    def test_the_heap_is_collapsed(self):
        if not self.kernel_collapses():
            self.skipTest("this kernel has no MADV_COLLAPSE (Linux 6.1 and later) or huge pages are off")
        R = loader.load()
        m = mmap.mmap(-1, 8 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        m.write(b"x" * len(m))  # resident, in 4 KiB pages
        before = self.anon_huge_kib()
        self.assertGreaterEqual(R["_collapse_memory"](), 1)
        self.assertGreaterEqual(self.anon_huge_kib() - before, 4096, "8 MiB mapped: at least two huge pages")
        self.assertEqual(m[:3] + m[-3:], b"xxxxxx")  # the contents are kept
        m.close()


if __name__ == "__main__":
    unittest.main()

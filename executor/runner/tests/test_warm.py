"""A spare worker's warm-up (warm.py): which modules it exercises, and that
it gives way to a call: a waiting request stops it before the next step,
while the guard the runner sends ahead (an arm frame) does not, and stays
for the worker's loop to read."""

import ctypes
import json
import mmap
import os
import struct
import sys
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

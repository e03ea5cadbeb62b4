"""A spare worker's warm-up (warm.py): which modules it exercises, and that
it gives way to a call: a waiting request stops it before the next step,
while the guard the runner sends ahead (an arm frame) does not, and stays
for the worker's loop to read."""

import json
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


if __name__ == "__main__":
    unittest.main()

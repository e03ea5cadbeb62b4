"""What a run returns: state, the runner's checks of the worker's reply,
error reports, and the file ops' refusals."""

import errno
import json
import os
import unittest

import loader


class StateTest(unittest.TestCase):
    def setUp(self):
        self.R = loader.load()

    def test_collect_state(self):
        ns = {"a": 1, "b": [1, 2], "t": (1, 2), "f": open, "_p": 3, "big": "x" * 100, "s": {"k": None}}
        state, dropped, too_large, missing, unreturned = self.R["_collect_state"](ns, 80, ["a", "t", "big", "nope", "s"])
        self.assertEqual(state, {"a": 1, "s": {"k": None}})
        self.assertEqual(dropped, [{"name": "t", "type": "tuple"}])  # a tuple comes back a list
        self.assertEqual(too_large, [{"name": "big", "bytes": 102}])
        self.assertEqual(missing, ["nope"])
        self.assertEqual(unreturned, ["b"])

    def test_collect_every_global(self):
        state = self.R["_collect_state"]({"a": 1, "_h": 2, "os": os, "n": float("nan")}, 1 << 20, None)
        self.assertEqual(state[0], {"a": 1})
        self.assertEqual(state[1], [{"name": "n", "type": "float"}])


class CleanReplyTest(unittest.TestCase):
    """The worker ran user code: the runner trusts nothing of its reply."""

    def setUp(self):
        self.R = loader.load()

    def clean(self, reply, transient=True, max_out=100, max_state=100, max_img=1000, max_images=2):
        return self.R["_clean_reply"](json.dumps(reply), "n", transient, max_out, max_state, max_img, max_images)

    def test_refuses_a_wrong_nonce_status_or_shape(self):
        for bad in ({"status": "ok"}, {"nonce": "x", "status": "ok"}, {"nonce": "n", "status": "fine"},
                    {"nonce": "n", "status": "ok", "error": "x"}, {"nonce": "n", "status": "ok", "result": 1},
                    {"nonce": "n", "status": "ok", "images": {}}):
            with self.assertRaises(ValueError, msg=bad):
                self.clean(bad)
        with self.assertRaises(ValueError):
            self.R["_clean_reply"]("[]", "n", True, 1, 1, 1, 1)

    def test_caps_again(self):
        r = self.clean({"nonce": "n", "status": "error", "result": "r" * 1000, "extra": 1,
                        "error": {"type": "E" * 300, "message": "m", "line": True, "traceback": 5},
                        "images": [{"png": "AAAA", "width": 1, "height": 1}] * 3 + [{"png": 1}]})
        self.assertNotIn("extra", r)
        self.assertIn("bytes dropped", r["result"])
        self.assertLessEqual(len(r["error"]["type"]), 300)
        self.assertEqual((r["error"]["line"], r["error"]["traceback"]), (0, "5"))
        self.assertEqual(len(r["images"]), 2)

    def test_state_over_its_cap_is_dropped_whole_and_named(self):
        r = self.clean({"nonce": "n", "status": "ok", "state": {"a": "x" * 200}})
        self.assertEqual(r["state"], {})
        self.assertEqual(r["state_too_large"], [{"name": "a", "bytes": 202}])
        self.assertNotIn("state", self.clean({"nonce": "n", "status": "ok", "state": {"a": 1}}, transient=False))


class ErrorsTest(unittest.TestCase):
    def setUp(self):
        self.R = loader.load()

    def raise_in_cell(self, code):
        try:
            exec(compile(code, "<cell-1>", "exec"), {})
        except BaseException as e:  # noqa: BLE001
            return e
        self.fail("no exception")

    def test_error_info_names_the_cells_line(self):
        e = self.raise_in_cell("x = 1\n\ndef f():\n    return 1 / 0\nf()\n")
        info = self.R["_error_info"](e, "<cell-1>")
        self.assertEqual((info["type"], info["line"]), ("ZeroDivisionError", 4))
        self.assertTrue(info["traceback"].startswith("Traceback (most recent call last):\n"))
        self.assertNotIn("test_results", info["traceback"])  # only the user's frames

    def test_eperm_of_a_denied_class_names_the_policy(self):
        e = self.raise_in_cell("import os\nraise PermissionError(1, 'Operation not permitted', 'fork')\n")
        info = self.R["_error_info"](e, "<cell-1>", ("processes",))
        self.assertIn("not allowed by the sandbox policy", info["message"])
        self.assertIsNone(self.R["_explain_eperm"](OSError(errno.ENOENT, "x"), ("processes",)))

    def test_clip(self):
        s = self.R["_clip"]("a" * 50 + "b" * 50, 20)
        self.assertTrue(s.startswith("a" * 10) and s.endswith("b" * 10) and "80 characters dropped" in s)

    def test_syntax_window_of_a_long_line(self):
        code = "x = [" + "1, " * 400 + ")\n"
        syn = self.R["_parse"]({"code": code})["syntax"]
        self.assertLessEqual(len(syn["text"]), 406)
        self.assertIn("^", syn["detail"])
        self.assertEqual(self.R["_parse"]({"code": 1})["status"], "error")
        self.assertEqual(self.R["_parse"]({"code": "x = 1"}), {"status": "ok"})


class FilesTest(unittest.TestCase):
    def setUp(self):
        self.R = loader.load()
        self.root = self.R["_WORKDIR"]

    def test_paths_stay_in_the_working_directory(self):
        outside = os.path.dirname(self.root)
        os.symlink(outside, os.path.join(self.root, "up"))
        for path in ("../x", "/etc/passwd", "up/x", "a\x00b"):
            r = self.R["_file_op"]({"op": "read", "path": path})
            self.assertEqual(r["error"]["type"], "PathError", path)

    def test_write_over_the_file_cap_is_refused(self):
        with open(os.path.join(self.root, "f"), "wb") as f:
            f.write(b"1234")
        r = self.R["_file_op"]({"op": "write", "path": "f", "data": "NTY3OA==", "append": True, "max_file_bytes": 6})
        self.assertEqual((r["status"], r["error"]["type"], r["file_size"]), ("error", "FileTooLarge", 4))
        r = self.R["_file_op"]({"op": "read", "path": "f", "max_bytes": 2})
        self.assertEqual((r["error"]["type"], r["file_size"]), ("FileTooLarge", 4))
        r = self.R["_file_op"]({"op": "read", "path": "f", "offset": 9, "length": 1})
        self.assertEqual(r["error"]["type"], "BadOffset")
        self.assertEqual(self.R["_file_op"]({"op": "read", "path": "nope"})["error"]["type"], "FileNotFoundError")


if __name__ == "__main__":
    unittest.main()


class NoInputTest(unittest.TestCase):
    def test_input_says_why_it_fails(self):
        R = loader.load()
        with self.assertRaises(EOFError) as cm:
            R["_no_input"]("name? ")
        self.assertIn("input() is not available", str(cm.exception))
        self.assertIn("stdin is empty", str(cm.exception))

"""The runner against the golden request frames of executor/protocol
(testdata/*.json, which go test marshals the Go structs against)."""

import base64
import glob
import json
import os
import re
import unittest

import loader


def keys(v, out):
    if isinstance(v, dict):
        for k, x in v.items():
            out.add(k)
            keys(x, out)
    elif isinstance(v, list):
        for x in v:
            keys(x, out)
    return out


class GoldenFramesTest(unittest.TestCase):
    def setUp(self):
        self.R = loader.load()

    def test_every_field_is_one_the_runner_reads(self):
        src = "".join(loader.source(n) for n in loader.order())
        named = set(re.findall(r'"([a-z_]+)"', src))  # the runner reads fields by their quoted names
        files = sorted(glob.glob(os.path.join(loader.TESTDATA, "*.json")))
        self.assertGreaterEqual(len(files), 11)
        for f in files:
            with open(f) as fh:
                for k in sorted(keys(json.load(fh), set())):
                    if k in ("y", "id"):  # a state member; the id is echoed as a whole (resp["id"] = req.get("id"))
                        continue
                    self.assertIn(k, named, "%s: field %r is named nowhere in the runner" % (os.path.basename(f), k))

    def test_run(self):
        req = loader.golden("run")
        self.assertIsNone(self.R["_check_facts"](req, "<cell-1>"), "the gate's imports are CPython's")
        resp = self.R["_worker_run"](dict(req, cell="<cell-1>"), ())
        self.assertEqual(resp["status"], "ok", resp)
        self.assertEqual(resp["result"], repr(json.dumps({"s": 3})))
        self.assertEqual(resp["state"], {"y": 2, "x": 1})
        raw = json.dumps(dict(resp, nonce="n"))
        clean = self.R["_clean_reply"](raw, "n", True, 1 << 20, 1 << 20, 4 << 20, 16)
        self.assertEqual(clean["state"], {"y": 2, "x": 1})

    def test_run_imports_that_disagree_are_refused(self):
        req = loader.golden("run")
        req["imports"] = req["imports"][:1]
        resp = self.R["_check_facts"](req, "<cell-1>")
        self.assertEqual(resp["status"], "refused")
        self.assertEqual(resp["error"]["type"], "FactMismatch")
        self.assertIn("from json import dumps as d, loads (line 2)", resp["error"]["message"])

    def test_worker_key_of_the_run_is_the_preloads_arm(self):
        # A spare worker armed by the pool's preload serves the run with the
        # same guard: both frames give one key.
        run, pre = loader.golden("run"), loader.golden("preload")
        arm = dict(pre["arm"], op="arm")
        self.assertEqual(self.R["_worker_key"](run), self.R["_worker_key"](arm))
        key = json.loads(self.R["_worker_key"](run))
        self.assertEqual(key[0], {"processes": False, "pty": False, "native_code": True, "sockets": ["unix"]})
        self.assertEqual(key[1], [[], ["socket", "subprocess"]])
        self.assertEqual(key[2], run["modules"]["calls"])
        self.assertNotEqual(self.R["_worker_key"](loader.golden("run_bash")), self.R["_worker_key"](run))

    def test_parse(self):
        resp = self.R["_parse"](loader.golden("parse"))
        self.assertEqual(resp["status"], "ok")
        syn = resp["syntax"]
        self.assertEqual((syn["type"], syn["line"]), ("SyntaxError", 1))
        self.assertIn("def f(:", syn["detail"])

    def test_file_ops(self):
        w = self.R["_file_op"](loader.golden("write"))
        self.assertEqual(w, {"status": "ok", "file_size": 5})
        with open(os.path.join(self.R["_WORKDIR"], "out", "a.txt"), "rb") as f:
            self.assertEqual(f.read(), b"hello")
        r = self.R["_file_op"](loader.golden("read"))
        self.assertEqual((base64.b64decode(r["data"]), r["file_size"]), (b"hello", 5))
        part = self.R["_file_op"](loader.golden("read_part"))
        self.assertEqual((base64.b64decode(part["data"]), part["file_size"]), (b"llo", 5))
        ls = self.R["_file_op"](loader.golden("list"))
        self.assertEqual([(e["path"], e["dir"]) for e in ls["entries"]], [("out", True), ("out/a.txt", False)])

    def test_interrupt_exit_and_ping_reach_the_loop(self):
        # The loop's reader: interrupt calls back, ping is queued for a
        # reply; exit would end the process (not sent here).
        r, w = os.pipe()
        try:
            self.R["_PROTO_IN"] = r
            runner = self.R["_Runner"]()
            for name in ("interrupt", "ping"):
                os.write(w, self.R["_encode"](loader.golden(name)))
            hits = []
            runner.read_protocol(lambda: hits.append(1))
            self.assertEqual(hits, [1])
            self.assertEqual([m["op"] for m in runner.pending], ["ping"])
            self.assertEqual(runner.pending[0]["nonce"], loader.golden("ping")["nonce"])
        finally:
            os.close(r)
            os.close(w)


class FramesTest(unittest.TestCase):
    def setUp(self):
        self.R = loader.load()

    def test_frames_round_trip_and_oversized_is_refused(self):
        r, w = os.pipe()
        try:
            os.set_blocking(r, False)
            rd = self.R["_FrameReader"](r, 64)
            os.write(w, self.R["_encode"]({"a": "é"}) + self.R["_encode"]({"b": 2})[:5])
            rd.feed()
            self.assertEqual([json.loads(d) for d in rd.frames()], [{"a": "é"}])
            self.assertEqual(len(rd.buf), 5)  # the next frame waits for the rest
            big = self.R["_FrameReader"](r, 64)
            os.write(w, b"\x00\x00\x01\x00" + b"x" * 8)
            big.feed()
            with self.assertRaises(ValueError):
                list(big.frames())
        finally:
            os.close(r)
            os.close(w)

    def test_capture_keeps_head_and_tail(self):
        c = self.R["_Capture"](10)
        for b in (b"01234", b"56789", b"abcdef"):
            c.add(b)
        text, truncated = c.text()
        self.assertTrue(truncated)
        self.assertEqual(text, "01234\n... [6 bytes dropped] ...\nbcdef")
        self.assertEqual(self.R["_Capture"](10).text(), ("", False))


if __name__ == "__main__":
    unittest.main()

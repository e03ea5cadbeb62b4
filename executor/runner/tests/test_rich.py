"""Rich representations: display() and a cell's last expression give an
object's HTML, PNG or SVG (within their bounds, and what does not fit is
named), and the runner's reply checks hold the worker to the same bounds
and to the shape of executor/protocol's golden reply (testdata/reply_rich.json)."""

import base64
import contextlib
import io
import json
import os
import re
import struct
import unittest
import zlib

import loader


def png(w=2, h=1, pad=0):
    """A w×h grey PNG, with pad bytes of an ancillary chunk."""
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    rows = b"".join(b"\x00" + b"\x80" * w for _ in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + (chunk(b"tEXt", b"c\x00" + b"x" * pad) if pad else b"") + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


# The fakes user code defines: objects with IPython's _repr_*_ methods.
FAKES = '''
import base64, struct, zlib
class Html:
    def __init__(self, html): self.html = html
    def __repr__(self): return "Html(%d)" % len(self.html)
    def _repr_html_(self): return self.html
class Png:
    def __init__(self, data): self.data = data
    def __repr__(self): return "Png()"
    def _repr_png_(self): return self.data
class Svg:
    def __repr__(self): return "Svg()"
    def _repr_svg_(self): return '<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>'
class Both(Png, Svg):
    def _repr_html_(self): return ("<b>both</b>", {"isolated": True})
class Broken:
    def __repr__(self): return "Broken()"
    def _repr_html_(self): raise ValueError("no html today")
    def _repr_png_(self): return b"GIF89a not a png"
    def _repr_svg_(self): return "<svg/>"
class Declines:
    def _repr_html_(self): return None
class Anything:
    def __getattr__(self, name): return lambda: "<b>%s</b>" % name
'''


class RichTest(unittest.TestCase):
    def setUp(self):
        self.R = loader.load()

    def run_cell(self, code, max_images=16, max_img=4 << 20):
        req = {"code": FAKES + code, "cell": "<cell-1>", "nonce": "n",
               "limits": {"timeout_ms": 30000, "max_output_bytes": 1 << 20, "max_state_bytes": 1 << 20,
                          "max_image_bytes": max_img, "max_images": max_images}}
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            resp = self.R["_worker_run"](req, ())
        resp["stdout"] = out.getvalue()
        return resp

    def data(self, item):
        return base64.b64decode(item["data"])

    def test_display_and_the_last_expression_give_html_png_and_svg_in_order(self):
        p = png(3, 2)
        resp = self.run_cell("display(Html('<i>a</i>'), Svg())\nPng(%r)" % p)
        self.assertEqual(resp["status"], "ok", resp)
        self.assertEqual(resp["stdout"], "Html(8)\nSvg()\n")  # display() still prints each repr
        self.assertEqual(resp["result"], "Png()")
        got = [(i["mime"], i["from"], i["n"], i["width"], i["height"]) for i in resp["rich"]]
        self.assertEqual(got, [("text/html", "display", 1, 0, 0), ("image/svg+xml", "display", 2, 0, 0),
                               ("image/png", "result", 0, 3, 2)])
        self.assertEqual(self.data(resp["rich"][0]), b"<i>a</i>")
        self.assertIn(b"<svg", self.data(resp["rich"][1]))
        self.assertEqual(self.data(resp["rich"][2]), p)
        self.assertNotIn("rich_dropped", resp)

    def test_an_object_gives_its_html_and_one_image_png_over_svg(self):
        resp = self.run_cell("Both(%r)" % png())
        self.assertEqual([i["mime"] for i in resp["rich"]], ["text/html", "image/png"])
        self.assertEqual(self.data(resp["rich"][0]), b"<b>both</b>")  # a (data, metadata) pair gives its data

    def test_a_failing_representation_is_named_and_the_run_goes_on(self):
        resp = self.run_cell("display(Broken())\nx = 1")
        self.assertEqual(resp["status"], "ok", resp)
        self.assertEqual([i["mime"] for i in resp["rich"]], ["image/svg+xml"])  # PNG failed: SVG is tried
        why = [(d["mime"], d["why"], d.get("error")) for d in resp["rich_dropped"]]
        self.assertEqual(why, [("text/html", "failed", "ValueError: no html today"),
                               ("image/png", "failed", "ValueError: returned data that is not a PNG file")])

    def test_classes_none_plain_objects_and_mocks_give_nothing(self):
        resp = self.run_cell("display(Html, Declines(), 42, Anything())\nHtml")
        self.assertNotIn("rich", resp)
        self.assertNotIn("rich_dropped", resp)

    def test_html_over_the_item_limit_is_dropped_and_named(self):
        resp = self.run_cell("display(Html('x' * (300 << 10)), Html('ok'))")
        self.assertEqual([self.data(i) for i in resp["rich"]], [b"ok"])
        self.assertEqual(resp["rich_dropped"], [{"mime": "text/html", "from": "display", "n": 1, "bytes": 300 << 10,
                                                 "why": "too_large", "limit": 256 << 10}])

    def test_html_and_svg_over_the_run_total_are_dropped_and_named(self):
        resp = self.run_cell("for i in range(5): display(Html('x' * (250 << 10)))")
        self.assertEqual(len(resp["rich"]), 4)
        self.assertEqual([(d["n"], d["why"], d["limit"]) for d in resp["rich_dropped"]], [(5, "over_total", 1 << 20)])

    def test_items_over_the_count_are_dropped_and_named(self):
        resp = self.run_cell("for i in range(18): display(Html('<p>%d</p>' % i))")
        self.assertEqual(len(resp["rich"]), 16)
        self.assertEqual([(d["n"], d["why"], d["limit"]) for d in resp["rich_dropped"]], [(17, "over_count", 16), (18, "over_count", 16)])

    def test_pngs_share_the_image_limits_with_figures(self):
        resp = self.run_cell("for i in range(3): display(Png(%r))" % png(), max_images=2)
        self.assertEqual(len(resp["rich"]), 2)
        self.assertEqual([(d["n"], d["why"], d["limit"]) for d in resp["rich_dropped"]], [(3, "over_image_count", 2)])
        big = png(pad=600)
        resp = self.run_cell("display(Png(%r), Png(%r))" % (big, big), max_img=1000)
        self.assertEqual([(d["n"], d["bytes"], d["why"], d["limit"]) for d in resp["rich_dropped"]],
                         [(2, len(big), "over_image_bytes", 1000)])

    def test_a_dataframe_and_a_series_give_bounded_html_tables(self):
        try:
            import pandas as pd  # noqa: F401
        except ImportError:
            self.skipTest("pandas is not installed on the host (the sandbox image has it; the e2e test covers it there)")
        resp = self.run_cell("import pandas as pd\ndf = pd.DataFrame({'a': range(500), 'b': 1})\ndisplay(df.a)\ndf")
        html = [self.data(i).decode() for i in resp["rich"]]
        self.assertEqual([i["mime"] for i in resp["rich"]], ["text/html", "text/html"])
        self.assertIn("<table", html[1])
        self.assertEqual(html[1].count("<tr>"), 60 + 1)  # 60 rows and the "..." row (the header's has a style)
        self.assertIn("<th>499</th>", html[1])
        self.assertNotIn("<th>250</th>", html[1])
        self.assertIn("500 rows × 2 columns", html[1])
        self.assertIn("<th>a</th>", html[0])  # the Series as a one-column table
        self.assertEqual(html[0].count("<tr>"), 60 + 1)

    def test_display_outside_a_run_only_prints(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.R["_display"](self.R["_RichSink"]())
        self.assertEqual(self.R["_RICH"].items, [])


class RichReplyTest(unittest.TestCase):
    """The runner re-applies the bounds to what the worker sends."""

    def setUp(self):
        self.R = loader.load()

    def clean(self, reply, max_img=4 << 20, max_images=16):
        return self.R["_clean_reply"](json.dumps(dict(reply, nonce="n", status="ok")), "n", True, 1 << 20, 1 << 20,
                                      max_img, max_images)

    def item(self, data, mime="text/html", n=1, **kw):
        return dict({"mime": mime, "data": base64.b64encode(data).decode(), "from": "display", "n": n,
                     "width": 0, "height": 0}, **kw)

    def test_the_golden_reply_passes_unchanged(self):
        golden = loader.golden("reply_rich")
        r = self.R["_clean_reply"](json.dumps(golden), golden["nonce"], True, 1 << 20, 1 << 20, 4 << 20, 16)
        self.assertEqual(r["rich"], golden["rich"])
        self.assertEqual(r["rich_dropped"], golden["rich_dropped"])

    def test_a_workers_reply_has_the_golden_shape(self):
        golden = loader.golden("reply_rich")
        resp = RichTest.run_cell(self, "display(Html('x' * (300 << 10)))\nBoth(%r)" % png())
        self.assertEqual({tuple(sorted(i)) for i in resp["rich"]}, {tuple(sorted(golden["rich"][0]))})
        self.assertEqual(sorted(resp["rich_dropped"][0]), sorted(golden["rich_dropped"][0]))

    def test_items_over_the_bounds_are_dropped_again_and_named(self):
        items = [self.item(b"x" * (300 << 10)), self.item(b"y", mime="text/plain"), self.item(b"z", n=-1),
                 self.item(b"ok", n=2), dict(self.item(b""), data="not base64!")]
        items += [self.item(png(), mime="image/png", n=3 + i, width=2, height=1) for i in range(3)]
        r = self.clean({"rich": items, "images": [{"png": base64.b64encode(png()).decode(), "width": 2, "height": 1}] * 2},
                       max_images=3)
        self.assertEqual([(i["mime"], i["n"]) for i in r["rich"]], [("text/html", 2), ("image/png", 3), ("image/png", 4), ("image/png", 5)])
        self.assertEqual([(d["n"], d["why"]) for d in r["rich_dropped"]], [(1, "too_large")])
        self.assertNotIn("images", r)  # the rich PNGs took every image the run may return

    def test_malformed_rich_is_refused_and_dropped_entries_are_clipped(self):
        with self.assertRaises(ValueError):
            self.clean({"rich": {}})
        with self.assertRaises(ValueError):
            self.clean({"rich_dropped": "x"})
        r = self.clean({"rich_dropped": [7] + [{"mime": "m" * 500, "bytes": -1, "why": "w", "error": "e" * 5000}] * 100})
        self.assertEqual(len(r["rich_dropped"]), 63)  # 64 entries read, one of them not an object
        d = r["rich_dropped"][0]
        self.assertEqual((len(d["mime"]), d["bytes"], d["n"], d["limit"]), (64, 0, 0, 0))
        self.assertLess(len(d["error"]), 400)


class BoundsTest(unittest.TestCase):
    def test_the_runners_bounds_are_the_protocols(self):
        R = loader.load()
        with open(os.path.join(os.path.dirname(loader.TESTDATA), "protocol.go"), encoding="utf-8") as f:
            src = f.read()

        def go(name):
            m = re.search(r"^\s*%s\s*=\s*(\d+)(?:\s*<<\s*(\d+))?\s*$" % name, src, re.M)
            self.assertIsNotNone(m, name)
            return int(m.group(1)) << int(m.group(2) or 0)

        for py, g in (("_MAX_RICH_BYTES", "MaxRichBytes"), ("_MAX_RICH_TOTAL", "MaxRichTotalBytes"), ("_MAX_RICH", "MaxRich"),
                      ("_MAX_RICH_DROPPED", "MaxRichDropped"), ("_RICH_HTML_ROWS", "RichHTMLRows"), ("_RICH_HTML_COLS", "RichHTMLCols")):
            self.assertEqual(R[py], go(g), py)
        runner = "".join(loader.source(n) for n in loader.order())
        whys = re.findall(r'^\s*Rich(?:TooLarge|Over\w+|Failed)\s*=\s*"(\w+)"', src, re.M)
        self.assertEqual(len(whys), 6)
        for why in whys:  # every reason the server explains is one the runner gives
            self.assertIn('"%s"' % why, runner)
        for mime, g in (("text/html", "MIMEHTML"), ("image/png", "MIMEPNG"), ("image/svg+xml", "MIMESVG")):
            self.assertIn(mime, R["_RICH_MIMES"])
            self.assertRegex(src, r'%s\s*=\s*"%s"' % (g, re.escape(mime)))


if __name__ == "__main__":
    unittest.main()

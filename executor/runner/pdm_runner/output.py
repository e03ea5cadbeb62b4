# output.py: what a run prints and draws: the capped capture of the worker's
# stdout and stderr, the worker's fresh stdio, the matplotlib figures
# left open (rendered to PNG), display() and the rich representations
# (HTML, PNG, SVG) of what it shows.
# A part of the sandbox runner; see ../README.md.

# ---------------------------------------------------------------- output


class _Capture:
    """Keeps the head and the tail of at most cap bytes of one stream and
    counts the rest."""

    def __init__(self, cap):
        self.half = max(cap // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, b):
        self.total += len(b)
        room = self.half - len(self.head)
        if room > 0:
            self.head += b[:room]
            b = b[room:]
        if b:
            self.tail += b
            extra = len(self.tail) - self.half
            if extra > 0:
                del self.tail[:extra]

    def text(self):
        dropped = self.total - len(self.head) - len(self.tail)
        if dropped > 0:
            data = bytes(self.head) + ("\n... [%d bytes dropped] ...\n" % dropped).encode() + bytes(self.tail)
        else:
            data = bytes(self.head) + bytes(self.tail)
        return data.decode("utf-8", "replace"), dropped > 0


def _figures(max_images, max_bytes):
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return [], 0
    images, total, skipped = [], 0, 0
    try:
        nums = list(plt.get_fignums())
        for num in nums:
            if len(images) >= max_images:
                skipped += 1
                continue
            try:
                fig = plt.figure(num)
                buf = io.BytesIO()
                fig.savefig(buf, format="png")
                data = buf.getvalue()
            except (SandboxTimeout, SandboxInterrupt):
                raise
            except Exception as e:
                _diag("figure %s: %r" % (num, e))
                skipped += 1
                continue
            if total + len(data) > max_bytes or data[:8] != b"\x89PNG\r\n\x1a\n":
                skipped += 1
                continue
            w, h = struct.unpack(">II", data[16:24])
            total += len(data)
            images.append({"png": base64.b64encode(data).decode("ascii"), "width": w, "height": h})
    finally:
        try:
            plt.close("all")
        except Exception:
            pass
    return images, skipped


def _fresh_stdio():
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True)
    sys.__stdout__ = sys.stdout
    sys.__stderr__ = sys.stderr


def _flush_stdio():
    for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if s is not None:
                s.flush()
        except BaseException:  # noqa: BLE001
            pass


def _no_input(prompt=""):
    """input() in a sandbox: there is no terminal and stdin is empty, so
    say so instead of Python's bare "EOF when reading a line"."""
    raise EOFError("input() is not available: code runs without a terminal and its stdin is empty; "
                   "put the data in the code, a variable or a file in the working directory")


# Bounds of the rich representations of one run: executor/protocol's
# MaxRichBytes, MaxRichTotalBytes, MaxRich, MaxRichDropped, RichHTMLRows
# and RichHTMLCols (the runner's tests hold them equal).
_MAX_RICH_BYTES = 256 << 10  # one HTML or SVG item
_MAX_RICH_TOTAL = 1 << 20  # all HTML and SVG items of a run
_MAX_RICH = 16  # items of a run
_MAX_RICH_DROPPED = 64  # entries of rich_dropped
_RICH_HTML_ROWS = 60  # a DataFrame's or Series' HTML table
_RICH_HTML_COLS = 20
_RICH_MIMES = ("text/html", "image/png", "image/svg+xml")
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _rich_method(obj, name):
    """obj's bound _repr_*_ method, or None: a class's own (unbound)
    method is not its representation, and an object that claims every
    attribute (a mock, a proxy: it has IPython's canary too) has none, as
    in IPython."""
    if isinstance(obj, type):
        return None
    try:
        if hasattr(obj, "_ipython_canary_method_should_not_exist_"):
            return None
        f = getattr(obj, name, None)
    except (SandboxTimeout, SandboxInterrupt):
        raise
    except Exception:  # noqa: BLE001 - a property that raises: no such representation
        return None
    return f if callable(f) else None


def _rich_value(v, want):
    """What a _repr_*_ method returned, as bytes of kind want ("text" or
    "png"), or None when it declined; ValueError says why it is unusable.
    A (data, metadata) pair gives its data, as IPython takes it."""
    if isinstance(v, tuple) and len(v) == 2:
        v = v[0]
    if v is None:
        return None
    if want == "png":
        if isinstance(v, str):
            try:
                v = base64.b64decode(v, validate=True)
            except ValueError:
                raise ValueError("returned a str that is not base64") from None
        if not isinstance(v, (bytes, bytearray)):
            raise ValueError("returned %s, not bytes" % type(v).__name__)
        v = bytes(v)
        if v[:8] != _PNG_MAGIC or len(v) < 24:
            raise ValueError("returned data that is not a PNG file")
        return v
    if isinstance(v, (bytes, bytearray)):
        v = bytes(v).decode("utf-8", "replace")
    if not isinstance(v, str):
        raise ValueError("returned %s, not str" % type(v).__name__)
    return v.encode("utf-8", "replace")


def _bounded(opt, cap):
    return opt if isinstance(opt, int) and not isinstance(opt, bool) and 0 < opt <= cap else cap


def _html_of(obj):
    """obj's HTML: a pandas DataFrame's or Series' table with at most
    _RICH_HTML_ROWS rows and _RICH_HTML_COLS columns (fewer when pandas'
    display options say so), else its _repr_html_."""
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(obj, (pd.DataFrame, pd.Series)):
        frame = obj.to_frame() if isinstance(obj, pd.Series) else obj
        return frame.to_html(max_rows=_bounded(pd.get_option("display.max_rows"), _RICH_HTML_ROWS),
                             max_cols=_bounded(pd.get_option("display.max_columns"), _RICH_HTML_COLS),
                             show_dimensions="truncate", notebook=True)
    f = _rich_method(obj, "_repr_html_")
    return f() if f is not None else None


def _reprs(obj):
    """Yields (mime, data bytes or None, error text or None) for obj's rich
    representations: its HTML, then one image, PNG over SVG (a failing
    _repr_png_ is reported and SVG is tried)."""
    image = False
    for mime, want, method in (("text/html", "text", None), ("image/png", "png", "_repr_png_"),
                               ("image/svg+xml", "text", "_repr_svg_")):
        if image:
            break
        try:
            if method is None:
                v = _html_of(obj)
            else:
                f = _rich_method(obj, method)
                v = f() if f is not None else None
            data = _rich_value(v, want)
        except (SandboxTimeout, SandboxInterrupt):
            raise
        except Exception as e:  # noqa: BLE001 - a failing _repr_*_ is reported, the run goes on
            try:
                why = "%s: %s" % (type(e).__name__, e)
            except Exception:  # noqa: BLE001 - its __str__ may raise too
                why = type(e).__name__
            yield mime, None, _clip(why, 300)
            continue
        if data is None:
            continue
        image = mime != "text/html"
        yield mime, data, None


class _RichSink:
    """The rich representations of one run, within their bounds; what does
    not fit is named in dropped, never cut. PNG items share the figures'
    count and bytes (max_images, max_image_bytes), counted first."""

    def __init__(self, max_images=16, max_image_bytes=4 << 20):
        self.reset(max_images, max_image_bytes)

    def reset(self, max_images=16, max_image_bytes=4 << 20):
        self.items, self.dropped = [], []
        self.text = 0  # bytes of HTML and SVG kept
        self.png = 0  # bytes of PNG kept
        self.pngs = 0
        self.shown = 0  # display() arguments so far
        self.max_images, self.max_image_bytes = max_images, max_image_bytes

    def drop(self, mime, frm, n, size, why, limit, error=None):
        if len(self.dropped) < _MAX_RICH_DROPPED:
            d = {"mime": mime, "from": frm, "n": n, "bytes": size, "why": why, "limit": limit}
            if error:
                d["error"] = error
            self.dropped.append(d)

    def add(self, obj, frm):
        n = 0
        if frm == "display":
            self.shown += 1
            n = self.shown
        for mime, data, error in _reprs(obj):
            if data is None:
                self.drop(mime, frm, n, 0, "failed", 0, error)
                continue
            size = len(data)
            if len(self.items) >= _MAX_RICH:
                self.drop(mime, frm, n, size, "over_count", _MAX_RICH)
                continue
            item = {"mime": mime, "data": base64.b64encode(data).decode("ascii"), "from": frm, "n": n,
                    "width": 0, "height": 0}
            if mime == "image/png":
                if self.pngs >= self.max_images:
                    self.drop(mime, frm, n, size, "over_image_count", self.max_images)
                    continue
                if self.png + size > self.max_image_bytes:
                    self.drop(mime, frm, n, size, "over_image_bytes", self.max_image_bytes)
                    continue
                item["width"], item["height"] = struct.unpack(">II", data[16:24])
                self.png += size
                self.pngs += 1
            else:
                if size > _MAX_RICH_BYTES:
                    self.drop(mime, frm, n, size, "too_large", _MAX_RICH_BYTES)
                    continue
                if self.text + size > _MAX_RICH_TOTAL:
                    self.drop(mime, frm, n, size, "over_total", _MAX_RICH_TOTAL)
                    continue
                self.text += size
            self.items.append(item)


_RICH = _RichSink()


def _display(*objs, **options):
    """display(obj, ...) as in a notebook: each object's repr on stdout (a
    pandas DataFrame's repr is its table, bounded by pandas' display
    options), so a cell can show values that are not its last, and its
    rich representations (see _RichSink) in the run's reply. IPython's
    keyword options (include, metadata, ...) are accepted and ignored."""
    for o in objs:
        print(repr(o), file=sys.stdout)
        if _RUN.running:
            _RICH.add(o, "display")

# output.py: what a run prints and draws: the capped capture of the worker's
# stdout and stderr, the worker's fresh stdio, the matplotlib figures
# left open (rendered to PNG).
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


def _display(*objs):
    """display(obj, ...) as in a notebook, in text: each object's repr on
    stdout (a pandas DataFrame's repr is its table, bounded by pandas'
    display options), so a cell can show values that are not its last."""
    for o in objs:
        print(repr(o), file=sys.stdout)

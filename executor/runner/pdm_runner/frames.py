# frames.py: the protocol's frames: length-prefixed JSON in and out, the runner's
# diagnostics channel, and the reader of a worker's result pipe.
# A part of the sandbox runner; see ../README.md.

def _diag(msg):
    try:
        os.write(_DIAG, ("runner: %s\n" % msg).encode("utf-8", "replace"))
    except OSError:
        pass


# The worker encodes its reply after user code ran, which may have
# replaced json.dumps or json.JSONEncoder in its interpreter: the encoder
# is made before.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=str)


def _encode(obj):
    data = _ENCODER.encode(obj).encode("utf-8", "surrogatepass")
    return struct.pack(">I", len(data)) + data


def _write_all(fd, buf):
    view = memoryview(buf)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _send(obj):
    _write_all(_PROTO_OUT, _encode(obj))


def _read_reply(reader):
    """Feeds the worker's result pipe into reader and returns (reply, fail):
    the first complete frame, or why the worker's reply is invalid."""
    reader.feed()
    try:
        for data in reader.frames():
            return data, None
    except ValueError as e:
        return None, ("killed", "SandboxKilled", "%s: %s" % (_INVALID, e))
    return None, None


class _FrameReader:
    """Accumulates length-prefixed frames from a non-blocking fd; refuses a
    frame longer than cap before reading it."""

    def __init__(self, fd, cap):
        self.fd = fd
        self.cap = cap
        self.buf = bytearray()
        self.eof = False

    def feed(self):
        try:
            b = os.read(self.fd, 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            b = b""
        if not b:
            self.eof = True
            return
        self.buf += b

    def peek(self):
        """The complete frames held, left for frames(), and whether part of
        another has come."""
        out, i = [], 0
        while len(self.buf) - i >= 4:
            (n,) = struct.unpack(">I", self.buf[i:i + 4])
            if len(self.buf) - i - 4 < n:
                break
            out.append(bytes(self.buf[i + 4:i + 4 + n]))
            i += 4 + n
        return out, i < len(self.buf)

    def frames(self):
        """Yields complete frames; raises ValueError for an oversized one."""
        while len(self.buf) >= 4:
            (n,) = struct.unpack(">I", self.buf[:4])
            if n > self.cap:
                raise ValueError("a frame of %d bytes exceeds the limit of %d bytes" % (n, self.cap))
            if len(self.buf) < 4 + n:
                return
            data = bytes(self.buf[4:4 + n])
            del self.buf[:4 + n]
            yield data

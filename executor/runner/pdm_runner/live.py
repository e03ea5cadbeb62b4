# live.py: a run's output sent while it runs (a run request with "stream"):
# output frames that carry each stream's next bytes with their offsets.
# A part of the sandbox runner; see ../README.md.

# An output frame for a stream is sent at most every _LIVE_EVERY seconds
# and carries what waited since the last one; at most _LIVE_PENDING bytes
# wait (the rest is skipped: the frame after it starts at a later offset,
# and the reply holds the whole capped output anyway). So a flood of output
# costs the protocol at most _LIVE_PENDING / _LIVE_EVERY bytes a second a
# stream.
_LIVE_EVERY = 0.05
_LIVE_PENDING = 64 << 10


def _utf8_cut(b):
    """The length of b's longest prefix that does not end inside a UTF-8
    sequence (at most 3 bytes are held back)."""
    n = len(b)
    for back in range(1, min(4, n + 1)):
        c = b[n - back]
        if c < 0x80:
            return n  # ASCII: complete
        if c >= 0xC0:  # a lead byte: is its sequence complete?
            need = 2 if c < 0xE0 else 3 if c < 0xF0 else 4
            return n if back >= need else n - back
    return n


class _Live:
    """One stream of one run as output frames: the bytes the worker wrote
    that no frame carried yet. pending holds the stream's bytes from
    offset on; sent counts the bytes frames carried, skipped those none
    will."""

    def __init__(self, name, req):
        self.name = name
        self.id = req.get("id")
        self.nonce = req.get("nonce")
        self.offset = 0
        self.pending = bytearray()
        self.last = 0.0  # when the last frame went
        self.gap = 0  # bytes skipped after pending, since the last frame
        self.sent = 0
        self.skipped = 0

    def add(self, b):
        room = 0 if self.gap else _LIVE_PENDING - len(self.pending)
        if len(b) <= room:
            self.pending += b
            return
        # Full: what fits waits, the rest is skipped until the next frame.
        self.pending += b[:room]
        self.gap += len(b) - room

    def due(self):
        """Seconds until this stream's next frame is due (None: nothing waits)."""
        if not self.pending and not self.gap:
            return None
        return max(self.last + _LIVE_EVERY - time.monotonic(), 0.0)

    def flush(self, final=False):
        """Sends what waits: whole UTF-8 sequences only, unless final (the
        run ended, or bytes after these are skipped)."""
        n = len(self.pending) if final or self.gap else _utf8_cut(self.pending)
        if n == 0:
            if self.gap:  # (not reached: a gap follows pending bytes)
                self.offset, self.skipped, self.gap = self.offset + self.gap, self.skipped + self.gap, 0
            return
        data = bytes(self.pending[:n])
        del self.pending[:n]
        _send({"op": "output", "id": self.id, "nonce": self.nonce, "stream": self.name,
               "offset": self.offset, "bytes": n, "data": data.decode("utf-8", "replace")})
        self.offset += n
        self.sent += n
        if not self.pending:
            self.offset += self.gap
            self.skipped += self.gap
            self.gap = 0
        self.last = time.monotonic()

# files.py: the file ops (read, write, list) of the working directory, served
# by the runner itself.
# A part of the sandbox runner; see ../README.md.

# ---------------------------------------------------------------- files


class PathError(Exception):
    pass


def _resolve(path):
    if not isinstance(path, str) or "\x00" in path:
        raise PathError("invalid path")
    if any(part == ".." for part in path.split("/")):
        raise PathError("path %r contains '..'" % path)
    root = os.path.realpath(_WORKDIR)
    p = path if os.path.isabs(path) else os.path.join(root, path)
    real = os.path.realpath(p)
    if real != root and not real.startswith(root + "/"):
        raise PathError("path %r is outside the working directory %s" % (path, _WORKDIR))
    return root, real


_MAX_LIST_BYTES = 8 << 20


def _too_large(file_size, msg):
    """A read's file, or a write's file before the call, is file_size
    bytes; the read or write would pass the cap msg names."""
    return {"status": "error", "file_size": file_size, "error": {"type": "FileTooLarge", "message": msg}}


def _no_space(want, free, file_size):
    return {"status": "error", "file_size": file_size, "error": {"type": "NoSpace", "message":
            "%d bytes do not fit, %d bytes are free" % (want, max(free, 0))}}


def _file_op(req):
    op = req["op"]
    try:
        root, real = _resolve(req.get("path") or ".")
        if op == "read":
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                st = os.fstat(fd)
                if not (st.st_mode & 0o170000 == 0o100000):
                    raise PathError("%r is not a regular file" % req.get("path"))
                cap = int(req.get("max_bytes") or (1 << 20))
                if "length" not in req:
                    # The whole file, or nothing when it is larger than cap.
                    if st.st_size > cap:
                        return _too_large(st.st_size, "%r is %d bytes; the maximum is %d bytes" % (req.get("path"), st.st_size, cap))
                    offset, want = 0, cap
                else:
                    # A part: up to length bytes from offset, of a file of
                    # at most max_file_bytes.
                    limit = int(req.get("max_file_bytes") or 0)
                    if limit and st.st_size > limit:
                        return _too_large(st.st_size, "%r is %d bytes; the maximum is %d bytes" % (req.get("path"), st.st_size, limit))
                    offset, want = int(req.get("offset") or 0), min(int(req["length"]), cap)
                    if offset < 0 or offset > st.st_size:
                        return {"status": "error", "file_size": st.st_size, "error": {"type": "BadOffset",
                                "message": "offset %d is past the end of %r (%d bytes)" % (offset, req.get("path"), st.st_size)}}
                chunks, n = [], 0
                while n < want:
                    b = os.pread(fd, min(1 << 20, want - n), offset + n)
                    if not b:
                        break
                    n += len(b)
                    chunks.append(b)
                if "length" not in req and n == want and os.pread(fd, 1, n):
                    return _too_large(n + 1, "%r grew past the maximum of %d bytes" % (req.get("path"), cap))
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            return {"status": "ok", "data": base64.b64encode(b"".join(chunks)).decode("ascii"), "file_size": max(size, offset + n)}
        if op == "write":
            if real == root:
                raise PathError("cannot write the working directory itself")
            data = base64.b64decode(req.get("data") or "")
            append = bool(req.get("append"))
            limit = int(req.get("max_file_bytes") or 0)
            if limit and len(data) > limit:
                return _too_large(0, "%d bytes; the maximum is %d bytes" % (len(data), limit))
            os.makedirs(os.path.dirname(real), exist_ok=True)
            _resolve(os.path.relpath(os.path.dirname(real), root))
            existed = os.path.lexists(real)
            fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | (os.O_APPEND if append else 0), 0o644)
            refused = None
            try:
                st = os.fstat(fd)
                if not (st.st_mode & 0o170000 == 0o100000):
                    raise PathError("%r is not a regular file" % req.get("path"))
                before = st.st_size if append else 0
                vfs = os.fstatvfs(fd)
                free = vfs.f_bavail * vfs.f_frsize + (0 if append else st.st_size)
                if limit and before + len(data) > limit:
                    refused = _too_large(before, "%r is %d bytes; with these %d bytes it would be %d bytes; the maximum is %d bytes"
                                         % (req.get("path"), before, len(data), before + len(data), limit))
                elif len(data) > free:
                    refused = _no_space(len(data), free, st.st_size)
                else:
                    if not append:
                        os.ftruncate(fd, 0)
                    try:
                        _write_all(fd, data)
                    except OSError as e:
                        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                            raise
                        os.ftruncate(fd, before)
                        vfs = os.fstatvfs(fd)
                        refused = _no_space(len(data), vfs.f_bavail * vfs.f_frsize, before)
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            if refused is not None:
                if not existed:
                    os.unlink(real)
                return refused
            return {"status": "ok", "file_size": size}
        if op == "list":
            entries = []
            if not os.path.isdir(real):
                st = os.lstat(real)
                entries.append({"path": os.path.relpath(real, root), "size": st.st_size, "dir": False,
                                "mtime_ns": st.st_mtime_ns})
                return {"status": "ok", "entries": entries}
            stack = [real]
            size = 0
            while stack and len(entries) < 10000 and size < _MAX_LIST_BYTES:
                d = stack.pop()
                with os.scandir(d) as it:
                    for ent in sorted(it, key=lambda e: e.name):
                        st = ent.stat(follow_symlinks=False)
                        is_dir = ent.is_dir(follow_symlinks=False)
                        rel = os.path.relpath(ent.path, root)
                        size += len(rel) + 100
                        entries.append({"path": rel, "size": st.st_size, "dir": is_dir, "mtime_ns": st.st_mtime_ns})
                        if is_dir:
                            stack.append(ent.path)
            entries.sort(key=lambda e: e["path"])
            return {"status": "ok", "entries": entries}
        raise PathError("unknown operation %r" % op)
    except PathError as e:
        return {"status": "error", "error": {"type": "PathError", "message": str(e)}}
    except FileNotFoundError:
        return {"status": "error", "error": {"type": "FileNotFoundError", "message": "%r does not exist" % req.get("path")}}
    except OSError as e:
        return {"status": "error", "error": {"type": type(e).__name__, "message": "%r: %s" % (req.get("path"), e.strerror or e)}}

# errors.py: how an exception of user code is reported: the user's traceback
# only, the policy's message for a refusal the kernel caused, clipped text.
# A part of the sandbox runner; see ../README.md.

def _explain_eperm(e, denied):
    """The policy message for an EPERM that a denied capability class
    caused in C code (seccomp), or None. pty.openpty's own error after
    os.openpty failed ("out of pty devices": it tried the BSD devices
    next) is one too."""
    if not denied or not isinstance(e, OSError):
        return None
    text = str(e)
    if "sandbox policy" in text:
        return None
    names = set()
    tb = e.__traceback__
    while tb is not None:
        names.add(tb.tb_frame.f_code.co_name)
        names.add(linecache.getline(tb.tb_frame.f_code.co_filename, tb.tb_lineno).strip())
        tb = tb.tb_next
    if e.errno is None and "pty" in denied and text == "out of pty devices" and "_open_terminal" in names:
        return _MSG["pty"]
    if e.errno != errno.EPERM:
        return None
    # A socket pair is AF_UNIX: denied with sockets, or with the unix family.
    pair = None
    if "sockets" in denied:
        pair = _MSG["sockets"]
    elif "sockets.unix" in denied:
        pair = _socket_msg(_FAMILIES["unix"], [f for f in _FAMILIES if "sockets." + f not in denied])
    if pair and "_make_self_pipe" in names:
        return pair + ": an asyncio event loop needs a socket pair to start, so asyncio cannot run here"
    hints = " ".join(names) + " " + text
    if pair and "sockets" not in denied and "socketpair" in hints:
        return pair
    # The failing call names the class (the kernel's EPERM does not).
    for cls, words in (("pty", ("openpty", "forkpty", "ptmx")),
                       ("processes", ("fork", "spawn", "Popen", "_execute_child", "execv", "system(")),
                       ("sockets", ("socket", "socketpair")),
                       ("native_code", ("mmap", "memfd", "dlopen", "CDLL", "mprotect"))):
        if cls in denied and any(w in hints for w in words):
            return _MSG[cls]
    return None


def _user_traceback(tb):
    entries = [fs for fs in traceback.extract_tb(tb) if fs.filename != "<pdm-runner>"]
    i = 0
    while i < len(entries) and not entries[i].filename.startswith("<cell"):
        i += 1
    return entries[i:] if i < len(entries) else entries


def _clip(s, n=_MAX_ERROR_TEXT):
    s = s if isinstance(s, str) else str(s)
    if len(s) > n:
        return s[: n // 2] + "\n... [%d characters dropped] ...\n" % (len(s) - n) + s[-(n // 2):]
    return s


def _error_info(e, cell_name, denied=()):
    try:
        msg = str(e)
    except BaseException:  # noqa: BLE001 - a user exception's __str__ may raise
        msg = "<str() failed>"
    info = {"type": type(e).__name__, "message": msg, "line": 0, "traceback": ""}
    if isinstance(e, SyntaxError):
        info["line"] = e.lineno or 0
        info["message"] = e.msg or msg
        info["traceback"] = "".join(traceback.format_exception_only(type(e), e))
        return info
    policy = _explain_eperm(e, denied)
    if policy:
        info["message"] = "%s [%s]" % (policy, msg)
    else:
        # A library may wrap the refusal (logging.config: "Unable to
        # configure handler"): name the refusal it wraps.
        seen, c = 0, e.__cause__ or e.__context__
        while c is not None and seen < 10:
            text = _explain_eperm(c, denied) or (str(c) if isinstance(c, (PermissionError, ImportError)) and (
                "sandbox policy" in str(c) or "refused at run time" in str(c)) else None)
            if text:
                info["message"] = "%s (caused by %s: %s)" % (msg, type(c).__name__, text)
                break
            seen, c = seen + 1, c.__cause__ or c.__context__
    entries = _user_traceback(e.__traceback__)
    for fs in entries:
        if fs.filename == cell_name:
            info["line"] = fs.lineno or 0
    tb = "Traceback (most recent call last):\n" + "".join(traceback.format_list(entries))
    if info["message"] != msg:
        # A refusal the policy explains: the traceback's last line, what
        # a reader sees first, says so too, not only the raw OS error.
        tb += "%s: %s\n" % (type(e).__name__, info["message"])
    else:
        try:
            tb += "".join(traceback.format_exception_only(type(e), e))
        except BaseException:  # noqa: BLE001
            tb += "%s\n" % type(e).__name__
    info["traceback"] = tb
    info["message"] = _clip(info["message"])
    info["traceback"] = _clip(info["traceback"])
    return info

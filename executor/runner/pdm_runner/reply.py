# reply.py: the runner's checks of a worker's reply (untrusted: the worker ran
# user code) and the key a worker is fixed to at its first run.
# A part of the sandbox runner; see ../README.md.

_STATUSES = ("ok", "error", "timeout", "oom", "killed")
_INVALID = "the sandbox sent an invalid reply"


def _clean_reply(raw, nonce, transient, max_out, max_state, max_img, max_images):
    """Validates a worker's result and re-applies every cap to it: the
    worker runs user code, so its reply is untrusted."""
    r = json.loads(raw)
    if not isinstance(r, dict):
        raise ValueError("the result is not an object")
    if r.get("nonce") != nonce:
        raise ValueError("the result does not carry this call's nonce")
    out = {}
    status = r.get("status")
    if status not in _STATUSES:
        raise ValueError("unknown status %.40r" % (status,))
    out["status"] = status
    err = r.get("error")
    if err is not None:
        if not isinstance(err, dict):
            raise ValueError("error is not an object")
        line = err.get("line")
        out["error"] = {"type": _clip(str(err.get("type") or "Error"), 256), "message": _clip(str(err.get("message") or "")),
                        "line": line if isinstance(line, int) and not isinstance(line, bool) and 0 <= line < 1 << 31 else 0,
                        "traceback": _clip(str(err.get("traceback") or ""))}
    res = r.get("result")
    if res is not None:
        if not isinstance(res, str):
            raise ValueError("result is not a string")
        b = res.encode("utf-8", "surrogatepass")
        if len(b) > max_out + 256:
            half = max_out // 2
            res = b[:half].decode("utf-8", "replace") + "\n... [%d bytes dropped] ...\n" % (len(b) - max_out) + b[-half:].decode("utf-8", "replace")
        out["result"] = res
    if transient and "state" in r:
        st = r["state"]
        if not isinstance(st, dict):
            raise ValueError("state is not an object")
        too_large = r.get("state_too_large")
        too_large = [{"name": str(d.get("name", ""))[:256], "bytes": d["bytes"]} for d in too_large[:_MAX_DROPPED]
                     if isinstance(d, dict) and type(d.get("bytes")) is int and 0 <= d["bytes"] < 1 << 62] if isinstance(too_large, list) else []
        if len(json.dumps(st, ensure_ascii=False).encode("utf-8", "surrogatepass")) > max_state:
            # The worker trims the state to its cap; a worker that did not
            # loses all of it, named, and the run keeps its outcome.
            too_large = [{"name": str(k)[:256], "bytes": len(json.dumps(v, ensure_ascii=False).encode("utf-8", "surrogatepass"))}
                         for k, v in list(st.items())[:_MAX_DROPPED]] + too_large
            st = {}
        out["state"] = st
        if too_large:
            out["state_too_large"] = too_large[:_MAX_DROPPED]
        dropped = r.get("dropped_state")
        if isinstance(dropped, list):
            out["dropped_state"] = [{"name": str(d.get("name", ""))[:256], "type": str(d.get("type", ""))[:256]}
                                    for d in dropped[:_MAX_DROPPED] if isinstance(d, dict)]
        for k, n in (("missing_state", _MAX_DROPPED), ("unreturned_globals", _MAX_UNRETURNED)):
            names = r.get(k)
            if isinstance(names, list):
                names = [str(x)[:256] for x in names[:n] if isinstance(x, str)]
                if names:
                    out[k] = names
    pngs, total = _clean_rich(r, out, max_img, max_images)
    imgs = r.get("images")
    if imgs is not None:
        if not isinstance(imgs, list):
            raise ValueError("images is not a list")
        kept = []
        for im in imgs:
            if pngs + len(kept) >= max_images or not isinstance(im, dict) or not isinstance(im.get("png"), str):
                continue
            n = len(im["png"]) * 3 // 4
            if total + n > max_img:
                continue
            w, h = im.get("width"), im.get("height")
            if not (isinstance(w, int) and isinstance(h, int)):
                continue
            total += n
            kept.append({"png": im["png"], "width": w, "height": h})
        if kept:
            out["images"] = kept
    return out


def _clean_rich(r, out, max_img, max_images):
    """Re-applies the bounds of the rich representations (see _RichSink) to
    the worker's "rich" and "rich_dropped" into out: an item that breaks
    one is named in rich_dropped; a malformed one is left out. Returns the
    count and bytes of the PNG items kept, which the figures share."""
    items, dropped = r.get("rich"), r.get("rich_dropped")
    if items is not None and not isinstance(items, list):
        raise ValueError("rich is not a list")
    if dropped is not None and not isinstance(dropped, list):
        raise ValueError("rich_dropped is not a list")
    names = []
    for d in (dropped or ())[:_MAX_RICH_DROPPED]:
        if not isinstance(d, dict):
            continue
        size, limit = d.get("bytes"), d.get("limit")
        e = {"mime": str(d.get("mime", ""))[:64], "from": str(d.get("from", ""))[:16],
             "n": d["n"] if type(d.get("n")) is int and 0 <= d["n"] < 1 << 31 else 0,
             "bytes": size if type(size) is int and 0 <= size < 1 << 62 else 0,
             "why": str(d.get("why", ""))[:32],
             "limit": limit if type(limit) is int and 0 <= limit < 1 << 62 else 0}
        if isinstance(d.get("error"), str) and d["error"]:
            e["error"] = _clip(d["error"], 300)
        names.append(e)
    kept, text, png, pngs = [], 0, 0, 0

    def drop(it, size, why, limit):
        if len(names) < _MAX_RICH_DROPPED:
            names.append({"mime": it["mime"], "from": it["from"], "n": it["n"], "bytes": size, "why": why, "limit": limit})

    for it in items or ():
        if not isinstance(it, dict) or it.get("mime") not in _RICH_MIMES or not isinstance(it.get("data"), str) \
                or it.get("from") not in ("display", "result") or type(it.get("n")) is not int or not 0 <= it["n"] < 1 << 31:
            continue
        try:
            size = len(base64.b64decode(it["data"], validate=True))
        except ValueError:
            continue
        if len(kept) >= _MAX_RICH:
            drop(it, size, "over_count", _MAX_RICH)
            continue
        w, h = it.get("width"), it.get("height")
        if type(w) is not int or type(h) is not int or not (0 <= w < 1 << 31 and 0 <= h < 1 << 31):
            continue
        if it["mime"] == "image/png":
            if pngs >= max_images:
                drop(it, size, "over_image_count", max_images)
                continue
            if png + size > max_img:
                drop(it, size, "over_image_bytes", max_img)
                continue
            png += size
            pngs += 1
        else:
            if size > _MAX_RICH_BYTES:
                drop(it, size, "too_large", _MAX_RICH_BYTES)
                continue
            if text + size > _MAX_RICH_TOTAL:
                drop(it, size, "over_total", _MAX_RICH_TOTAL)
                continue
            text += size
        kept.append({"mime": it["mime"], "data": it["data"], "from": it["from"], "n": it["n"], "width": w, "height": h})
    if kept:
        out["rich"] = kept
    if names:
        out["rich_dropped"] = names
    return pngs, png


def _result_cap(max_out, max_state, max_img, max_images):
    # JSON may escape a character into 6 bytes.
    return (6 * (max_out + 2 * _MAX_ERROR_TEXT + _MAX_DROPPED * 1200 + _MAX_UNRETURNED * 300) + 6 * max_state + (max_img * 4) // 3
            + max_images * 256 + (_MAX_RICH_TOTAL * 4) // 3 + _MAX_RICH * 256 + _MAX_RICH_DROPPED * 2048 + (64 << 10))


def _worker_key(req):
    """What a worker is fixed to at its first run: the capabilities (its
    seccomp filter) and the module rules (its audit hook), normalized."""
    caps = req.get("capabilities")
    if isinstance(caps, dict):
        caps = {"processes": bool(caps.get("processes")), "pty": bool(caps.get("pty")),
                "native_code": bool(caps.get("native_code")),
                "sockets": sorted({str(f) for f in (caps.get("sockets") or ())})}
    else:
        caps = None
    mods = req.get("modules") or {}
    rules = [sorted({str(m) for m in (mods.get(k) or ())}) for k in ("allowed", "blocked")]
    calls = mods.get("calls") or []
    return json.dumps([caps, rules, calls if isinstance(calls, list) else []], sort_keys=True)

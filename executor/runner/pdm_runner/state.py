# state.py: a transient run's state: the globals that round-trip through JSON,
# under the state's cap.
# A part of the sandbox runner; see ../README.md.

def _round_trips(v):
    try:
        enc = json.dumps(v, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError, OverflowError):
        return None
    try:
        if json.loads(enc) != v:
            return None
    except Exception:
        return None
    return enc


def _type_name(v):
    t = type(v)
    mod = t.__module__
    if mod in ("builtins", "__main__"):
        return t.__qualname__
    return mod + "." + t.__qualname__


_JSON_TYPES = (type(None), bool, int, float, str, list, dict)  # tuples do not round-trip
_MAX_UNRETURNED = 100  # names of globals listed as not returned


def _collect_state(ns, max_bytes, names):
    """The state a transient run returns: the globals named in names (the
    keys the call sent, then the names it asked for), or every global when
    names is None ("*"). Returns (state, dropped, too_large, missing,
    unreturned): values that are not JSON round-trippable are dropped
    (named with their type); when the state would exceed max_bytes the
    largest values are left out until the rest fits, each named with its
    size (of its JSON); names asked for that are not defined are missing; unreturned
    names the other globals of JSON types, for the caller to ask for."""
    state, dropped, missing, sizes, values = {}, [], [], {}, {}
    if names is None:
        names = [n for n, v in list(ns.items()) if not n.startswith("_") and not isinstance(v, types.ModuleType)]
    for name in dict.fromkeys(names):
        if name not in ns:
            if len(missing) < _MAX_DROPPED:
                missing.append(name[:256])
            continue
        v = ns[name]
        enc = _round_trips(v)
        if enc is None:
            if len(dropped) < _MAX_DROPPED:
                dropped.append({"name": name[:256], "type": _type_name(v)[:256]})
            continue
        n = len(enc.encode("utf-8"))
        values[name] = n
        sizes[name] = len(json.dumps(name, ensure_ascii=False).encode("utf-8")) + 1 + n + 1
        state[name] = v
    total = 2 + sum(sizes.values())
    too_large = []
    for name in sorted(sizes, key=lambda n: -sizes[n]):
        if total <= max_bytes:
            break
        total -= sizes[name]
        del state[name]
        if len(too_large) < _MAX_DROPPED:
            too_large.append({"name": name[:256], "bytes": values[name]})
    unreturned = []
    for name, v in list(ns.items()):
        if len(unreturned) >= _MAX_UNRETURNED:
            break
        if name in sizes or name.startswith("_") or type(v) not in _JSON_TYPES:
            continue
        if any(d["name"] == name for d in dropped):
            continue
        unreturned.append(name[:256])
    return state, dropped, too_large, missing, unreturned

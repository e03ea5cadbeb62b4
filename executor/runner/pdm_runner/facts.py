# facts.py: what the runner checks of code before it runs: the gate's import
# facts against CPython's AST, and the parse op's syntax verdict.
# A part of the sandbox runner; see ../README.md.

# ---------------------------------------------------------------- facts


def _fmt_fact(f):
    module, level, frm, names, alias, line = f
    mod = "." * level + module
    if frm:
        ns = ", ".join(n + (" as " + a if a else "") for n, a in names)
        return "from %s import %s (line %d)" % (mod, ns, line)
    return "import %s%s (line %d)" % (mod, " as " + alias if alias else "", line)


def _derive_imports(tree):
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out.append((a.name, 0, False, (), a.asname or "", node.lineno))
        elif isinstance(node, ast.ImportFrom):
            names = tuple((a.name, a.asname or "") for a in node.names)
            out.append((node.module or "", node.level or 0, True, names, "", node.lineno))
    return sorted(out)


def _gate_imports(facts):
    out = []
    for f in facts or ():
        names = tuple((n.get("name", ""), n.get("asname", "") or "") for n in (f.get("names") or ()))
        out.append((f.get("module", "") or "", int(f.get("level", 0) or 0), bool(f.get("from", False)),
                    names, f.get("alias", "") or "", int(f.get("line", 0) or 0)))
    return sorted(out)


def _diff(a, b):
    rest = list(b)
    only = []
    for x in a:
        if x in rest:
            rest.remove(x)
        else:
            only.append(x)
    return only


def _check_facts(req, cell_name):
    """Parses the code and compares the gate's import facts with CPython's.
    Returns None when the code may run, else the error response."""
    code = req.get("code") or ""
    try:
        tree = ast.parse(code, filename=cell_name, mode="exec")
    except SyntaxError as e:
        # The gate parsed what CPython does not: a syntax error all the
        # same, found before anything ran.
        info = _syntax_info(e)
        return {"status": "syntax_error", "error": {"type": info["type"], "message": info["message"], "line": info["line"],
                                                    "col": info["col"], "traceback": info["detail"]}}
    except (ValueError, RecursionError, MemoryError) as e:
        return {"status": "error", "error": {"type": type(e).__name__, "message": str(e), "line": 0, "traceback": ""}}
    want = _gate_imports(req.get("imports"))
    got = _derive_imports(tree)
    if want == got:
        return None
    parts = []
    missing = _diff(got, want)
    extra = _diff(want, got)
    if missing:
        parts.append("CPython sees " + "; ".join(_fmt_fact(f) for f in missing) + " which the gate did not report")
    if extra:
        parts.append("the gate reported " + "; ".join(_fmt_fact(f) for f in extra) + " which CPython does not see")
    return {"status": "refused", "error": {"type": "FactMismatch", "line": (missing or extra)[0][5],
                                           "message": "refusing to run: the static gate and CPython disagree about the imports: " + "; ".join(parts),
                                           "traceback": ""}}


_PARSE_TEXT = 8 << 10  # cap of each text field of a parse answer
_PARSE_LINE = 400  # a longer source line is shown around the error


def _parse(req):
    """Answers a "parse" request here, in the runner: CPython's parser builds
    the AST only (ast.PyCF_ONLY_AST, dont_inherit) and nothing of the code
    runs; no worker is involved. The answer has "syntax" when the code does
    not parse: CPython's message, position and its rendering with a caret."""
    code = req.get("code")
    if not isinstance(code, str):
        return {"status": "error", "error": {"type": "RunnerError", "message": "parse: code must be a string"}}
    try:
        compile(code, "<cell>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as e:  # IndentationError and TabError too
        return {"status": "ok", "syntax": _syntax_info(e)}
    except (ValueError, RecursionError, MemoryError) as e:
        # A NUL byte (ValueError), or code nested too deeply for the parser.
        return {"status": "ok", "syntax": {"type": type(e).__name__, "message": str(e)[:_PARSE_TEXT], "line": 0, "col": 0,
                                           "end_line": 0, "end_col": 0, "text": "", "detail": ""}}
    return {"status": "ok"}


def _syntax_info(e):
    """CPython's SyntaxError e as the server reports it: message, position,
    the source line and CPython's rendering with a caret (file <cell>)."""
    text = e.text or ""
    off, end = e.offset or 0, e.end_offset or 0
    if len(text) > _PARSE_LINE:
        # One huge line: show a window around the error, so the caret
        # stays in what is shown.
        lo = max(0, (off or 1) - 1 - _PARSE_LINE // 2)
        hi = lo + _PARSE_LINE
        text = ("..." if lo else "") + text[lo:hi] + ("..." if hi < len(e.text) else "")
        shift = (3 if lo else 0) - lo
        off = off + shift if off else 0
        end = min(end + shift, len(text) + 1) if end and e.end_lineno == e.lineno else 0
    shown = type(e)(e.msg, ("<cell>", e.lineno, off or None, text, e.end_lineno, end or None))
    detail = "".join(traceback.format_exception_only(type(e), shown))
    return {"type": type(e).__name__, "message": (e.msg or str(e))[:_PARSE_TEXT],
            "line": e.lineno or 0, "col": e.offset or 0,
            "end_line": e.end_lineno or 0, "end_col": e.end_offset or 0,
            "text": text.rstrip("\n")[:_PARSE_TEXT], "detail": detail[:_PARSE_TEXT]}

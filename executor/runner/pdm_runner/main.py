# main.py: the last part: the user's __main__ module, then the runner's loop.
# A part of the sandbox runner; see ../README.md.

_USER = types.ModuleType("__main__")
_USER.__dict__["__builtins__"] = builtins
sys.modules["__main__"] = _USER
if _WORKDIR not in sys.path:
    sys.path.append(_WORKDIR)

warnings.filterwarnings("ignore", message=".*non-interactive.*")
warnings.filterwarnings("ignore", message=".*More than .* figures have been opened.*")


_Runner().serve()

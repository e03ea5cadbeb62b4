# packages.py: the package volume that install-package fills (appended to
# sys.path), the image's trusted directories, and the finder that refuses
# native extensions from the volume while native code is denied.
# A part of the sandbox runner; see ../README.md.

# ---------------------------------------------------------------- packages

# Packages installed by install-package live on a read-only volume mounted
# here (absent in sandboxes without one). The directory is appended, so an
# installed package never shadows the standard library or the image's
# packages, and .pth files in it are not processed (it is no site dir).
# Every run of a session calls importlib.invalidate_caches(), so a package
# installed into a running session is importable in its next call. A
# transient sandbox (PDM_TRANSIENT=1) serves one call and nothing is
# installed while it lives, so it skips that: its first invalidation would
# import importlib.metadata (email, zipfile, pathlib), 20-40 ms of CPU per
# sandbox.
_TRANSIENT = os.environ.get("PDM_TRANSIENT") == "1"
_PACKAGES = "/opt/pdm-packages"
if _PACKAGES not in sys.path:
    sys.path.append(_PACKAGES)


def _trusted_dirs():
    dirs = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            dirs.add(os.path.realpath(p))
    for p in sys.path:
        if p and os.path.isdir(p):
            dirs.add(os.path.realpath(p))
    dirs.discard(os.path.realpath(_WORKDIR))
    # What install-package brought in is the caller's choice, not the
    # image's: its code counts as user code.
    dirs.discard(os.path.realpath(_PACKAGES))
    dirs.discard("/")
    return tuple(sorted(d.rstrip("/") + "/" for d in dirs))


_TRUSTED = _trusted_dirs()


class _RefusedExtension:
    """The loader of an extension module found in the package volume while
    native code is denied: its import fails naming the policy."""

    def __init__(self, fullname, path):
        self.name, self.path = fullname, path

    def create_module(self, spec):
        raise ModuleBlockedError("import of %r refused at run time: %s is native code from %s, and %s" % (
            self.name, os.path.basename(self.path), _PACKAGES, _MSG["native_code"]), name=self.name)

    def exec_module(self, module):
        pass


def _refuse_package_extensions():
    """Directories under the package volume get finders whose extension
    modules (.so) are refused: what install-package brought in runs as
    Python only while native code is denied."""
    from importlib.machinery import (BYTECODE_SUFFIXES, EXTENSION_SUFFIXES, SOURCE_SUFFIXES, FileFinder,
                                     SourceFileLoader, SourcelessFileLoader)
    root = os.path.realpath(_PACKAGES)
    loaders = ((_RefusedExtension, EXTENSION_SUFFIXES), (SourceFileLoader, SOURCE_SUFFIXES),
               (SourcelessFileLoader, BYTECODE_SUFFIXES))

    def packages_hook(path, _root=root, _realpath=os.path.realpath, _finder=FileFinder, _loaders=loaders):
        real = _realpath(path)
        if real == _root or real.startswith(_root + "/"):
            return _finder(path, *_loaders)
        raise ImportError("not in the package volume", path=path)

    sys.path_hooks.insert(0, packages_hook)
    for p in list(sys.path_importer_cache):
        real = _STABLE_PATHS.get(p) or os.path.realpath(p)
        if real == root or real.startswith(root + "/"):
            del sys.path_importer_cache[p]


# Keys of the import system's cache that name themselves (no symlink on the
# way) on a read-only /usr: where they lead cannot change while the sandbox
# lives, so the runner works it out once, before it forks a worker, and the
# worker's _refuse_package_extensions skips the realpath (a few hundred
# lstat calls, 10 ms with numpy and pandas imported, on every call).
_STABLE_PATHS = {}
_USR_READ_ONLY = []  # [bool] once known


def _usr_read_only(mountinfo="/proc/self/mountinfo"):
    """Whether / and every mount at or under /usr are read-only."""
    try:
        for mnt, opts, _ in _mounts(mountinfo):
            if (mnt == "/" or mnt == "/usr" or mnt.startswith("/usr/")) and "rw" in opts:
                return False
    except OSError:
        return False
    return True


def _note_stable_paths():
    """Runner only (it runs no user code), before each fork of a worker."""
    if not _USR_READ_ONLY:
        _USR_READ_ONLY.append(_usr_read_only())
    if not _USR_READ_ONLY[0]:
        return
    for p in list(sys.path_importer_cache):
        if type(p) is str and p.startswith("/usr/") and p not in _STABLE_PATHS:
            real = os.path.realpath(p)
            if real == p:
                _STABLE_PATHS[p] = real

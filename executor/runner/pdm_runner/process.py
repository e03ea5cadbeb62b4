# python-docker-mcp sandbox runner.
#
# process.py: the first part of the runner, run before anything else:
# process 1's own protection (non-dumpable, SIGINT ignored), its private
# copies of the protocol streams, and the limits every part uses. The
# runner is these parts (see ORDER and ../README.md), joined in that order
# into one source by package runner (executor/runner/embed.go) and run as
# one program, in one namespace, under the file name <pdm-runner>.
#
# Started as `python3 -I -B -c <bootstrap> pdm-runner` as the sandbox
# container's process 1; the bootstrap reads a preamble from stdin first:
# the joined source and, when the executor has it, the code an earlier
# sandbox compiled from it (see runnerBootstrap in executor/spec.go). After it,
# the runner speaks length-prefixed JSON frames (4-byte
# big-endian length, then UTF-8 JSON) on the stdin/stdout the container was
# started with. Runner diagnostics go to the original stderr.
#
# Frames in:  {"op": "run"|"preload"|"parse"|"read"|"write"|"list"|"ping"|"interrupt"|"exit", "id": n, "nonce": s, ...}
#             (the request structs of executor/protocol, requests.go)
# Frames out: {"op": "ready", ...} once, then one response per request,
#             carrying the request's id and nonce.
#
# Two processes (the container is the security boundary, not this file):
#
#   the runner (this process, pid 1): single-threaded, non-dumpable (so
#     /proc/1/mem, /proc/1/fd and ptrace are refused to everything else in
#     the container), holds the protocol, the time limit and the caps. It
#     never runs user code; a poll loop serves the protocol, drains the
#     worker's output pipes into capped buffers and reads its result pipe
#     with a size cap.
#
#   the worker (a forked child): user code runs here, with fd 0 = /dev/null,
#     fd 1/2 = capture pipes, a result pipe, and nothing else of the runner's.
#     It stays non-dumpable too (its filter refuses PR_SET_DUMPABLE), so
#     its own /proc/self/mem cannot write past its page protections.
#     Before the first user code it installs PR_SET_NO_NEW_PRIVS and a
#     seccomp filter built from the request's capabilities, and a CPython
#     audit hook (PEP 578, cannot be removed) that enforces the capability
#     classes, the module rules and the blocked calls it can observe. Transient sandboxes use one worker for
#     their one call; a persistent session keeps its worker (and so its
#     globals) across calls, stopped by the runner (SIGSTOP) between them.

import ast
import base64
import builtins
import ctypes
import errno
import gc
import importlib
import importlib.util
import io
import json
import linecache
import opcode  # the guard's, imported here once: not again in every worker
import os
import re
import select
import stat
import signal
import struct
import sys
import sysconfig
import time
import traceback
import types
import warnings

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_MM = 35

# Nothing else in the container may read this process's memory or file
# descriptors: non-dumpable makes /proc/1/{mem,fd,environ,...} root-owned
# and ptrace needs CAP_SYS_PTRACE, which no process here has.
if _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
    os.write(2, b"runner: prctl(PR_SET_DUMPABLE, 0) failed\n")
    os._exit(70)

# Process 1 only gets signals it handles: keep it that way (SIGINT would
# otherwise raise KeyboardInterrupt here).
signal.signal(signal.SIGINT, signal.SIG_IGN)

_PID = os.getpid()
_MAX_FRAME = 256 << 20

# Private copies of the protocol streams (not inheritable, closed in workers).
_PROTO_IN = os.dup(0)
_PROTO_OUT = os.dup(1)
_DIAG = os.dup(2)
_DEVNULL = os.open(os.devnull, os.O_RDWR)
os.dup2(_DEVNULL, 0)
os.dup2(_DEVNULL, 1)
os.dup2(_DEVNULL, 2)
# The protocol streams get mode 0: nothing in the sandbox may open them
# again through /proc/1/fd. Non-dumpable already closes /proc/1/fd under
# Linux; gVisor's /proc applies no such check (any process of the sandbox
# opens another's /proc/<pid>/fd/<n>), but it refuses to reopen a stream of
# mode 0, and chmod back does not reopen it either (measured with Debian's
# runsc 20221219; executor/README.md, "gVisor"). Already open descriptors
# (the runner's) are unaffected; a stream that cannot be chmodded is left.
for _fd in (_PROTO_IN, _PROTO_OUT, _DIAG):
    try:
        os.fchmod(_fd, 0)
    except OSError:
        pass
del _fd

_WORKDIR = os.getcwd()
_GRACE = 1.0  # seconds the worker gets to stop after its time limit or a cancel (default)

# Output limits of the result a worker sends (the runner re-applies them).
_MAX_ERROR_TEXT = 64 << 10
_MAX_DROPPED = 1000
_MAX_FILES = 1000
_MAX_FILES_BYTES = 256 << 10

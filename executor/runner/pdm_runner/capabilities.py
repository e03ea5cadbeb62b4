# capabilities.py: the policy's capability classes (processes, sockets, pty,
# native_code), their messages, and the kernel filter (seccomp BPF) a
# worker installs before any user code.
# A part of the sandbox runner; see ../README.md.

# ---------------------------------------------------------------- policy messages

_MSG = types.MappingProxyType({
    "processes": "process creation is not allowed by the sandbox policy (policy.capabilities.processes is false)",
    "sockets": "opening sockets is not allowed by the sandbox policy (policy.capabilities.sockets is empty)",
    "pty": "pseudo-terminals are not allowed by the sandbox policy (policy.capabilities.pty is false)",
    "native_code": "loading native code is not allowed by the sandbox policy (policy.capabilities.native_code is false)",
})
_FAMILIES = types.MappingProxyType({"unix": 1, "inet": 2, "inet6": 10})
_FAMILY_NAMES = types.MappingProxyType({1: "unix", 2: "inet", 10: "inet6"})


def _socket_msg(family, allowed):
    name = _FAMILY_NAMES.get(family, "family %d" % family if isinstance(family, int) else "this family")
    if not allowed:
        return _MSG["sockets"]
    return "%s sockets are not allowed by the sandbox policy (policy.capabilities.sockets allows %s)" % (
        name, ", ".join(allowed))


def _denied_classes(caps):
    if caps is None:
        return ()
    out = []
    if not caps.get("processes"):
        out.append("processes")
    if not caps.get("sockets"):
        out.append("sockets")
    else:
        # Families the policy leaves out, for the messages ("sockets.unix").
        out.extend("sockets." + f for f in _FAMILIES if f not in caps.get("sockets"))
    if not caps.get("pty"):
        out.append("pty")
    if not caps.get("native_code"):
        out.append("native_code")
    return tuple(out)


# ---------------------------------------------------------------- seccomp

_AUDIT_ARCH_X86_64 = 0xC000003E
_AUDIT_ARCH_AARCH64 = 0xC00000B7
_SYSCALLS = {
    "x86_64": dict(arch=_AUDIT_ARCH_X86_64, seccomp=317, fork=57, vfork=58, execve=59, execveat=322, clone=56,
                   clone3=435, socket=41, socketpair=53, ioctl=16, memfd_create=319, mmap=9, mprotect=10,
                   pkey_mprotect=329, ptrace=101, process_vm_readv=310, process_vm_writev=311, kcmp=312,
                   personality=135, io_uring_setup=425, io_uring_enter=426, io_uring_register=427,
                   pidfd_getfd=438, userfaultfd=323, shmat=30, prctl=157),
    "aarch64": dict(arch=_AUDIT_ARCH_AARCH64, seccomp=277, execve=221, execveat=281, clone=220, clone3=435,
                    socket=198, socketpair=199, ioctl=29, memfd_create=279, mmap=222, mprotect=226,
                    pkey_mprotect=288, ptrace=117, process_vm_readv=270, process_vm_writev=271, kcmp=272,
                    personality=92, io_uring_setup=425, io_uring_enter=426, io_uring_register=427,
                    pidfd_getfd=438, userfaultfd=282, shmat=196, prctl=167),
}

_LD_W_ABS = 0x20
_JEQ = 0x15
_JGE = 0x35
_JSET = 0x45
_RET = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_KILL = 0x80000000
_OFF_NR, _OFF_ARCH = 0, 4


def _ret_errno(e):
    return 0x00050000 | e


def _arg(i):
    return 16 + 8 * i  # low 32 bits of args[i] (little-endian)


def _seccomp_program(caps, machine):
    """The BPF program for a worker: the always-denied calls that could
    reach the runner, plus the denied capability classes (caps None = only
    the former)."""
    sc = _SYSCALLS[machine]
    prog = []

    def add(code, k, jt=0, jf=0):
        prog.append((code, jt, jf, k))

    def deny(nr, err=errno.EPERM):
        if nr is None:
            return
        add(_LD_W_ABS, _OFF_NR)
        add(_JEQ, nr, 0, 1)
        add(_RET, _ret_errno(err))

    add(_LD_W_ABS, _OFF_ARCH)
    add(_JEQ, sc["arch"], 1, 0)
    add(_RET, _RET_KILL)
    if machine == "x86_64":  # x32 system calls share the arch value
        add(_LD_W_ABS, _OFF_NR)
        add(_JGE, 0x40000000, 0, 1)
        add(_RET, _ret_errno(errno.EPERM))
    for name in ("ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "userfaultfd",
                 "io_uring_setup", "io_uring_enter", "io_uring_register"):
        deny(sc[name])
    # The worker stays non-dumpable, so its /proc/self/mem (which writes
    # past page protections) stays root's: no PR_SET_DUMPABLE, and no
    # PR_SET_MM to rewrite its memory map's bookkeeping.
    add(_LD_W_ABS, _OFF_NR)
    add(_JEQ, sc["prctl"], 0, 4)
    add(_LD_W_ABS, _arg(0))
    add(_JEQ, _PR_SET_DUMPABLE, 1, 0)
    add(_JEQ, _PR_SET_MM, 0, 1)
    add(_RET, _ret_errno(errno.EPERM))
    if caps is not None:
        if not caps.get("processes"):
            for name in ("fork", "vfork", "execve", "execveat"):
                deny(sc.get(name))
            deny(sc["clone3"], errno.ENOSYS)  # glibc falls back to clone for threads
            # clone without CLONE_THREAD makes a process; threads keep working.
            add(_LD_W_ABS, _OFF_NR)
            add(_JEQ, sc["clone"], 0, 3)
            add(_LD_W_ABS, _arg(0))
            add(_JSET, 0x00010000, 1, 0)
            add(_RET, _ret_errno(errno.EPERM))
        fams = sorted({_FAMILIES[f] for f in (caps.get("sockets") or ()) if f in _FAMILIES})
        for name in ("socket", "socketpair"):
            n = len(fams)
            add(_LD_W_ABS, _OFF_NR)
            add(_JEQ, sc[name], 0, n + 3)
            add(_LD_W_ABS, _arg(0))
            for i, fam in enumerate(fams):
                add(_JEQ, fam, n - i, 0)
            add(_RET, _ret_errno(errno.EPERM))
            add(_RET, _RET_ALLOW)
        if not caps.get("pty"):
            reqs = (0x80045430, 0x40045431, 0x5441)  # TIOCGPTN, TIOCSPTLCK, TIOCGPTPEER
            n = len(reqs)
            add(_LD_W_ABS, _OFF_NR)
            add(_JEQ, sc["ioctl"], 0, n + 3)
            add(_LD_W_ABS, _arg(1))
            for i, r in enumerate(reqs):
                add(_JEQ, r, n - i, 0)
            add(_RET, _RET_ALLOW)
            add(_RET, _ret_errno(errno.EPERM))
        if not caps.get("native_code"):
            deny(sc["memfd_create"])
            deny(sc["personality"])  # READ_IMPLIES_EXEC would make every mapping executable
            # mmap(PROT_EXEC) only of a file, private and not writable:
            # code the image holds, as the dynamic loader maps it. Refused:
            # PROT_WRITE with it, MAP_ANONYMOUS, and MAP_SHARED (a shared
            # mapping of /dev/zero or shared memory can be mapped a second
            # time, writable, with mremap).
            add(_LD_W_ABS, _OFF_NR)
            add(_JEQ, sc["mmap"], 0, 7)
            add(_LD_W_ABS, _arg(2))
            add(_JSET, 0x4, 0, 3)  # PROT_EXEC
            add(_JSET, 0x2, 3, 0)  # PROT_WRITE
            add(_LD_W_ABS, _arg(3))
            add(_JSET, 0x21, 1, 0)  # MAP_ANONYMOUS, MAP_SHARED(_VALIDATE)
            add(_RET, _RET_ALLOW)
            add(_RET, _ret_errno(errno.EPERM))
            for name in ("mprotect", "pkey_mprotect"):
                add(_LD_W_ABS, _OFF_NR)
                add(_JEQ, sc[name], 0, 3)
                add(_LD_W_ABS, _arg(2))
                add(_JSET, 0x4, 0, 1)
                add(_RET, _ret_errno(errno.EPERM))
            add(_LD_W_ABS, _OFF_NR)
            add(_JEQ, sc["shmat"], 0, 3)
            add(_LD_W_ABS, _arg(2))
            add(_JSET, 0o100000, 0, 1)  # SHM_EXEC
            add(_RET, _ret_errno(errno.EPERM))
    add(_RET, _RET_ALLOW)
    return prog


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


# The filters built so far, by capabilities: the runner builds the one a
# spare worker installs before it forks it (about a millisecond of Python),
# so that the worker only hands it to the kernel.
_FILTERS = {}


def _seccomp_filter(caps):
    """(instructions, bytes) of the filter for caps, built once."""
    key = json.dumps(caps, sort_keys=True)
    f = _FILTERS.get(key)
    if f is None:
        machine = os.uname().machine
        if machine not in _SYSCALLS:
            raise OSError("no seccomp table for architecture %s" % machine)
        prog = _seccomp_program(caps, machine)
        f = (len(prog), b"".join(struct.pack("=HBBI", c, jt, jf, k) for c, jt, jf, k in prog))
        if len(_FILTERS) >= 16:
            _FILTERS.clear()
        _FILTERS[key] = f
    return f


def _install_seccomp(caps):
    n, raw = _seccomp_filter(caps)
    machine = os.uname().machine
    buf = ctypes.create_string_buffer(raw, len(raw))
    fprog = _SockFprog(n, ctypes.cast(buf, ctypes.c_void_p))
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    syscall = _libc.syscall
    syscall.restype = ctypes.c_long
    # SECCOMP_SET_MODE_FILTER with SECCOMP_FILTER_FLAG_TSYNC: every thread.
    if syscall(ctypes.c_long(_SYSCALLS[machine]["seccomp"]), ctypes.c_ulong(1), ctypes.c_ulong(1),
               ctypes.byref(fprog)) != 0:
        raise OSError(ctypes.get_errno(), "seccomp(SECCOMP_SET_MODE_FILTER): " + os.strerror(ctypes.get_errno()))

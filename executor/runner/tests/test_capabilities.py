import errno
import os
import struct
import subprocess
import sys
import textwrap
import unittest

import loader

R = loader.load()
ALLOW, KILL = 0x7FFF0000, 0x80000000


def eperm(e=errno.EPERM):
    return 0x00050000 | e


def run_bpf(prog, nr, args=(), arch=None, machine="x86_64"):
    """Classic BPF over a seccomp_data (nr, arch, ip, args), as the kernel
    runs the filter: the instructions the runner emits only."""
    if arch is None:
        arch = R["_SYSCALLS"][machine]["arch"]
    args = list(args) + [0] * (6 - len(args))
    data = struct.pack("<iIQ6Q", nr, arch, 0, *args)
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = prog[pc]
        if code == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            (acc,) = struct.unpack_from("<I", data, k)
            pc += 1
        elif code in (0x15, 0x35, 0x45):  # JEQ, JGE, JSET (K)
            cond = acc == k if code == 0x15 else acc >= k if code == 0x35 else bool(acc & k)
            pc += 1 + (jt if cond else jf)
        elif code == 0x06:  # RET K
            return k
        else:
            raise AssertionError("opcode %#x" % code)


def caps(processes=False, sockets=(), pty=False, native_code=False):
    return {"processes": processes, "sockets": list(sockets), "pty": pty, "native_code": native_code}


class FilterProgramTest(unittest.TestCase):
    def verdict(self, c, name, args=(), machine="x86_64"):
        sc = R["_SYSCALLS"][machine]
        return run_bpf(R["_seccomp_program"](c, machine), sc[name], args, machine=machine)

    def test_always_denied_whatever_the_capabilities(self):
        for c in (None, caps(True, ("unix", "inet", "inet6"), True, True)):
            for machine in ("x86_64", "aarch64"):
                for name in ("ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
                             "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register"):
                    self.assertEqual(self.verdict(c, name, machine=machine), eperm(), (c, machine, name))
                # The worker stays non-dumpable: no PR_SET_DUMPABLE, no PR_SET_MM.
                self.assertEqual(self.verdict(c, "prctl", (4,), machine), eperm())
                self.assertEqual(self.verdict(c, "prctl", (35,), machine), eperm())
                self.assertEqual(self.verdict(c, "prctl", (38,), machine), ALLOW)  # PR_SET_NO_NEW_PRIVS

    def test_other_architectures_are_killed_and_x32_refused(self):
        prog = R["_seccomp_program"](None, "x86_64")
        self.assertEqual(run_bpf(prog, 0, arch=R["_AUDIT_ARCH_AARCH64"]), KILL)
        self.assertEqual(run_bpf(prog, 0x40000000 + 1), eperm())
        self.assertEqual(run_bpf(prog, 0), ALLOW)  # read

    def test_processes(self):
        c = caps(processes=False)
        for name in ("fork", "vfork", "execve", "execveat"):
            self.assertEqual(self.verdict(c, name), eperm(), name)
        self.assertEqual(self.verdict(c, "clone3"), eperm(errno.ENOSYS))  # glibc falls back to clone
        self.assertEqual(self.verdict(c, "clone", (0x00010000 | 0x100,)), ALLOW)  # CLONE_THREAD: a thread
        self.assertEqual(self.verdict(c, "clone", (17,)), eperm())  # SIGCHLD: a process
        for name in ("fork", "execve", "clone", "clone3"):
            self.assertEqual(self.verdict(caps(processes=True), name, (17,)), ALLOW, name)
        self.assertEqual(self.verdict(None, "fork"), ALLOW)  # no capabilities: only the always-denied

    def test_socket_families(self):
        for fams, allowed in (((), ()), (("unix",), (1,)), (("inet", "inet6"), (2, 10)),
                              (("unix", "inet", "inet6"), (1, 2, 10))):
            c = caps(sockets=fams)
            for name in ("socket", "socketpair"):
                for fam in (1, 2, 10, 16):
                    want = ALLOW if fam in allowed else eperm()
                    self.assertEqual(self.verdict(c, name, (fam,)), want, (fams, name, fam))

    def test_pty(self):
        for req in (0x80045430, 0x40045431, 0x5441):
            self.assertEqual(self.verdict(caps(pty=False), "ioctl", (3, req)), eperm(), hex(req))
            self.assertEqual(self.verdict(caps(pty=True), "ioctl", (3, req)), ALLOW)
        self.assertEqual(self.verdict(caps(pty=False), "ioctl", (1, 0x5401)), ALLOW)  # TCGETS

    def test_native_code(self):
        c = caps(native_code=False)
        read, write, ex = 1, 2, 4
        private, shared, anon = 0x02, 0x01, 0x20
        self.assertEqual(self.verdict(c, "mmap", (0, 4096, read | ex, private)), ALLOW)  # the loader maps a file
        self.assertEqual(self.verdict(c, "mmap", (0, 4096, read | write | ex, private)), eperm())
        self.assertEqual(self.verdict(c, "mmap", (0, 4096, read | ex, private | anon)), eperm())
        self.assertEqual(self.verdict(c, "mmap", (0, 4096, read | ex, shared)), eperm())
        self.assertEqual(self.verdict(c, "mmap", (0, 4096, read | write, private | anon)), ALLOW)
        self.assertEqual(self.verdict(c, "mprotect", (0, 4096, read | ex)), eperm())
        self.assertEqual(self.verdict(c, "mprotect", (0, 4096, read)), ALLOW)
        self.assertEqual(self.verdict(c, "memfd_create"), eperm())
        self.assertEqual(self.verdict(c, "personality"), eperm())
        self.assertEqual(self.verdict(c, "shmat", (1, 0, 0o100000)), eperm())
        self.assertEqual(self.verdict(c, "shmat", (1, 0, 0)), ALLOW)
        self.assertEqual(self.verdict(caps(native_code=True), "mmap", (0, 4096, read | write | ex, private | anon)), ALLOW)

    def test_programs_fit_the_kernel(self):
        # At most BPF_MAXINSNS instructions; every jump lands inside.
        for machine in ("x86_64", "aarch64"):
            for c in (None, caps(), caps(True, ("unix", "inet", "inet6"), True, True), caps(sockets=("inet",))):
                prog = R["_seccomp_program"](c, machine)
                self.assertLess(len(prog), 4096)
                self.assertEqual(prog[-1], (0x06, 0, 0, ALLOW))
                for i, (code, jt, jf, k) in enumerate(prog):
                    if code in (0x15, 0x35, 0x45):
                        self.assertLess(i + 1 + max(jt, jf), len(prog), (machine, c, i))


class FilterBuiltOnceTest(unittest.TestCase):
    """The runner builds a spare worker's filter before it forks it
    (serve.py spare): the worker finds the bytes built, the same as a
    build of its own."""

    def test_the_filter_is_built_once_per_capabilities(self):
        caps = {"processes": False, "sockets": ["unix"], "pty": False, "native_code": False}
        n, raw = R["_seccomp_filter"](caps)
        machine = os.uname().machine
        prog = R["_seccomp_program"](caps, machine)
        self.assertEqual(n, len(prog))
        self.assertEqual(raw, b"".join(struct.pack("=HBBI", *ins) for ins in prog))
        self.assertIs(R["_seccomp_filter"](dict(reversed(list(caps.items()))))[1], raw)
        other = dict(caps, processes=True)
        self.assertNotEqual(R["_seccomp_filter"](other)[1], raw)
        self.assertNotEqual(R["_seccomp_filter"](None)[1], raw)

    def test_the_built_filters_are_bounded(self):
        for i in range(40):
            R["_seccomp_filter"]({"processes": False, "sockets": [], "pty": False, "native_code": False, "n": i})
        self.assertLessEqual(len(R["_FILTERS"]), 16)


class MessagesTest(unittest.TestCase):
    def test_denied_classes(self):
        self.assertEqual(R["_denied_classes"](None), ())
        self.assertEqual(R["_denied_classes"](caps()), ("processes", "sockets", "pty", "native_code"))
        self.assertEqual(R["_denied_classes"](caps(True, ("inet",), True, True)), ("sockets.unix", "sockets.inet6"))

    def test_socket_message_names_the_family_and_the_policy(self):
        self.assertIn("policy.capabilities.sockets is empty", R["_socket_msg"](2, ()))
        self.assertEqual(R["_socket_msg"](2, ("unix",)),
                         "inet sockets are not allowed by the sandbox policy (policy.capabilities.sockets allows unix)")


@unittest.skipUnless(sys.platform == "linux" and os.uname().machine in ("x86_64", "aarch64"), "seccomp on Linux")
class KernelFilterTest(unittest.TestCase):
    """The filter installed for real, in a child process of its own."""

    def test_installed_filter_refuses_fork_and_inet_sockets(self):
        prog = textwrap.dedent("""
            import errno, os, socket, sys
            sys.path.insert(0, %r)
            import loader
            R = loader.load()
            R["_install_seccomp"]({"processes": False, "sockets": ["unix"], "pty": True, "native_code": True})
            out = []
            try:
                os.fork()
                out.append("fork ran")
            except OSError as e:
                out.append("fork " + errno.errorcode[e.errno])
            try:
                socket.socket(socket.AF_INET).close()
                out.append("inet ran")
            except OSError as e:
                out.append("inet " + errno.errorcode[e.errno])
            socket.socket(socket.AF_UNIX).close()
            out.append("unix ok")
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            out.append("dumpable %%d %%s" %% (libc.prctl(4, 1, 0, 0, 0), errno.errorcode[ctypes.get_errno()]))
            print(" / ".join(out))
        """) % loader.HERE
        p = subprocess.run([sys.executable, "-I", "-B", "-c", prog], capture_output=True, text=True, timeout=60)
        refused = ("Operation not permitted", "Function not implemented", "Permission denied")
        if p.returncode and "seccomp(SECCOMP_SET_MODE_FILTER)" in p.stderr and any(r in p.stderr for r in refused):
            # The host's own filter or kernel refuses filters; a program
            # the kernel finds malformed (EINVAL) fails the test.
            self.skipTest("this host refuses seccomp filters: %s" % p.stderr.strip()[-200:])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), "fork EPERM / inet EPERM / unix ok / dumpable -1 EPERM")


if __name__ == "__main__":
    unittest.main()

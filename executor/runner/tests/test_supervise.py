"""The runner's watch over the working directory (supervise.py,
_snapshot): what a call changed there is found whether the walk starts
from the working directory itself (as in a sandbox, where the runner's
current directory is it) or from its path. Its reads of /proc through one
descriptor of /proc (_proc_open, _proc_list) see what paths from / see,
and fall back to those paths without it. A process counts as ended
(_zombie) only when no thread of it runs, and as exiting (_exiting) only
when every thread of it is."""

import ctypes
import os
import signal
import sys
import tempfile
import threading
import time
import unittest

import loader


class SnapshotTest(unittest.TestCase):
    def setUp(self):
        self.wd = tempfile.mkdtemp(prefix="pdm-snapshot-")
        self.R = loader.load(self.wd)
        os.makedirs(os.path.join(self.wd, "sub", "deeper"))
        for name in ("a.txt", os.path.join("sub", "b.csv"), os.path.join("sub", "deeper", "c")):
            with open(os.path.join(self.wd, name), "w") as f:
                f.write(name)
        self.cwd = os.getcwd()

    def tearDown(self):
        os.chdir(self.cwd)
        for root, dirs, files in os.walk(self.wd, topdown=False):
            for n in files:
                os.unlink(os.path.join(root, n))
            for n in dirs:
                os.rmdir(os.path.join(root, n))
        os.rmdir(self.wd)

    def names(self):
        return sorted(self.R["_snapshot"]())

    def test_the_same_names_from_either_start(self):
        want = ["a.txt", os.path.join("sub", "b.csv"), os.path.join("sub", "deeper", "c")]
        self.assertEqual(self.names(), want)  # from its path: the test's cwd is elsewhere
        os.chdir(self.wd)
        self.assertEqual(self.names(), want)  # from "." as in a sandbox

    def test_a_change_is_seen(self):
        os.chdir(self.wd)
        before = self.R["_snapshot"]()
        with open(os.path.join(self.wd, "sub", "b.csv"), "a") as f:
            f.write("more")
        after = self.R["_snapshot"]()
        self.assertEqual([p for p in after if before.get(p) != after[p]], [os.path.join("sub", "b.csv")])


class ProcTest(unittest.TestCase):
    def setUp(self):
        self.R = loader.load(tempfile.gettempdir())

    def tearDown(self):
        for fd in self.R["_PROC_FD"]:
            if fd >= 0:
                os.close(fd)

    def check(self):
        R = self.R
        with R["_proc_open"]("%d/status" % os.getpid()) as f:
            self.assertIn("Pid:\t%d\n" % os.getpid(), f.read())
        with R["_proc_open"]("self/stat", "rb") as f:
            self.assertTrue(f.read().startswith(b"%d (" % os.getpid()))
        self.assertIn(str(os.getpid()), R["_proc_list"]())
        self.assertEqual(sorted(R["_proc_list"]("%d/task" % os.getpid())), sorted(os.listdir("/proc/self/task")))
        self.assertEqual(R["_pstat"](os.getpid())[0], "R")
        child = os.fork()
        if child == 0:
            os._exit(0)
        try:
            os.waitid(os.P_PID, child, os.WEXITED | os.WNOWAIT)
            self.assertTrue(R["_zombie"](str(child)))  # exited, not yet reaped
            self.assertIn(str(child), R["_proc_list"]())  # a listing of now, not of the first call
        finally:
            os.waitpid(child, 0)
        self.assertNotIn(str(child), R["_proc_list"]())

    def test_through_the_descriptor(self):
        self.check()
        fd = self.R["_PROC_FD"][0]
        self.assertGreaterEqual(fd, 0)
        self.assertEqual(os.readlink("/proc/self/fd/%d" % fd), "/proc")
        self.check()
        self.assertEqual(self.R["_PROC_FD"], [fd])  # opened once

    def test_without_it(self):
        self.R["_PROC_FD"].append(-1)  # /proc could not be opened
        self.check()


class EndedTest(unittest.TestCase):
    """What a reset takes for an ended process, on the host's kernel."""

    def setUp(self):
        self.R = loader.load(tempfile.gettempdir())
        self.addCleanup(lambda: [os.close(fd) for fd in self.R["_PROC_FD"] if fd >= 0])

    def child(self, body):
        """A forked child running body; killed and reaped when the test ends."""
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                body(w)
            finally:
                os._exit(0)
        os.close(w)
        self.addCleanup(self.reap, pid)
        os.read(r, 1)  # body is under way
        os.close(r)
        return pid

    def reap(self, pid):
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass  # reaped by the test

    def test_a_running_process(self):
        pid = self.child(lambda w: (os.write(w, b"x"), time.sleep(60)))
        self.assertFalse(self.R["_zombie"](str(pid)))
        self.assertFalse(self.R["_exiting"](pid))

    def test_a_process_that_exited(self):
        pid = self.child(lambda w: os.write(w, b"x"))
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        self.assertTrue(self.R["_zombie"](str(pid)))
        self.assertTrue(self.R["_exiting"](pid))

    def test_a_process_that_is_gone(self):
        pid = self.child(lambda w: os.write(w, b"x"))
        os.waitpid(pid, 0)
        self.assertTrue(self.R["_zombie"](str(pid)))
        self.assertTrue(self.R["_exiting"](pid))

    @unittest.skipUnless(sys.platform.startswith("linux"), "Linux threads")
    def test_a_first_thread_that_ended_alone_leaves_the_process_running(self):
        # pthread_exit in the first thread: /proc shows the process as a
        # zombie while its other thread goes on running code.
        def body(w):
            libc = ctypes.CDLL(None)
            threading.Thread(target=lambda: (os.write(w, b"x"), time.sleep(60))).start()
            time.sleep(0.05)
            libc.pthread_exit(None)

        pid = self.child(body)
        deadline = time.monotonic() + 5
        while self.R["_pstat"](pid)[0] != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(self.R["_pstat"](pid)[0], "Z")  # what the first thread shows
        self.assertFalse(self.R["_zombie"](str(pid)))
        self.assertFalse(self.R["_exiting"](pid))
        self.assertIn(pid, self.R["_others"]())


if __name__ == "__main__":
    unittest.main()

"""A transient sandbox's reset (reset.py) on a scratch directory standing
in for its writable paths: what a call left is removed, what it changed
in the baseline fails the reset, whether the walk opens each mount's top
by its path or from the descriptor the baseline holds, and mountinfo is
read as the sandbox has it. Processes and System V IPC are left to the Docker tests, where
the runner is process 1 of its own namespaces."""

import os
import tempfile
import unittest

import loader

MOUNTINFO = """\
21 20 0:19 / / ro,relatime - overlay overlay ro,lowerdir=x
22 21 0:20 / /proc rw,nosuid - proc proc rw
23 21 0:21 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
24 23 0:22 / /dev/pts rw,nosuid - devpts devpts rw,gid=5
25 23 0:23 / /dev/mqueue rw,nosuid - mqueue mqueue rw
26 21 0:24 / /sys ro,nosuid - sysfs sysfs ro
27 26 0:25 / /sys/fs/cgroup ro - cgroup2 cgroup rw
28 23 0:26 / /dev/shm rw,nosuid - tmpfs shm rw,size=65536k
29 21 0:27 / /tmp rw,nosuid,nodev,noexec - tmpfs tmpfs rw,size=65536k
30 21 0:28 / /my\\040space rw,nosuid - tmpfs tmpfs rw
31 21 0:29 / /usr ro - overlay overlay ro
"""


class MountsTest(unittest.TestCase):
    def setUp(self):
        self.R = loader.load()

    def mounts(self, text):
        with tempfile.NamedTemporaryFile("w", delete=False) as f:
            f.write(text)
        self.addCleanup(os.unlink, f.name)
        return self.R["_writable_mounts"](f.name)

    def test_read_write_mounts_outside_proc_and_sys(self):
        self.assertEqual(self.mounts(MOUNTINFO), ["/dev", "/dev/mqueue", "/dev/shm", "/my space", "/tmp"])

    def test_a_writable_root_fails(self):
        with self.assertRaises(self.R["_ResetFailed"]) as cm:
            self.mounts(MOUNTINFO.replace("/ / ro,relatime", "/ / rw,relatime"))
        self.assertIn("docker.read_only", str(cm.exception))


class RestoreTest(unittest.TestCase):
    def setUp(self):
        self.R = loader.load()
        self.dir = tempfile.mkdtemp()
        self.addCleanup(self.cleanup)
        os.mkdir(os.path.join(self.dir, "kept"))
        with open(os.path.join(self.dir, "kept", "cache"), "w") as f:
            f.write("before")
        self.base = self.R["_Baseline"].__new__(self.R["_Baseline"])
        self.base.mounts = [self.dir]
        self.base.paths = self.R["_walk"]([self.dir])

    def cleanup(self):
        for root, dirs, _ in os.walk(self.dir):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o700)
        import shutil
        shutil.rmtree(self.dir)

    def path(self, *p):
        return os.path.join(self.dir, *p)

    def test_what_a_call_left_is_removed(self):
        os.makedirs(self.path("a", "b", "c"))
        with open(self.path("a", "b", "c", "f"), "w") as f:
            f.write("x")
        os.symlink("/etc/passwd", self.path("kept", "link"))
        os.mkfifo(self.path("fifo"))
        os.chmod(self.path("a", "b"), 0)  # unreadable: the walk opens it again
        os.chmod(self.path("kept"), 0o500)  # its mode is put back
        n = self.R["_restore_paths"](self.base)
        self.assertEqual(n, len(self.base.paths))
        self.assertEqual(sorted(os.listdir(self.dir)), ["kept"])
        self.assertEqual(os.listdir(self.path("kept")), ["cache"])
        self.assertEqual(self.R["_walk"]([self.dir]), self.base.paths)

    def test_a_changed_file_of_the_baseline_fails_even_with_its_times_put_back(self):
        p = self.path("kept", "cache")
        st = os.stat(p)
        with open(p, "w") as f:
            f.write("after!")  # same size
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
        with self.assertRaises(self.R["_ResetFailed"]) as cm:
            self.R["_restore_paths"](self.base)
        self.assertIn("cache changed", str(cm.exception))

    def test_a_removed_file_of_the_baseline_fails(self):
        os.unlink(self.path("kept", "cache"))
        with self.assertRaises(self.R["_ResetFailed"]) as cm:
            self.R["_restore_paths"](self.base)
        self.assertIn("cache was removed", str(cm.exception))

    def test_nothing_left_is_a_no_op(self):
        self.assertEqual(self.R["_restore_paths"](self.base), len(self.base.paths))

    def walks(self):
        walk, n = self.R["_walk"], []

        def counted(*a, **k):
            n.append(1)
            return walk(*a, **k)
        self.R["_walk"] = counted
        self.addCleanup(self.R.__setitem__, "_walk", walk)
        return n

    def test_nothing_left_walks_once_and_a_restoration_is_walked_again(self):
        n = self.walks()
        self.R["_restore_paths"](self.base)
        self.assertEqual(len(n), 1, "with nothing to put back, the first walk is the check")
        os.chmod(self.path("kept"), 0o500)
        del n[:]
        self.R["_restore_paths"](self.base)
        self.assertEqual(len(n), 2, "what was put back is checked by a second walk")
        self.assertEqual(self.R["_walk"]([self.dir]), self.base.paths)


class RestoreFromHeldTopTest(RestoreTest):
    """The same with the top held open, as the baseline holds it in a
    sandbox (_hold_tops): the walk opens it relative to that descriptor."""

    def setUp(self):
        super().setUp()
        self.R["_hold_tops"]([self.dir])
        fd = self.R["_TOPS"][self.dir]
        self.addCleanup(os.close, fd)
        self.assertEqual(self.R["_walk"]([self.dir]), self.base.paths)


class ReseedTest(unittest.TestCase):
    def test_each_worker_draws_its_own_stream(self):
        import random
        R = loader.load()
        random.seed(7)
        state = random.getstate()
        R["_reseed"]()
        self.assertNotEqual(random.getstate(), state)


if __name__ == "__main__":
    unittest.main()

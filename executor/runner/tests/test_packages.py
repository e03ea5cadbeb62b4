import os
import sys
import tempfile
import unittest

import loader

R = loader.load()


def mountinfo(*lines):
    f = tempfile.NamedTemporaryFile("w", delete=False)
    for mnt, opts in lines:
        f.write("1 0 0:1 / %s %s - overlay overlay rw\n" % (mnt, opts))
    f.close()
    return f.name


class StablePathsTest(unittest.TestCase):
    """What the worker's guard does not resolve again: import-cache keys
    under a read-only /usr that are their own real path (packages.py)."""

    def test_usr_read_only_needs_root_and_every_usr_mount_read_only(self):
        cases = [
            ([("/", "ro,relatime"), ("/tmp", "rw"), ("/workspace", "rw")], True),
            ([("/", "ro"), ("/usr", "ro,nosuid")], True),
            ([("/", "rw,relatime")], False),
            ([("/", "ro"), ("/usr/local", "rw")], False),
        ]
        for lines, want in cases:
            path = mountinfo(*lines)
            self.addCleanup(os.unlink, path)
            self.assertEqual(R["_usr_read_only"](path), want, lines)
        self.assertFalse(R["_usr_read_only"]("/nonexistent/mountinfo"))

    def test_only_usr_keys_that_are_their_own_real_path(self):
        links = [os.path.join("/usr/bin", n) for n in sorted(os.listdir("/usr/bin"))
                 if os.path.islink(os.path.join("/usr/bin", n))]
        self.assertTrue(links, "a symlink under /usr/bin")
        link = links[0]
        with tempfile.TemporaryDirectory() as tmp:
            keys = ["/usr/lib", link, tmp]
            saved = dict(sys.path_importer_cache)
            stable, ro = R["_STABLE_PATHS"], R["_USR_READ_ONLY"]
            self.addCleanup(lambda: (sys.path_importer_cache.clear(), sys.path_importer_cache.update(saved)))
            self.addCleanup(lambda: (stable.clear(), ro.clear()))
            for k in keys:
                sys.path_importer_cache.setdefault(k, None)
            stable.clear()
            ro[:] = [False]
            R["_note_stable_paths"]()
            self.assertEqual(stable, {}, "nothing is kept while /usr can be written")
            ro[:] = [True]
            R["_note_stable_paths"]()
            self.assertEqual(stable.get("/usr/lib"), "/usr/lib")
            self.assertNotIn(link, stable, "a symlink is resolved by each worker")
            self.assertNotIn(tmp, stable, "a key outside /usr is resolved by each worker")


if __name__ == "__main__":
    unittest.main()

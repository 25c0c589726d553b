"""Tests of the package fingerprint and its kept hash."""

import os
import tempfile
import unittest

from klbr import fingerprint


class PackageHashTest(unittest.TestCase):
    def setUp(self) -> None:
        self.root = self.enterContext(tempfile.TemporaryDirectory())
        os.makedirs(os.path.join(self.root, "sub", "__pycache__"))
        self.write("a.py", "x = 1\n")
        self.write("sub/b.py", "y = 2\n")
        self.write("sub/__pycache__/c.py", "ignored\n")
        self.write("notes.txt", "ignored\n")
        fingerprint._kept.pop(self.root, None)

    def tearDown(self) -> None:
        fingerprint._kept.pop(self.root, None)

    def write(self, rel: str, text: str) -> None:
        with open(os.path.join(self.root, rel), "w") as handle:
            handle.write(text)

    def test_hash_covers_py_files_by_relative_path_only(self) -> None:
        """`package_hash()` reads every .py file outside __pycache__, and only those."""
        before = fingerprint.package_hash(self.root)
        self.write("notes.txt", "changed\n")
        self.write("sub/__pycache__/c.py", "changed\n")
        self.assertEqual(fingerprint.package_hash(self.root), before)
        self.write("sub/b.py", "y = 3\n")
        self.assertNotEqual(fingerprint.package_hash(self.root), before)

    def test_a_recent_signature_is_never_kept(self) -> None:
        """A hash of files written within RACY_NS is computed again each time, never kept."""
        fingerprint.package_hash(self.root)
        self.assertNotIn(self.root, fingerprint._kept)

    def test_kept_hash_is_answered_until_a_file_changes(self) -> None:
        """An old signature is kept; a same-size rewrite (new ctime) is read again."""
        original = fingerprint.RACY_NS
        fingerprint.RACY_NS = -10**12  # every signature counts as old
        try:
            first = fingerprint.package_hash(self.root)
            self.assertEqual(fingerprint._kept[self.root][1], first)
            self.assertEqual(fingerprint.package_hash(self.root), first)
            # Same size, same mtime set back by hand: ctime still moves, and the hash follows.
            st = os.stat(os.path.join(self.root, "a.py"))
            self.write("a.py", "x = 9\n")
            os.utime(os.path.join(self.root, "a.py"), ns=(st.st_atime_ns, st.st_mtime_ns))
            changed = fingerprint.package_hash(self.root)
            self.assertNotEqual(changed, first)
            fingerprint._kept.pop(self.root, None)
            self.assertEqual(fingerprint.package_hash(self.root), changed)
            self.write("sub/new.py", "")
            self.assertNotEqual(fingerprint.package_hash(self.root), changed)
        finally:
            fingerprint.RACY_NS = original


if __name__ == "__main__":
    unittest.main()

"""Tests of the workspace's two security rules: the state directory is never part of it, and
a path is never opened through a link the kernel follows (the swap race)."""

import ctypes
import os
import tempfile
import threading
import unittest

from klbr.files import FileHandle
from klbr.paths import WorkspaceEscape
from klbr.workspace import Workspace


class StateDirTest(unittest.IsolatedAsyncioTestCase):
    """The default layout: the state directory `.klbr` inside the workspace (the checkout)."""

    def setUp(self) -> None:
        self.root = os.path.realpath(self.enterContext(tempfile.TemporaryDirectory()))
        self.state = os.path.join(self.root, ".klbr")
        os.makedirs(os.path.join(self.state, "skills", "planted"))
        with open(os.path.join(self.state, "operator.token"), "w") as f:
            f.write("a" * 64 + "\n")
        with open(os.path.join(self.state, "config.kdl"), "w") as f:
            f.write("// config TOKEN\n")
        with open(os.path.join(self.root, "notes.md"), "w") as f:
            f.write("TOKEN in the workspace\n")
        os.symlink(os.path.join(self.state, "operator.token"), os.path.join(self.root, "alias"))
        self.ws = Workspace(self.root, deny=[self.state])

    async def test_every_operation_refuses_the_state_directory(self) -> None:
        """`open_file`, `ls`, `search`, `delete` and `resolve` refuse the state dir and what is in it."""
        message = (
            f"cannot use path '.klbr/operator.token': it is inside the state directory {self.state!r}, "
            "which is never part of the workspace"
        )
        with self.assertRaises(WorkspaceEscape) as caught:
            await self.ws.open_file(".klbr/operator.token")
        self.assertEqual(str(caught.exception), message)
        attempts = [
            self.ws.open_file(".klbr/skills/planted/SKILL.md", create=True),
            self.ws.open_file(os.path.join(self.state, "config.kdl")),
            self.ws.ls(".klbr"),
            self.ws.search("TOKEN", ".klbr"),
            self.ws.delete(".klbr/config.kdl"),
            self.ws.delete(".klbr", recursive=True),
            self.ws.open_file("docs/../.klbr/config.kdl"),
        ]
        for attempt in attempts:
            with self.assertRaises(WorkspaceEscape):
                await attempt
        with self.assertRaises(WorkspaceEscape):
            self.ws.resolve(".klbr")
        self.assertTrue(os.path.exists(os.path.join(self.state, "config.kdl")))
        self.assertFalse(os.path.exists(os.path.join(self.state, "skills", "planted", "SKILL.md")))

    async def test_a_recursive_delete_of_a_folder_holding_the_state_directory_is_refused(self) -> None:
        """`delete(recursive=True)` of a directory the state directory lies in deletes nothing:
        it would delete the store and the token with it."""
        nested = os.path.join(self.root, "var", "klbr")
        os.makedirs(nested)
        with open(os.path.join(nested, "runtime.sqlite"), "w") as f:
            f.write("store\n")
        ws = Workspace(self.root, deny=[nested])
        with self.assertRaisesRegex(WorkspaceEscape, "holds the state directory"):
            await ws.delete("var", recursive=True)
        self.assertTrue(os.path.exists(os.path.join(nested, "runtime.sqlite")))
        os.mkdir(os.path.join(self.root, "var", "cache"))
        await ws.delete("var/cache", recursive=True)
        self.assertEqual(os.listdir(os.path.join(self.root, "var")), ["klbr"])

    async def test_a_link_into_the_state_directory_is_refused(self) -> None:
        """`open_file()` resolves a link to the token and refuses where it leads."""
        with self.assertRaisesRegex(WorkspaceEscape, "inside the state directory"):
            await (await self.ws.open_file("alias")).read()
        with self.assertRaisesRegex(WorkspaceEscape, "inside the state directory"):
            await self.ws.open_file("alias")

    async def test_listings_and_searches_leave_the_state_directory_out(self) -> None:
        """`ls()` (also recursive) and `search()` never show or read the state directory."""
        self.assertEqual([e.path for e in await self.ws.ls()], ["alias", "notes.md"])
        self.assertEqual([e.path for e in await self.ws.ls(recursive=True)], ["alias", "notes.md"])
        result = await self.ws.search("TOKEN")
        self.assertEqual([m.path for m in result.matches], ["notes.md"])


class SwapRaceTest(unittest.IsolatedAsyncioTestCase):
    """A directory swapped for a symlink to outside, over and over, while the workspace writes."""

    def setUp(self) -> None:
        base = os.path.realpath(self.enterContext(tempfile.TemporaryDirectory()))
        self.root = os.path.join(base, "ws")
        self.outside = os.path.join(base, "outside")
        os.makedirs(os.path.join(self.root, "d"))
        os.mkdir(self.outside)
        os.symlink(self.outside, os.path.join(self.root, "link"))
        self.ws = Workspace(self.root)

    def _swapper(self, stop: threading.Event, swaps: list[int]) -> None:
        # renameat2(RENAME_EXCHANGE) swaps the directory and the link atomically, so `d` is
        # always one or the other: the sharpest form of the race.
        libc = ctypes.CDLL(None, use_errno=True)
        d = os.path.join(self.root, "d").encode()
        link = os.path.join(self.root, "link").encode()
        while not stop.is_set() and swaps[0] < 1_000_000:
            if libc.renameat2(-100, d, -100, link, 2) != 0:
                raise OSError(ctypes.get_errno(), "renameat2 failed")
            swaps[0] += 1

    async def test_writes_never_land_outside_while_a_directory_is_swapped(self) -> None:
        """`FileHandle.write`, `append`, `open_file(create=True)` and `delete` stay inside the root
        while another thread swaps `d` for a link to a directory outside it."""
        stop = threading.Event()
        swaps = [0]
        thread = threading.Thread(target=self._swapper, args=(stop, swaps))
        handle = FileHandle(self.root, "d/f.txt")
        outcomes = {"ok": 0, "refused": 0}
        thread.start()
        try:
            for i in range(1500):
                try:
                    if i % 4 == 0:
                        await handle.write(f"write {i}")
                    elif i % 4 == 1:
                        await handle.append(f" append {i}")
                    elif i % 4 == 2:
                        await self.ws.open_file(f"d/new{i}.txt", create=True)
                    else:
                        await self.ws.delete(f"d/new{i - 1}.txt")
                    outcomes["ok"] += 1
                except OSError:  # WorkspaceEscape included: refusing is fine, landing outside is not
                    outcomes["refused"] += 1
        finally:
            stop.set()
            thread.join()
        self.assertGreater(swaps[0], 100, "the race must have run")
        self.assertGreater(outcomes["ok"], 0, "some writes must have landed, inside")
        self.assertEqual(os.listdir(self.outside), [], f"written outside the root ({outcomes})")


if __name__ == "__main__":
    unittest.main()


class ReadOnlyPathTest(unittest.TestCase):
    """The sandbox keeps klbr's code and the git hooks read-only; a refused write says why."""

    def test_writing_names_a_read_only_mount_and_a_busy_mount_point(self) -> None:
        """`EROFS` (inside a read-only bind) and `EBUSY` (replacing the bound file) both read as one refusal."""
        import errno as errnos

        from klbr.files import ReadOnlyPath, writing

        for code in (errnos.EROFS, errnos.EBUSY):
            with self.assertRaises(ReadOnlyPath) as caught:
                with writing("main.ts"):
                    raise OSError(code, os.strerror(code))
            self.assertIsInstance(caught.exception, PermissionError)
            self.assertTrue(str(caught.exception).startswith("cannot write main.ts: it is read-only to cells"))
        with self.assertRaises(FileNotFoundError):
            with writing("x"):
                raise FileNotFoundError(errnos.ENOENT, "missing")

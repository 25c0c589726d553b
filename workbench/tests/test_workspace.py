"""Tests of the workspace: root-bound paths, file edits, listing and search."""

import os
import tempfile
import unittest
from unittest import mock

from klbr import workspace
from klbr.paths import WorkspaceEscape
from klbr.workspace import Workspace


class WorkspaceCase(unittest.IsolatedAsyncioTestCase):
    def setUp(self) -> None:
        base = os.path.realpath(self.enterContext(tempfile.TemporaryDirectory()))
        self.root = os.path.join(base, "ws")
        self.sibling = os.path.join(base, "sibling")
        os.mkdir(self.root)
        os.mkdir(self.sibling)
        with open(os.path.join(self.sibling, "secret.txt"), "w") as f:
            f.write("secret TODO\n")
        self.ws = Workspace(self.root)

    def write(self, rel: str, text: str) -> str:
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path


class PathRulesTest(WorkspaceCase):
    async def test_dotdot_escape_is_refused(self) -> None:
        """`open_file()` refuses a `..` path that leads out of the root, naming path and root."""
        with self.assertRaises(WorkspaceEscape) as caught:
            await self.ws.open_file("../sibling/secret.txt")
        self.assertEqual(str(caught.exception), f"cannot use path '../sibling/secret.txt': '..' leads outside the workspace root {self.root!r}")
        self.assertIsInstance(caught.exception, PermissionError)

    async def test_absolute_path_outside_is_refused(self) -> None:
        """`open_file()` refuses an absolute path outside the root, and `ls` refuses `/`."""
        with self.assertRaisesRegex(WorkspaceEscape, "absolute path is outside the workspace root"):
            await self.ws.open_file(os.path.join(self.sibling, "secret.txt"))
        with self.assertRaises(WorkspaceEscape):
            await self.ws.ls("/")

    async def test_absolute_path_inside_is_allowed(self) -> None:
        """`open_file()` accepts an absolute path inside the root."""
        self.write("a.txt", "hi")
        handle = await self.ws.open_file(os.path.join(self.root, "a.txt"))
        self.assertEqual((handle.path, await handle.read()), ("a.txt", "hi"))

    async def test_symlink_to_filesystem_root_is_refused(self) -> None:
        """`ls`, `open_file` and `search` refuse a symlink that leads to `/`."""
        os.symlink("/", os.path.join(self.root, "slash"))
        for attempt in (self.ws.ls("slash"), self.ws.open_file("slash/etc/hostname"), self.ws.search("root", "slash")):
            with self.assertRaisesRegex(WorkspaceEscape, "a symlink leads to '/"):
                await attempt

    async def test_symlink_to_sibling_dir_is_refused(self) -> None:
        """`open_file` refuses a symlinked dir to a sibling of the root, also for creating files."""
        os.symlink(self.sibling, os.path.join(self.root, "out"))
        with self.assertRaises(WorkspaceEscape):
            await self.ws.open_file("out/secret.txt")
        with self.assertRaises(WorkspaceEscape):
            await self.ws.open_file("out/new.txt", create=True)
        self.assertFalse(os.path.exists(os.path.join(self.sibling, "new.txt")))

    async def test_dangling_symlink_out_is_refused(self) -> None:
        """`open_file(create=True)` refuses a dangling link whose target is outside."""
        os.symlink(os.path.join(self.sibling, "later.txt"), os.path.join(self.root, "later"))
        with self.assertRaises(WorkspaceEscape):
            await self.ws.open_file("later", create=True)
        self.assertFalse(os.path.exists(os.path.join(self.sibling, "later.txt")))

    async def test_handle_rechecks_after_swap_to_symlink(self) -> None:
        """`FileHandle.read()` refuses once its file was replaced by a link that leads out."""
        self.write("f.txt", "mine")
        handle = await self.ws.open_file("f.txt")
        os.unlink(os.path.join(self.root, "f.txt"))
        os.symlink(os.path.join(self.sibling, "secret.txt"), os.path.join(self.root, "f.txt"))
        with self.assertRaises(WorkspaceEscape):
            await handle.read()

    async def test_symlink_inside_root_is_followed(self) -> None:
        """`open_file()` follows a symlink that stays inside the root."""
        self.write("real/a.txt", "inside")
        os.symlink(os.path.join(self.root, "real"), os.path.join(self.root, "alias"))
        self.assertEqual(await (await self.ws.open_file("alias/a.txt")).read(), "inside")

    def test_bad_path_values_are_refused(self) -> None:
        """`Workspace.resolve()` refuses empty paths, NUL bytes and non-paths."""
        with self.assertRaisesRegex(ValueError, "path is empty"):
            self.ws.resolve("")
        with self.assertRaisesRegex(ValueError, "NUL byte"):
            self.ws.resolve("a\0b")
        with self.assertRaisesRegex(TypeError, "got int"):
            self.ws.resolve(3)  # type: ignore[arg-type]


class FileTest(WorkspaceCase):
    async def test_open_missing_without_create_fails(self) -> None:
        """`open_file()` refuses a missing file unless create=True, which makes parents too."""
        with self.assertRaisesRegex(FileNotFoundError, r"^cannot open docs/n.md: no such file \(pass create=True to make it\)$"):
            await self.ws.open_file("docs/n.md")
        handle = await self.ws.open_file("docs/n.md", create=True)
        self.assertEqual(await handle.read(), "")

    async def test_open_directory_fails(self) -> None:
        """`open_file()` refuses a directory."""
        os.mkdir(os.path.join(self.root, "d"))
        with self.assertRaises(IsADirectoryError):
            await self.ws.open_file("d")

    async def test_a_pipe_is_refused_not_waited_on(self) -> None:
        """`read()` and `append()` refuse a named pipe at once: opening or reading one would wait
        for a writer or a reader that never comes, and the cell with it."""
        os.mkfifo(os.path.join(self.root, "pipe"))
        handle = await self.ws.open_file("pipe")
        for attempt in (handle.read(), handle.append("x"), handle.replace("a", "b")):
            with self.assertRaisesRegex(OSError, r"^cannot open pipe: it is not a regular file"):
                await attempt

    async def test_write_append_read(self) -> None:
        """`write()` replaces the text atomically, keeping the mode; `append()` adds to it."""
        path = self.write("x.txt", "old")
        os.chmod(path, 0o600)
        handle = await self.ws.open_file("x.txt")
        self.assertEqual(await handle.write("new\n"), 4)
        await handle.append("more\n")
        self.assertEqual(await handle.read(), "new\nmore\n")
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
        self.assertEqual([n for n in os.listdir(self.root) if n.endswith(".tmp")], [])

    async def test_replace_exactly_one(self) -> None:
        """`replace()` replaces the one occurrence."""
        self.write("n.md", "alpha beta gamma")
        handle = await self.ws.open_file("n.md")
        await handle.replace("beta", "BETA")
        self.assertEqual(await handle.read(), "alpha BETA gamma")

    async def test_replace_zero_occurrences_fails_and_leaves_file(self) -> None:
        """`replace()` raises ValueError naming count 0 and leaves the file untouched."""
        self.write("n.md", "alpha")
        handle = await self.ws.open_file("n.md")
        with self.assertRaises(ValueError) as caught:
            await handle.replace("omega", "x")
        self.assertEqual(str(caught.exception), "cannot replace in n.md: expected exactly one occurrence of 'omega' (got 0)")
        self.assertEqual(await handle.read(), "alpha")

    async def test_replace_many_occurrences_fails_and_leaves_file(self) -> None:
        """`replace()` raises ValueError naming the count when the text occurs several times."""
        self.write("n.md", "a a a")
        handle = await self.ws.open_file("n.md")
        with self.assertRaisesRegex(ValueError, r"\(got 3\)$"):
            await handle.replace("a", "b")
        self.assertEqual(await handle.read(), "a a a")

    async def test_replace_counts_overlapping_occurrences(self) -> None:
        """`replace()` refuses text that occurs twice overlapping (`}\\n}` in `}\\n}\\n}`): which
        one was meant is ambiguous, and the file is left untouched."""
        self.write("n.js", "}\n}\n}\n")
        handle = await self.ws.open_file("n.js")
        with self.assertRaisesRegex(ValueError, r"\(got 2\)$"):
            await handle.replace("}\n}", "}")
        self.assertEqual(await handle.read(), "}\n}\n}\n")

    async def test_replace_empty_old_fails(self) -> None:
        """`replace()` refuses an empty old text."""
        self.write("n.md", "abc")
        with self.assertRaisesRegex(ValueError, "old text is empty"):
            await (await self.ws.open_file("n.md")).replace("", "x")

    async def test_delete_rules(self) -> None:
        """`delete()` removes files and links (not targets), refuses non-empty dirs and the root."""
        self.write("d/f.txt", "x")
        os.symlink(self.sibling, os.path.join(self.root, "link"))
        await self.ws.delete("link")
        self.assertTrue(os.path.isdir(self.sibling))
        with self.assertRaisesRegex(OSError, "directory is not empty"):
            await self.ws.delete("d")
        with self.assertRaisesRegex(PermissionError, "workspace root"):
            await self.ws.delete(".")
        with self.assertRaises(WorkspaceEscape):
            await self.ws.delete("../sibling/secret.txt")
        await self.ws.delete("d", recursive=True)
        self.assertEqual(os.listdir(self.root), [])
        with self.assertRaisesRegex(FileNotFoundError, r"^cannot delete d: no such file or directory$"):
            await self.ws.delete("d")


class ListingTest(WorkspaceCase):
    def setUp(self) -> None:
        super().setUp()
        self.write("a.py", "print('TODO one')\n")
        self.write("b.txt", "nothing\n")
        self.write("src/c.py", "x = 1  # TODO two\n# TODO three\n")
        self.write("src/deep/d.py", "pass\n")
        os.symlink(self.sibling, os.path.join(self.root, "out"))

    async def test_ls_one_level(self) -> None:
        """`ls()` lists one level, sorted, with links shown but not followed."""
        listing = await self.ws.ls()
        self.assertEqual([(e.path, e.kind) for e in listing], [("a.py", "file"), ("b.txt", "file"), ("out", "link"), ("src", "dir")])
        self.assertEqual(repr(listing), "a.py (18 B)\nb.txt (8 B)\nout -> (link)\nsrc/")

    async def test_ls_recursive_with_match(self) -> None:
        """`ls(recursive=True, match=...)` walks the tree and keeps matching names only."""
        listing = await self.ws.ls(".", recursive=True, match="*.py")
        self.assertEqual([e.path for e in listing], ["a.py", "src/c.py", "src/deep/d.py"])
        self.assertFalse(listing.truncated)

    async def test_ls_leaves_out_an_entry_deleted_while_it_lists(self) -> None:
        """`ls()` lists what is still there when a file goes between reading a directory and
        looking at the file (a build deleting its output), rather than failing the whole listing."""
        real_stat = os.stat

        def vanishing(name, *args, **kwargs):  # noqa: ANN001, ANN202 - os.stat's own signature
            if name == "b.txt":
                raise FileNotFoundError(2, "No such file or directory", name)
            return real_stat(name, *args, **kwargs)

        with mock.patch("os.stat", vanishing):
            one_level = await self.ws.ls()
            walked = await self.ws.ls(".", recursive=True)
        self.assertEqual([e.path for e in one_level], ["a.py", "out", "src"])
        self.assertNotIn("b.txt", [e.path for e in walked])
        self.assertIn("src/c.py", [e.path for e in walked])

    async def test_ls_cap_says_truncated(self) -> None:
        """`ls()` stops at max_entries and says truncated."""
        listing = await self.ws.ls(".", recursive=True, max_entries=2)
        self.assertEqual(len(listing), 2)
        self.assertTrue(listing.truncated)
        self.assertIn("[truncated: stopped after 2 entries]", repr(listing))

    async def test_ls_missing_fails(self) -> None:
        """`ls()` raises FileNotFoundError for a missing path."""
        with self.assertRaisesRegex(FileNotFoundError, "cannot list nope"):
            await self.ws.ls("nope")

    async def test_search_finds_lines(self) -> None:
        """`search()` reports path, line number and text, skipping links out of the root."""
        result = await self.ws.search("TODO")
        self.assertEqual([(m.path, m.line) for m in result.matches], [("a.py", 1), ("src/c.py", 1), ("src/c.py", 2)])
        self.assertFalse(result.truncated)
        self.assertEqual(str(result).splitlines()[0], "a.py:1: print('TODO one')")

    async def test_search_truncation_is_reported(self) -> None:
        """`search()` stops at max_results, sets truncated and prints "truncated"."""
        result = await self.ws.search("TODO", max_results=2)
        self.assertEqual(len(result.matches), 2)
        self.assertTrue(result.truncated)
        self.assertIn("truncated", str(result))

    async def test_search_exactly_at_cap_is_not_truncated(self) -> None:
        """`search()` does not call a result truncated when nothing more matched."""
        result = await self.ws.search("TODO", max_results=3)
        self.assertFalse(result.truncated)

    async def test_search_regex_and_subpath(self) -> None:
        """`search(regex=True)` matches a regex within a sub-path."""
        result = await self.ws.search(r"TODO (two|three)", "src", regex=True)
        self.assertEqual([m.line for m in result.matches], [1, 2])

    async def test_search_numbers_lines_by_newline_only(self) -> None:
        """`search()` counts lines the way editors, `code.lines` and grep do: a form feed, a
        lone carriage return or U+2028 inside a line does not start a new one; CRLF ends one."""
        self.write("paged.c", "int a;\n\f\nint b; /* TODO four */\r\nx = 'a\u2028b'\rc\n// TODO five\n")
        result = await self.ws.search("TODO", "paged.c")
        self.assertEqual([(m.line, m.text) for m in result.matches], [(3, "int b; /* TODO four */"), (5, "// TODO five")])
        empty = await self.ws.search("^$", "paged.c", regex=True)
        self.assertEqual(empty.matches, [], "no phantom line after the final newline")

    async def test_search_skips_binary_and_refuses_bad_args(self) -> None:
        """`search()` skips binary files and refuses an empty pattern or bad max_results."""
        with open(os.path.join(self.root, "bin.dat"), "wb") as f:
            f.write(b"TODO\0\1\2")
        result = await self.ws.search("TODO")
        self.assertNotIn("bin.dat", [m.path for m in result.matches])
        self.assertGreaterEqual(result.files_skipped, 1)
        with self.assertRaisesRegex(ValueError, "pattern must be a non-empty string"):
            await self.ws.search("")
        with self.assertRaisesRegex(ValueError, "max_results must be a positive int"):
            await self.ws.search("x", max_results=0)


class BindingTest(unittest.IsolatedAsyncioTestCase):
    async def test_current_returns_bound_workspace(self) -> None:
        """`workspace.current()` returns the object bound for this generation."""
        with tempfile.TemporaryDirectory() as tmp:
            bound = workspace.bind(tmp)
            self.assertIs(await workspace.current(), bound)
            self.assertEqual(bound.root, os.path.realpath(tmp))

    def test_bind_refuses_non_directory(self) -> None:
        """`Workspace()` refuses a root that is not a directory."""
        with self.assertRaisesRegex(NotADirectoryError, "root is not a directory"):
            Workspace("/nonexistent/klbr-root")

    def test_prelude_names(self) -> None:
        """`PRELUDE_NAMES` lists the five workspace functions, all module attributes."""
        self.assertEqual(workspace.PRELUDE_NAMES, ("open_file", "ls", "search", "delete", "run"))
        self.assertTrue(all(callable(getattr(workspace, n)) for n in workspace.PRELUDE_NAMES))


if __name__ == "__main__":
    unittest.main()

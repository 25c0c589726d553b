"""Tests of ``klbr.skills``: the offered set comes from the init payload only."""

import asyncio
import unittest

import klbr.skills as skills
from klbr.cells import run_cell

PAYLOAD = {
    "revision": "sha256:abc",
    "roots": ["/ws/skills", "/state/skills"],
    "bodies": {"workspace": "# workspace\n\nHow to edit files.\n", "maintenance": "# maintenance\n\nDuties.\n"},
    "refused": [{"id": "dup", "root": "/state/skills", "reason": "defined in two roots"}],
}


class SkillsTest(unittest.TestCase):
    def setUp(self) -> None:
        skills._install(PAYLOAD)

    def test_dir_lists_offered_ids_and_attributes(self) -> None:
        """`dir(skills)` lists the offered ids plus delete, refused, revision, roots and write."""
        self.assertEqual(dir(skills), ["delete", "maintenance", "refused", "revision", "roots", "workspace", "write"])

    def test_attribute_is_the_body(self) -> None:
        """`skills.<id>` is an object whose doc and str are the body."""
        self.assertEqual(skills.workspace.__doc__, PAYLOAD["bodies"]["workspace"])
        self.assertEqual(str(skills.maintenance), "# maintenance\n\nDuties.\n")
        self.assertEqual(repr(skills.workspace), "<skill workspace: '# workspace', 32 characters>")

    def test_help_prints_the_body(self) -> None:
        """`help(skills.<id>)` in a cell prints the body."""
        result = asyncio.run(run_cell("help(skills.workspace)", {"skills": skills}))
        self.assertIn("How to edit files.", result.stdout)
        self.assertNotIn("One offered skill", result.stdout)

    def test_metadata(self) -> None:
        """`skills.refused`, `revision` and `roots` come from the payload."""
        self.assertEqual(skills.revision, "sha256:abc")
        self.assertEqual(skills.roots, ["/ws/skills", "/state/skills"])
        self.assertEqual(skills.refused, [{"id": "dup", "root": "/state/skills", "reason": "defined in two roots"}])

    def test_unknown_id_lists_offered(self) -> None:
        """`skills.<unknown>` raises AttributeError listing the offered ids."""
        with self.assertRaises(AttributeError) as caught:
            skills.dup  # noqa: B018
        self.assertEqual(str(caught.exception), "cannot import skill 'dup': not offered in this generation (offered: maintenance, workspace)")

    def test_from_import_by_id(self) -> None:
        """`from klbr.skills import <id>` works for an offered id."""
        from klbr.skills import workspace as body  # noqa: PLC0415
        self.assertEqual(body.id, "workspace")

    def test_reinstall_replaces_the_set(self) -> None:
        """`_install()` replaces the whole set: an id no longer offered disappears."""
        skills._install({"revision": "r2", "roots": [], "bodies": {}, "refused": []})
        self.assertEqual(dir(skills), ["delete", "refused", "revision", "roots", "write"])
        with self.assertRaisesRegex(AttributeError, r"\(offered: none\)"):
            skills.workspace  # noqa: B018

    def test_malformed_payload_changes_nothing(self) -> None:
        """`_install()` refuses malformed fields and keeps the previous set."""
        bad = [
            {"bodies": {"x": 1}},
            {"bodies": {}, "roots": "notalist"},
            {"bodies": {}, "refused": ["x"]},
            {"bodies": {}, "revision": 5},
            [],
        ]
        for payload in bad:
            with self.assertRaises(ValueError):
                skills._install(payload)  # type: ignore[arg-type]
        self.assertEqual(skills.revision, "sha256:abc")
        self.assertIn("workspace", dir(skills))


if __name__ == "__main__":
    unittest.main()

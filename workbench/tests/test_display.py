"""Tests of ``klbr.display.display``: what a cell shows besides its text output."""

import base64
import unittest

from klbr.cells import run_cell
from klbr.display import MAX_DISPLAY_BYTES, MAX_DISPLAYS, display
from tests.support import KernelCase

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


class Figure:
    """An object that knows how to show itself, the way plotting libraries do."""

    def _repr_png_(self) -> bytes:
        return PNG


class DisplayTest(unittest.IsolatedAsyncioTestCase):
    async def test_image_and_html_are_kept_in_order(self) -> None:
        """A cell's displays reach its result in order, with their type and bytes."""
        ns = {"display": display, "PNG": PNG}
        result = await run_cell("display(PNG)\ndisplay('<b>hi</b>', mime='text/html')", ns)
        self.assertEqual(result.outcome, "ok")
        self.assertEqual([d["mime"] for d in result.displays], ["image/png", "text/html"])
        self.assertEqual(base64.b64decode(result.displays[0]["data_b64"]), PNG)
        self.assertEqual(base64.b64decode(result.displays[1]["data_b64"]), b"<b>hi</b>")
        self.assertEqual(result.to_json()["displays"], result.displays)

    async def test_an_object_shows_itself(self) -> None:
        """An object with ``_repr_png_()`` is shown as the PNG it returns."""
        result = await run_cell("display(Figure())", {"display": display, "Figure": Figure})
        self.assertEqual([d["mime"] for d in result.displays], ["image/png"])

    async def test_an_object_whose_show_method_raises_ends_the_cell_with_its_error(self) -> None:
        """A cell that displays an object whose ``_repr_html_()`` or ``_repr_png_()`` raises (even an
        exception whose ``__str__`` raises) ends with outcome error naming that exception."""
        broken = "class E(Exception):\n    def __str__(self):\n        raise RuntimeError('broken')\n"
        for method, raised, message in (
            ("_repr_html_", "ValueError('no html')", "no html"),
            ("_repr_png_", "E()", "<exception str() failed: RuntimeError: broken>"),
        ):
            code = broken + f"class F:\n    def {method}(self):\n        raise {raised}\ndisplay(F())"
            result = await run_cell(code, {"display": display})
            assert result.error is not None
            self.assertEqual((result.outcome, result.error["message"], result.displays), ("error", message, []))

    async def test_a_cell_without_displays_reports_none(self) -> None:
        """A cell that shows nothing has no ``displays`` in its reply, and the next cell starts empty."""
        ns = {"display": display, "PNG": PNG}
        await run_cell("display(PNG)", ns)
        result = await run_cell("1 + 1", ns)
        self.assertEqual(result.displays, [])
        self.assertNotIn("displays", result.to_json())

    async def test_bad_input_says_what_to_pass(self) -> None:
        """Text without a type, unknown bytes, too many or too large displays are refused with the fix."""
        ns = {"display": display, "PNG": PNG, "MAX": MAX_DISPLAY_BYTES}
        cases = {
            "display('hello')": "mime='text/html'",
            "display(b'plain bytes')": "not PNG, JPEG, GIF or WebP",
            "display(PNG, mime='image/jpeg')": "are not image/jpeg",
            "display(object())": "_repr_png_",
            "display(b'\\x89PNG\\r\\n\\x1a\\n' + bytes(MAX))": "at most",
        }
        for code, says in cases.items():
            result = await run_cell(code, ns)
            self.assertEqual(result.outcome, "error", code)
            self.assertIn(says, result.error["message"], code)
        many = await run_cell(f"for _ in range({MAX_DISPLAYS + 1}): display(PNG)", ns)
        self.assertEqual(many.outcome, "error")
        self.assertIn("at most 8 displays", many.error["message"])
        self.assertEqual(len(many.displays), MAX_DISPLAYS)

    def test_outside_a_cell_it_refuses(self) -> None:
        """``display()`` outside a cell says so instead of losing the output."""
        with self.assertRaisesRegex(RuntimeError, "from a cell"):
            display(PNG)


if __name__ == "__main__":
    unittest.main()


class DisplayReplyTest(KernelCase):
    async def test_the_most_a_cell_may_display_still_fits_its_reply(self) -> None:
        """A cell that shows as many of the largest displays as display() lets it still gets its
        ``ok`` reply, with its output, in one frame; the display over the budget is refused."""
        await self.init()
        big = "b'\\x89PNG\\r\\n\\x1a\\n' + bytes(MAX - 8)"
        code = (
            f"for _ in range({MAX_DISPLAYS}):\n"
            f"    try:\n        display({big})\n"
            "    except ValueError as err:\n        print(err)\n"
            "print('done')"
        )
        self.kernel.state.ns["MAX"] = MAX_DISPLAY_BYTES
        reply = await self.call({"kind": "execute", "id": "e1", "cell": "e1", "code": code})
        self.assertEqual(reply["kind"], "ok", reply.get("message"))
        self.assertEqual(reply["result"]["outcome"], "ok")
        self.assertTrue(reply["result"]["stdout"].endswith("done\n"))
        self.assertGreaterEqual(len(reply["result"]["displays"]), 1)

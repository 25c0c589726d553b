"""``display()``: rich output of a cell — an image or a piece of HTML shown in the page.

The host keeps each display as an artifact and the page shows it in the cell: an image inline, HTML
sanitised (no scripts, no event handlers). The model reads one line per display in the cell's
result (its type, size and artifact id), never the bytes.

Examples::

    display(open("plot.png", "rb").read())       # PNG, JPEG, GIF or WebP bytes
    display("<table><tr><td>1</td></tr></table>", mime="text/html")
    display(figure)                              # any object with _repr_png_() or _repr_html_()
"""

from __future__ import annotations

import base64
from contextvars import ContextVar
from typing import Any

__all__ = ["MAX_DISPLAY_BYTES", "MAX_DISPLAYS", "MAX_DISPLAYS_TOTAL_BYTES", "MIMES", "current_displays", "display"]

#: The types ``display()`` takes.
MIMES = ("image/png", "image/jpeg", "image/gif", "image/webp", "text/html")
#: The most bytes one display may hold.
MAX_DISPLAY_BYTES = 2 * 1024 * 1024
#: The most displays one cell may make.
MAX_DISPLAYS = 8
#: The most bytes one cell's displays may hold in all. The displays travel base64 in the cell's
#: reply, one frame of 16 MiB: this much is 8 MiB there, which leaves room for the two captured
#: streams and the value. Eight displays of the largest size would not fit, and the cell's whole
#: reply (its output included) would be lost.
MAX_DISPLAYS_TOTAL_BYTES = 6 * 1024 * 1024

#: The displays of the running cell, in order; ``None`` outside a cell.
current_displays: ContextVar[list[dict[str, str]] | None] = ContextVar(
    "klbr_cell_displays", default=None
)

_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def _sniff(data: bytes) -> str | None:
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _bytes_of(obj: Any, mime: str | None) -> tuple[bytes, str]:
    """The bytes and type ``display(obj, mime=mime)`` shows."""
    if mime is None and not isinstance(obj, (bytes, bytearray, memoryview, str)):
        png = getattr(obj, "_repr_png_", None)
        html = getattr(obj, "_repr_html_", None)
        if callable(png):
            return _bytes_of(png(), "image/png")
        if callable(html):
            return _bytes_of(html(), "text/html")
        raise TypeError(
            f"display() takes image bytes, an HTML string with mime='text/html', or an object "
            f"with _repr_png_() or _repr_html_() (got {type(obj).__name__})"
        )
    if isinstance(obj, str):
        if mime != "text/html":
            raise ValueError(
                "display() of a str shows HTML: pass mime='text/html' (plain text goes to print())"
            )
        return obj.encode("utf-8"), "text/html"
    if not isinstance(obj, (bytes, bytearray, memoryview)):
        raise TypeError(f"display() with mime={mime!r} takes bytes or str (got {type(obj).__name__})")
    data = bytes(obj)
    found = _sniff(data)
    if mime is None:
        if found is None:
            raise ValueError(
                "display() cannot tell what these bytes are: they are not PNG, JPEG, GIF or WebP; "
                "pass mime=... for HTML"
            )
        return data, found
    if mime not in MIMES:
        raise ValueError(f"display() takes mime in {', '.join(MIMES)} (got {mime!r})")
    if mime != "text/html" and found != mime:
        raise ValueError(f"display(mime={mime!r}): the bytes are not {mime} (they look like {found})")
    return data, mime


def display(obj: Any, *, mime: str | None = None) -> None:
    """Show ``obj`` in the page under this cell: image bytes (PNG, JPEG, GIF, WebP, recognised by
    their first bytes), an HTML string with ``mime="text/html"`` (sanitised before it is shown:
    no scripts, no event handlers), or an object with ``_repr_png_()`` or ``_repr_html_()``.

    At most 8 displays a cell, 2 MiB each and 6 MiB in all. The cell's result names each display (type, size,
    artifact id) for the model; the bytes stay out of the model's context.

    Raises ``TypeError`` or ``ValueError`` saying what to pass instead, and ``RuntimeError``
    outside a cell.
    """
    shown = current_displays.get()
    if shown is None:
        raise RuntimeError("display() shows output of a cell: call it from a cell")
    data, kind = _bytes_of(obj, mime)
    if len(data) > MAX_DISPLAY_BYTES:
        raise ValueError(
            f"display() takes at most {MAX_DISPLAY_BYTES} bytes (got {len(data)}): "
            "make the image smaller, or write it to a file in the workspace"
        )
    if len(shown) >= MAX_DISPLAYS:
        raise ValueError(f"a cell shows at most {MAX_DISPLAYS} displays: split the work over cells")
    held = sum(len(base64.b64decode(d["data_b64"])) for d in shown)
    if held + len(data) > MAX_DISPLAYS_TOTAL_BYTES:
        raise ValueError(
            f"a cell's displays hold at most {MAX_DISPLAYS_TOTAL_BYTES} bytes in all (got {held} shown "
            f"and {len(data)} more): split the work over cells, or make the images smaller"
        )
    shown.append({"mime": kind, "data_b64": base64.b64encode(data).decode("ascii")})

"""Per-cell capture of ``sys.stdout`` and ``sys.stderr``.

``install()`` replaces ``sys.stdout`` and ``sys.stderr`` once with writers that look up
the running cell's ``CellOutput`` through a ``ContextVar``. Output written where no cell
is running (a thread the cell started, a hook, the kernel itself) goes to the streams
that were there before, which in the workbench is file descriptor 2: never the frame
channel. Each stream's capture is capped, with a marker saying how much was dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import sys
import threading
from contextvars import ContextVar
from typing import Callable, TextIO

from klbr.frames import cut_to_size, encoded_size

__all__ = ["CellOutput", "DEFAULT_OUTPUT_CAP", "STREAM_NAMES", "current_output", "install"]

DEFAULT_OUTPUT_CAP = 1024 * 1024
"""The default cap of each captured stream of one cell (1 MiB), in the bytes it takes in a
frame (``klbr.frames.encoded_size``: a control character takes up to 6)."""

STREAM_NAMES = ("stdout", "stderr")

_CHUNK = 64 * 1024

current_output: ContextVar[CellOutput | None] = ContextVar("klbr_cell_output", default=None)
"""The capture of the cell running in this context, or ``None`` outside cells."""

StreamSink = Callable[[str, str], None]
"""Receives live output batches: ``sink(name, text)`` with ``name`` stdout or stderr."""


class _Capture:
    """One capped stream capture; counts what it had to drop."""

    def __init__(self, cap: int) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.dropped = 0
        self.cap = cap

    def add(self, text: str) -> str:
        """Keep as much of ``text`` as fits and return the kept part."""
        # Counted as the frame will carry it: a control character takes 6 bytes there, not 1.
        kept = cut_to_size(text, self.cap - self.size)
        if len(kept) < len(text):
            self.dropped += len(text[len(kept) :].encode("utf-8", "surrogatepass"))
        self.size += encoded_size(kept)
        if kept:
            self.parts.append(kept)
        return kept

    def text(self) -> str:
        out = "".join(self.parts)
        if self.dropped:
            out += f"\n[klbr: output truncated, {self.dropped} more bytes not kept]\n"
        return out


class CellOutput:
    """The captured stdout and stderr of one cell, with optional live batches.

    Writes may come from any thread running in the cell's context. When a ``sink`` is
    given, new text is batched and handed to it on the event loop (a batch per loop
    iteration, at most 64 KiB each); ``close()`` hands over whatever is still pending, so
    every batch precedes the cell's final reply.
    """

    def __init__(self, cap: int = DEFAULT_OUTPUT_CAP, sink: StreamSink | None = None) -> None:
        """Capture up to ``cap`` bytes per stream; send live batches to ``sink`` if given."""
        self._captures = {name: _Capture(cap) for name in STREAM_NAMES}
        self._pending: list[tuple[str, str]] = []
        self._sink = sink
        self._lock = threading.Lock()
        self._closed = False
        self._scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        if sink is not None:
            self._loop = asyncio.get_running_loop()

    def write(self, name: str, text: str) -> bool:
        """Record ``text`` on stream ``name``; return False when already closed."""
        with self._lock:
            if self._closed:
                return False
            kept = self._captures[name].add(text)
            if self._sink is None or not kept:
                return True
            self._pending.append((name, kept))
            if self._scheduled:
                return True
            self._scheduled = True
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # the loop is closing; close() is not going to be reached either
            self._loop.call_soon_threadsafe(self._flush)
        return True

    def _take_pending(self) -> list[tuple[str, str]]:
        with self._lock:
            pending, self._pending = self._pending, []
            self._scheduled = False
        batches: list[tuple[str, str]] = []
        for name, text in pending:
            if batches and batches[-1][0] == name and len(batches[-1][1]) + len(text) <= _CHUNK:
                batches[-1] = (name, batches[-1][1] + text)
            else:
                batches.extend((name, text[i : i + _CHUNK]) for i in range(0, len(text), _CHUNK))
        return batches

    def _flush(self) -> None:
        if self._sink is None:
            return
        for name, text in self._take_pending():
            self._sink(name, text)

    def close(self) -> None:
        """End the capture and hand every pending batch to the sink, in order."""
        with self._lock:
            self._closed = True
        self._flush()

    def text(self, name: str) -> str:
        """The whole capture of stream ``name``, with a truncation marker if capped."""
        with self._lock:
            return self._captures[name].text()


class _RoutedStream(io.TextIOBase):
    """A text stream that writes to the current cell's capture or to a fallback."""

    def __init__(self, name: str, fallback: TextIO) -> None:
        super().__init__()
        self._name = name
        self._fallback = fallback

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    @property
    def errors(self) -> str:  # type: ignore[override]
        return "strict"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._fallback.fileno()

    def write(self, text: str) -> int:  # type: ignore[override]
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        output = current_output.get()
        if output is None or not output.write(self._name, text):
            self._fallback.write(text)
            self._fallback.flush()
        return len(text)

    def flush(self) -> None:
        if current_output.get() is None:
            self._fallback.flush()


def install() -> None:
    """Route ``sys.stdout`` and ``sys.stderr`` through the per-cell capture (idempotent)."""
    if not isinstance(sys.stdout, _RoutedStream):
        sys.stdout = _RoutedStream("stdout", sys.stdout)
    if not isinstance(sys.stderr, _RoutedStream):
        sys.stderr = _RoutedStream("stderr", sys.stderr)

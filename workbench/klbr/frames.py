"""The length-prefixed frame channel between the host and this workbench.

A frame is a 4-byte big-endian unsigned length ``N`` followed by ``N`` bytes of UTF-8
JSON encoding one object. Every frame carries ``kind`` and ``id``. A frame that is
truncated, larger than the limit, not UTF-8, not JSON, not an object or without a string
``id`` is a framing failure (``FrameError``): the workbench reports it once and exits, and
the host replaces the process.

``FrameChannel.from_stdio()`` moves the channel onto private duplicates of descriptors 0
and 1, re-opens descriptor 0 on ``/dev/null`` and points descriptor 1 at descriptor 2, so
nothing a cell or its subprocesses print can reach the channel.
"""

from __future__ import annotations

import json
import os
import re
import struct
import threading
from json.encoder import encode_basestring
from typing import Any

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES", "FrameChannel", "FrameError", "FrameTooLarge", "cut_to_size", "encode_frame",
    "encoded_size",
]

DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024
"""The default frame size limit in bytes (16 MiB), the same as the host's."""

_HEADER = struct.Struct(">I")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_MAX_CHAR_BYTES = 6  # the longest a character gets in a frame: ``\u0000``


class FrameError(Exception):
    """A frame from the host could not be read: truncated, oversize or malformed."""


class FrameTooLarge(ValueError):
    """A frame this workbench wanted to send is over the frame size limit."""


def encode_frame(obj: dict[str, Any], max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> bytes:
    """Encode one object as a frame: 4-byte big-endian length, then UTF-8 JSON.

    NaN and infinities are refused (JSON has no spelling for them). Lone surrogates are
    written as ``\\u`` escapes so the bytes stay valid UTF-8; every other character is
    written as ``encoded_size`` counts it.

    Raises ``FrameTooLarge`` when the encoded object is over ``max_frame_bytes``, and
    ``TypeError``/``ValueError`` when the object is not JSON-serialisable.

    >>> encode_frame({"kind": "ok", "id": "r1", "result": {}})[:4]
    b'\\x00\\x00\\x00#'
    """
    body = _utf8(json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":")))
    if len(body) > max_frame_bytes:
        raise FrameTooLarge(
            f"cannot send {obj.get('kind')} frame {obj.get('id')!r}: frame is over the limit "
            f"of {max_frame_bytes} bytes (got {len(body)} bytes)"
        )
    return _HEADER.pack(len(body)) + body


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # only a lone surrogate is not UTF-8: escape it alone
        return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


def encoded_size(text: str) -> int:
    """The bytes ``text`` takes inside a frame, as a JSON string without its quotes.

    That is its UTF-8 size, except that a control character takes 6 bytes (``\\u0001``) or
    2 (``\\n``), ``"`` and ``\\`` take 2 and a lone surrogate 6.

    >>> encoded_size("ab"), encoded_size("\\x00"), encoded_size("é")
    (2, 6, 2)
    """
    return len(_utf8(encode_basestring(text))) - 2  # json.dumps(text, ensure_ascii=False), minus its overhead


def cut_to_size(text: str, limit: int) -> str:
    """The longest start of ``text`` whose ``encoded_size`` is at most ``limit`` bytes.

    >>> cut_to_size("ab\\x00cd", 4)
    'ab'
    """
    if limit <= 0:
        return ""
    if len(text) * _MAX_CHAR_BYTES <= limit or encoded_size(text) <= limit:
        return text
    low, high = 0, min(len(text), limit)  # every character takes at least one byte
    while low < high:
        middle = (low + high + 1) // 2
        if encoded_size(text[:middle]) <= limit:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def decode_body(body: bytes) -> dict[str, Any]:
    """Decode one frame body into its object, or raise ``FrameError`` saying why not."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as err:
        reason = f"body is not UTF-8 (got {err.reason} at byte {err.start})"
        raise FrameError(f"cannot decode frame: {reason}") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as err:
        raise FrameError(f"cannot decode frame: body is not JSON (got {err.msg} at offset {err.pos})") from None
    if not isinstance(obj, dict):
        raise FrameError(f"cannot decode frame: body is not an object (got {type(obj).__name__})")
    if not isinstance(obj.get("id"), str):
        raise FrameError(f"cannot decode frame: id must be a string (got {obj.get('id')!r})")
    return obj


class FrameChannel:
    """Reads frames from one file descriptor and writes frames to another.

    ``read()`` is called from one reader thread only. ``write()`` may be called from any
    thread: a lock keeps each frame's bytes together. After the host has gone (a broken
    pipe), writes are dropped silently; the reader then sees end of file.
    """

    def __init__(self, read_fd: int, write_fd: int, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        """Use ``read_fd`` for incoming and ``write_fd`` for outgoing frames."""
        if max_frame_bytes < 64:
            raise ValueError(
                f"cannot open frame channel: max_frame_bytes must be at least 64 (got {max_frame_bytes})"
            )
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.max_frame_bytes = max_frame_bytes
        self.closed = False
        self._lock = threading.Lock()

    @classmethod
    def from_stdio(cls, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> FrameChannel:
        """Move the frame channel off descriptors 0 and 1 and return it.

        Afterwards descriptor 0 reads ``/dev/null`` and descriptor 1 writes where
        descriptor 2 does. The private duplicates are not inherited by subprocesses.
        """
        read_fd = os.dup(0)
        write_fd = os.dup(1)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(2, 1)
        return cls(read_fd, write_fd, max_frame_bytes)

    def _read_exact(self, n: int, what: str) -> bytes | None:
        chunks: list[bytes] = []
        got = 0
        while got < n:
            chunk = os.read(self.read_fd, min(n - got, 1 << 20))
            if not chunk:
                if got == 0 and what == "header":
                    return None
                raise FrameError(f"cannot read frame: stream ended inside the {what} (got {got} of {n} bytes)")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def read(self) -> dict[str, Any] | None:
        """Read one frame; return its object, or ``None`` at a clean end of file.

        Raises ``FrameError`` for a truncated, oversize or malformed frame.
        """
        header = self._read_exact(_HEADER.size, "header")
        if header is None:
            return None
        (length,) = _HEADER.unpack(header)
        if length > self.max_frame_bytes:
            raise FrameError(
                f"cannot read frame: length is over the limit of {self.max_frame_bytes} bytes (got {length})"
            )
        return decode_body(self._read_exact(length, "body") or b"")

    def write(self, obj: dict[str, Any]) -> None:
        """Write one frame atomically with respect to other writers.

        Raises ``FrameTooLarge`` (and leaves the channel untouched) when the object's
        encoding is over the limit, so the caller can send a smaller frame instead.
        """
        data = encode_frame(obj, self.max_frame_bytes)
        with self._lock:
            if self.closed:
                return
            view = memoryview(data)
            try:
                while view:
                    written = os.write(self.write_fd, view)
                    view = view[written:]
            except (BrokenPipeError, ConnectionResetError):
                self.closed = True

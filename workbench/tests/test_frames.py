"""Tests of the frame codec and ``FrameChannel`` on real pipes."""

import json
import os
import struct
import unittest

from klbr.frames import FrameChannel, FrameError, FrameTooLarge, cut_to_size, encode_frame, encoded_size


def pipe_with(data: bytes) -> int:
    """A read end holding ``data`` and then end of file."""
    read_fd, write_fd = os.pipe()
    os.write(write_fd, data)
    os.close(write_fd)
    return read_fd


def frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


class ReadTest(unittest.TestCase):
    def read_all(self, data: bytes, max_frame_bytes: int = 1024) -> list:
        fd = pipe_with(data)
        try:
            channel = FrameChannel(fd, -1, max_frame_bytes)
            out = []
            for _ in range(100):
                item = channel.read()
                if item is None:
                    return out
                out.append(item)
            raise AssertionError("too many frames")
        finally:
            os.close(fd)

    def assert_framing(self, data: bytes, message: str, max_frame_bytes: int = 1024) -> None:
        with self.assertRaises(FrameError) as caught:
            self.read_all(data, max_frame_bytes)
        self.assertEqual(str(caught.exception), message)

    def test_reads_frames_then_clean_eof(self) -> None:
        """`FrameChannel.read()` returns each object, then None at a clean end of file."""
        data = frame(b'{"kind":"ping","id":"a"}') + frame('{"kind":"x","id":"é"}'.encode())
        self.assertEqual(self.read_all(data), [{"kind": "ping", "id": "a"}, {"kind": "x", "id": "é"}])

    def test_truncated_header(self) -> None:
        """`FrameChannel.read()` refuses a stream ending inside a header."""
        self.assert_framing(b"\x00\x00", "cannot read frame: stream ended inside the header (got 2 of 4 bytes)")

    def test_truncated_body(self) -> None:
        """`FrameChannel.read()` refuses a stream ending inside a body."""
        self.assert_framing(struct.pack(">I", 10) + b'{"a"', "cannot read frame: stream ended inside the body (got 4 of 10 bytes)")

    def test_oversize(self) -> None:
        """`FrameChannel.read()` refuses a length over the limit without reading the body."""
        self.assert_framing(struct.pack(">I", 2048), "cannot read frame: length is over the limit of 1024 bytes (got 2048)")

    def test_not_utf8(self) -> None:
        """`FrameChannel.read()` refuses a body that is not UTF-8."""
        with self.assertRaisesRegex(FrameError, "^cannot decode frame: body is not UTF-8"):
            self.read_all(frame(b'{"id":"\xff"}'))

    def test_not_json_not_object_no_id(self) -> None:
        """`FrameChannel.read()` refuses non-JSON, a non-object and an object without a string id."""
        with self.assertRaisesRegex(FrameError, "^cannot decode frame: body is not JSON"):
            self.read_all(frame(b"{nope"))
        self.assert_framing(frame(b"[1]"), "cannot decode frame: body is not an object (got list)")
        self.assert_framing(frame(b'{"kind":"ping"}'), "cannot decode frame: id must be a string (got None)")
        self.assert_framing(frame(b""), "cannot decode frame: body is not JSON (got Expecting value at offset 0)")


class WriteTest(unittest.TestCase):
    def test_encode_round_trip(self) -> None:
        """`encode_frame()` writes a big-endian length and compact UTF-8 JSON."""
        data = encode_frame({"kind": "ok", "id": "r1", "result": {"t": "é"}})
        (length,) = struct.unpack(">I", data[:4])
        self.assertEqual(length, len(data) - 4)
        self.assertEqual(json.loads(data[4:].decode("utf-8")), {"kind": "ok", "id": "r1", "result": {"t": "é"}})

    def test_encode_refuses_oversize_and_nan(self) -> None:
        """`encode_frame()` refuses an object over the limit and NaN."""
        with self.assertRaisesRegex(FrameTooLarge, r"^cannot send ok frame 'r1': frame is over the limit of 64 bytes"):
            encode_frame({"kind": "ok", "id": "r1", "result": "x" * 100}, 64)
        with self.assertRaises(ValueError):
            encode_frame({"kind": "ok", "id": "r1", "result": float("nan")})

    def test_lone_surrogate_stays_valid_utf8(self) -> None:
        """`encode_frame()` escapes a lone surrogate so the bytes stay valid UTF-8."""
        data = encode_frame({"kind": "stream", "id": "e", "name": "stdout", "text": "a\udcffb"})
        self.assertEqual(json.loads(data[4:].decode("utf-8"))["text"], "a\udcffb")

    def test_lone_surrogate_escapes_only_itself(self) -> None:
        """`encode_frame()` keeps other non-ASCII text raw beside a lone surrogate, so a frame's
        size is the sum of `encoded_size()` of its strings and not three times it."""
        text = "\U0001f600" * 100 + "\ud800"
        data = encode_frame({"kind": "stream", "id": "e", "name": "stdout", "text": text})
        self.assertEqual(json.loads(data[4:].decode("utf-8"))["text"], text)
        self.assertEqual(encoded_size(text), 406)
        self.assertEqual(len(data) - 4, len('{"kind":"stream","id":"e","name":"stdout","text":""}') + 406)

    def test_encoded_size_counts_json_escapes(self) -> None:
        """`encoded_size()` counts a control character as 6 bytes, a newline and a quote as 2."""
        self.assertEqual(encoded_size("\x00" * 10), 60)
        self.assertEqual(encoded_size('\n"\\'), 6)
        self.assertEqual(encoded_size("é\U0001f600"), 6)

    def test_cut_to_size_keeps_the_longest_start_that_fits(self) -> None:
        """`cut_to_size()` cuts by encoded bytes, not characters, and never splits an escape."""
        self.assertEqual(cut_to_size("\x01" * 100, 59), "\x01" * 9)
        self.assertEqual(cut_to_size("ab\x00cd", 7), "ab")
        self.assertEqual(cut_to_size("ab\x00cd", 9), "ab\x00c")
        self.assertEqual(cut_to_size("abc", 3), "abc")
        self.assertEqual(cut_to_size("abc", 0), "")

    def test_write_after_broken_pipe_is_dropped(self) -> None:
        """`FrameChannel.write()` drops frames once the host has gone, without raising."""
        read_fd, write_fd = os.pipe()
        os.close(read_fd)
        channel = FrameChannel(-1, write_fd)
        try:
            channel.write({"kind": "ok", "id": "a", "result": {}})
            channel.write({"kind": "ok", "id": "b", "result": {}})
            self.assertTrue(channel.closed)
        finally:
            os.close(write_fd)

    def test_write_is_whole_frames(self) -> None:
        """`FrameChannel.write()` writes each frame whole; a reader gets them back in order."""
        read_fd, write_fd = os.pipe()
        writer = FrameChannel(-1, write_fd)
        for i in range(3):
            writer.write({"kind": "stream", "id": "e", "name": "stdout", "text": str(i)})
        os.close(write_fd)
        reader = FrameChannel(read_fd, -1)
        texts = [reader.read()["text"] for _ in range(3)]  # type: ignore[index]
        self.assertEqual((texts, reader.read()), (["0", "1", "2"], None))
        os.close(read_fd)


if __name__ == "__main__":
    unittest.main()

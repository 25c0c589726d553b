"""The workbench process: a ``Kernel`` served over the stdio frame channel.

``python3 -m klbr [--max-frame-bytes N]`` moves the frame channel onto private copies of
stdin/stdout (``FrameChannel.from_stdio``), routes ``print`` through the per-cell capture,
and serves frames until one of:

- end of input: exit status 0;
- a ``shutdown`` request: it is answered ``{}``, then exit status 0;
- a framing failure (truncated, oversize or malformed frame): one ``error`` frame with id
  ``""`` and code ``frame_invalid`` is written, then exit status 2.

A reader thread reads frames and hands them to the event loop. If a cell blocks the event
loop, the reader still ends the process a few seconds after end of input or a framing
failure, so a dead channel never leaves a worker behind.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import threading
from typing import Callable

from klbr.capture import install
from klbr.frames import DEFAULT_MAX_FRAME_BYTES, FrameChannel, FrameError
from klbr.kernel import Kernel

__all__ = ["main", "serve"]

_EXIT_GRACE_S = 5.0


def _read_frames(
    channel: FrameChannel, loop: asyncio.AbstractEventLoop, kernel: Kernel, stop: Callable[[int], None]
) -> None:
    code = 0
    try:
        while True:
            frame = channel.read()
            if frame is None:
                break
            loop.call_soon_threadsafe(kernel.receive, frame)
    except (FrameError, OSError) as err:
        code = 2
        channel.write({"kind": "error", "id": "", "code": "frame_invalid", "message": str(err)})
    try:
        loop.call_soon_threadsafe(stop, code)
    except RuntimeError:
        return  # the loop has already finished
    # A cell blocking the loop must not keep a dead or broken channel's process alive.
    threading.Event().wait(_EXIT_GRACE_S)
    os._exit(code)


async def serve(channel: FrameChannel) -> int:
    """Serve frames from ``channel`` until end of input, ``shutdown`` or a framing failure.

    Returns the exit status: 0 for end of input or ``shutdown``, 2 for a framing failure.
    """
    loop = asyncio.get_running_loop()
    stopped: asyncio.Future[int] = loop.create_future()

    def stop(code: int) -> None:
        if not stopped.done():
            stopped.set_result(code)

    kernel = Kernel(channel.write, max_frame_bytes=channel.max_frame_bytes)
    kernel.on_stop = stop
    reader = threading.Thread(
        target=_read_frames, args=(channel, loop, kernel, stop), name="klbr-frames", daemon=True
    )
    reader.start()
    code = await stopped
    await kernel.close()
    return code


def main(argv: list[str] | None = None) -> int:
    """Run the workbench on this process's stdin/stdout and return the exit status.

    ``python3 -m klbr [--max-frame-bytes N]``; the caller ends the process with the status.
    """
    parser = argparse.ArgumentParser(prog="python3 -m klbr", description="The klbr workbench.")
    parser.add_argument(
        "--max-frame-bytes", type=int, default=DEFAULT_MAX_FRAME_BYTES, help="frame size limit in bytes"
    )
    args = parser.parse_args(argv)
    if args.max_frame_bytes < 64:
        parser.error(f"cannot start: --max-frame-bytes must be at least 64 (got {args.max_frame_bytes})")
    channel = FrameChannel.from_stdio(args.max_frame_bytes)
    install()
    # Not asyncio.run(): its cleanup waits for every executor thread, and a cell's
    # to_thread work must not keep a finished workbench alive. The caller exits with
    # os._exit(status) right after.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    return loop.run_until_complete(serve(channel))

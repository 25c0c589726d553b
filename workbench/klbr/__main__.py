"""Entry point: ``python3 -m klbr [--max-frame-bytes N]`` with ``PYTHONPATH=<repo>/workbench``."""

import contextlib
import os
import sys

from klbr.serve import main

if __name__ == "__main__":
    status = main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    # Threads a cell started must not keep a finished workbench alive.
    os._exit(status)

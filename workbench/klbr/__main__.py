"""Entry point: ``python3 -m klbr [--max-frame-bytes N]`` with ``PYTHONPATH=<repo>/workbench``."""

import os
import sys

from klbr.serve import main

if __name__ == "__main__":
    status = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    # Threads a cell started must not keep a finished workbench alive.
    os._exit(status)

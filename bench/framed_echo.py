"""A raw framed echo over stdio: the ceiling of the workbench's cell round trip.

Each frame read from stdin (a 4-byte big-endian length, then that many bytes) is written
back unchanged to stdout. End of input ends the process with status 0; a frame cut short
ends it with status 2. Standard library only.
"""

import sys


def main() -> int:
    """Echo frames until stdin ends."""
    stdin = sys.stdin.buffer
    stdout = sys.stdout.buffer
    while True:
        header = stdin.read(4)
        if len(header) == 0:
            return 0
        if len(header) < 4:
            return 2
        length = int.from_bytes(header, "big")
        body = stdin.read(length)
        if len(body) < length:
            return 2
        stdout.write(header + body)
        stdout.flush()


if __name__ == "__main__":
    sys.exit(main())

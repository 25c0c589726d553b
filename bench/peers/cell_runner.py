"""A persistent Python process for the agent-loop peers' cell: each frame read from stdin (a
4-byte big-endian length, then UTF-8 JSON {"code": ...}) is executed in one namespace that
lives as long as the process, its stdout captured; the answer frame is JSON
{"stdout": ..., "sends": [...], "waited": bool}. `send(text)` and `wait()` stand for klbr's
`local.send` and `wait`. End of input ends the process. Standard library only.
"""

import contextlib
import io
import json
import sys


def main() -> int:
    """Run cells until stdin ends."""
    stdin = sys.stdin.buffer
    stdout = sys.stdout.buffer
    namespace = {}
    while True:
        header = stdin.read(4)
        if len(header) < 4:
            return 0
        code = json.loads(stdin.read(int.from_bytes(header, "big")))["code"]
        state = {"sends": [], "waited": False}
        namespace["send"] = state["sends"].append
        namespace["wait"] = lambda: state.update(waited=True)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "<cell>", "exec"), namespace)
        body = json.dumps({"stdout": out.getvalue(), **state}).encode()
        stdout.write(len(body).to_bytes(4, "big") + body)
        stdout.flush()


if __name__ == "__main__":
    sys.exit(main())

"""The peer of the workbench's cell round trip: a Jupyter kernel's execute round trip.

Run with an interpreter that has ``jupyter_client`` and ``ipykernel`` (Debian's
``python3-jupyter-client`` and ``python3-ipykernel`` install them for ``/usr/bin/python3``).
It starts ``--starts`` kernels, timing each until it answers ``kernel_info``, then on the
first one times ``--count`` executions of ``1+1`` (after ``--warmup`` untimed ones): from
sending ``execute_request`` until both its ``execute_reply`` and its ``execute_result``
(the value) have arrived. It prints one JSON object on stdout: ``{"ok": true, ...}`` with
the samples in milliseconds, or ``{"ok": false, "reason": ...}`` when Jupyter is missing.
"""

import argparse
import json
import sys
import time


def _emit(value: dict) -> int:
    print(json.dumps(value), flush=True)
    return 0


def _wait(get, msg_id: str, want: str, timeout: float) -> dict:
    """Return the first message of type ``want`` whose parent is ``msg_id``."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no {want} for {msg_id} within {timeout} s")
        msg = get(timeout=left)
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == want:
            return msg


def main() -> int:
    """Measure and print one JSON object."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--starts", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=10.0)
    args = parser.parse_args()
    try:
        import ipykernel
        import jupyter_client
        from jupyter_client.manager import start_new_kernel
    except ImportError as exc:
        return _emit({"ok": False, "reason": f"{sys.executable} cannot import {exc.name}"})

    kernels = []
    start_ms = []
    try:
        for _ in range(max(1, args.starts)):
            t0 = time.perf_counter()
            km, kc = start_new_kernel(kernel_name="python3", startup_timeout=60)
            start_ms.append((time.perf_counter() - t0) * 1000)
            kernels.append((km, kc))
        kc = kernels[0][1]
        samples = []
        for i in range(args.warmup + args.count):
            t0 = time.perf_counter()
            msg_id = kc.execute("1+1", store_history=False)
            reply = _wait(kc.get_shell_msg, msg_id, "execute_reply", args.timeout)
            result = _wait(kc.get_iopub_msg, msg_id, "execute_result", args.timeout)
            elapsed = (time.perf_counter() - t0) * 1000
            if reply["content"]["status"] != "ok" or result["content"]["data"]["text/plain"] != "2":
                return _emit({"ok": False, "reason": f"1+1 did not answer 2: {reply['content']}"})
            if i >= args.warmup:
                samples.append(elapsed)
    finally:
        for km, kc in kernels:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    return _emit({
        "ok": True,
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "ipykernel": ipykernel.__version__,
        "jupyter_client": jupyter_client.__version__,
        "round_trip_ms": samples,
        "start_ms": start_ms,
    })


if __name__ == "__main__":
    sys.exit(main())

"""``jobs``: code that runs in the background, in a workbench of its own.

``await jobs.start(code)`` returns a job id at once. The host runs ``code`` as one cell in a
new workbench process (its own heap and process group), pinned to the behaviour release and
the workspace of the turn that started it. When it ends, you are woken with an input from
``job`` saying how it ended; ``await jobs.result(job_id)`` waits for it and returns it all.

    job_id = await jobs.start("import subprocess\\n...\\nsummary", name="tests",
                              budget={"wall_time_s": 600, "tokens": 20_000})
    wait("tests running")          # the job's end wakes you
    await jobs.status(job_id)      # state, cause, usage; jobs.list() for all
    await jobs.cancel(job_id)      # kills its process group; it ends "cancelled"

States: ``pending`` (waiting for a slot) → ``running`` → ``done`` | ``failed`` |
``cancelled`` | ``interrupted`` (the daemon stopped under it: it is never resumed or run
again) | ``over_budget`` (it spent its wall time, model requests or tokens). Each move
has a ``cause``.

``budget`` asks for at most: ``wall_time_s``, ``model_requests``, ``tokens`` (prompt plus
completion, of ``llm()`` and child agents inside the job). Each is capped by the daemon's
per-job limits, and a job started inside a job also by what its parent has left. A job's
workbench cannot speak: ``local.send`` and ``discord.send`` are refused there.
"""

from __future__ import annotations

import math
from typing import Any

from klbr import rpc
from klbr.awaited import api_class

__all__ = ["Jobs", "jobs", "check_budget"]

_BUDGET_KEYS = ("wall_time_s", "model_requests", "tokens")


def check_budget(budget: Any, action: str) -> dict[str, Any] | None:
    """Validate a ``budget`` argument: ``None`` or a dict of ``wall_time_s``,
    ``model_requests`` and ``tokens``, each a finite number >= 0.

    >>> check_budget({"tokens": 1000}, "start job")
    {'tokens': 1000}
    """
    if budget is None:
        return None
    if not isinstance(budget, dict):
        raise TypeError(f"cannot {action}: budget must be a dict (got {type(budget).__name__})")
    unknown = sorted(set(budget) - set(_BUDGET_KEYS))
    if unknown:
        raise ValueError(f"cannot {action}: budget keys are {', '.join(_BUDGET_KEYS)} (got {', '.join(map(str, unknown))})")
    for key, value in budget.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
            raise ValueError(f"cannot {action}: budget {key} must be a number >= 0 (got {value!r})")
        if key != "wall_time_s" and not float(value).is_integer():
            raise ValueError(f"cannot {action}: budget {key} must be a whole number (got {value!r})")
    return {key: (int(v) if key != "wall_time_s" else v) for key, v in budget.items()}


def _job_id(job_id: Any, action: str) -> str:
    if not isinstance(job_id, str) or not job_id:
        raise TypeError(f"cannot {action}: job_id must be a non-empty string (got {job_id!r})")
    return job_id


@api_class("jobs", start="no job was started", status="nothing was read", list="nothing was read",
           cancel="no job was cancelled", result="nothing was read")
class Jobs:
    """Background jobs. Bound in every cell as ``jobs``."""

    async def start(self, code: str, budget: dict[str, Any] | None = None, name: str | None = None) -> str:
        """Start ``code`` as a job in its own workbench; return its job id at once.

        The job is durable (``pending``) when this returns. Its final expression's value,
        its output and its error come back in the completion input and in ``result()``.

        Raises ``TypeError``/``ValueError`` for bad arguments, ``klbr.rpc.RpcError`` when
        the host refuses.

        >>> job_id = await jobs.start("6 * 7", name="answer")  # doctest: +SKIP
        """
        if not isinstance(code, str) or not code.strip():
            raise TypeError("cannot start job: code must be a non-empty string")
        if name is not None and (not isinstance(name, str) or not 1 <= len(name) <= 200):
            raise ValueError(f"cannot start job: name must be 1-200 characters (got {name!r})")
        params: dict[str, Any] = {"code": code, "name": name, "budget": check_budget(budget, "start job")}
        job = await rpc.call_json("jobs.start", params)
        return job["job_id"]

    async def status(self, job_id: str) -> dict[str, Any]:
        """The job now: ``state``, ``cause``, ``budget``, ``requests_used``, ``tokens_used``,
        times and what started it. Raises ``klbr.rpc.RpcError`` (``not_found``)."""
        return await rpc.call_json("jobs.status", {"job_id": _job_id(job_id, "read job")})

    async def list(self) -> list[dict[str, Any]]:
        """The session's jobs, newest first (at most 50)."""
        return await rpc.call_json("jobs.list", {})

    async def cancel(self, job_id: str) -> dict[str, Any]:
        """Cancel a job: a pending one never runs, a running one's process group is killed.
        Returns the job as it then is; an ended job is left as it was."""
        return await rpc.call_json("jobs.cancel", {"job_id": _job_id(job_id, "cancel job")})

    async def result(self, job_id: str) -> dict[str, Any]:
        """Wait until the job has ended and return it with ``result``: ``value``, ``stdout``,
        ``stderr``, ``error`` (and ``outcome``). Cancelling the wait does not cancel the job.

        >>> (await jobs.result(job_id))["result"]["value"]  # doctest: +SKIP
        '42'
        """
        return await rpc.call_json("jobs.result", {"job_id": _job_id(job_id, "wait for job")})

    def __repr__(self) -> str:
        return "<jobs: await jobs.start(code, budget=None, name=None), .status(id), .list(), .cancel(id), .result(id)>"


jobs = Jobs()
"""The one ``Jobs`` object the prelude binds."""

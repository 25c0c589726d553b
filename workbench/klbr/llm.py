"""``llm`` and ``agent``: model calls of your own, from a cell or from a job.

``await llm(prompt)`` makes one request on a configured route (``fast`` unless you say
``main`` or ``long``) and returns its text and usage. The host records the request and the
answer durably, with what caused it (your cell and frame, or the job), and counts it
against the budgets: the daemon's requests and tokens per hour and, inside a job, the
job's own (and its parents').

``await agent(task)`` runs a child agent: a model loop of its own, with the python tool,
in a job's workbench. It ends with a result (its last answer, or what it passed to
``wait()``) and never speaks to a conversation. It is a job (``kind == "agent"``), so it
also wakes you with its completion input, and ``jobs.cancel`` stops it.

A spent budget raises ``BudgetExceeded`` before any request is made; its ``until`` says
when an hourly limit frees (``None`` for a job's own limit, which never refills).

A failure that may pass (a rate limit, a server error, a dropped connection) is asked again
by the host, three attempts in all, after the wait the server named (``Retry-After``) or
1 s, then 4 s; each attempt counts as a request. The error you then get ends with "(after 3
attempts)". A refusal (a bad request, a wrong key, a request past the model's context) is
raised at once. Thinking the server left in the text (``<think>…</think>``) is not part of
``reply.text``; the call's record keeps the reply whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from klbr import rpc
from klbr.awaited import api
from klbr.jobs import check_budget

__all__ = ["AgentResult", "BudgetExceeded", "LlmReply", "agent", "llm"]

_ROUTES = ("main", "fast", "long")


class BudgetExceeded(rpc.RpcError):
    """A budget is spent; the call was not made. ``until`` is the ISO time an hourly limit
    frees, or ``None``."""

    def __init__(self, error: rpc.RpcError) -> None:
        """Wrap the host's ``over_budget`` refusal."""
        super().__init__(error.method, error.code, error.host_message)
        found = re.search(r"frees at (\S+?)\)?$", error.host_message)
        self.until: str | None = found.group(1) if found else None


@dataclass
class LlmReply:
    """What ``llm()`` returns; ``str(reply)`` is the text."""

    text: str
    usage: dict[str, Any] = field(default_factory=dict)
    call_id: str = ""
    route: str = ""
    finish_reason: str | None = None

    def __str__(self) -> str:
        return self.text


@dataclass
class AgentResult:
    """What ``agent()`` returns: the child job's id, how it ended, and its result text."""

    job_id: str
    state: str
    cause: str
    value: str | None
    requests_used: int = 0
    tokens_used: int = 0

    @property
    def ok(self) -> bool:
        """Whether the child agent finished with a result (state ``done``)."""
        return self.state == "done"

    def __str__(self) -> str:
        return self.value if self.value is not None else f"[agent {self.job_id} {self.state}: {self.cause}]"


async def _call(method: str, params: dict[str, Any]) -> dict[str, Any]:
    try:
        result = await rpc.call(method, params)
    except rpc.RpcError as error:
        if error.code == "over_budget":
            raise BudgetExceeded(error) from None
        raise
    if not isinstance(result, dict):
        raise RuntimeError(f"{method}: host replied with a {type(result).__name__}, not an object")
    return result


def _positive(name: str, value: Any, action: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"cannot {action}: {name} must be a whole number >= 1 (got {value!r})")
    return value


@api("llm", "the model was not asked")
async def llm(prompt: str, route: str = "fast", max_tokens: int | None = None,
              budget: int | None = None, system: str | None = None) -> LlmReply:
    """Ask the model on ``route`` one question; return its text and usage.

    ``max_tokens`` caps the completion; ``budget`` caps the tokens of this call (the
    completion is also capped by what the job has left). ``system`` is an optional system
    message. The request is recorded before it is sent and the answer after it.

    Raises ``BudgetExceeded`` when a budget is spent, ``klbr.rpc.RpcError`` when the host or
    the provider fails, ``TypeError``/``ValueError`` for bad arguments.

    >>> reply = await llm("Name one prime above 100.", max_tokens=10)  # doctest: +SKIP
    >>> print(reply, reply.usage)  # doctest: +SKIP
    """
    if not isinstance(prompt, str) or not prompt.strip():
        raise TypeError("cannot call llm: prompt must be a non-empty string")
    if route not in _ROUTES:
        raise ValueError(f"cannot call llm: route must be one of {', '.join(_ROUTES)} (got {route!r})")
    if system is not None and not isinstance(system, str):
        raise TypeError(f"cannot call llm: system must be a string (got {type(system).__name__})")
    params = {
        "prompt": prompt,
        "route": route,
        "max_tokens": _positive("max_tokens", max_tokens, "call llm"),
        "budget": _positive("budget", budget, "call llm"),
        "system": system,
    }
    result = await _call("llm", params)
    return LlmReply(str(result.get("text", "")), dict(result.get("usage") or {}), str(result.get("call_id", "")),
                    str(result.get("route", route)), result.get("finish_reason"))


@api("agent", "no agent was started")
async def agent(task: str, budget: dict[str, Any] | None = None, route: str = "main",
                name: str | None = None) -> AgentResult:
    """Run a child agent on ``task`` in a job's workbench and return how it ended.

    ``budget`` is a job budget (``wall_time_s``, ``model_requests``, ``tokens``), capped by
    the daemon's per-job limits and by what a parent job has left. The child never speaks;
    its result is ``str(result)``. Cancelling this call does not stop the child: it is a
    job, and ``jobs.cancel(result.job_id)`` does.

    >>> answer = await agent("Summarise docs/jobs.md in three lines.", budget={"tokens": 20_000})  # doctest: +SKIP
    """
    if not isinstance(task, str) or not task.strip():
        raise TypeError("cannot start agent: task must be a non-empty string")
    if route not in _ROUTES:
        raise ValueError(f"cannot start agent: route must be one of {', '.join(_ROUTES)} (got {route!r})")
    started = await _call("jobs.start", {"code": task, "kind": "agent", "route": route,
                                         "name": name, "budget": check_budget(budget, "start agent")})
    ended = await _call("jobs.result", {"job_id": started["job_id"]})
    value = (ended.get("result") or {}).get("value")
    return AgentResult(ended["job_id"], ended["state"], ended["cause"], value if isinstance(value, str) else None,
                       int(ended.get("requests_used", 0)), int(ended.get("tokens_used", 0)))

"""The names bound in every cell of a generation, built once at ``init``."""

from __future__ import annotations

import builtins
from typing import Any

from klbr import code, skills, workspace
from klbr.artifacts import read_artifact
from klbr.behavior import behavior
from klbr.cells import wait
from klbr.display import display
from klbr.discord import discord, ignore
from klbr.jobs import jobs
from klbr.llm import agent, llm
from klbr.history import history
from klbr.hooks import hooks
from klbr.local import local
from klbr.timers import timers

__all__ = ["build_namespace"]


def build_namespace() -> dict[str, Any]:
    """A fresh cell namespace: the workspace functions, ``workspace``, ``code``, ``local``,
    ``discord``, ``ignore``, ``wait``, ``skills``, ``behavior``, ``history``, ``hooks``, ``read_artifact``,
    ``timers``, ``jobs``, ``llm``, ``agent`` and ``display``.

    The workspace must already be bound (``klbr.workspace.bind``).
    """
    ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    for name in workspace.PRELUDE_NAMES:
        ns[name] = getattr(workspace, name)
    ns.update(workspace=workspace, code=code, local=local, discord=discord, ignore=ignore, wait=wait,
              skills=skills, behavior=behavior, history=history, hooks=hooks, read_artifact=read_artifact, timers=timers,
              jobs=jobs, llm=llm, agent=agent, display=display)
    return ns

"""The cell queue: cells run one at a time, in arrival order, each in its own task.

``submit(job)`` returns a future of the cell's ``CellResult``. ``cancel(request_id)``
cancels the running cell's task, or drops a queued cell (its future resolves with outcome
``cancelled`` at once); it returns False for an unknown or finished cell.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from klbr.cells import CellResult
from klbr.rpc import attributed_task, settle

__all__ = ["CellJob", "CellQueue"]


@dataclass
class CellJob:
    """One ``execute`` request waiting for its turn: request id, cell id and code."""

    request_id: str
    cell_id: str
    code: str
    done: asyncio.Future[CellResult] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


CellRunner = Callable[[CellJob], Awaitable[CellResult]]


class CellQueue:
    """Runs submitted cells with ``runner`` one at a time, in submission order."""

    def __init__(self, runner: CellRunner) -> None:
        """Run each job with ``runner(job)``, inside a task of its own."""
        self._runner = runner
        self._pending: deque[CellJob] = deque()
        self._running: tuple[CellJob, asyncio.Task[CellResult]] | None = None
        self._drainer: asyncio.Task[None] | None = None

    def submit(self, job: CellJob) -> asyncio.Future[CellResult]:
        """Queue ``job`` behind every earlier one and return the future of its result."""
        self._pending.append(job)
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.get_running_loop().create_task(self._drain())
        return job.done

    def cancel(self, request_id: str) -> bool:
        """Cancel the running or queued cell of ``request_id``; False if there is none."""
        if self._running is not None:
            job, task = self._running
            if job.request_id == request_id:
                if task.done():
                    return False
                task.cancel()
                return True
        for job in self._pending:
            if job.request_id == request_id:
                self._pending.remove(job)
                if not job.done.done():
                    job.done.set_result(CellResult("cancelled"))
                return True
        return False

    def close(self) -> None:
        """Cancel the running cell and every queued one (at shutdown)."""
        for job in list(self._pending):
            self.cancel(job.request_id)
        if self._running is not None:
            self._running[1].cancel()

    async def _drain(self) -> None:
        while self._pending:
            job = self._pending.popleft()
            task = attributed_task(self._runner(job), job.request_id)
            self._running = (job, task)
            try:
                await settle(task)
            finally:
                self._running = None
            if job.done.done():
                continue
            if task.cancelled():
                job.done.set_result(CellResult("cancelled"))
            elif task.exception() is not None:
                job.done.set_exception(task.exception())  # type: ignore[arg-type]
            else:
                job.done.set_result(task.result())

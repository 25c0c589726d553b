"""``behavior``: edit your own policy hooks, test them, publish and activate them.

Your hooks (``attention.plan``, ``model.plan``, ``context.prepare``, ``turn.next``) are
plain Python files in an immutable, content-addressed *release*. To change one:

    d = await behavior.draft()             # a writable copy of the active release
    src = await d.read("turn.py")
    await d.write("turn.py", src.replace(...))
    report = await d.test()                # the host runs every hook on fixtures
    print(report)                          # which hooks answered, and how
    await d.activate()                     # publish, then switch if nobody switched since

``await hooks.bind("turn.next", fn, draft=d)`` makes another function serve a hook
(``help(hooks)``). A failing ``test()`` or ``publish()`` keeps its diagnostics (which hook,
which fixture, the error and its traceback): ``await d.diagnostics()`` for one draft,
``await behavior.candidates()`` for every failed candidate; the operator sees the same with
``klbr candidates <session>``.

The host checks a candidate itself; a draft cannot declare itself tested. Activation is a
compare-and-swap on the behaviour epoch: it fails if the epoch moved since the draft was
taken. Your workbench heap is kept: only the hook worker is replaced. An activation
applies from the next turn: the running turn, and every cell and hook call in it, keeps
the release its frame recorded (``await hooks.release()``). ``await behavior.rollback()``
returns to the last release that completed a turn with every hook answering.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from klbr import rpc
from klbr.awaited import api_class

__all__ = ["Behavior", "Draft", "TestReport", "behavior"]


@dataclass(frozen=True)
class TestReport:
    """What the host found when it ran each hook of a draft on fixture inputs.

    ``ok`` is true only when every hook answered with a result that fits its contract.
    ``checks`` holds one ``{"hook", "ok", "detail", "fixture", "error", "trace_id"}`` per
    hook; ``error`` is ``{code, message, traceback}`` for a failing one. ``candidate_id``
    names the kept diagnostics of a failed test, else ``None``.
    """

    ok: bool
    checks: list[dict[str, Any]] = field(default_factory=list)
    candidate_id: str | None = None

    def __str__(self) -> str:
        lines = [f"draft test: {'ok' if self.ok else 'FAILED'}"]
        for check in self.checks:
            mark = "ok  " if check.get("ok") else "FAIL"
            lines.append(f"  {mark} {check.get('hook')}: {check.get('detail', '')}")
            trace = (check.get("error") or {}).get("traceback")
            if not check.get("ok") and trace:
                lines.extend("       " + line for line in str(trace).rstrip().splitlines()[-6:])
        if self.candidate_id:
            lines.append(f"  diagnostics kept as {self.candidate_id}")
        return "\n".join(lines)


@api_class("draft", files="nothing was read", read="nothing was read", write="nothing was written",
           test="nothing was tested", bind="nothing was bound", diagnostics="nothing was read",
           publish="nothing was published", activate="nothing was activated")
class Draft:
    """A writable copy of a release, in the state directory (not in your workspace).

    ``base_release`` and ``base_epoch`` are what was active when the draft was taken;
    ``activate()`` refuses if the epoch has moved since.
    """

    def __init__(self, info: dict[str, Any]) -> None:
        self.id: str = str(info["draft_id"])
        self.base_release: str = str(info["base_release"])
        self.base_epoch: int = int(info["base_epoch"])
        self.release: str | None = None

    async def files(self) -> list[str]:
        """The draft's file paths, relative and sorted."""
        result = await rpc.call_object("behavior.files", {"draft_id": self.id}, action="list draft files")
        return [str(path) for path in result.get("files", [])]

    async def read(self, path: str) -> str:
        """The text of one draft file, e.g. ``await d.read("turn.py")``."""
        result = await rpc.call_object("behavior.read", {"draft_id": self.id, "path": path}, action="read")
        return str(result["text"])

    async def write(self, path: str, text: str) -> None:
        """Replace (or create) one draft file. Paths stay inside the draft; no links."""
        if not isinstance(text, str):
            raise TypeError(f"cannot write {path}: text must be a string (got {type(text).__name__})")
        await rpc.call("behavior.write", {"draft_id": self.id, "path": path, "text": text})
        self.release = None

    async def test(self) -> TestReport:
        """Run every hook of the draft on fixtures in a throwaway worker; nothing is changed."""
        result = await rpc.call_object("behavior.test", {"draft_id": self.id}, action="test draft")
        return TestReport(ok=bool(result.get("ok")), checks=list(result.get("checks", [])),
                          candidate_id=result.get("candidate_id"))

    async def bind(self, hook: str, function: Any) -> str:
        """Make ``function`` (a ``def`` or ``"file.py:function"``) serve ``hook`` in this draft."""
        from klbr.hooks import hooks  # noqa: PLC0415 - hooks imports behavior lazily too

        return await hooks.bind(hook, function, draft=self)

    async def diagnostics(self) -> list[dict[str, Any]]:
        """The kept diagnostics of this draft's failed tests and publishes, newest first."""
        result = await rpc.call_object("behavior.candidates", {"draft_id": self.id}, action="read diagnostics")
        return list(result.get("candidates", []))

    async def publish(self) -> str:
        """Test, then publish the draft as an immutable release; return its sha256 id.

        Raises ``klbr.rpc.RpcError`` naming the failing hooks and the kept diagnostics
        (``cd_…``) when the test fails.
        """
        result = await rpc.call_object("behavior.publish", {"draft_id": self.id}, action="publish")
        self.release = str(result["release_id"])
        return self.release

    async def activate(self) -> int:
        """Publish (if not yet, or again after a write or bind) and activate at the draft's base
        epoch; return the new epoch."""
        release = self.release or await self.publish()
        return await behavior.activate(release, self.base_epoch)

    def __repr__(self) -> str:
        return f"<draft {self.id} of release {self.base_release[:12]} at epoch {self.base_epoch}>"


@api_class("behavior", status="nothing was read", draft="no draft was taken", candidates="nothing was read",
           activate="nothing was activated", rollback="nothing was rolled back")
class Behavior:
    """Your behaviour releases. Bound in every cell as ``behavior``."""

    last_draft: Draft | None = None
    """The draft ``draft()`` returned last in this kernel; ``hooks.bind`` defaults to it."""

    async def status(self) -> dict[str, Any]:
        """The active release, its epoch and the last good release."""
        return await rpc.call_object("behavior.status", {}, action="read behaviour status")

    async def draft(self) -> Draft:
        """A new writable draft copied from the active release."""
        draft = Draft(await rpc.call_object("behavior.draft", {}, action="take a draft"))
        self.last_draft = draft
        return draft

    async def candidates(self) -> list[dict[str, Any]]:
        """Every kept failed candidate of this session, newest first: ``{id, draft_id,
        action, revision, at, failing, checks}``, each check with its fixture, error and
        traceback."""
        result = await rpc.call_object("behavior.candidates", {}, action="list candidates")
        return list(result.get("candidates", []))

    async def activate(self, release_id: str, expected_epoch: int) -> int:
        """Switch to a published release if the epoch is still ``expected_epoch``; return the new one."""
        params = {"release_id": release_id, "expected_epoch": expected_epoch}
        result = await rpc.call_object("behavior.activate", params, action="activate")
        return int(result["epoch"])

    async def rollback(self) -> int:
        """Return to the last good release (compare-and-swap on the current epoch)."""
        result = await rpc.call_object("behavior.rollback", {}, action="roll back")
        return int(result["epoch"])

    def __repr__(self) -> str:
        return "<behaviour releases: await behavior.draft(), .status(), .activate(), .rollback(), .candidates()>"


behavior = Behavior()
"""The one ``Behavior`` object the prelude binds."""

"""The skills offered to this kernel generation, imported by id, and your own managed skills.

    import klbr.skills as skills
    dir(skills)              # the ids this generation offers (and the attributes below)
    help(skills.workspace)   # one body
    skills.refused           # ids found and not offered, with the reason
    skills.revision          # content identity of the whole offered set
    skills.roots             # where those ids were read from: builtin root, managed root
    await skills.write("notes", "# notes\\n...")  # write your own skill (help(skills.write))
    await skills.delete("notes")                  # remove one you wrote

The set comes only from the host's ``init`` payload, fixed for the generation: this
process never reads a skills directory. Builtin skills ship with klbr's checkout; the skills
you write are kept by the host in the managed root under the state directory (which a cell
cannot write). A skill you write or delete is offered from your next turn: the host starts a
new workbench generation before it, so your variables are lost then.
"""

from typing import Any

from klbr import rpc

__all__: list[str] = []

refused: list[dict[str, str]] = []
"""Skills found but not offered, each ``{id, root, reason}``."""

revision: str | None = None
"""The content identity of the offered set, as the host computed it."""

roots: list[str] = []
"""The skill roots the host read, in order."""

class Skill:
    """One offered skill; ``help(skill)`` and ``str(skill)`` show its body."""

    def __init__(self, skill_id: str, body: str) -> None:
        """Hold skill ``skill_id`` with its ``body`` (also its ``__doc__``)."""
        self.id = skill_id
        self.body = body
        self.__doc__ = body

    def __str__(self) -> str:
        return self.body

    def __repr__(self) -> str:
        first = next((line for line in self.body.splitlines() if line.strip()), "")
        return f"<skill {self.id}: {first.strip()!r}, {len(self.body)} characters>"


Skill.__doc__ = None  # help(skill) must show the body, not this class's docstring

_offered: dict[str, Skill] = {}
_ATTRIBUTES = ("delete", "refused", "revision", "roots", "write")


async def write(skill_id: str, body: str) -> dict[str, Any]:
    """Write (or replace) your managed skill ``skill_id`` with ``body``; return a receipt.

    ``body`` is the whole ``SKILL.md``: its first non-empty line must be exactly
    ``# <skill_id>``, and it is at most 256 KiB of UTF-8. The id is lowercase letters, digits
    and ``_``, starting with a letter (so ``skills.<id>`` works), and must not be a builtin
    skill's id: builtin and managed skills are one namespace, and a builtin is never replaced.
    The host checks it as it checks every skill and writes it atomically under the state
    directory's ``skills/<id>/SKILL.md``; that directory is read-only to cells.

    The receipt is ``{id, path, bytes, revision, offered_from}``: ``revision`` is the skill
    set the next generation offers. This generation's set does not change: the skill is
    offered from your next turn, when the host starts a new workbench generation (your
    variables are lost then; keep state in files). Keep a skill to instructions.

    Raises ``klbr.rpc.RpcError`` with code ``skill_invalid`` and the reason for a refused
    skill, ``forbidden`` in a job or child agent, and ``TypeError`` for non-string arguments.

    >>> await skills.write("notes", "# notes\\n\\nHow I keep notes: ...")  # doctest: +SKIP
    """
    if not isinstance(skill_id, str) or not isinstance(body, str):
        raise TypeError(
            f"cannot write skill: id and body must be strings (got {type(skill_id).__name__}, {type(body).__name__})"
        )
    return await rpc.call_object("skills.write", {"id": skill_id, "body": body}, action="write skill")


async def delete(skill_id: str) -> dict[str, Any]:
    """Delete your managed skill ``skill_id``; return ``{id, revision, offered_from}``.

    Only skills you wrote (the managed root) can be deleted; a builtin id is refused with
    ``skill_invalid``, an unknown one with ``not_found`` (``klbr.rpc.RpcError``). Like a write,
    the change applies from your next turn's workbench generation.

    >>> await skills.delete("notes")  # doctest: +SKIP
    """
    if not isinstance(skill_id, str):
        raise TypeError(f"cannot delete skill: id must be a string (got {type(skill_id).__name__})")
    return await rpc.call_object("skills.delete", {"id": skill_id}, action="delete skill")


def _install(payload: dict[str, object]) -> None:
    """Replace the offered set with the ``skills`` object of an ``init`` request.

    Raises ``ValueError`` naming the first malformed field; nothing changes then.
    """
    if not isinstance(payload, dict):
        raise ValueError(f"cannot load skills: payload must be an object (got {type(payload).__name__})")
    bodies = payload.get("bodies", {})
    if not isinstance(bodies, dict) or not all(isinstance(v, str) for v in bodies.values()):
        raise ValueError("cannot load skills: bodies must map ids to strings (got a non-string entry)")
    new_roots = payload.get("roots", [])
    if not isinstance(new_roots, list) or not all(isinstance(r, str) for r in new_roots):
        raise ValueError(f"cannot load skills: roots must be a list of strings (got {new_roots!r})")
    new_refused = payload.get("refused", [])
    if not isinstance(new_refused, list) or not all(isinstance(r, dict) for r in new_refused):
        raise ValueError(f"cannot load skills: refused must be a list of objects (got {new_refused!r})")
    new_revision = payload.get("revision")
    if new_revision is not None and not isinstance(new_revision, str):
        raise ValueError(f"cannot load skills: revision must be a string or null (got {new_revision!r})")
    global revision
    _offered.clear()
    _offered.update({skill_id: Skill(skill_id, body) for skill_id, body in sorted(bodies.items())})
    roots[:] = new_roots
    refused[:] = [
        {"id": str(r.get("id", "")), "root": str(r.get("root", "")), "reason": str(r.get("reason", ""))}
        for r in new_refused
    ]
    revision = new_revision


def __getattr__(name: str) -> Skill:
    if name in _offered:
        return _offered[name]
    if name.startswith("__"):
        raise AttributeError(name)
    offered = ", ".join(_offered) or "none"
    raise AttributeError(f"cannot import skill {name!r}: not offered in this generation (offered: {offered})")


def __dir__() -> list[str]:
    return sorted(_offered) + list(_ATTRIBUTES)

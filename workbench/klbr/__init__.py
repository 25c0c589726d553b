"""klbr's workbench: the persistent Python process in which the agent's cells run.

The host starts it as ``python3 -m klbr`` and speaks length-prefixed JSON frames with it
on stdio (see ``klbr.serve`` and ``klbr.kernel``). Inside a cell these names are bound:

    open_file, ls, search, delete, run   the workspace (``help(workspace)``)
    workspace                            ``ws = await workspace.current()``
    local                                ``await local.send(text)``: the only speech
    wait                                 ``wait(reason, seconds=None)``: end the cell and the turn
    skills                               ``dir(skills)``, ``help(skills.<id>)``
    timers                               ``await timers.after(seconds, note)``: wake later
    jobs                                 ``await jobs.start(code)``: background work
    llm, agent                           ``await llm(prompt)``, ``await agent(task)``: child calls

Modules: ``serve`` (the process and its frame loop), ``kernel`` (the handler table),
``cells`` (running one cell), ``workspace``, ``skills``, ``hooks`` (behaviour hooks),
``rpc`` (host calls), ``local``, ``timers``, ``jobs``, ``llm``, ``frames`` (the wire codec).
"""

__all__: list[str] = []

/**
 * The host RPCs a cell of one session may call, bound to that session, and the catalog of every
 * host RPC: `workspace.run` (the kernel binds it to each process) and the groups below, each a
 * domain's definitions with what they are bound to. The catalog is what `docs/protocol.md`
 * lists (`deno task rpc:docs`); a session binds exactly the groups the catalog names.
 *
 * @module
 */

import { behaviorRpcs } from "../behavior/mod.ts";
import { codeRpcs } from "../code/mod.ts";
import { artifactReadRpc, historyRpcs } from "../context/mod.ts";
import { type DiscordEffects, discordRpcs } from "../discord/mod.ts";
import { type Jobs, unattendedRpcs } from "../jobs/mod.ts";
import {
  bindRpcs,
  type BoundRpc,
  type RpcDefinition,
  skillRpcDeps,
  skillRpcs,
  workspaceRunRpc,
} from "../kernel/mod.ts";
import { localSendRpc } from "../session/mod.ts";
import type { Session } from "../session/mod.ts";
import type { SessionDeps } from "./_session_workers.ts";

/** What the session's RPCs need beyond the session's own parts. */
export interface SessionRpcDeps extends SessionDeps {
  /** The Discord transport, when the configuration has a `discord` node. */
  discord?: DiscordEffects;
  /** The daemon's timers, jobs and child model calls. */
  jobs: Jobs;
}

/** The session a group is bound for: its id and the {@linkcode Session} its calls act on. */
interface SessionScope {
  session: string;
  parts: Session;
}

/** A domain's definitions and how a session binds them. */
interface SessionGroup {
  rpcs: readonly RpcDefinition<never>[];
  bind: (deps: SessionRpcDeps, scope: SessionScope) => BoundRpc[];
}

/** A group whose definitions are bound to what `depsOf` builds for the session. */
function group<D>(
  rpcs: RpcDefinition<D>[],
  depsOf: (deps: SessionRpcDeps, scope: SessionScope) => D,
): SessionGroup {
  return { rpcs, bind: (deps, scope) => bindRpcs(rpcs, depsOf(deps, scope)) };
}

function lanes(deps: SessionRpcDeps, { session, parts }: SessionScope) {
  return {
    store: deps.store,
    session,
    frame: parts.runningFrame.bind(parts),
  };
}

const SESSION_GROUPS: SessionGroup[] = [
  group([localSendRpc], lanes),
  group([artifactReadRpc], (deps) => ({ store: deps.store })),
  group(historyRpcs, (deps, { session }) => ({ store: deps.store, session })),
  group(discordRpcs, (deps, scope) => ({ ...lanes(deps, scope), discord: deps.discord })),
  {
    rpcs: unattendedRpcs,
    bind: (deps, { session, parts }) =>
      deps.jobs.rpcs({
        session,
        frame: parts.runningFrame.bind(parts),
        release: () => parts.activeRelease().releaseId,
        workspace: deps.workspace,
      }),
  },
  group(behaviorRpcs, (deps, { session, parts }) => ({
    store: deps.store,
    session,
    python: deps.python,
    repoRoot: deps.repoRoot,
    workspace: deps.workspace,
    sandbox: deps.sandbox,
    activate: (releaseId: string, expectedEpoch: number, reason: string) =>
      parts.activate({ releaseId, expectedEpoch, reason }),
    // A cell sees the release its turn is pinned to (the active one outside a turn).
    pinned: parts.pinnedRelease.bind(parts),
  })),
  // A managed skill is offered from the next generation, started at the next boundary.
  group(skillRpcs, (deps, { parts }) =>
    skillRpcDeps({
      roots: deps.skillRoots,
      changed: parts.skillsChanged.bind(parts),
      offeredFrom: "your next turn: the workbench restarts before it, so variables are lost",
    })),
  group(codeRpcs, (deps, scope) => ({
    ...lanes(deps, scope),
    workspace: deps.workspace,
    deny: deps.stateDir === undefined ? [] : [deps.stateDir],
    readOnly: deps.protect,
    sandbox: deps.sandbox,
  })),
];

/**
 * Every host RPC a worker can call, each declared once, in the order `docs/protocol.md` lists
 * them.
 *
 * @example
 * ```ts
 * hostRpcCatalog().map((rpc) => rpc.name); // ["workspace.run", "local.send", …]
 * ```
 */
export function hostRpcCatalog(): RpcDefinition<never>[] {
  return [workspaceRunRpc as RpcDefinition<never>, ...SESSION_GROUPS.flatMap((g) => g.rpcs)];
}

/** The host RPCs of one session's workbench, bound to the session (`workspace.run` aside). */
export function sessionRpcs(deps: SessionRpcDeps, parts: Session): BoundRpc[] {
  return SESSION_GROUPS.flatMap((g) => g.bind(deps, { session: parts.id, parts }));
}

/**
 * The host RPCs a cell of one session may call, bound to that session: every definition of
 * {@linkcode hostRpcCatalog} but `workspace.run`, which the kernel binds itself. The catalog is
 * also what `docs/protocol.md` lists (`deno task rpc:docs`).
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
import type { SessionDeps, SessionParts } from "./_session_parts.ts";

/** What the session's RPCs need beyond the session's own parts. */
export interface SessionRpcDeps extends SessionDeps {
  /** The Discord transport, when the configuration has a `discord` node. */
  discord?: DiscordEffects;
  /** The one activation path, shared with the operator's `activate`. */
  activate: (releaseId: string, expectedEpoch: number, reason: string) => Promise<number>;
  /** The daemon's timers, jobs and child model calls. */
  jobs: Jobs;
}

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
  return [
    workspaceRunRpc,
    localSendRpc,
    artifactReadRpc,
    ...historyRpcs,
    ...discordRpcs,
    ...unattendedRpcs,
    ...behaviorRpcs,
    ...skillRpcs,
    ...codeRpcs,
  ] as RpcDefinition<never>[];
}

/** The host RPCs of one session's workbench, bound to the session (`workspace.run` aside). */
export function sessionRpcs(
  deps: SessionRpcDeps,
  scope: { session: string; parts: SessionParts },
): BoundRpc[] {
  const { store, bus } = deps;
  const { session, parts } = scope;
  const notify = () => bus.wake(session);
  const frame = () => parts.frame;
  return [
    ...bindRpcs([localSendRpc], { store, session, frame, notify }),
    ...bindRpcs([artifactReadRpc], { store }),
    ...bindRpcs(historyRpcs, { store, session }),
    ...bindRpcs(discordRpcs, { store, session, discord: deps.discord, frame, notify }),
    ...deps.jobs.rpcs({
      session,
      frame,
      release: () => parts.behavior.releaseId,
      workspace: deps.workspace,
    }),
    ...bindRpcs(behaviorRpcs, {
      store,
      session,
      python: deps.python,
      repoRoot: deps.repoRoot,
      workspace: deps.workspace,
      sandbox: deps.sandbox,
      activate: deps.activate,
      // A cell sees the release its turn is pinned to (the active one outside a turn).
      pinned: () => {
        const pin = parts.pin ?? { frameId: null, ...parts.behavior };
        return { releaseId: pin.releaseId, frameId: pin.frameId };
      },
    }),
    // A managed skill is offered from the next generation, started at the next boundary.
    ...bindRpcs(
      skillRpcs,
      skillRpcDeps({
        roots: deps.skillRoots,
        changed: (change) => (parts.skillsChanged = change),
        offeredFrom: "your next turn: the workbench restarts before it, so variables are lost",
      }),
    ),
    ...bindRpcs(codeRpcs, {
      store,
      session,
      workspace: deps.workspace,
      deny: deps.stateDir === undefined ? [] : [deps.stateDir],
      readOnly: deps.protect,
      notify,
    }),
  ];
}

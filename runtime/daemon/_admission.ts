/**
 * The one admission path for every source: inputs are committed (dedupe key, source kind,
 * conversation, author, timestamps) in one transaction before any of them is acknowledged.
 * Admission never waits for Python; the caller wakes the session after the commit.
 *
 * @module
 */

import { type AdmitInput, admitInputs as admitStoreInputs } from "../../store/tables/inputs.ts";
import { discordDedupeKey, localDedupeKey } from "../../store/tables/dedupe_keys.ts";
import type { Store } from "../../store/store.ts";
import {
  faultPoint,
  type InputAttachment,
  isKlbrError,
  KlbrError,
  type Logger,
} from "../core/mod.ts";
import { keptAttachmentSize } from "../../store/tables/artifacts.ts";
import { MAINTENANCE_CONVERSATION } from "../session/mod.ts";
import type { DiscordMessage } from "../discord/mod.ts";
import type { UnattendedInput } from "../jobs/mod.ts";
import type { AdmitOutcome, InputMessage } from "../lanes/mod.ts";

/** One input to admit, built lazily so a bad field refuses that input only. */
export type PendingInput = () => Omit<AdmitInput, "session">;

/**
 * Commits every input in one transaction; a refused one (a bad field, a malformed dedupe key
 * part) is answered alone and writes nothing (`admitInputs` in `store/tables/inputs.ts`). On return each `ack` outcome's input
 * is durable; a repeated dedupe key is acknowledged with the first input's id. `within`, when
 * given, runs in the same transaction after the inputs (a fired timer marks itself there), so
 * what it writes commits with them or not at all.
 *
 * Proven by "inputs sent together commit together; a refused one is answered alone" in
 * `tests/runtime/daemon/daemon.test.ts`, and by the `commit-before-notify` crash window
 * (`tests/crash/commit_before_notify.test.ts`): an input committed but never acknowledged is
 * one input when its client sends it again.
 *
 * @throws {KlbrError} `store_unavailable` or `store_corrupt` when the store cannot commit: then
 * nothing of the batch was admitted, and every input of it is answered with that error.
 */
export function admitBatch(
  store: Store,
  session: string,
  inputs: PendingInput[],
  within?: (outcomes: AdmitOutcome[]) => void,
): AdmitOutcome[] {
  const outcomes = store.transaction(() => {
    const outcomes = admitInputs(store, session, inputs);
    within?.(outcomes);
    return outcomes;
  });
  faultPoint("commit-before-notify");
  return outcomes;
}

/**
 * Writes `inputs` inside the caller's transaction: one outcome per input, a refused one
 * answered alone with nothing written. Nothing is durable until that transaction commits.
 *
 * @throws {KlbrError} `store_unavailable` or `store_corrupt` when the store cannot write: the
 * caller's transaction must then roll back, and no input of it is admitted.
 */
export function admitInputs(
  store: Store,
  session: string,
  inputs: PendingInput[],
): AdmitOutcome[] {
  return admitGroups(store, [{ session, inputs }])[0];
}

/**
 * Writes several groups of inputs (each of one session) inside the caller's transaction as one
 * store batch — one dedupe pass and one sequence bump per session for all of them — and answers
 * each group with one outcome per input, as {@linkcode admitInputs} would have.
 *
 * @throws {KlbrError} `store_unavailable` or `store_corrupt` when the store cannot write: the
 * caller's transaction must then roll back, and no input of any group is admitted.
 */
export function admitGroups(
  store: Store,
  groups: readonly { session: string; inputs: readonly PendingInput[] }[],
): AdmitOutcome[][] {
  const built = groups.map((group) =>
    group.inputs.map((input): AdmitInput | KlbrError => {
      try {
        return { session: group.session, ...input() };
      } catch (error) {
        if (isKlbrError(error)) return error;
        throw error;
      }
    })
  );
  // A store that cannot write throws here: it refuses the whole batch, never one input of it.
  const written = admitStoreInputs(
    store,
    built.flat().filter((b): b is AdmitInput => !(b instanceof KlbrError)),
  );
  let next = 0;
  return built.map((list) =>
    list.map((b): AdmitOutcome => {
      const outcome = b instanceof KlbrError ? b : written[next++];
      return outcome instanceof KlbrError
        ? { error: outcome }
        : { ack: { input_id: outcome.inputId, seq: outcome.seq, duplicate: outcome.duplicate } };
    })
  );
}

/**
 * A local input from a lane client: its dedupe key is the client's id and message id. Its body
 * is the text, or `{text, attachments}` when it carries files: each named the way a Discord
 * attachment is (`filename`, `size`, `content_type`, `artifact`), so a cell reads either with
 * `read_artifact`.
 *
 * The built input throws `not_found` for an attachment that is not a kept one in `stateDir`
 * (never uploaded, or uploaded to another daemon): that input alone is refused.
 */
export function localInput(
  clientId: string,
  input: InputMessage,
  options: { stateDir?: string } = {},
): PendingInput {
  return () => ({
    sourceKind: "local",
    dedupeKey: localDedupeKey(clientId, input.client_msg_id),
    clientMsgId: input.client_msg_id,
    conversationId: input.conversation,
    author: input.author,
    body: input.attachments?.length
      ? { text: input.text, attachments: input.attachments.map(keptFile(options.stateDir)) }
      : input.text,
  });
}

/** Checks a named attachment is kept here, and describes it with its size on disk. */
function keptFile(stateDir: string | undefined) {
  return (file: InputAttachment) => {
    const size = stateDir === undefined ? undefined : keptAttachmentSize(stateDir, file.artifact);
    if (size === undefined) {
      throw new KlbrError(
        "not_found",
        `cannot accept input: attachment ${file.filename} (${
          file.artifact.slice(0, 12)
        }) was not uploaded to this daemon; upload it again with POST /attachments`,
      );
    }
    return {
      filename: file.filename,
      size,
      content_type: file.content_type,
      artifact: file.artifact,
    };
  };
}

/**
 * A Discord message: source `discord`, dedupe key `discord:<channel>:<message>` (a message
 * delivered again, replayed or backfilled is one input), conversation `discord:<channel>` (a
 * thread is a channel: its own conversation), body the text with its Discord details.
 */
export function discordInput(message: DiscordMessage): PendingInput {
  return () => ({
    sourceKind: "discord",
    dedupeKey: discordDedupeKey(message.channelId, message.messageId),
    conversationId: `discord:${message.channelId}`,
    author: `discord:${message.authorId}:${message.username}`,
    body: message.body,
    receivedAt: message.receivedAt,
  });
}

/**
 * A maintenance request (`klbr maintain`): source `system`, a fresh dedupe key, conversation
 * `system:maintenance`. The turn that consumes it loads the `maintenance` skill.
 */
export function maintenanceInput(reason: string): PendingInput {
  return () => ({
    sourceKind: "system",
    dedupeKey: `system:maintenance:${crypto.randomUUID()}`,
    conversationId: MAINTENANCE_CONVERSATION,
    author: "operator",
    body: `[maintenance] ${reason}`,
  });
}

/**
 * The durable timer of the next scheduled maintenance turn: due `every` ms from `now`, in
 * conversation `system:maintenance`, so the input it fires starts a maintenance turn.
 */
export function maintenanceTimer(
  now: number,
  every: number,
): { conversation: string; dueAt: number; note: string } {
  return {
    conversation: MAINTENANCE_CONVERSATION,
    dueAt: now + every,
    note: `scheduled maintenance turn (every ${Math.round(every / 1000)} s)`,
  };
}

/**
 * Why a session admits nothing now, or `undefined` when it does: the daemon is shutting down,
 * the session is not running, or the store reported a damaged file (what it would commit could
 * not be trusted).
 */
export function admissionRefusal(
  store: Store,
  state: { session: string; admitting: boolean; running: boolean },
): KlbrError | undefined {
  if (!state.admitting) {
    return new KlbrError("shutting_down", "cannot admit input: the daemon is shutting down", {
      status: 503,
    });
  }
  if (!state.running) {
    return new KlbrError(
      "not_found",
      `cannot admit input: session ${state.session} is not running`,
    );
  }
  const health = store.health();
  if (health.state === "corrupt") {
    return new KlbrError(
      "store_corrupt",
      `cannot admit input: the store reported a damaged file at ${
        new Date(health.since!).toISOString()
      }; stop the daemon and restore a backup (got ${health.error})`,
      { status: 503 },
    );
  }
  return undefined;
}

/**
 * Admits a fired timer or a finished job through the same path as every input; `within` runs
 * in the admission's transaction. Returns `false`, writing nothing, when the input is refused
 * (logged); the caller keeps it for later. The caller wakes the session.
 */
export function admitUnattended(
  deps: { store: Store; log: Logger },
  session: string,
  unattended: { input: UnattendedInput; within: (inputId: string) => void },
): boolean {
  const { input, within } = unattended;
  let admitted = false;
  try {
    admitBatch(deps.store, session, [() => input], ([outcome]) => {
      if ("error" in outcome) throw outcome.error;
      within(outcome.ack.input_id);
      admitted = true;
    });
  } catch (error) {
    deps.log.error("admission.refused", `cannot admit ${input.dedupeKey}: ${error}`, {
      dedupe_key: input.dedupeKey,
    });
    return false;
  }
  return admitted;
}

/**
 * Compaction: the oldest uncovered provider items are covered by a new summary that replaces
 * the previous one. The cut never splits a tool group (it falls before a user or assistant
 * item). The summary is written by the `long` route's model and checked; when the model fails,
 * is unreachable or its answer fails the check, the extractive summary is used and the reason
 * recorded. Nothing is committed until the summary and the new context epoch commit together
 * (`commitSummary`); a crash before that leaves the previous context in use.
 *
 * @module
 */

import { join } from "node:path";
import {
  commitSummary,
  type Compaction,
  latestSummary,
  type SummarySource,
} from "../../store/tables/context_summaries.ts";
import { appendEvent } from "../../store/tables/events.ts";
import {
  estimateTokens,
  itemSizesNewestFirst,
  lastItemIdx,
} from "../../store/tables/provider_items.ts";
import { requireSession } from "../../store/tables/sessions.ts";
import type { Store } from "../../store/store.ts";
import { recordCalibration } from "../../store/tables/token_counts.ts";
import { KlbrError, type Logger } from "../core/mod.ts";
import type { Provider } from "../model/mod.ts";
import { type ContextBudget, messagesTokens, rawLimits } from "./_budget.ts";
import { type Digest, digestStep, foldDigest, parseDigest, SECTIONS } from "./_digest.ts";
import { renderBounded, summaryHeader } from "./_render.ts";
import { checkModelSummary, refsIn, summarizerMessages, summaryMaterial } from "./_summarizer.ts";

/** How long the summarizer may take before the extractive summary is used. */
export const SUMMARY_TIMEOUT_MS = 120_000;

/** What a compaction needs. */
export interface CompactionDeps {
  store: Store;
  log: Logger;
  /** Each route's budget; `main`'s sizes the summary. */
  contextBudget: (route: string) => ContextBudget;
  /** The provider of a route; compaction asks `long`. */
  provider?: (route: string) => Provider;
}

/** What {@linkcode compactContext} is asked to do. */
export interface CompactOptions {
  /**
   * Keep at most this many raw tokens of the newest items, or at least this many items, or
   * `nothing`: the summary covers every item (a repair).
   */
  keep: { tokens: number } | { items: number } | "nothing";
  /** Ask the `long` model for the summary (the extractive one is the fallback). */
  model: boolean;
  /** Aborts the model's call (the extractive summary is then used). */
  signal?: AbortSignal;
}

/**
 * The idx to cover through when at most `keep` raw tokens of the newest items are to stay:
 * the earliest start within that tail that is not a tool result, or, when the newest group
 * alone is larger, the start of that group.
 */
function cutByTokens(store: Store, session: string, after: number, keep: number): number {
  let sum = 0;
  let start: number | undefined;
  for (const size of itemSizesNewestFirst(store, session, after)) {
    sum += size.tokens;
    const valid = size.role !== "tool";
    if (sum <= keep) {
      if (valid) start = size.idx;
      continue;
    }
    if (start === undefined && valid) start = size.idx;
    if (start !== undefined) break;
  }
  return start === undefined ? after : start - 1;
}

/** The idx to cover through when at least `keep` items are to stay, cut before a user item. */
function cutByItems(store: Store, session: string, after: number, keep: number): number {
  const sizes = [...itemSizesNewestFirst(store, session, after)].reverse();
  for (let i = sizes.length - keep; i > 0; i--) {
    if (sizes[i].role === "user") return sizes[i - 1].idx;
  }
  return after;
}

function checkKeep(keep: CompactOptions["keep"]): void {
  if (keep === "nothing") return;
  const [what, value, max] = "tokens" in keep
    ? ["keep tokens", keep.tokens, 100_000_000]
    : ["keep items", keep.items, 100_000];
  if (!Number.isSafeInteger(value) || value < 1 || value > max) {
    throw new KlbrError(
      "invalid_input",
      `cannot compact context: ${what} must be an integer in 1-${max} (got ${value})`,
    );
  }
}

let faultHits = 0;

/**
 * A test-only fault point, off unless `KLBR_FAULT` names it: past the first `KLBR_FAULT_AFTER`
 * hits (default 0) it writes `<state>/fault.<name>` and blocks this thread for up to a minute,
 * so a test can SIGKILL the daemon exactly there. The general fault seam (branch `faults`) is
 * meant to absorb it.
 */
function faultPoint(stateDir: string, name: string): void {
  if (Deno.env.get("KLBR_FAULT") !== name) return;
  if (faultHits++ < Number(Deno.env.get("KLBR_FAULT_AFTER") ?? 0)) return;
  Deno.writeTextFileSync(join(stateDir, `fault.${name}`), String(Deno.pid));
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60_000);
}

/** The model's summary of a step, checked; or why the extractive one is used instead. */
async function modelSummary(
  deps: CompactionDeps,
  session: string,
  step: { previous: string | null; digest: Digest; folded: Digest; header: string; max: number },
  signal: AbortSignal | undefined,
): Promise<{ text: string; tokens: number } | { reason: string }> {
  if (deps.provider === undefined) return { reason: "no provider for the long route" };
  // Characters the body may have: the bound less the header, at about 4 per raw token.
  const maxChars = Math.max(0, (step.max - estimateTokens(step.header) - 8) * 4);
  const material = summaryMaterial(step.previous, step.digest, maxChars);
  const limits = rawLimits(deps.store, session, "long", deps.contextBudget("long"));
  const messages = summarizerMessages(material);
  const estimate = messagesTokens(messages);
  if (estimate > limits.request) {
    return { reason: `the material (${estimate} tokens) is over the long route's budget` };
  }
  let body: string;
  try {
    const timeout = AbortSignal.timeout(SUMMARY_TIMEOUT_MS);
    // No tools: the summary is text, and a server without tool calling answers it too.
    const turn = await deps.provider("long").streamChat({ messages, tools: false }, {
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
    if (turn.usage.promptTokens) {
      recordCalibration(deps.store, session, {
        route: "long",
        estimated: estimate,
        reported: turn.usage.promptTokens,
      });
    }
    if (turn.toolCalls.length > 0) return { reason: "the long model called a tool" };
    body = turn.text.trim();
  } catch (error) {
    return { reason: `the long model failed: ${error instanceof Error ? error.message : error}` };
  }
  // The step's own entries are all in the material, also those the bounded fold had to count.
  const known = new Set([
    ...refsIn(step.previous ?? ""),
    ...digestRefs(step.folded),
    ...digestRefs(step.digest),
  ]);
  const reason = checkModelSummary(body, {
    mustName: new Map(step.digest.delivered.entries.map((e) => [e.ref, e.state ?? ""])),
    known,
    maxTokens: step.max,
    header: step.header,
  });
  if (reason !== null) return { reason: `the long model's summary failed its check: ${reason}` };
  const text = `${step.header}\n${body}`;
  return { text, tokens: estimateTokens(text) };
}

function digestRefs(digest: Digest): string[] {
  return SECTIONS.flatMap((name) => digest[name].entries.map((e) => e.ref));
}

/**
 * Covers the oldest uncovered items with a new summary and commits it with the next context
 * epoch; returns `undefined` when there is nothing to cover.
 *
 * When it returns, the summary covering items `1…coversToIdx` is the one requests use, and
 * `context.compacted` records its source (and why the model's summary was not used). Proven
 * by "a long conversation passes its budget and is compacted automatically …" in
 * `tests/runtime/context/context_e2e.test.ts` and the kills in
 * `tests/crash/compaction_kill.test.ts`.
 *
 * @throws {KlbrError} `epoch_moved` when another compaction committed meanwhile (nothing is
 * written); `not_found` for an unknown session; `invalid_input` for a `keep` outside its range.
 */
export async function compactContext(
  deps: CompactionDeps,
  session: string,
  options: CompactOptions,
): Promise<Compaction | undefined> {
  const { store } = deps;
  checkKeep(options.keep);
  const expectedEpoch = requireSession(store, session).contextEpoch;
  const previous = latestSummary(store, session);
  const after = previous?.coversToIdx ?? 0;
  const { keep } = options;
  const coversTo = keep === "nothing"
    ? lastItemIdx(store, session)
    : "tokens" in keep
    ? cutByTokens(store, session, after, keep.tokens)
    : cutByItems(store, session, after, keep.items);
  if (coversTo <= after) return undefined;
  const max = rawLimits(store, session, "main", deps.contextBudget("main")).summary;
  const digest = digestStep(store, session, { after, through: coversTo });
  const folded = foldDigest(store, parseDigest(previous?.digest), digest);
  const epoch = expectedEpoch + 1;
  const extractive = renderBounded(folded, summaryHeader(coversTo, epoch, "extractive"), max);
  let chosen: { text: string; tokens: number; source: SummarySource; reason: string | null } = {
    text: extractive.text,
    tokens: extractive.tokens,
    source: "extractive",
    reason: null,
  };
  if (options.model) {
    const header = summaryHeader(coversTo, epoch, "model");
    const written = await modelSummary(deps, session, {
      previous: previous?.text ?? null,
      digest,
      folded: extractive.digest,
      header,
      max,
    }, options.signal);
    chosen = "reason" in written
      ? { ...chosen, reason: written.reason }
      : { text: written.text, tokens: written.tokens, source: "model", reason: null };
  }
  const done = commitSummary(store, session, {
    expectedEpoch,
    coversToIdx: coversTo,
    text: chosen.text,
    source: chosen.source,
    digest: extractive.digest,
    tokens: chosen.tokens,
    fallbackReason: chosen.reason,
    summarizedItems: coversTo - after,
    beforeCommit: () => faultPoint(store.stateDir, "compaction.commit"),
  });
  deps.log.info(
    "context.compacted",
    `context epoch ${done.epoch}: items #1–#${coversTo} summarized (${chosen.source}${
      chosen.reason ? `; ${chosen.reason}` : ""
    })`,
    { epoch: done.epoch, covers_to_idx: coversTo, source: chosen.source },
  );
  return done;
}

/** Who asked for a repair, and why. */
export interface RepairOptions {
  by: "operator" | "daemon";
  reason: string;
}

/**
 * Rewrites the active context from the durable records, without the model: an extractive
 * summary of every item stands in for them (`context.compacted`, then `context.repaired`).
 * Nothing is deleted: `history.read` still reaches every item. Returns `undefined` when the
 * context holds no item the summary does not already cover.
 *
 * @throws {KlbrError} `epoch_moved` when another compaction committed meanwhile; `not_found`
 * for an unknown session.
 * @example
 * ```ts
 * await repairContext(deps, "default", { by: "operator", reason: "klbr repair" });
 * ```
 */
export async function repairContext(
  deps: CompactionDeps,
  session: string,
  options: RepairOptions,
): Promise<Compaction | undefined> {
  const done = await compactContext(deps, session, { keep: "nothing", model: false });
  if (done === undefined) return undefined;
  const summary = latestSummary(deps.store, session);
  appendEvent(deps.store, session, "context.repaired", {
    by: options.by,
    reason: options.reason.slice(0, 500),
    epoch: done.epoch,
    covers_to_idx: done.coversToIdx,
    summary_chars: summary?.text.length ?? 0,
  });
  deps.log.warn(
    "context.repaired",
    `context epoch ${done.epoch}: every item up to #${done.coversToIdx} is now an extractive ` +
      `summary (by the ${options.by}: ${options.reason.slice(0, 200)})`,
    { epoch: done.epoch, covers_to_idx: done.coversToIdx, by: options.by },
  );
  return done;
}

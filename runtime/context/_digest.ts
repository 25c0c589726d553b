/**
 * The structured digest a summary is folded from: what the owner said, what was sent (local
 * sends and Discord outbox rows with their real state: only `delivered` and `confirmed` ones
 * reached the conversation), what stayed scratchpad, and which cells ran with which outcome and
 * what they showed (a bounded excerpt of their output) — four sections kept apart, each entry
 * named by its history ref. A step's digest is read from the items it covers; folding appends it
 * to the previous summary's digest. Sizes are bounded by `_render.ts`.
 *
 * @module
 */

import { z } from "zod";
import { getFrame } from "../../store/tables/frames.ts";
import { getInputs } from "../../store/tables/inputs.ts";
import { type ProviderItem, readProviderRange } from "../../store/tables/provider_items.ts";
import {
  cellsOfToolCalls,
  outboxStates,
  sendsOfCells,
} from "../../store/tables/history_sources.ts";
import type { Store } from "../../store/store.ts";
import { wholeCharacters } from "./_budget.ts";
import { bodyOf } from "./_inputs.ts";

/** Characters an entry's text keeps at most. */
export const EXCERPT_CHARS = 400;

/**
 * Whether a send's state says it reached its conversation: `delivered` (a local send) or
 * `confirmed` (a Discord row).
 */
export function reachedState(state: string | undefined): boolean {
  return state === "delivered" || state === "confirmed";
}

/**
 * The group a send's state puts it in: `delivered` (it reached the conversation), `failed`
 * (it did not), `unknown` (it may have) or `pending` (not posted yet: `pending`, `attempting`).
 */
export function sendGroup(
  state: string | undefined,
): "delivered" | "failed" | "unknown" | "pending" {
  if (reachedState(state)) return "delivered";
  if (state === "failed" || state === "unknown") return state;
  return "pending";
}

const Entry = z.object({
  /** The history ref, e.g. `send:12`. */
  ref: z.string(),
  /** The provider item the entry comes from, for order and for the "earlier" ranges. */
  idx: z.int(),
  text: z.string(),
  /** Set on the entries of the step being summarized now; they are kept longest. */
  step: z.boolean().optional(),
  /** The conversation (said, delivered), the author (said), the state or outcome. */
  conversation: z.string().optional(),
  author: z.string().optional(),
  state: z.string().optional(),
  /** A cell's: what it showed (error, value, stdout, stderr), as an excerpt. */
  output: z.string().optional(),
});

/** One listed thing. */
export type Entry = z.infer<typeof Entry>;

const Earlier = z.object({
  count: z.int(),
  fromIdx: z.int(),
  toIdx: z.int(),
  /** Counts by state (delivered), outcome (cells) or author (said). */
  by: z.record(z.string(), z.int()),
});

/** What no longer fits as entries: how many, over which items, by state or outcome. */
export type Earlier = z.infer<typeof Earlier>;

const Section = z.object({ earlier: Earlier.nullable(), entries: z.array(Entry) });

/** The four sections, in the order a summary shows them. */
export const SECTIONS = ["said", "delivered", "drafts", "cells"] as const;

/** One section's name. */
export type SectionName = (typeof SECTIONS)[number];

/** A digest: the four sections and the last item it covers. */
export const Digest = z.object({
  version: z.literal(1),
  coversToIdx: z.int(),
  said: Section,
  delivered: Section,
  drafts: Section,
  cells: Section,
});

/** A digest. */
export type Digest = z.infer<typeof Digest>;

/** A digest that covers nothing. */
export function emptyDigest(): Digest {
  const section = () => ({ earlier: null, entries: [] });
  return {
    version: 1,
    coversToIdx: 0,
    said: section(),
    delivered: section(),
    drafts: section(),
    cells: section(),
  };
}

/** Reads a stored digest; a missing or unreadable one is empty. */
export function parseDigest(value: unknown): Digest {
  const parsed = Digest.safeParse(value);
  return parsed.success ? parsed.data : emptyDigest();
}

/** Entries a section of one step keeps before the oldest become counts (a long backlog). */
const MAX_STEP_ENTRIES = 2_000;

/** What an absorbed entry is counted by in its section's "earlier" line. */
function countKey(name: SectionName, entry: Entry): string {
  if (name === "said") return entry.author ?? "someone";
  if (name === "drafts") return "note";
  return entry.state ?? "unknown";
}

/** Moves the oldest `count` entries of a section into its "earlier" counts. */
export function absorbOldest(
  name: SectionName,
  section: { earlier: Earlier | null; entries: Entry[] },
  count: number,
): void {
  for (const entry of section.entries.splice(0, count)) {
    const earlier = section.earlier ??
      { count: 0, fromIdx: entry.idx, toIdx: entry.idx, by: {} };
    earlier.count++;
    earlier.fromIdx = Math.min(earlier.fromIdx, entry.idx);
    earlier.toIdx = Math.max(earlier.toIdx, entry.idx);
    const key = countKey(name, entry);
    earlier.by[key] = (earlier.by[key] ?? 0) + 1;
    section.earlier = earlier;
  }
}

/**
 * Flattens whitespace and keeps at most `max` characters, marking a cut with …; the cut never
 * splits a character outside the BMP (a lone surrogate, which servers refuse).
 */
export function excerpt(text: string, max = EXCERPT_CHARS): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, wholeCharacters(flat, max))}…` : flat;
}

interface Call {
  id: string;
  idx: number;
}

function callsOf(item: ProviderItem): Call[] {
  const calls = (item.message.tool_calls ?? []) as { id?: unknown }[];
  return calls.filter((c) => typeof c.id === "string").map((c) => ({
    id: c.id as string,
    idx: item.idx,
  }));
}

/**
 * The owner's inputs a user item opened its frame with (none for runtime notes). The opening is
 * known by the header of the frame's first input, wherever it is: after the talk read meanwhile
 * or a note about the previous turn, when the opening has them.
 */
function saidIn(store: Store, item: ProviderItem, seen: Set<string>): Entry[] {
  const content = typeof item.message.content === "string" ? item.message.content : "";
  if (!content.includes("[input ") || item.frameId === null || seen.has(item.frameId)) return [];
  const inputIds = getFrame(store, item.frameId)?.inputIds ?? [];
  if (inputIds.length === 0 || !content.includes(`[input ${inputIds[0]} from `)) return [];
  seen.add(item.frameId);
  return getInputs(store, inputIds).map((input) => {
    const body = bodyOf(input);
    return {
      ref: `input:${input.id}`,
      idx: item.idx,
      text: excerpt(body),
      step: true,
      author: input.author,
      conversation: input.conversationId,
    };
  });
}

/** The entries of one chunk of items, appended to `into`. */
function digestChunk(store: Store, session: string, items: ProviderItem[], into: Digest): void {
  const seen = new Set<string>();
  const calls: Call[] = [];
  for (const item of items) {
    const content = typeof item.message.content === "string" ? item.message.content : "";
    if (item.role === "user") into.said.entries.push(...saidIn(store, item, seen));
    if (item.role !== "assistant") continue;
    if (content !== "") {
      into.drafts.entries.push({
        ref: `item:${item.idx}`,
        idx: item.idx,
        text: excerpt(content),
        step: true,
      });
    }
    calls.push(...callsOf(item));
  }
  const idxOfCall = new Map(calls.map((call) => [call.id, call.idx]));
  const cells = cellsOfToolCalls(store, session, calls.map((call) => call.id));
  const idxOfCell = new Map<string, number>();
  for (const cell of cells) {
    const idx = idxOfCall.get(cell.toolCallId)!;
    idxOfCell.set(cell.id, idx);
    into.cells.entries.push({
      ref: `cell:${cell.id}`,
      idx,
      text: excerpt(cell.code.split("\n").find((line) => line.trim() !== "") ?? "", 200),
      step: true,
      state: cell.outcome ?? "running",
      ...(cell.output === "" ? {} : { output: excerpt(cell.output) }),
    });
  }
  for (const send of sendsOfCells(store, session, cells.map((cell) => cell.id))) {
    into.delivered.entries.push({
      ref: send.ref,
      idx: idxOfCell.get(send.cellId)!,
      text: excerpt(send.text),
      step: true,
      conversation: send.conversation,
      state: send.state,
    });
  }
}

/**
 * The digest of the items `after < idx <= through`, read in chunks so a long range never
 * holds more than one chunk of messages. Every entry is marked `step`.
 */
export function digestStep(
  store: Store,
  session: string,
  range: { after: number; through: number },
): Digest {
  const digest = emptyDigest();
  digest.coversToIdx = range.through;
  const CHUNK = 500;
  for (let from = range.after; from < range.through; from += CHUNK) {
    const items = readProviderRange(store, session, {
      after: from,
      through: Math.min(range.through, from + CHUNK),
    });
    digestChunk(store, session, items, digest);
    for (const name of SECTIONS) {
      const section = digest[name];
      section.entries.sort((a, b) => a.idx - b.idx);
      if (section.entries.length > MAX_STEP_ENTRIES) {
        absorbOldest(name, section, section.entries.length - MAX_STEP_ENTRIES);
      }
    }
  }
  return digest;
}

/**
 * The previous digest followed by the step's: the previous entries lose their `step` mark,
 * and Discord rows not yet final (`pending`, `attempting`, `unknown`) get their current state.
 */
export function foldDigest(store: Store, previous: Digest, step: Digest): Digest {
  const folded = emptyDigest();
  folded.coversToIdx = step.coversToIdx;
  for (const name of SECTIONS) {
    folded[name] = {
      earlier: previous[name].earlier,
      entries: [
        ...previous[name].entries.map(({ step: _, ...entry }) => entry),
        ...step[name].entries,
      ],
    };
  }
  // A row not yet final may have moved (an `unknown` one can be reconciled to `confirmed`).
  const open = folded.delivered.entries.filter((e) =>
    e.ref.startsWith("outbox:") && ["pending", "attempting", "unknown"].includes(e.state ?? "")
  );
  const states = outboxStates(store, open.map((e) => e.ref.slice("outbox:".length)));
  for (const entry of open) {
    entry.state = states.get(entry.ref.slice("outbox:".length)) ?? entry.state;
  }
  return folded;
}

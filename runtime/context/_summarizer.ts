/**
 * The model-written summary: the prompt the `long` route's model gets (the previous summary
 * and the step's items as JSON: each cell with its code and a bounded excerpt of what it
 * showed, the sends grouped by their real state), and the check its answer must pass before it
 * is used — the four headings in order, every send of the step named with its state under the
 * sent messages when it reached the conversation (`delivered`, `confirmed`) and under
 * {@linkcode UNREACHED_HEADING} otherwise, no sent message anywhere else, no draft among the
 * sent messages, no id that does not exist, and the length within the summary's share. A
 * failing answer is never used; the caller falls back to the extractive text and records why.
 *
 * @module
 */

import { estimateTokens } from "../../store/tables/provider_items.ts";
import type { ChatMessage } from "../model/mod.ts";
import { type Digest, reachedState, type SectionName, SECTIONS, sendGroup } from "./_digest.ts";
import { HEADINGS, UNREACHED_HEADING } from "./_render.ts";

/** The first words of the summarizer's system message (a fake model recognises it by them). */
const SUMMARIZER_MARKER = "[klbr summarizer]";

/** The states a sent message's line may carry. */
const SENT_STATES = ["delivered", "pending", "attempting", "confirmed", "failed", "unknown"];

const REF = /\[((?:input|send|outbox|item|cell|output|artifact|summary):[A-Za-z0-9_-]+)\]/g;

/** Every history ref a text names in [brackets]. */
export function refsIn(text: string): string[] {
  return [...text.matchAll(REF)].map((m) => m[1]);
}

/** One listed item of the material. */
export type MaterialItem = Record<string, unknown> & { id: string; text: string };

/** What the model is given, as JSON. */
export interface SummaryMaterial {
  covers: { from: number; to: number };
  previous_summary: string | null;
  new_items: {
    inputs: MaterialItem[];
    /** The step's sends by their real state; only `delivered` ones reached the conversation. */
    sent: Partial<Record<"delivered" | "failed" | "unknown" | "pending", MaterialItem[]>>;
    scratchpad: MaterialItem[];
    /** Each cell's first code line (`text`), `outcome` and what it showed (`output`). */
    cells: MaterialItem[];
  };
  /** Every send of the step, with its state and the heading it goes under. */
  must_name_as_sent: { id: string; state: string; heading: string }[];
  /** The four headings, in order. */
  headings: string[];
  /** Where the sends that did not reach the conversation go, right after the sent ones. */
  unreached_heading: string;
  max_chars: number;
}

/** Builds the material of one step: the previous summary's text and the step's entries. */
export function summaryMaterial(
  previous: string | null,
  step: Digest,
  maxChars: number,
): SummaryMaterial {
  const list = (name: SectionName, entries = step[name].entries): MaterialItem[] =>
    entries.map((e) => ({
      id: e.ref,
      text: e.text,
      ...(e.author === undefined ? {} : { author: e.author }),
      ...(e.conversation === undefined ? {} : { conversation: e.conversation }),
      ...(e.state === undefined ? {} : { [name === "cells" ? "outcome" : "state"]: e.state }),
      ...(e.output === undefined ? {} : { output: e.output }),
    }));
  const sent: SummaryMaterial["new_items"]["sent"] = {};
  for (const group of ["delivered", "failed", "unknown", "pending"] as const) {
    const entries = step.delivered.entries.filter((e) => sendGroup(e.state) === group);
    if (entries.length > 0) sent[group] = list("delivered", entries);
  }
  return {
    covers: { from: 1, to: step.coversToIdx },
    previous_summary: previous,
    new_items: {
      inputs: list("said"),
      sent,
      scratchpad: list("drafts"),
      cells: list("cells"),
    },
    must_name_as_sent: step.delivered.entries.map((e) => ({
      id: e.ref,
      state: e.state ?? "",
      heading: reachedState(e.state) ? HEADINGS.delivered : UNREACHED_HEADING,
    })),
    headings: SECTIONS.map((name) => HEADINGS[name]),
    unreached_heading: UNREACHED_HEADING,
    max_chars: maxChars,
  };
}

/** The two messages of a summarizer request. */
export function summarizerMessages(material: SummaryMaterial): ChatMessage[] {
  const [said, sent, drafts, cells] = material.headings;
  const unreached = material.unreached_heading;
  const system = [
    `${SUMMARIZER_MARKER} You write the context summary of a klbr agent's session. The agent`,
    "reads your summary instead of the items it covers, so it must keep apart what people said",
    "to the agent, what the agent SENT (only sends in state delivered or confirmed reached a",
    "person; failed ones did not, unknown ones may have, pending ones not yet), what stayed in its",
    "scratchpad (drafts nobody read), and which cells ran with which outcome and what they showed",
    "(keep what was learned: results, values, errors).",
    "You get the previous summary (covering the items before this step) and this step's items as",
    "JSON. Write one new summary covering both; it replaces the previous one.",
    `1. Use exactly these headings, each on its own line, in this order: "${said}", "${sent}",`,
    `"${drafts}", "${cells}"; when any send did not reach the conversation, put "${unreached}"`,
    `right after the entries of "${sent}". You may end with a line "Notes:" and what the agent`,
    "must remember.",
    '2. Each entry is a line starting with "- " that names its id in brackets, e.g. [send:12].',
    "3. Every id of must_name_as_sent goes under the heading given with it, with its state in",
    'parentheses, e.g. "(delivered)", "(confirmed)", "(failed)", "(unknown)", "(pending)".',
    `4. Never put a scratchpad note ([item:N]) under "${sent}" or "${unreached}", and never put a`,
    "sent message ([send:…] or [outbox:…]) anywhere else: a draft is not a message.",
    "5. Use only ids that appear in the previous summary or in the new items; older entries may",
    'be merged into one line such as "- earlier: 40 messages sent (…)".',
    `6. At most ${material.max_chars} characters in all. Answer with the summary only.`,
  ].join("\n");
  return [
    { role: "system", content: system },
    { role: "user", content: JSON.stringify(material) },
  ];
}

/** What a model-written summary is checked against. */
export interface SummaryExpectations {
  /** Every send of the step, by ref, with its state. */
  mustName: Map<string, string>;
  /** Every ref the summary may name: the previous summary's and the new digest's. */
  known: Set<string>;
  /** The whole text (header included) stays under this many raw tokens. */
  maxTokens: number;
  /** The header the host puts before the body. */
  header: string;
}

/** Splits a body into its sections by heading; a reason string when they are not as required. */
function sections(body: string): Map<string, string[]> | string {
  const required = SECTIONS.map((name) => HEADINGS[name]);
  const wanted = [...required, UNREACHED_HEADING, "Notes:"];
  const found = new Map<string, string[]>();
  let current: string[] | undefined;
  for (const raw of body.split("\n")) {
    const line = raw.trim();
    if (wanted.includes(line)) {
      if (found.has(line)) return `the heading "${line}" appears twice`;
      current = [];
      found.set(line, current);
      continue;
    }
    if (current === undefined) {
      if (line !== "") return `text before the first heading (got ${JSON.stringify(line)})`;
      continue;
    }
    if (line !== "") current.push(line);
  }
  const order = [...found.keys()];
  const main = order.filter((h) => required.includes(h));
  if (required.some((h) => !found.has(h)) || main.join() !== required.join()) {
    return `the headings must be ${required.map((h) => JSON.stringify(h)).join(", ")}, in this ` +
      `order (got ${order.map((h) => JSON.stringify(h)).join(", ") || "none"})`;
  }
  const after = order.indexOf(UNREACHED_HEADING);
  if (after >= 0 && order[after - 1] !== HEADINGS.delivered) {
    return `the heading "${UNREACHED_HEADING}" must come right after "${HEADINGS.delivered}"`;
  }
  return found;
}

/**
 * Checks a model-written summary body; returns why it may not be used, or `null` when it may.
 *
 * @example
 * ```ts
 * const reason = checkModelSummary(body, { mustName, known, maxTokens, header });
 * ```
 */
export function checkModelSummary(body: string, expect: SummaryExpectations): string | null {
  if (body.trim() === "") return "the summary is empty";
  const found = sections(body);
  if (typeof found === "string") return found;
  const sentHeadings = [HEADINGS.delivered, UNREACHED_HEADING];
  for (const [heading, lines] of found) {
    for (const line of lines) {
      for (const ref of refsIn(line)) {
        if (!expect.known.has(ref)) {
          return `it names ${ref}, which is neither in the previous summary nor in the new items`;
        }
        const sent = ref.startsWith("send:") || ref.startsWith("outbox:");
        if (sent && !sentHeadings.includes(heading)) {
          return `${ref} is a sent message but appears under "${heading}"`;
        }
        if (!sent && sentHeadings.includes(heading)) {
          return `${ref} is not a sent message but appears under "${heading}"`;
        }
        if (sent && !SENT_STATES.some((state) => line.includes(`(${state})`))) {
          return `${ref} is listed without its state in parentheses`;
        }
      }
    }
  }
  for (const [ref, state] of expect.mustName) {
    const heading = reachedState(state) ? HEADINGS.delivered : UNREACHED_HEADING;
    const lines = found.get(heading) ?? [];
    if (!lines.some((line) => refsIn(line).includes(ref) && line.includes(`(${state})`))) {
      return `${ref} is not named under "${heading}" with its state (${state})`;
    }
  }
  const tokens = estimateTokens(`${expect.header}\n${body}`);
  if (tokens > expect.maxTokens) {
    return `it is ${tokens} tokens, over the bound of ${expect.maxTokens}`;
  }
  return null;
}

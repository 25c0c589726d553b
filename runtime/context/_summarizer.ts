/**
 * The model-written summary: the prompt the `long` route's model gets (the previous summary
 * and the step's items as JSON), and the check its answer must pass before it is used —
 * the four headings in order, every send of the step named under the sent messages with its
 * state, no sent message anywhere else, no draft among the sent messages, no id that does not
 * exist, and the length within the summary's share. A failing answer is never used; the
 * caller falls back to the extractive text and records why.
 *
 * @module
 */

import { estimateTokens } from "../../store/provider_items.ts";
import type { ChatMessage, Provider, ProviderTurn } from "../model/mod.ts";
import { type Digest, type SectionName, SECTIONS } from "./_digest.ts";
import { HEADINGS } from "./_render.ts";

/** The first words of the summarizer's system message (a fake model recognises it by them). */
export const SUMMARIZER_MARKER = "[klbr summarizer]";

/** The states a sent message's line may carry. */
const SENT_STATES = ["delivered", "pending", "attempting", "confirmed", "failed", "unknown"];

const REF = /\[((?:input|send|outbox|item|cell|output|artifact|summary):[A-Za-z0-9_-]+)\]/g;

/** Every history ref a text names in [brackets]. */
export function refsIn(text: string): string[] {
  return [...text.matchAll(REF)].map((m) => m[1]);
}

/** What the model is given, as JSON. */
export interface SummaryMaterial {
  covers: { from: number; to: number };
  previous_summary: string | null;
  new_items: Record<"inputs" | "sent" | "scratchpad" | "cells", Record<string, unknown>[]>;
  must_name_as_sent: { id: string; state: string }[];
  headings: string[];
  max_chars: number;
}

/** Builds the material of one step: the previous summary's text and the step's entries. */
export function summaryMaterial(
  previous: string | null,
  step: Digest,
  maxChars: number,
): SummaryMaterial {
  const list = (name: SectionName) =>
    step[name].entries.map((e) => ({
      id: e.ref,
      text: e.text,
      ...(e.author === undefined ? {} : { author: e.author }),
      ...(e.conversation === undefined ? {} : { conversation: e.conversation }),
      ...(e.state === undefined ? {} : { [name === "cells" ? "outcome" : "state"]: e.state }),
    }));
  return {
    covers: { from: 1, to: step.coversToIdx },
    previous_summary: previous,
    new_items: {
      inputs: list("said"),
      sent: list("delivered"),
      scratchpad: list("drafts"),
      cells: list("cells"),
    },
    must_name_as_sent: step.delivered.entries.map((e) => ({ id: e.ref, state: e.state ?? "" })),
    headings: SECTIONS.map((name) => HEADINGS[name]),
    max_chars: maxChars,
  };
}

/** The two messages of a summarizer request. */
export function summarizerMessages(material: SummaryMaterial): ChatMessage[] {
  const [said, sent, drafts, cells] = material.headings;
  const system = [
    `${SUMMARIZER_MARKER} You write the context summary of a klbr agent's session. The agent`,
    "reads your summary instead of the items it covers, so it must keep apart what people said",
    "to the agent, what the agent SENT (the only things that reached a person), what stayed in",
    "its scratchpad (drafts nobody read), and which cells ran with which outcome.",
    "You get the previous summary (covering the items before this step) and this step's items as",
    "JSON. Write one new summary covering both; it replaces the previous one.",
    `1. Use exactly these headings, each on its own line, in this order: "${said}", "${sent}",`,
    `"${drafts}", "${cells}". You may end with a line "Notes:" and what the agent must remember.`,
    '2. Each entry is a line starting with "- " that names its id in brackets, e.g. [send:12].',
    `3. Every id of must_name_as_sent goes under "${sent}" with its state in parentheses, e.g.`,
    '"(delivered)", "(confirmed)", "(unknown)".',
    `4. Never put a scratchpad note ([item:N]) under "${sent}", and never put a sent message`,
    "([send:…] or [outbox:…]) anywhere else: a draft is not a message.",
    "5. Use only ids that appear in the previous summary or in the new items; older entries may",
    'be merged into one line such as "- earlier: 40 messages sent (…)".',
    `6. At most ${material.max_chars} characters in all. Answer with the summary only.`,
  ].join("\n");
  return [
    { role: "system", content: system },
    { role: "user", content: JSON.stringify(material) },
  ];
}

/**
 * Asks the `long` route's model for the summary body; resolves with its text.
 *
 * @throws {KlbrError} `provider_failed` from the provider; `invalid_input` when the model
 * answered with a tool call instead of text.
 */
export async function writeModelSummary(
  provider: Provider,
  material: SummaryMaterial,
  options: { signal: AbortSignal },
): Promise<ProviderTurn> {
  return await provider.streamChat(
    { messages: summarizerMessages(material), toolChoice: "none" },
    { signal: options.signal },
  );
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
  const wanted = [...SECTIONS.map((name) => HEADINGS[name]), "Notes:"];
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
  const required = wanted.slice(0, 4);
  if (required.some((h) => !found.has(h)) || order.slice(0, 4).join() !== required.join()) {
    return `the headings must be ${required.map((h) => JSON.stringify(h)).join(", ")}, in this ` +
      `order (got ${order.map((h) => JSON.stringify(h)).join(", ") || "none"})`;
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
  const sentHeading = HEADINGS.delivered;
  for (const [heading, lines] of found) {
    for (const line of lines) {
      for (const ref of refsIn(line)) {
        if (!expect.known.has(ref)) {
          return `it names ${ref}, which is neither in the previous summary nor in the new items`;
        }
        const sent = ref.startsWith("send:") || ref.startsWith("outbox:");
        if (sent && heading !== sentHeading) {
          return `${ref} is a sent message but appears under "${heading}"`;
        }
        if (!sent && heading === sentHeading) {
          return `${ref} is not a sent message but appears under "${sentHeading}"`;
        }
        if (sent && !SENT_STATES.some((state) => line.includes(`(${state})`))) {
          return `${ref} is listed without its state in parentheses`;
        }
      }
    }
  }
  const sentLines = found.get(sentHeading)!;
  for (const [ref, state] of expect.mustName) {
    if (!sentLines.some((line) => refsIn(line).includes(ref) && line.includes(`(${state})`))) {
      return `${ref} is not named as sent with its state (${state})`;
    }
  }
  const tokens = estimateTokens(`${expect.header}\n${body}`);
  if (tokens > expect.maxTokens) {
    return `it is ${tokens} tokens, over the bound of ${expect.maxTokens}`;
  }
  return null;
}

/**
 * The message a turn opens with: its inputs, each headed by who said it where, within a share
 * of the budget. An input too long for its share is cut and names the exact read that gives
 * it whole, so a burst of large inputs never makes a request larger than the budget.
 *
 * @module
 */

import { inputText } from "../../store/tables/history_sources.ts";
import type { InputRecord } from "../../store/tables/inputs.ts";
import { estimateTokens } from "../../store/tables/provider_items.ts";
import { clipToTokens } from "./_budget.ts";

/** The least share of the opening one input's body gets, in raw tokens. */
const MIN_INPUT_TOKENS = 48;

function header(input: InputRecord): string {
  return `[input ${input.id} from ${input.author} in ${input.conversationId}]`;
}

/**
 * An input's text: a string body as it is; a Discord body's text, then its details as JSON —
 * the text `history.read("input:<id>")` reads, so a cut's offset reads on from the cut.
 */
export function bodyOf(input: InputRecord): string {
  return inputText(input.body);
}

/**
 * Renders `inputs` as one user message of at most about `maxTokens` raw tokens. Each input
 * gets an equal share; one that does not fit its share is cut, with a note naming
 * `history.read("input:<id>")`. When not even every header fits, the rest are listed by id.
 *
 * @example
 * ```ts
 * const opening = renderInputs(frameInputs, limits.opening);
 * ```
 */
export function renderInputs(inputs: InputRecord[], maxTokens: number): Record<string, unknown> {
  const share = Math.max(MIN_INPUT_TOKENS, Math.floor(maxTokens / Math.max(1, inputs.length)));
  const parts: string[] = [];
  let used = 0;
  let shown = 0;
  // Room for the line that lists the inputs not shown, should there be any.
  const reserve = inputs.length > 1 ? 64 : 0;
  for (const input of inputs) {
    const head = header(input);
    const body = bodyOf(input);
    const clipped = clipToTokens(body, share);
    const part = clipped.length === body.length ? `${head}\n${body}` : `${head}\n${clipped}\n` +
      `[… cut here: this input is ${body.length} characters; await history.read(` +
      `"input:${input.id}", offset=${clipped.length}) reads on from here]`;
    const cost = estimateTokens(part);
    if (shown > 0 && used + cost > maxTokens - reserve) break;
    parts.push(part);
    used += cost;
    shown++;
  }
  if (shown < inputs.length) {
    const rest = inputs.slice(shown).map((input) => `input:${input.id}`);
    const listed = clipToTokens(rest.join(" "), Math.max(16, maxTokens - used - 40));
    parts.push(
      `[… ${rest.length} more inputs of this turn are not shown; read each with ` +
        `await history.read(id): ${listed}${listed.length < rest.join(" ").length ? " …" : ""}]`,
    );
  }
  return { role: "user", content: parts.join("\n\n") };
}

/** What heads the talk a plan read without answering, when a turn shows it. */
export const AMBIENT_HEADING =
  "[runtime] meanwhile in this conversation, read without answering (not addressed to you):";

/**
 * Renders the ambient talk a turn is shown before its inputs, within about `maxTokens` raw
 * tokens: a heading, then each input as {@linkcode renderInputs} shows it. Empty when there is
 * none.
 */
export function renderAmbient(inputs: InputRecord[], maxTokens: number): string {
  if (inputs.length === 0) return "";
  const body = renderInputs(inputs, maxTokens).content as string;
  return `${AMBIENT_HEADING}\n\n${body}`;
}

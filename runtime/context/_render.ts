/**
 * A digest as summary text, bounded: the four sections under fixed headings, each entry with
 * its history ref, older entries turned into "earlier" counts until the text fits its token
 * share. The newest step's entries go last, and its sends last of all, so a summary names every
 * send of the step it was written for unless not even their ids would fit. Only sends that
 * reached their conversation (`delivered`, `confirmed`) are under "Messages you sent (these
 * reached the conversation):"; failed, unknown and pending ones follow under
 * {@linkcode UNREACHED_HEADING}, each with its state.
 *
 * @module
 */

import { utf8Length } from "../../store/tables/provider_items.ts";
import type { SummarySource } from "../../store/tables/context_summaries.ts";
import {
  absorbOldest,
  type Digest,
  type Earlier,
  type Entry,
  excerpt,
  reachedState,
  type SectionName,
  SECTIONS,
} from "./_digest.ts";

/** The heading of each section; a model-written summary must use the same ones. */
export const HEADINGS: Record<SectionName, string> = {
  said: "Inputs you received:",
  delivered: "Messages you sent (these reached the conversation):",
  drafts: "Your scratchpad notes (never delivered to anyone):",
  cells: "Cells you ran:",
};

/** The heading of the sends that did not reach their conversation, or not yet, or may not have. */
export const UNREACHED_HEADING =
  "Messages that did not reach the conversation (failed), may not have (unknown) or not yet (pending):";

/** The two lines every summary starts with: what it covers, and how to reach what it left out. */
export function summaryHeader(coversTo: number, epoch: number, source: SummarySource): string {
  const by = source === "model" ? "written by the long model" : "extractive";
  return [
    `[summary of ${coversTo} earlier items, #1–#${coversTo}; epoch ${epoch}, ${by}]`,
    'Not in this request: `await history.search("words")` finds them by their words, ' +
    "`await history.read(id)` reads one exactly ([ids] below). Discord states: confirmed, " +
    "pending, failed (not posted), unknown (may have been posted).",
  ].join("\n");
}

function counts(by: Record<string, number>): string {
  return Object.entries(by).sort((a, b) => b[1] - a[1]).map(([k, n]) => `${n} ${k}`).join(", ");
}

/** The "earlier" counts of sends, split into those that reached the conversation and the rest. */
function splitEarlier(e: Earlier | null): { reached: Earlier | null; rest: Earlier | null } {
  if (e === null) return { reached: null, rest: null };
  const part = (keep: boolean): Earlier | null => {
    const by = Object.fromEntries(Object.entries(e.by).filter(([k]) => reachedState(k) === keep));
    const count = Object.values(by).reduce((a, b) => a + b, 0);
    return count === 0 ? null : { ...e, count, by };
  };
  return { reached: part(true), rest: part(false) };
}

function earlierLine(name: SectionName, e: Earlier): string {
  const range = `items #${e.fromIdx}–#${e.toIdx}`;
  switch (name) {
    case "said":
      return `- earlier: ${e.count} inputs (${range}; from ${counts(e.by)}), not listed`;
    case "delivered":
      return `- earlier: ${e.count} messages sent (${range}): ${counts(e.by)}`;
    case "drafts":
      return `- earlier: ${e.count} notes (${range}), never delivered`;
    case "cells":
      return `- earlier: ${e.count} cells (${range}): ${counts(e.by)}`;
  }
}

/** One entry's line. */
export function entryLine(name: SectionName, e: Entry): string {
  const text = e.text === "" ? "" : ` ${e.text}`;
  switch (name) {
    case "said":
      return `-${text} [${e.ref}] (${e.author} in ${e.conversation})`;
    case "delivered":
      return `- to ${e.conversation}:${text} (${e.state}) [${e.ref}]`;
    case "drafts":
      return `-${text} [${e.ref}]`;
    case "cells":
      return `-${text} → ${e.state}${e.output ? `: ${e.output}` : ""} [${e.ref}]`;
  }
}

/**
 * The lines of a section that are not its entries: its heading(s), "earlier" counts and the
 * "(none)" of an empty part. The sends are in two parts: `reached` and `rest` count the entries
 * of each ({@linkcode sectionLines} puts the entries in).
 */
function fixedLines(
  name: SectionName,
  earlier: Earlier | null,
  entries: { reached: number; rest: number },
): { head: string[]; restHead: string[] } {
  if (name !== "delivered") {
    const head = [HEADINGS[name], ...(earlier === null ? [] : [earlierLine(name, earlier)])];
    if (earlier === null && entries.reached + entries.rest === 0) head.push("- (none)");
    return { head, restHead: [] };
  }
  const split = splitEarlier(earlier);
  const head = [HEADINGS.delivered, ...(split.reached ? [earlierLine(name, split.reached)] : [])];
  if (split.reached === null && entries.reached === 0) head.push("- (none)");
  const restHead = split.rest === null && entries.rest === 0
    ? []
    : [UNREACHED_HEADING, ...(split.rest ? [earlierLine(name, split.rest)] : [])];
  return { head, restHead };
}

/** A section's lines in order; the sends that did not reach the conversation under their own heading. */
function sectionLines(name: SectionName, section: Digest[SectionName]): string[] {
  const apart = name === "delivered";
  const reached = section.entries.filter((e) => !apart || reachedState(e.state));
  const rest = apart ? section.entries.filter((e) => !reachedState(e.state)) : [];
  const { head, restHead } = fixedLines(name, section.earlier, {
    reached: reached.length,
    rest: rest.length,
  });
  return [
    ...head,
    ...reached.map((e) => entryLine(name, e)),
    ...restHead,
    ...rest.map((e) => entryLine(name, e)),
  ];
}

/** Renders a digest under `header`, unbounded. */
export function renderDigest(digest: Digest, header: string): string {
  return [header, ...SECTIONS.flatMap((name) => sectionLines(name, digest[name]))].join("\n");
}

/** A section's rendered size, kept current as entries are absorbed or shortened. */
class SectionSize {
  #lines: number[];
  #entries = 0;
  #fixed = 0;
  /** Entries of the sends that did not reach the conversation (0 in other sections). */
  #rest: number;

  constructor(readonly name: SectionName, readonly section: Digest[SectionName]) {
    this.#lines = section.entries.map((entry) => utf8Length(entryLine(name, entry)) + 1);
    this.#entries = this.#lines.reduce((a, b) => a + b, 0);
    this.#rest = name === "delivered"
      ? section.entries.filter((e) => !reachedState(e.state)).length
      : 0;
    this.#refix();
  }

  get bytes(): number {
    return this.#fixed + this.#entries;
  }

  #refix(): void {
    const rest = this.#rest;
    const { head, restHead } = fixedLines(this.name, this.section.earlier, {
      reached: this.section.entries.length - rest,
      rest,
    });
    this.#fixed = [...head, ...restHead].reduce((n, line) => n + utf8Length(line) + 1, 0);
  }

  /** Moves the oldest entry into the "earlier" counts. */
  absorb(): void {
    if (this.name === "delivered" && !reachedState(this.section.entries[0]?.state)) this.#rest--;
    absorbOldest(this.name, this.section, 1);
    this.#entries -= this.#lines.shift()!;
    this.#refix();
  }

  /** Cuts every entry's text (and a cell's output) to `max` characters (0: the ref alone). */
  shorten(max: number): void {
    this.section.entries.forEach((entry, i) => {
      entry.text = max === 0 ? "" : excerpt(entry.text, max);
      if (entry.output !== undefined) {
        if (max === 0) delete entry.output;
        else entry.output = excerpt(entry.output, max);
      }
      const bytes = utf8Length(entryLine(this.name, entry)) + 1;
      this.#entries += bytes - this.#lines[i];
      this.#lines[i] = bytes;
    });
  }
}

/** The raw token estimate of text of `bytes` UTF-8 bytes (as `estimateTokens` counts it). */
const tokensOf = (bytes: number) => Math.floor((bytes + 3) / 4) + 4;

/**
 * Renders `digest` under `header` within `maxTokens` raw tokens: first older entries become
 * counts (largest section first), then the step's texts shrink (120, then 40 characters; the
 * sends' last), then the other sections' texts go (the ref stays) and their oldest entries
 * become counts, and only then the sends' texts and, last of all, sends. Returns the text and
 * the digest as bounded (the next fold starts there).
 */
export function renderBounded(
  input: Digest,
  header: string,
  maxTokens: number,
): { text: string; digest: Digest; tokens: number } {
  const digest = structuredClone(input);
  const headerBytes = utf8Length(header);
  const sizes = Object.fromEntries(
    SECTIONS.map((name) => [name, new SectionSize(name, digest[name])]),
  ) as Record<SectionName, SectionSize>;
  const total = () => tokensOf(headerBytes + SECTIONS.reduce((n, s) => n + sizes[s].bytes, 0));
  // 1. Older entries (not of this step), from the largest section.
  while (total() > maxTokens) {
    const older = SECTIONS.filter((s) =>
      digest[s].entries.length > 0 && digest[s].entries[0].step !== true
    );
    if (older.length === 0) break;
    sizes[older.reduce((a, b) => (sizes[a].bytes >= sizes[b].bytes ? a : b))].absorb();
  }
  // 2. Shorter texts for the step's entries: sends keep theirs longest.
  const shorten = (names: readonly SectionName[], max: number) => {
    if (total() > maxTokens) { for (const name of names) sizes[name].shorten(max); }
  };
  const others = ["said", "drafts", "cells"] as const;
  for (const max of [120, 40]) shorten(others, max);
  for (const max of [120, 40]) shorten(["delivered"], max);
  // 3. The step's own entries (notes, cells, inputs), then the sends' texts, then sends.
  for (const name of others) shorten([name], 0);
  for (const name of ["drafts", "cells", "said"] as const) {
    while (total() > maxTokens && digest[name].entries.length > 0) sizes[name].absorb();
  }
  shorten(["delivered"], 0);
  while (total() > maxTokens && digest.delivered.entries.length > 0) sizes.delivered.absorb();
  const text = renderDigest(digest, header);
  return { text, digest, tokens: tokensOf(utf8Length(text)) };
}

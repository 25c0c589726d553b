/**
 * A digest as summary text, bounded: the four sections under fixed headings, each entry with
 * its history ref, older entries turned into "earlier" counts until the text fits its token
 * share. The newest step's entries go last, and its sends last of all, so a summary names every
 * send of the step it was written for unless not even their ids would fit.
 *
 * @module
 */

import { utf8Length } from "../../store/provider_items.ts";
import type { SummarySource } from "../../store/context_summaries.ts";
import {
  absorbOldest,
  type Digest,
  type Earlier,
  type Entry,
  excerpt,
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
      return `-${text} → ${e.state} [${e.ref}]`;
  }
}

/** Renders a digest under `header`, unbounded. */
export function renderDigest(digest: Digest, header: string): string {
  const lines = [header];
  for (const name of SECTIONS) {
    const section = digest[name];
    lines.push(HEADINGS[name]);
    if (section.earlier !== null) lines.push(earlierLine(name, section.earlier));
    for (const entry of section.entries) lines.push(entryLine(name, entry));
    if (section.earlier === null && section.entries.length === 0) lines.push("- (none)");
  }
  return lines.join("\n");
}

/** A section's rendered size, kept current as entries are absorbed or shortened. */
class SectionSize {
  #lines: number[];
  #entries = 0;
  #fixed = 0;

  constructor(readonly name: SectionName, readonly section: Digest[SectionName]) {
    this.#lines = section.entries.map((entry) => utf8Length(entryLine(name, entry)) + 1);
    this.#entries = this.#lines.reduce((a, b) => a + b, 0);
    this.#refix();
  }

  get bytes(): number {
    return this.#fixed + this.#entries;
  }

  #refix(): void {
    const { earlier, entries } = this.section;
    this.#fixed = utf8Length(HEADINGS[this.name]) + 1 +
      (earlier === null ? 0 : utf8Length(earlierLine(this.name, earlier)) + 1) +
      (earlier === null && entries.length === 0 ? 9 : 0);
  }

  /** Moves the oldest entry into the "earlier" counts. */
  absorb(): void {
    absorbOldest(this.name, this.section, 1);
    this.#entries -= this.#lines.shift()!;
    this.#refix();
  }

  /** Cuts every entry's text to `max` characters (0: the ref alone). */
  shorten(max: number): void {
    this.section.entries.forEach((entry, i) => {
      entry.text = max === 0 ? "" : excerpt(entry.text, max);
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

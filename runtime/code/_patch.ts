/**
 * Checked patches: a set of edits, each on a version-bound range, applied to every file they
 * touch or to none. Refused when any range is stale or when the result of a file has more
 * syntax errors than the file had; the files are then untouched.
 *
 * @module
 */

import { dirname } from "node:path";
import { KlbrError } from "../core/mod.ts";
import { refuseProtected } from "../sandbox/mod.ts";
import { syncPath } from "../../store/tables/files.ts";
import { countSyntaxErrors, type SyntaxProblem } from "./_outline.ts";
import type { CodeEdit, CodeRange } from "./_schemas.ts";
import { checkRange, type CodeService, type StaleRange } from "./_service.ts";
import { type Source, sourceFromBytes, utf8 } from "./_source.ts";
import { fileWriter } from "./_write.ts";

type Span = Pick<CodeRange, "start_byte" | "end_byte" | "start_line" | "end_line">;

/** What a patch did to one file (a type, not an interface: it is a record body). */
export type PatchedFile = {
  path: string;
  before_hash: string;
  after_hash: string;
  /** Whether a grammar re-parsed the result (files without one are patched unchecked). */
  syntax_checked: boolean;
  /** Each edit's span before and after, in file order. */
  edits: { before: Span; after: Span }[];
};

/** A file whose patched text would have more syntax errors than it has. */
export interface SyntaxRefusal {
  path: string;
  errors_before: number;
  errors_after: number;
  /** The first errors of the patched text. */
  problems: SyntaxProblem[];
}

/** The answer to a patch: applied with the new ranges, or why nothing was written. */
export type PatchOutcome =
  | { ok: true; files: PatchedFile[]; ranges: CodeRange[] }
  | { ok: false; reason: "stale"; stale: StaleRange[] }
  | { ok: false; reason: "syntax"; refusals: SyntaxRefusal[] };

interface FilePlan {
  source: Source;
  /** Indices into the patch's edits, in file order. */
  order: number[];
  after: Source;
  file: PatchedFile;
}

async function readTargets(service: CodeService, edits: CodeEdit[]) {
  const byReal = new Map<string, { source: Source; order: number[] }>();
  for (const [i, edit] of edits.entries()) {
    const source = await service.source(edit.range.path, `patch ${edit.range.path}`);
    refuseProtected(service.readOnly, source.real, source.path);
    const entry = byReal.get(source.real) ?? { source, order: [] };
    entry.order.push(i);
    byReal.set(source.real, entry);
  }
  return [...byReal.values()];
}

function staleOf(targets: { source: Source; order: number[] }[], edits: CodeEdit[]) {
  const stale: StaleRange[] = [];
  for (const { source, order } of targets) {
    const bad = order.find((i) => edits[i].range.hash !== source.hash);
    if (bad !== undefined) {
      stale.push({
        path: source.path,
        range_hash: edits[bad].range.hash,
        current_hash: source.hash,
      });
    }
  }
  return stale;
}

/** Builds one file's new bytes and each edit's new range. */
async function planFile(
  source: Source,
  order: number[],
  edits: CodeEdit[],
  ranges: CodeRange[],
): Promise<FilePlan> {
  order.sort((a, b) => edits[a].range.start_byte - edits[b].range.start_byte || a - b);
  const parts: Uint8Array[] = [];
  const spans: { index: number; start: number; end: number }[] = [];
  let at = 0;
  let length = 0;
  for (const i of order) {
    const range = edits[i].range;
    checkRange(source, range, "patch");
    if (range.start_byte < at) {
      throw new KlbrError(
        "invalid_input",
        `cannot patch ${source.path}: two edits overlap (got bytes ${range.start_byte}-${range.end_byte} inside an earlier edit ending at ${at})`,
      );
    }
    const text = utf8(edits[i].text);
    parts.push(source.bytes.subarray(at, range.start_byte), text);
    length += range.start_byte - at;
    spans.push({ index: i, start: length, end: length + text.length });
    length += text.length;
    at = range.end_byte;
  }
  parts.push(source.bytes.subarray(at));
  const bytes = await new Blob(parts as BlobPart[]).bytes();
  const after = await sourceFromBytes(source.path, source.real, bytes);
  const file: PatchedFile = {
    path: source.path,
    before_hash: source.hash,
    after_hash: after.hash,
    syntax_checked: false,
    edits: [],
  };
  for (const span of spans) {
    const before = edits[span.index].range;
    const now = after.range(span.start, span.end);
    ranges[span.index] = now;
    file.edits.push({ before: spanOf(before), after: spanOf(now) });
  }
  return { source, order, after, file };
}

function spanOf(r: CodeRange): Span {
  return {
    start_byte: r.start_byte,
    end_byte: r.end_byte,
    start_line: r.start_line,
    end_line: r.end_line,
  };
}

/** Compares the syntax errors before and after; null when the patch adds none. */
async function syntaxCheck(service: CodeService, plan: FilePlan): Promise<SyntaxRefusal | null> {
  const before = await service.parsed(plan.source);
  if (before === null) return null;
  // Count now: the next parse may evict this tree.
  const errorsBefore = countSyntaxErrors(before.cached.tree.rootNode, plan.source, 0).count;
  const after = await service.parsed(plan.after);
  if (after === null) return null;
  plan.file.syntax_checked = true;
  const { count, problems } = countSyntaxErrors(after.cached.tree.rootNode, plan.after);
  if (count <= errorsBefore) return null;
  return { path: plan.source.path, errors_before: errorsBefore, errors_after: count, problems };
}

/**
 * Applies `edits` to the workspace, all or none, and returns the new range of each edit (in
 * the order given). Runs under the service's patch lock, so patches never interleave.
 *
 * On return with `ok: true` every touched file holds its new text (each written to a temp
 * file in its directory, fsynced, renamed over the old one; the directory fsynced; where the
 * service has a sandbox, the temp file is made, written and renamed by a confined process, so a
 * directory swapped for a link after the path check cannot carry the write out: "a confined
 * daemon's patch never writes through a directory swapped for a symlink after its path check"
 * in `tests/runtime/code/patch_confined.test.ts`). With
 * `ok: false`, and when it throws, every file holds its old text. A crash between two files'
 * renames can leave the first renamed: that window is not covered. Proven by "a patch_many
 * with one bad edit leaves every file byte-identical" in `tests/runtime/code/patch.test.ts`.
 *
 * @throws {KlbrError} `invalid_input` for overlapping edits or a range that does not fit its
 * file; the path check's codes; `forbidden` for a read-only path (nothing is written); `internal` when writing or renaming fails (the files already
 * renamed are restored first). The `code.patch` record is the caller's, committed after the
 * renames: a crash between the two leaves the files patched without their record.
 */
export function applyPatch(service: CodeService, edits: CodeEdit[]): Promise<PatchOutcome> {
  return service.exclusive(async () => {
    const targets = await readTargets(service, edits);
    const stale = staleOf(targets, edits);
    if (stale.length > 0) return { ok: false, reason: "stale", stale };
    const ranges: CodeRange[] = new Array(edits.length);
    const plans: FilePlan[] = [];
    for (const t of targets) plans.push(await planFile(t.source, t.order, edits, ranges));
    const refusals: SyntaxRefusal[] = [];
    for (const plan of plans) {
      const refusal = await syntaxCheck(service, plan);
      if (refusal !== null) refusals.push(refusal);
    }
    if (refusals.length > 0) return { ok: false, reason: "syntax", refusals };
    const moved = await writeAll(service, plans);
    if (moved !== null) return { ok: false, reason: "stale", stale: moved };
    return { ok: true, files: plans.map((p) => p.file), ranges };
  });
}

/**
 * Writes every plan's new bytes beside its file, checks no file moved meanwhile, renames
 * them into place. Returns the files that changed under the patch (nothing renamed), or null.
 */
async function writeAll(service: CodeService, plans: FilePlan[]): Promise<StaleRange[] | null> {
  const writer = fileWriter(service.root, service.sandbox);
  const temps: string[] = [];
  let renamed = 0;
  try {
    for (const plan of plans) temps.push(await writer.temp(plan.source.real, plan.after.bytes));
    const moved: StaleRange[] = [];
    for (const plan of plans) {
      const now = await service.source(plan.source.path, `patch ${plan.source.path}`);
      if (now.hash !== plan.source.hash) {
        moved.push({ path: now.path, range_hash: plan.source.hash, current_hash: now.hash });
      }
    }
    if (moved.length > 0) return moved;
    for (; renamed < plans.length; renamed++) {
      await writer.rename(temps[renamed], plans[renamed].source.real);
    }
  } catch (cause) {
    // Nothing renamed yet: the refusal (a path check, say) is the answer as it stands.
    if (renamed === 0 && cause instanceof KlbrError) throw cause;
    for (let i = 0; i < renamed; i++) {
      const back = await writer.temp(plans[i].source.real, plans[i].source.bytes);
      await writer.rename(back, plans[i].source.real);
    }
    throw new KlbrError(
      "internal",
      `cannot patch ${
        plans[renamed]?.source.path ?? "files"
      }: writing failed; the files are unchanged`,
      { cause },
    );
  } finally {
    for (let i = renamed; i < temps.length; i++) await writer.remove(temps[i]);
  }
  for (const dir of new Set(plans.map((p) => dirname(p.source.real)))) await syncPath(dir);
  return null;
}

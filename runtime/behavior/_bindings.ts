/**
 * Hook bindings: a release's `hooks.json` names, per hook, the file and function that serve
 * it instead of the default (`attention.py:plan`, `model.py:plan`, `context.py:prepare`,
 * `turn.py:next`). The workbench reads it when it loads a hook (`klbr.hooks.read_bindings`,
 * the same rules); `hooks.bind` in a cell writes it into a draft through here.
 *
 * @module
 */

import { join } from "node:path";
import { z } from "zod";
import { replaceFile } from "../../store/tables/files.ts";
import { HookName, KlbrError } from "../core/mod.ts";

/** The file of a release that binds hooks to functions. */
export const BINDINGS_FILE = "hooks.json";

/** `file.py:function`, the file relative and inside the release, without dot segments. */
export const BindingTarget = z.string().max(256).regex(
  /^[A-Za-z0-9_][A-Za-z0-9_./-]*\.py:[A-Za-z_][A-Za-z0-9_]*$/,
  "expected file.py:function",
).refine(
  (t) => t.split(":")[0].split("/").every((p) => p !== "" && !p.startsWith(".")),
  "the file must be inside the release, without dot segments",
);

const Bindings = z.partialRecord(HookName, BindingTarget);

/**
 * Binds `hook` to `target` in the draft at `dir`, keeping its other bindings, and returns
 * every binding of the draft.
 *
 * @throws {KlbrError} `invalid_input` for a malformed target or a `hooks.json` that is not a
 * valid bindings object; `not_found` when the target's file is not in the draft.
 * @example
 * ```ts
 * await bindHook(draftDir, "turn.next", "policy.py:decide"); // { "turn.next": "policy.py:decide" }
 * ```
 */
export async function bindHook(
  dir: string,
  hook: HookName,
  target: string,
): Promise<Record<string, string>> {
  const parsed = BindingTarget.safeParse(target);
  if (!parsed.success) {
    throw new KlbrError(
      "invalid_input",
      `cannot bind ${hook}: ${parsed.error.issues[0].message} (got ${JSON.stringify(target)})`,
    );
  }
  const file = target.split(":")[0];
  try {
    if (!(await Deno.lstat(join(dir, file))).isFile) throw new Deno.errors.NotFound();
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
    throw new KlbrError("not_found", `cannot bind ${hook}: the draft has no file ${file}`);
  }
  const bindings = { ...(await readBindings(dir)), [hook]: target };
  const sorted = Object.fromEntries(Object.entries(bindings).sort(([a], [b]) => a < b ? -1 : 1));
  const text = `${JSON.stringify(sorted, null, 2)}\n`;
  await replaceFile(join(dir, BINDINGS_FILE), text, { mode: 0o644 });
  return sorted;
}

/**
 * The bindings of the tree at `dir`; `{}` without a `hooks.json`.
 *
 * @throws {KlbrError} `invalid_input` when the file is not a bindings object.
 */
export async function readBindings(dir: string): Promise<Record<string, string>> {
  let text: string;
  try {
    text = await Deno.readTextFile(join(dir, BINDINGS_FILE));
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return {};
    throw error;
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  const parsed = Bindings.safeParse(value);
  if (!parsed.success) {
    throw new KlbrError(
      "invalid_input",
      `cannot read ${BINDINGS_FILE}: it must map hook names to file.py:function (got ${
        text.slice(0, 120)
      })`,
    );
  }
  return parsed.data as Record<string, string>;
}

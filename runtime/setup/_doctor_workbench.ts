/**
 * `doctor`'s workbench check: imports the workbench package with the interpreter the daemon
 * will run, in the environment a worker gets, and imports every hook of a behaviour release
 * the way a hook worker loads it. Nothing is started but that one Python process.
 *
 * @module
 */

import { join } from "node:path";
import { z } from "zod";
import { WorkerFingerprint } from "../kernel/mod.ts";

const SCRIPT = `
import json, sys, traceback
out = {}
try:
    import klbr.kernel
    import klbr.fingerprint
    out["fingerprint"] = klbr.fingerprint.LOADED
except BaseException as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
    out["traceback"] = traceback.format_exc()[-2000:]
    print(json.dumps(out))
    sys.exit(0)
from klbr.errors import RequestError
from klbr.hooks import HOOKS, load_hook
out["hooks"] = []
if sys.argv[1]:
    for name in HOOKS:
        try:
            load_hook(name, {"revision": "doctor", "path": sys.argv[1]})
            out["hooks"].append({"hook": name, "ok": True})
        except RequestError as exc:
            out["hooks"].append({"hook": name, "ok": False, "error": exc.message})
print(json.dumps(out))
`;

const Report = z.object({
  fingerprint: WorkerFingerprint.optional(),
  error: z.string().optional(),
  traceback: z.string().optional(),
  hooks: z.array(z.object({ hook: z.string(), ok: z.boolean(), error: z.string().optional() }))
    .optional(),
});

/** What the check found. */
export interface WorkbenchCheck {
  /** Lines to print as they are. */
  lines: string[];
  /** One line per problem. */
  problems: string[];
}

/**
 * Imports the workbench package under `<repoRoot>/workbench` with `python`, then (when
 * `release` is given) each hook of the tree at `release.path`.
 *
 * @example
 * ```ts
 * const { lines, problems } = await checkWorkbench("python3", REPO_ROOT, { label, path });
 * ```
 */
export async function checkWorkbench(
  python: string,
  repoRoot: string,
  release: { label: string; path: string } | null,
): Promise<WorkbenchCheck> {
  const lines: string[] = [];
  const problems: string[] = [];
  let output: Deno.CommandOutput;
  try {
    output = await new Deno.Command(python, {
      args: ["-c", SCRIPT, release?.path ?? ""],
      clearEnv: true,
      env: {
        PATH: Deno.env.get("PATH") ?? "/usr/local/bin:/usr/bin:/bin",
        PYTHONPATH: join(repoRoot, "workbench"),
        PYTHONDONTWRITEBYTECODE: "1",
        LANG: "C.UTF-8",
      },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
  } catch (error) {
    problems.push(`workbench: cannot run ${python} (${String(error)})`);
    return { lines, problems };
  }
  const text = new TextDecoder().decode(output.stdout).trim().split("\n").at(-1) ?? "";
  let parsed: z.infer<typeof Report> | undefined;
  try {
    parsed = Report.parse(JSON.parse(text));
  } catch {
    const stderr = new TextDecoder().decode(output.stderr).trim().slice(-300);
    problems.push(`workbench: ${python} did not report (exit ${output.code}): ${stderr}`);
    return { lines, problems };
  }
  if (parsed.error !== undefined || parsed.fingerprint === undefined) {
    problems.push(
      `workbench package ${join(repoRoot, "workbench", "klbr")} does not import with ${python}: ${
        parsed.error ?? "no fingerprint"
      }`,
    );
    const last = parsed.traceback?.trim().split("\n").slice(-3).join(" | ");
    if (last) lines.push(`  ${last}`);
    return { lines, problems };
  }
  const f = parsed.fingerprint;
  lines.push(
    `workbench package ${
      f.package.slice(0, 12)
    } imports with python ${f.version} at ${f.executable}`,
  );
  if (release !== null) {
    const failing = (parsed.hooks ?? []).filter((h) => !h.ok);
    lines.push(
      `hooks of ${release.label}: ${
        (parsed.hooks ?? []).map((h) => `${h.hook} ${h.ok ? "ok" : "FAILS"}`).join(", ")
      }`,
    );
    for (const hook of failing) {
      problems.push(`hook ${hook.hook} of ${release.label}: ${hook.error}`);
    }
  }
  return { lines, problems };
}

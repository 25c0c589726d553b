/**
 * The fault-injection seam: named points in the daemon where a test makes it SIGKILL itself,
 * stall, or fail the I/O it is about to do. `docs/faults.md` gives the `KLBR_FAULTS` syntax
 * (`artifact-write=fail@1,store-commit=fail@3-5`), what each action does, and every point.
 *
 * In production the variable is unset: {@linkcode FAULTS} is `null`, and every point is one
 * branch on that constant.
 *
 * @module
 */

/** Every named fault point; the table in `docs/faults.md` says where each one is. */
const FAULT_POINTS = [
  "commit-before-notify",
  "admitted-before-index",
  "publish-before-reply",
  "enqueue-before-reply",
  "wait-before-wake",
  "activation-during-cell",
  "artifact-write",
  "frame-write",
  "store-commit",
] as const;

/** One of {@linkcode FAULT_POINTS}. */
export type FaultPoint = (typeof FAULT_POINTS)[number];

/** What a fault does when it fires. */
type FaultAction = "kill" | "fail" | "stall";

interface FaultRule {
  action: FaultAction;
  from: number;
  to: number;
  hits: number;
}

const STALL_MS = 600_000;

/**
 * Parses a `KLBR_FAULTS` value into its rules by point.
 *
 * @throws {Error} naming the bad entry; a test that misspells a point must not pass quietly.
 * @example
 * ```ts
 * parseFaults("artifact-write=fail@1"); // Map { "artifact-write" => { action: "fail", from: 1, to: 1 } }
 * ```
 */
function parseFaults(spec: string): Map<FaultPoint, FaultRule> {
  const rules = new Map<FaultPoint, FaultRule>();
  for (const entry of spec.split(",").map((s) => s.trim()).filter(Boolean)) {
    const match = /^([a-z-]+)=(kill|fail|stall)(?:@(\d+)(-(\d+)?)?)?$/.exec(entry);
    if (match === null || !(FAULT_POINTS as readonly string[]).includes(match[1])) {
      throw new Error(
        `cannot read KLBR_FAULTS: expected point=kill|fail|stall[@N[-M]] with a point of ${
          FAULT_POINTS.join(", ")
        } (got ${JSON.stringify(entry)})`,
      );
    }
    const from = match[3] === undefined ? 1 : Number(match[3]);
    const to = match[3] === undefined || match[4] === "-"
      ? Infinity
      : match[5] === undefined
      ? from
      : Number(match[5]);
    rules.set(match[1] as FaultPoint, { action: match[2] as FaultAction, from, to, hits: 0 });
  }
  return rules;
}

function readSpec(): Map<FaultPoint, FaultRule> | null {
  // The UI bundle imports core's types only; outside Deno there is no seam at all.
  if (typeof Deno === "undefined") return null;
  let spec: string | undefined;
  try {
    spec = Deno.env.get("KLBR_FAULTS");
  } catch {
    return null; // no env permission: no faults
  }
  return spec ? parseFaults(spec) : null;
}

/** The active fault rules, read once at start; `null` in production. */
const FAULTS: ReadonlyMap<FaultPoint, FaultRule> | null = readSpec();

/** The action due at this hit of `point`, if any; counts the hit. */
function due(point: FaultPoint): FaultAction | undefined {
  const rule = FAULTS!.get(point);
  if (rule === undefined) return undefined;
  rule.hits++;
  if (rule.hits < rule.from || rule.hits > rule.to) return undefined;
  const line = `klbr-fault: ${point} ${rule.action} (hit ${rule.hits})\n`;
  Deno.stderr.writeSync(new TextEncoder().encode(line));
  if (rule.action === "kill") {
    try {
      Deno.kill(Deno.pid, "SIGKILL");
    } catch {
      // Under a scoped --allow-run, Deno.kill is refused; the `kill` program is allowed.
      new Deno.Command("kill", { args: ["-KILL", String(Deno.pid)] }).outputSync();
    }
    // SIGKILL is not delivered synchronously on every platform: never run past the point.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, STALL_MS);
  }
  return rule.action;
}

/**
 * A synchronous fault point: returns at once unless `KLBR_FAULTS` names it. `kill` never
 * returns; `stall` blocks the whole daemon (like a stuck disk); `fail` throws `fail()`.
 *
 * @throws {Error} what `fail` returns, when the point's rule says `fail`.
 * @example
 * ```ts
 * faultPoint("store-commit", () => sqliteFull());
 * ```
 */
export function faultPoint(point: FaultPoint, fail?: () => Error): void {
  if (FAULTS === null) return;
  const action = due(point);
  if (action === "stall") Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, STALL_MS);
  if (action === "fail") throw fail?.() ?? new Error(`injected fault at ${point}`);
}

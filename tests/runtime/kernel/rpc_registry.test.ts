// The host RPC registry and its dispatcher, against the real workbench: a name is declared
// once, a role not allowed is refused, bad arguments are named, and an unexpected failure is
// logged with its stack and answered `internal`.

import assert from "node:assert/strict";
import { join } from "node:path";
import { z } from "zod";
import { createLogger, isKlbrError, newId } from "../../../runtime/core/mod.ts";
import {
  bindRpcs,
  type BoundRpc,
  defineRpc,
  KernelSupervisor,
  type ProcessRole,
  resolvePython,
  type RpcCall,
  RpcRegistry,
} from "../../../runtime/kernel/mod.ts";
import { REPO_ROOT } from "../../../runtime/setup/mod.ts";

const PYTHON = (await resolvePython("python3")).executable;

/** `test.add`: adds `by` to a counter; only a cell may call it. */
const addRpc = defineRpc({
  name: "test.add",
  summary: "Adds to a counter.",
  roles: ["workbench"],
  refusal: "only a cell counts",
  args: z.strictObject({ by: z.int().positive() }),
  reply: z.strictObject({ total: z.int() }),
  handler: (p, { deps }: RpcCall<{ total: number; fail?: "throw" | "reply" }>) => {
    if (deps.fail === "throw") throwUnexpected();
    deps.total += p.by;
    return deps.fail === "reply" ? { total: String(deps.total) as unknown as number } : {
      total: deps.total,
    };
  },
});

/** A named function, so its frame can be found in the logged stack. */
function throwUnexpected(): never {
  throw new TypeError("the counter is not a number");
}

/** Runs `code` in a fresh workbench of `role` serving `rpc`; returns the cell's error and the log. */
async function inCell(
  code: string,
  options: { rpc: BoundRpc[]; role?: ProcessRole },
): Promise<{ error: string | null; value: string | null; logged: Record<string, unknown>[] }> {
  const dir = await Deno.realPath(await Deno.makeTempDir({ prefix: "klbr-rpc-registry-" }));
  const logged: Record<string, unknown>[] = [];
  const kernel = new KernelSupervisor({
    python: PYTHON,
    session: "test",
    workspace: dir,
    repoRoot: REPO_ROOT,
    skillRoots: { builtinRoot: join(dir, "skills"), managedRoot: join(dir, "managed") },
    recordGeneration: () => {},
    role: options.role,
    rpc: options.rpc,
    log: createLogger({ format: "json", write: (line) => void logged.push(JSON.parse(line)) }),
  });
  try {
    const result = await kernel.execute(newId("cell"), `from klbr import rpc\n${code}`, {
      timeoutMs: 20_000,
    });
    return { error: result.error?.message ?? null, value: result.value, logged };
  } finally {
    await kernel.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("an rpc name declared twice is refused", () => {
  const twice = [...bindRpcs([addRpc], { total: 0 }), ...bindRpcs([addRpc], { total: 0 })];
  assert.throws(
    () => new RpcRegistry(twice),
    (e) =>
      isKlbrError(e, "invalid_config") &&
      e.message === 'cannot register rpc: the name is declared twice (got "test.add")',
  );
});

Deno.test("a role the rpc does not allow is refused forbidden, naming why; its handler never runs", async () => {
  const deps = { total: 0 };
  const job = await inCell("await rpc.call('test.add', {'by': 2})", {
    rpc: bindRpcs([addRpc], deps),
    role: "job",
  });
  assert.equal(
    job.error,
    "test.add failed (forbidden): cannot call test.add from a job: only a cell counts (got role job)",
  );
  assert.equal(deps.total, 0);
  const cell = await inCell("(await rpc.call('test.add', {'by': 2}))['total']", {
    rpc: bindRpcs([addRpc], deps),
  });
  assert.equal(cell.error, null);
  assert.equal(cell.value, "2");
});

Deno.test("bad arguments are refused invalid_input, naming the field and the problem", async () => {
  const deps = { total: 0 };
  const bad = await inCell("await rpc.call('test.add', {'by': 'three'})", {
    rpc: bindRpcs([addRpc], deps),
  });
  assert.equal(
    bad.error,
    "test.add failed (invalid_input): cannot call test.add: by: Invalid input: expected " +
      'number, received string (got {"by":"three"})',
  );
  assert.equal(deps.total, 0);
  assert.deepEqual(bad.logged, [], "a refused argument is an answer, not a host failure");
});

Deno.test("an unexpected handler failure is logged with its stack and answered internal", async () => {
  const thrown = await inCell("await rpc.call('test.add', {'by': 1})", {
    rpc: bindRpcs([addRpc], { total: 0, fail: "throw" }),
  });
  assert.equal(
    thrown.error,
    "test.add failed (internal): cannot call test.add: the host failed unexpectedly (got " +
      "TypeError); the daemon's log has the stack (event rpc.failed)",
  );
  assert.equal(thrown.logged.length, 1);
  const [line] = thrown.logged;
  assert.equal(line.level, "error");
  assert.equal(line.event, "rpc.failed");
  assert.equal(line.method, "test.add");
  assert.match(line.message as string, /the counter is not a number/);
  assert.match(
    line.stack as string,
    /TypeError: the counter is not a number\n\s+at throwUnexpected/,
  );

  const broken = await inCell("await rpc.call('test.add', {'by': 1})", {
    rpc: bindRpcs([addRpc], { total: 0, fail: "reply" }),
  });
  assert.match(broken.error ?? "", /^test\.add failed \(internal\): /);
  assert.equal(broken.logged.length, 1);
  assert.match(
    broken.logged[0].message as string,
    /the reply of test\.add does not match its schema: total: Invalid input: expected number/,
  );
});

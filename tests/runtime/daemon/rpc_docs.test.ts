// The host RPCs as one registry: the table in docs/protocol.md is written from it, every name
// is declared once, and the Python package calls only names it declares.

import assert from "node:assert/strict";
import { join } from "node:path";
import { hostRpcCatalog, rpcDocsTable, withRpcTable } from "../../../runtime/daemon/mod.ts";
import { bindRpcs, RpcRegistry } from "../../../runtime/kernel/mod.ts";
import { REPO_ROOT } from "../../../runtime/setup/mod.ts";

Deno.test("the rpc table in docs/protocol.md is the registry's", async () => {
  const text = await Deno.readTextFile(join(REPO_ROOT, "docs", "protocol.md"));
  assert.equal(
    withRpcTable(text, rpcDocsTable()),
    text,
    "docs/protocol.md lists other rpcs than the registry: run deno task rpc:docs",
  );
});

Deno.test("every host rpc is declared once, with a summary and the roles that may call it", () => {
  const catalog = hostRpcCatalog();
  const registry = new RpcRegistry(bindRpcs(catalog, undefined as never));
  assert.equal(registry.definitions().length, catalog.length);
  for (const rpc of catalog) {
    assert.ok(rpc.summary.length > 0, `${rpc.name} has a summary`);
    assert.ok(rpc.roles.length > 0, `${rpc.name} names who may call it`);
  }
});

Deno.test("the workbench package calls only rpcs the registry declares", async () => {
  const names = new Set(hostRpcCatalog().map((rpc) => rpc.name));
  const called = new Set<string>();
  for await (const entry of Deno.readDir(join(REPO_ROOT, "workbench", "klbr"))) {
    if (!entry.name.endsWith(".py")) continue;
    const text = await Deno.readTextFile(join(REPO_ROOT, "workbench", "klbr", entry.name));
    for (const m of text.matchAll(/(?:rpc\.call(?:_object|_json)?|_call)\(\s*"([a-z_.]+)"/g)) {
      called.add(m[1]);
    }
  }
  assert.ok(called.size > 30, `found the calls (got ${called.size})`);
  assert.deepEqual([...called].filter((name) => !names.has(name)).sort(), []);
});

// A job's completion input that could not be admitted when the job ended (its commit failed, as
// on a full disk) is retried on the timers' pause, so the agent is woken without a restart. The
// jobs domain through its face, with a real store in a temp dir, a real Python workbench for the
// job and manual host timers.

import assert from "node:assert/strict";
import { getJob } from "../../../store/tables/jobs.ts";
import { getInput } from "../../../store/tables/inputs.ts";
import { EventBus, SILENT_LOGGER } from "../../../runtime/core/mod.ts";
import { parseConfig } from "../../../runtime/config/mod.ts";
import { type RpcContext, RpcRegistry, skillRoots } from "../../../runtime/kernel/mod.ts";
import type { Provider } from "../../../runtime/model/mod.ts";
import { Jobs } from "../../../runtime/jobs/mod.ts";
import { REPO_ROOT } from "../../_helpers/daemon.ts";
import { ManualTimers } from "../../_helpers/fake_timers.ts";
import {
  RELEASE,
  someCell,
  someFrame,
  testAdmit,
  withClockedStore,
} from "../../_helpers/unattended.ts";

Deno.test("a job whose completion input the store could not commit wakes the agent once it can, without a restart", async () => {
  await withClockedStore(async (cs) => {
    const workspace = await Deno.realPath(await Deno.makeTempDir({ prefix: "klbr-job-ws-" }));
    const { config } = parseConfig("", { file: "test.kdl" });
    const timers = new ManualTimers(cs.clock);
    // The first commit of an announcement fails (a full disk); the disk has room after.
    const { admit, admitted, full } = testAdmit(cs.store, { value: true }, {
      full: { commits: 1 },
    });
    const jobs = new Jobs({
      store: cs.store,
      bus: new EventBus(),
      log: SILENT_LOGGER,
      python: "python3",
      repoRoot: REPO_ROOT,
      skillRoots: skillRoots({ repoRoot: workspace, stateDir: cs.dir }),
      provider: (): Provider => assert.fail("a code job asks no model"),
      budget: config.budget,
      cleanup: config.cleanup,
      cellTimeoutMs: 60_000,
      admit,
      maintenanceSession: "default",
      timers,
    });
    const frameId = someFrame(cs.store);
    const cellId = someCell(cs.store, "default", frameId);
    const frame = { id: frameId, routing: { conversations: ["local:default"] } };
    const registry = new RpcRegistry(jobs.rpcs({
      session: "default",
      frame: () => ({ ...frame, policyRevision: RELEASE }),
      release: () => RELEASE,
      workspace,
    }));
    const call = async (method: string, params: Record<string, unknown>) => {
      const signal = new AbortController().signal;
      const ctx: RpcContext = { signal, method, parent: "rq_1", cell: cellId };
      return await registry.call(method, params, ctx) as Record<string, unknown>;
    };
    jobs.startSession("default");
    try {
      const started = await call("jobs.start", { code: "6 * 7", name: "answer" });
      const id = String(started.job_id);
      const ended = await call("jobs.result", { job_id: id });
      assert.equal(ended.state, "done");
      // Its announcement met the full disk: nothing was admitted, and the job's result is durable.
      assert.equal(full.commits, 0, "the announcement's commit was refused");
      assert.deepEqual(admitted, []);
      assert.equal(getJob(cs.store, id)!.inputId, null);
      // The disk has room again: within the timers' retry pause the agent is woken, once.
      timers.advance(5_000);
      assert.equal(admitted.length, 1, "the job's input is admitted within 5 s, without a restart");
      const input = getInput(cs.store, admitted[0])!;
      assert.deepEqual([input.sourceKind, input.dedupeKey], ["job", `job:${id}`]);
      assert.equal(getJob(cs.store, id)!.inputId, input.id);
      // Nothing is retried once it is admitted.
      timers.advance(60_000);
      assert.equal(admitted.length, 1);
    } finally {
      await jobs.shutdown();
      await Deno.remove(workspace, { recursive: true });
    }
  });
});

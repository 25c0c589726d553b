// The jobs domain through its face: real SQLite with an injected clock, real Python workbenches
// for jobs, a fake provider (an object of functions that counts its calls) and manual host
// timers, so budgets and wall time are driven without waiting.

import assert from "node:assert/strict";
import { join } from "node:path";
import { readEventsOfKind } from "../../../store/tables/events.ts";
import { effectsOfCell } from "../../../store/tables/effects.ts";
import { getJob, type JobRecord, listJobs } from "../../../store/tables/jobs.ts";
import { listTimers } from "../../../store/tables/timers.ts";
import { getModelCall } from "../../../store/tables/model_calls.ts";
import { modelCallsOf } from "../../_helpers/store.ts";
import { moveJob } from "../../../store/tables/jobs.ts";
import { getInput, pendingInputs } from "../../../store/tables/inputs.ts";
import { EventBus, KlbrError, SILENT_LOGGER } from "../../../runtime/core/mod.ts";
import { parseConfig } from "../../../runtime/config/mod.ts";
import { type RpcContext, RpcRegistry, skillRoots } from "../../../runtime/kernel/mod.ts";
import { processGroupMembers } from "../../../runtime/sandbox/mod.ts";
import type { ChatMessage, Provider, ProviderTurn } from "../../../runtime/model/mod.ts";
import { Jobs, type RpcScope } from "../../../runtime/jobs/mod.ts";
import { REPO_ROOT } from "../../_helpers/daemon.ts";
import { ManualTimers } from "../../_helpers/fake_timers.ts";
import { fillDisk, mountSmallFs } from "../../crash/_loopback_fs.ts";
import {
  type ClockedStore,
  RELEASE,
  someCell,
  someFrame,
  testAdmit,
  withClockedStore,
} from "../../_helpers/unattended.ts";

type Reply = Partial<ProviderTurn> & { text?: string };

/** A provider whose answers come from `answer`; every request is kept. */
function fakeProvider(
  answer: (messages: ChatMessage[], n: number) => Reply,
  routeSettings: Record<string, unknown> = {},
) {
  const requests: {
    route: string;
    messages: ChatMessage[];
    maxTokens?: number;
    tools?: boolean;
  }[] = [];
  const provider = (route: string): Provider => ({
    route: { name: route, ...routeSettings } as unknown as Provider["route"],
    streamChat: (request) => {
      const { maxTokens, tools } = request;
      requests.push({ route, messages: [...request.messages], maxTokens, tools });
      const reply = answer(request.messages, requests.length);
      return Promise.resolve({
        text: reply.text ?? "",
        textPartial: false,
        reasoning: null,
        toolCalls: reply.toolCalls ?? [],
        finishReason: "stop",
        finishInferred: false,
        cutInToolCall: false,
        usage: reply.usage ?? { promptTokens: 100, completionTokens: 20 },
      });
    },
  });
  return { provider, requests };
}

interface Domain {
  jobs: Jobs;
  timers: ManualTimers;
  admitted: string[];
  requests: ReturnType<typeof fakeProvider>["requests"];
  scope: RpcScope;
  frameId: string;
  cellId: string;
  workspace: string;
  call: (method: string, params: Record<string, unknown>) => Promise<Record<string, unknown>>;
  /** Each artifact write the jobs reported for `/health`: `null` for one that succeeded. */
  artifactWrites: (string | null)[];
}

async function withJobs(
  options: {
    budget?: string;
    answer?: (m: ChatMessage[], n: number) => Reply;
    /** What every route declares, beside its name (`tool_calls`, …). */
    route?: Record<string, unknown>;
  },
  fn: (d: Domain, cs: ClockedStore) => Promise<void>,
): Promise<void> {
  await withClockedStore(async (cs) => {
    const workspace = await Deno.realPath(await Deno.makeTempDir({ prefix: "klbr-job-ws-" }));
    const { config } = parseConfig(options.budget ?? "", { file: "test.kdl" });
    const timers = new ManualTimers(cs.clock);
    const { admit, admitted } = testAdmit(cs.store);
    const fake = fakeProvider(options.answer ?? (() => ({ text: "child answer" })), options.route);
    const artifactWrites: (string | null)[] = [];
    const jobs = new Jobs({
      health: {
        modelCall: () => assert.fail("a job's model calls are not the route's health"),
        artifactWrite: (error) => void artifactWrites.push(error),
      },
      store: cs.store,
      bus: new EventBus(),
      log: SILENT_LOGGER,
      python: "python3",
      repoRoot: REPO_ROOT,
      skillRoots: skillRoots({ repoRoot: workspace, stateDir: cs.dir }),
      provider: fake.provider,
      budget: config.budget,
      cleanup: config.cleanup,
      cellTimeoutMs: 60_000,
      admit,
      maintenanceSession: "default",
      timers,
    });
    const frameId = someFrame(cs.store);
    const cellId = someCell(cs.store, "default", frameId);
    const frame = {
      id: frameId,
      routing: { conversations: ["local:default"] },
      policyRevision: RELEASE,
    };
    const scope: RpcScope = {
      session: "default",
      frame: () => frame,
      release: () => RELEASE,
      workspace,
    };
    const registry = new RpcRegistry(jobs.rpcs(scope));
    const call = async (method: string, params: Record<string, unknown>) => {
      const ctx: RpcContext = {
        signal: new AbortController().signal,
        method,
        parent: "rq_1",
        cell: cellId,
      };
      return await registry.call(method, params, ctx) as Record<string, unknown>;
    };
    jobs.startSession("default");
    try {
      await fn({
        jobs,
        timers,
        admitted,
        requests: fake.requests,
        scope,
        frameId,
        cellId,
        workspace,
        call,
        artifactWrites,
      }, cs);
    } finally {
      await jobs.shutdown();
      await Deno.remove(workspace, { recursive: true });
    }
  });
}

/** What a content cut to keep a request within its context ends with. */
const CUT = "[… cut here to keep the request within its context budget]";

/** A cell whose output is long enough to be spooled to an artifact. */
const LONG_CELL = "print('x' * 50_000 + 'END')";

const result = (d: Domain, id: string) => d.call("jobs.result", { job_id: id });

async function refusedWith(
  promise: Promise<unknown>,
  code: string,
  pattern: RegExp,
): Promise<void> {
  await assert.rejects(promise, (error) => {
    assert.ok(error instanceof KlbrError, String(error));
    assert.equal(error.code, code);
    assert.match(error.message, pattern);
    return true;
  });
}

Deno.test("`llm` from a cell is recorded with its frame and cell and counted in the hour", async () => {
  await withJobs({}, async (d, { store }) => {
    const reply = await d.call("llm", { prompt: "name a prime", max_tokens: 7 });
    assert.equal(reply.text, "child answer");
    assert.deepEqual(reply.usage, { prompt_tokens: 100, completion_tokens: 20 });
    const call = getModelCall(store, String(reply.call_id))!;
    assert.deepEqual([call.kind, call.route, call.frameId, call.cellId, call.jobId], [
      "llm",
      "fast",
      d.frameId,
      d.cellId,
      null,
    ]);
    assert.equal(call.request.prompt, "name a prime");
    assert.deepEqual([call.promptTokens, call.completionTokens, call.state], [100, 20, "done"]);
    // The request asked for no tool and at most the given completion tokens.
    assert.equal(d.requests[0].maxTokens, 7);
    const hour = d.jobs.budget.status() as { tokens_hour: { used: number } };
    assert.equal(hour.tokens_hour.used, 120);
  });
});

Deno.test("`llm` is refused `over_budget` once the hour's tokens are spent, until they free", async () => {
  // The children may use the whole hour here: this is the daemon's limit, not their share.
  const budget = "budget {\n tokens_per_hour 200\n child_share_percent 100\n}";
  await withJobs({ budget }, async (d, { store, clock }) => {
    const first = clock.now;
    await d.call("llm", { prompt: "a" });
    clock.now += 1_000;
    await d.call("llm", { prompt: "b" });
    // 240 tokens in the hour: the next call is refused before any request, saying when it frees.
    // It frees when the first call leaves the hour: 120 tokens are then under the limit.
    const frees = new Date(first + 3_600_000).toISOString();
    await refusedWith(
      d.call("llm", { prompt: "c" }),
      "over_budget",
      new RegExp(`tokens_per_hour: 240 of 200 used; frees at ${frees}`),
    );
    assert.equal(d.requests.length, 2);
    await refusedWith(d.call("llm", { prompt: "d" }), "over_budget", /tokens_per_hour/);
    // One record per spent limit, however often it refuses.
    const spent = readEventsOfKind(store, "default", "budget.exhausted");
    assert.equal(spent.length, 1);
    assert.deepEqual((spent[0].body as { what: string; until: string }).until, frees);
    // An hour after the first call it fits again.
    clock.now = first + 3_600_000;
    await d.call("llm", { prompt: "e" });
    assert.equal(d.requests.length, 3);
  });
});

Deno.test("a job runs in its own workbench, pinned, and is reaped before its completion input", async () => {
  await withJobs({}, async (d, { store }) => {
    const started = await d.call("jobs.start", {
      code: "import os\nprint(os.getcwd())\npid = os.getpid()\n(os.getpgid(0) == pid, 6 * 7)",
      name: "answer",
    });
    assert.equal(started.state, "pending");
    const ended = await result(d, String(started.job_id));
    assert.equal(ended.state, "done");
    assert.equal(ended.cause, "its code finished");
    const job = getJob(store, String(started.job_id))!;
    assert.deepEqual((job.result as { value: string }).value, "(True, 42)");
    assert.equal((job.result as { stdout: string }).stdout, `${d.workspace}\n`);
    assert.deepEqual([job.releaseId, job.workspace, job.frameId, job.cellId], [
      RELEASE,
      d.workspace,
      d.frameId,
      d.cellId,
    ]);
    // It no longer has a process once it is reported, and it woke the agent exactly once.
    assert.equal(job.pid, null);
    assert.equal(d.admitted.length, 1);
    const input = getInput(store, d.admitted[0])!;
    assert.deepEqual([input.sourceKind, input.dedupeKey, input.conversationId], [
      "job",
      `job:${job.id}`,
      "local:default",
    ]);
    assert.match(String(input.body), /ended done: its code finished\nvalue: \(True, 42\)/);
    assert.equal(job.inputId, input.id);
  });
});

Deno.test("a job's process group is dead once it has ended", async () => {
  await withJobs({}, async (d, { store }) => {
    const started = await d.call("jobs.start", { code: "import os\nos.getpid()" });
    const ended = await result(d, String(started.job_id));
    const pid = Number((getJob(store, String(ended.job_id))!.result as { value: string }).value);
    assert.ok(pid > 1);
    assert.deepEqual(await processGroupMembers(pid), []);
  });
});

Deno.test("cancelling a running job kills its group; it ends `cancelled` with the cause", async () => {
  await withJobs({}, async (d, { store }) => {
    const started = await d.call("jobs.start", {
      code:
        "import os, time\nwith open('pid', 'w') as f:\n    f.write(str(os.getpid()))\ntime.sleep(600)",
    });
    const id = String(started.job_id);
    for (let i = 0; i < 500 && !(await exists(`${d.workspace}/pid`)); i++) await tick();
    const pid = Number(await Deno.readTextFile(`${d.workspace}/pid`));
    assert.notDeepEqual(await processGroupMembers(pid), []);
    const cancelled = await d.call("jobs.cancel", { job_id: id });
    assert.deepEqual([cancelled.state, cancelled.cause], ["cancelled", "cancelled by a cell"]);
    assert.deepEqual(await processGroupMembers(pid), []);
    assert.equal(getJob(store, id)!.state, "cancelled");
    // Cancelling an ended job leaves it as it was.
    const again = await d.call("jobs.cancel", { job_id: id });
    assert.equal(again.state, "cancelled");
    assert.equal(d.admitted.length, 1);
  });
});

Deno.test("a job past its wall time is killed and ends `over_budget`", async () => {
  await withJobs({}, async (d, { store }) => {
    const started = await d.call("jobs.start", {
      code: "open('started', 'w').close()\nimport asyncio\nawait asyncio.sleep(600)",
      budget: { wall_time_s: 30 },
    });
    for (let i = 0; i < 500 && !(await exists(`${d.workspace}/started`)); i++) await tick();
    const waiting = result(d, String(started.job_id));
    d.timers.advance(30_000);
    const ended = await waiting;
    assert.equal(ended.state, "over_budget");
    assert.match(String(ended.cause), /^job wall_time_ms: 30000 of 30000 used$/);
    assert.equal(getJob(store, String(started.job_id))!.budget.wall_time_ms, 30_000);
  });
});

Deno.test("a job's `llm` calls draw from its budget; past its tokens it ends `over_budget`", async () => {
  await withJobs({}, async (d, { store }) => {
    const started = await d.call("jobs.start", {
      code: "for i in range(10):\n    await llm(f'q{i}', max_tokens=50)\n    print(i)",
      budget: { tokens: 300 },
    });
    const ended = await result(d, String(started.job_id));
    assert.equal(ended.state, "over_budget");
    assert.equal(ended.cause, "job tokens: 360 of 300 used");
    const job = getJob(store, String(started.job_id))!;
    assert.deepEqual([job.requestsUsed, job.tokensUsed], [3, 360]);
    // Each call was recorded against the job, and none was made past the limit.
    const calls = modelCallsOf(store, { jobId: job.id });
    assert.deepEqual(calls.map((c) => [c.kind, c.jobId, c.frameId, c.cellId]), [
      ["llm", job.id, d.frameId, null],
      ["llm", job.id, d.frameId, null],
      ["llm", job.id, d.frameId, null],
    ]);
    assert.equal(d.requests.length, 3);
    // The completion of each request was capped by what the job had left.
    assert.deepEqual(d.requests.map((r) => r.maxTokens), [50, 50, 50]);
    assert.equal(d.admitted.length, 1);
    assert.match(
      String(getInput(store, d.admitted[0])!.body),
      /ended over_budget: job tokens: 360 of 300/,
    );
  });
});

Deno.test("with one job slot a second job waits `pending`, recorded, and starts when the first ends", async () => {
  await withJobs(
    { budget: "budget {\n concurrent_jobs 1\n concurrent_processes 2\n}" },
    async (d, { store }) => {
      const first = await d.call("jobs.start", {
        code:
          "for _ in range(2000):\n    import os\n    if os.path.exists('go'): break\n    import time; time.sleep(0.005)\n1",
      });
      const second = await d.call("jobs.start", { code: "2" });
      assert.equal(getJob(store, String(second.job_id))!.state, "pending");
      const [queued] = readEventsOfKind(store, "default", "job.queued");
      assert.equal((queued.body as { job_id: string }).job_id, second.job_id);
      assert.match((queued.body as { reason: string }).reason, /1 of 1 jobs/);
      await Deno.writeTextFile(`${d.workspace}/go`, "");
      assert.equal((await result(d, String(first.job_id))).state, "done");
      assert.equal((await result(d, String(second.job_id))).state, "done");
      const order = readEventsOfKind(store, "default", "job.state").map((e) =>
        e.body as Record<string, string>
      )
        .filter((b) => b.to === "running" || b.to === "done").map((b) =>
          `${b.job_id === first.job_id ? 1 : 2}${b.to}`
        );
      assert.deepEqual(order, ["1running", "1done", "2running", "2done"]);
    },
  );
});

Deno.test("a job's workspace.run waits for a process slot, recorded, and runs when one frees", async () => {
  await withJobs(
    { budget: "budget {\n concurrent_jobs 1\n concurrent_processes 2\n}" },
    async (d, { store }) => {
      // The job holds one of the two slots; of its two runs, the second waits for the first.
      const code = "import asyncio\nslow = ('python3', '-c', 'import time; time.sleep(0.5)')\n" +
        "fast = ('python3', '-c', 'print(1)')\n" +
        "a, b = await asyncio.gather(run(slow), run(fast))\n(a.exit_code, b.exit_code)";
      const started = await d.call("jobs.start", { code });
      const ended = await result(d, String(started.job_id));
      assert.equal(ended.state, "done", String(ended.cause));
      assert.equal((ended.result as { value: string }).value, "(0, 0)");
      const [spent] = readEventsOfKind(store, "default", "budget.exhausted");
      assert.deepEqual(
        [(spent.body as { what: string }).what, (spent.body as { effect: string }).effect],
        ["concurrent_processes", "workspace.run waits for a process slot"],
      );
      assert.deepEqual((d.jobs.budget.status() as { processes: unknown }).processes, {
        in_use: 0,
        limit: 2,
        waiting: 0,
      });
    },
  );
});

Deno.test("a job queued for a process slot starts when a session's workspace.run gives the slot back", async () => {
  await withJobs(
    { budget: "budget {\n concurrent_jobs 1\n concurrent_processes 2\n}" },
    async (d, { store }) => {
      // Two workspace.run of the agent's cells hold both process slots; no job is running.
      const take = d.jobs.processSlot("default");
      const held = [
        await take(new AbortController().signal),
        await take(new AbortController().signal),
      ];
      const started = await d.call("jobs.start", { code: "6 * 7" });
      const id = String(started.job_id);
      assert.equal(getJob(store, id)!.state, "pending");
      const [queued] = readEventsOfKind(store, "default", "job.queued");
      assert.match((queued.body as { reason: string }).reason, /2 of 2 processes/);
      // The runs end: their slots are free, and the job must not wait for anything else.
      for (const release of held) release();
      for (let i = 0; i < 300 && getJob(store, id)!.state === "pending"; i++) await tick();
      assert.notEqual(
        getJob(store, id)!.state,
        "pending",
        "the job still waits although both process slots are free",
      );
      const ended = await result(d, id);
      assert.equal(ended.state, "done", String(ended.cause));
      assert.equal((ended.result as { value: string }).value, "42");
    },
  );
});

Deno.test("ending a job ends its open child jobs, which drew from its budget", async () => {
  await withJobs({}, async (d, { store }) => {
    const parent = await d.call("jobs.start", {
      code:
        "child = await jobs.start('import time\\ntime.sleep(600)', budget={'tokens': 999999})\n" +
        "print(child)\nimport asyncio\nawait asyncio.sleep(600)",
      budget: { tokens: 500 },
    });
    const parentId = String(parent.job_id);
    let childId: string | undefined;
    for (let i = 0; i < 500 && childId === undefined; i++) {
      childId = listJobs(store, "default").find((j) =>
        j.parentJobId === parentId && j.state === "running"
      )?.id;
      if (childId === undefined) await tick();
    }
    const child = getJob(store, childId!)!;
    // A child gets at most what its parent has left.
    assert.equal(child.budget.tokens, 500);
    await d.call("jobs.cancel", { job_id: parentId });
    const ended = await result(d, childId!);
    assert.equal(ended.state, "cancelled");
    assert.equal(ended.cause, `its parent job ${parentId} ended cancelled`);
  });
});

Deno.test("a job a dead daemon left running is `interrupted` and announced, never run again", async () => {
  await withJobs({}, async (d, cs) => {
    await d.jobs.shutdown();
    const started = await d.call("jobs.start", { code: "open('ran', 'a').write('x')" });
    // As if a dead daemon had started it: running, with no process left.
    const running = moveJob(cs.store, String(started.job_id), {
      to: "running",
      cause: "a job slot was free",
    });
    const store = cs.reopen();
    const { admit, admitted } = testAdmit(store);
    const fresh = new Jobs({
      store,
      bus: new EventBus(),
      log: SILENT_LOGGER,
      python: "python3",
      repoRoot: REPO_ROOT,
      skillRoots: skillRoots({ repoRoot: d.workspace, stateDir: cs.dir }),
      provider: () => {
        throw new Error("no model");
      },
      budget: parseConfig("", { file: "x" }).config.budget,
      cleanup: parseConfig("", { file: "x" }).config.cleanup,
      cellTimeoutMs: 1000,
      admit,
      maintenanceSession: "default",
      timers: new ManualTimers(cs.clock),
    });
    fresh.startSession("default");
    try {
      const job = getJob(store, running.id)!;
      assert.equal(job.state, "interrupted");
      assert.match(job.cause, /the daemon stopped while it ran .*never resumed or run again/);
      assert.equal(admitted.length, 1);
      assert.equal(getInput(store, admitted[0])!.dedupeKey, `job:${job.id}`);
      assert.equal(await exists(`${d.workspace}/ran`), false);
      // Another start announces nothing twice.
      fresh.startSession("default");
      assert.equal(admitted.length, 1);
      assert.deepEqual(listJobs(store, "default").map((j: JobRecord) => j.state), ["interrupted"]);
    } finally {
      await fresh.shutdown();
    }
  });
});

Deno.test("a child agent runs cells in its job's workbench, cannot speak, and ends with its answer", async () => {
  const answer = (messages: ChatMessage[], n: number): Reply =>
    n === 1
      ? {
        toolCalls: [{
          id: "c1",
          name: "python",
          arguments: JSON.stringify({
            code:
              "x = 2 + 2\ntry:\n    await local.send('hi')\nexcept Exception as e:\n    print(type(e).__name__, 'refused')\nx",
          }),
        }],
      }
      : { text: `the answer is ${String(messages.at(-1)?.content).match(/value: (\d+)/)?.[1]}` };
  await withJobs({ answer }, async (d, { store }) => {
    const started = await d.call("jobs.start", {
      code: "add two and two",
      kind: "agent",
      budget: { tokens: 1000 },
    });
    const ended = await result(d, String(started.job_id));
    assert.equal(ended.state, "done");
    assert.deepEqual(ended.result, { value: "the answer is 4" });
    assert.equal(ended.cause, "it answered after 2 steps");
    const [cell] = readEventsOfKind(store, "default", "job.cell");
    assert.equal((cell.body as { stdout: string }).stdout, "RpcError refused\n");
    assert.equal((cell.body as { step: number }).step, 1, "the cell ran in the first step");
    assert.equal(readEventsOfKind(store, "default", "send").length, 0);
    // Its own provider sequence: the contract, the task, its reply and the tool result.
    assert.deepEqual(d.requests[1].messages.map((m) => m.role), [
      "system",
      "user",
      "assistant",
      "tool",
    ]);
    assert.equal(d.requests[1].messages[1].content, "add two and two");
    const job = getJob(store, String(started.job_id))!;
    assert.deepEqual([job.kind, job.requestsUsed, job.tokensUsed], ["agent", 2, 240]);
    assert.deepEqual(modelCallsOf(store, { jobId: job.id }).map((c) => c.kind), ["agent", "agent"]);
  });
});

Deno.test("a child agent's cell result lists the timer and the job its cell committed, as the agent's do", async () => {
  const code = [
    "t = await timers.after(3600, 'look again')",
    "j = await jobs.start('print(1)', name='helper')",
    "print('set')",
  ].join("\n");
  const answer = (_messages: ChatMessage[], n: number): Reply =>
    n === 1
      ? { toolCalls: [{ id: "c1", name: "python", arguments: JSON.stringify({ code }) }] }
      : { text: "done" };
  await withJobs({ answer }, async (d, { store }) => {
    const started = await d.call("jobs.start", { code: "set a reminder", kind: "agent" });
    const ended = await result(d, String(started.job_id));
    assert.equal(ended.state, "done");
    const [timer] = listTimers(store, "default");
    const helper = listJobs(store, "default").find((job) => job.name === "helper")!;
    // Both name the agent as their cause, not a `cells` row; the child's cell lists them.
    assert.deepEqual([timer.cellId, timer.jobId], [null, started.job_id]);
    assert.deepEqual([helper.cellId, helper.parentJobId], [null, started.job_id]);
    const toolResult = String(d.requests[1].messages.at(-1)?.content);
    assert.match(toolResult, /effects this cell committed \(they happened; do not repeat them\):/);
    assert.match(toolResult, new RegExp(`1\\. timer ${timer.id}: "due [^"]+: look again"`));
    assert.match(toolResult, new RegExp(`2\\. job ${helper.id}: "helper: print\\(1\\)"`));
    const [cell] = readEventsOfKind(store, "default", "job.cell");
    const cellId = (cell.body as { cell_id: string }).cell_id;
    assert.deepEqual(effectsOfCell(store, cellId).map((e) => e.refId), [timer.id, helper.id]);
  });
});

Deno.test("a child agent's request stays within its route's context: the longest results are cut, no message dropped", async () => {
  const long = {
    id: "c",
    name: "python",
    arguments: JSON.stringify({ code: "print('x' * 7000)" }),
  };
  const answer = (_messages: ChatMessage[], n: number): Reply =>
    n <= 3 ? { toolCalls: [{ ...long, id: `c${n}` }] } : { text: "done" };
  await withJobs({ answer, route: { context_tokens: 2_048 } }, async (d) => {
    const started = await d.call("jobs.start", { code: "print a lot", kind: "agent" });
    assert.equal((await result(d, String(started.job_id))).state, "done");
    // The contract, the task, then a call and its result a step: all there, the results cut.
    assert.deepEqual(d.requests.map((r) => r.messages.length), [2, 4, 6, 8]);
    const last = d.requests[3].messages;
    assert.ok(last.filter((m) => m.role === "tool").every((m) => String(m.content).includes(CUT)));
    // Within 2,048 tokens at klbr's uncalibrated 1.25 tokens a raw token (about 4 characters each).
    assert.ok(JSON.stringify(last).length < (2_048 / 1.25) * 4, `${JSON.stringify(last).length}`);
  });
});

Deno.test("a child agent's cell that succeeded keeps its outcome when its long output cannot be spooled for a full disk", async () => {
  // The session's cells and a child agent's run on one tool-call step: a failed artifact write
  // costs the whole output, never the cell's outcome nor the job's result.
  const answer = (messages: ChatMessage[], n: number): Reply =>
    n === 1
      ? {
        toolCalls: [{ id: "c1", name: "python", arguments: JSON.stringify({ code: LONG_CELL }) }],
      }
      : { text: `told: ${/could not be kept/.test(String(messages.at(-1)?.content))}` };
  await withJobs({ answer }, async (d, { store, dir }) => {
    const fs = await mountSmallFs(64);
    const artifacts = join(dir, "artifacts");
    await Deno.remove(artifacts, { recursive: true }).catch(() => {});
    await Deno.symlink(fs.dir, artifacts);
    try {
      await fillDisk(fs.dir);
      const started = await d.call("jobs.start", { code: "print a lot", kind: "agent" });
      const ended = await result(d, String(started.job_id));
      assert.equal(ended.state, "done", String(ended.cause));
      assert.deepEqual(ended.result, { value: "told: true" });
      const [cell] = readEventsOfKind(store, "default", "job.cell");
      const body = cell.body as Record<string, string>;
      assert.equal(body.outcome, "ok", "the cell keeps its own outcome");
      assert.match(body.stdout_artifact_error, /No space left on device/);
      // The model read the excerpt, which names the failure and keeps the tail.
      const tool = String(d.requests[1].messages.at(-1)?.content);
      assert.match(tool, /^outcome: ok\n/);
      assert.match(
        tool,
        /the whole output could not be kept: writing its artifact failed \(.*No space left on device/,
      );
      assert.match(tool, /END\n/);
      // /health hears of it as of a session cell's failed write.
      assert.equal(d.artifactWrites.length, 1);
      assert.match(String(d.artifactWrites[0]), /No space left on device/);
    } finally {
      await fs.unmount();
    }
  });
});

Deno.test("a code job whose code succeeded ends `done` with its output excerpt when a full disk refuses its artifact", async () => {
  await withJobs({}, async (d, { dir }) => {
    const fs = await mountSmallFs(64);
    const artifacts = join(dir, "artifacts");
    await Deno.remove(artifacts, { recursive: true }).catch(() => {});
    await Deno.symlink(fs.dir, artifacts);
    try {
      await fillDisk(fs.dir);
      const started = await d.call("jobs.start", { code: LONG_CELL });
      const ended = await result(d, String(started.job_id));
      assert.equal(ended.state, "done", String(ended.cause));
      const kept = ended.result as Record<string, string>;
      assert.equal(kept.stdout_artifact, undefined);
      assert.match(kept.stdout_artifact_error, /No space left on device/);
      assert.match(kept.stdout, /the whole output could not be kept/);
      assert.ok(kept.stdout.endsWith("END\n"), "the excerpt keeps the tail");
      assert.match(String(d.artifactWrites), /No space left on device/);
    } finally {
      await fs.unmount();
    }
  });
});

Deno.test("a child agent on a text-mode route runs the first python fence of a reply, as the agent's turn does", async () => {
  const fenced =
    "Let me compute.\n```python\nprint(6 * 7)\n```\nand\n```py\nprint('not run')\n```\n";
  const answer = (messages: ChatMessage[], n: number): Reply =>
    n === 1
      ? { text: fenced }
      : { text: `it is ${String(messages.at(-1)?.content).match(/\b42\b/)?.[0]}` };
  await withJobs({ answer, route: { tool_calls: "text" } }, async (d, { store }) => {
    const started = await d.call("jobs.start", { code: "what is six times seven", kind: "agent" });
    const ended = await result(d, String(started.job_id));
    assert.equal(ended.state, "done", String(ended.cause));
    assert.deepEqual(ended.result, { value: "it is 42" });
    // No tools on the wire, the contract states the fence rules, and the cell's result comes
    // back as text, naming the block that did not run.
    assert.deepEqual(d.requests.map((r) => r.tools), [false, false]);
    assert.match(String(d.requests[0].messages[0].content), /write each cell as one ```python/);
    const told = String(d.requests[1].messages.at(-1)?.content);
    assert.match(told, /^\[runtime\] result of your python cell/);
    assert.match(told, /stdout:\n42\n/);
    assert.match(told, /only the first python block of a reply runs; 1 more did not/);
    const cells = readEventsOfKind(store, "default", "job.cell");
    assert.deepEqual(cells.map((c) => (c.body as { code: string }).code), ["print(6 * 7)"]);
  });
});

Deno.test("a child agent on an `auto` route that answers twice in a row with a fenced cell moves the route to text", async () => {
  const fence = (n: number) => `Here.\n\`\`\`python\nprint(${n})\n\`\`\`\n`;
  const answer = (_messages: ChatMessage[], n: number): Reply =>
    n <= 2 ? { text: fence(n) } : { text: "done" };
  await withJobs({ answer, route: { tool_calls: "auto" } }, async (d, { store }) => {
    const started = await d.call("jobs.start", { code: "print two numbers", kind: "agent" });
    const ended = await result(d, String(started.job_id));
    assert.deepEqual([ended.state, ended.result], ["done", { value: "done" }]);
    // Its own replies count, not the agent's: the second fenced one moves the route.
    assert.deepEqual(d.requests.map((r) => r.tools), [true, true, false]);
    const [adapted] = readEventsOfKind(store, "default", "route.adapted");
    assert.deepEqual(
      [(adapted.body as { route: string }).route, (adapted.body as { to: string }).to],
      ["main", "text"],
    );
    assert.equal(readEventsOfKind(store, "default", "job.cell").length, 2);
  });
});

Deno.test("a turn's request waits while the hour is spent, recorded, and goes out when it frees", async () => {
  await withJobs({ budget: "budget {\n model_requests_per_hour 1\n}" }, async (d, { store }) => {
    await d.call("llm", { prompt: "spend the hour" });
    const turns = d.jobs.meter("main", () => ({ session: "default", frameId: d.frameId }));
    const stop = new AbortController();
    const stopped = turns.streamChat({ messages: [] }, { signal: stop.signal });
    assert.equal(readEventsOfKind(store, "default", "budget.exhausted").length, 1);
    stop.abort(new Error("operator stop"));
    await assert.rejects(stopped, /operator stop/);
    assert.equal(d.requests.length, 1);
    const waiting = turns.streamChat({ messages: [] });
    d.timers.advance(3_600_000);
    const turn = await waiting;
    assert.equal(turn.text, "child answer");
    assert.equal(d.requests.length, 2);
    assert.equal(pendingInputs(store, "default").length, 0);
  });
});

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

function tick(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 10));
}

Deno.test("a cell waiting for a job's result hears the daemon's shutdown at once, not after the drain's grace", async () => {
  await withJobs({}, async (d) => {
    const started = await d.call("jobs.start", { code: "import time\ntime.sleep(600)" });
    const waiting = d.call("jobs.result", { job_id: String(started.job_id) });
    const settled = waiting.then(() => "answered", (error) => String(error));
    await tick();
    await d.jobs.shutdown();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<string>((resolve) => {
      timer = setTimeout(() => resolve("still waiting after 5 s"), 5_000);
    });
    const outcome = await Promise.race([settled, late]);
    clearTimeout(timer);
    assert.match(outcome, /cannot wait for job job_\w+: the daemon is shutting down/);
  });
});

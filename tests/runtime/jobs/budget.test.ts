// The hourly budgets through the jobs domain's face: real SQLite with an injected clock, a fake
// provider that counts its requests and manual host timers, so the hour is driven without
// waiting. Child calls (`llm()`) get their own share of the hour and cannot starve the agent's
// turns; a spent limit is announced once a pause; the operator's reset and raise lift it.

import assert from "node:assert/strict";
import { readEventsOfKind } from "../../../store/tables/events.ts";
import { EventBus, KlbrError, SILENT_LOGGER } from "../../../runtime/core/mod.ts";
import { parseConfig } from "../../../runtime/config/mod.ts";
import { type RpcContext, RpcRegistry, skillRoots } from "../../../runtime/kernel/mod.ts";
import { createProvider, type Provider } from "../../../runtime/model/mod.ts";
import { HOUR_MS, Jobs } from "../../../runtime/jobs/mod.ts";
import { REPO_ROOT } from "../../_helpers/daemon.ts";
import { ManualTimers } from "../../_helpers/fake_timers.ts";
import { type FakeOpenAI, startFakeOpenAI } from "../../fakes/openai_server.ts";
import {
  type ClockedStore,
  RELEASE,
  someCell,
  someFrame,
  testAdmit,
  withClockedStore,
} from "../../_helpers/unattended.ts";

interface Parts {
  jobs: Jobs;
  timers: ManualTimers;
  /** Requests the provider answered, by route. */
  requests: string[];
  llm: (prompt: string) => Promise<Record<string, unknown>>;
  /** One request of the agent's own turn. */
  turn: (signal?: AbortSignal) => Promise<unknown>;
}

/**
 * The jobs domain of `cs.store` under the `budget` node `budget`, as a daemon start builds it;
 * its model is `server` when given (a real provider over HTTP), else an instant one that counts.
 */
function startJobs(cs: ClockedStore, options: { budget: string; server?: FakeOpenAI }): Parts {
  const { budget, server } = options;
  const { config } = parseConfig(budget, { file: "test.kdl" });
  const timers = new ManualTimers(cs.clock);
  const requests: string[] = [];
  const served = server === undefined ? undefined : createProvider(
    parseConfig(`llm { url "${server.url}"; model "fake-model" }`, { file: "test.kdl" }).config
      .routes.main,
    { apiKey: undefined },
  );
  const provider = (route: string): Provider =>
    served ?? ({
      route: { name: route } as unknown as Provider["route"],
      streamChat: () => {
        requests.push(route);
        return Promise.resolve({
          text: "ok",
          textPartial: false,
          reasoning: null,
          toolCalls: [],
          finishReason: "stop",
          finishInferred: false,
          cutInToolCall: false,
          usage: { promptTokens: 10, completionTokens: 2 },
        });
      },
    });
  const jobs = new Jobs({
    store: cs.store,
    bus: new EventBus(),
    log: SILENT_LOGGER,
    python: "python3",
    repoRoot: REPO_ROOT,
    skillRoots: skillRoots({ repoRoot: cs.dir, stateDir: cs.dir }),
    provider,
    budget: config.budget,
    cleanup: config.cleanup,
    cellTimeoutMs: 60_000,
    admit: testAdmit(cs.store).admit,
    maintenanceSession: "default",
    timers,
  });
  const frameId = someFrame(cs.store);
  const cell = someCell(cs.store, "default", frameId);
  const frame = {
    id: frameId,
    routing: { conversations: ["local:default"] },
    policyRevision: RELEASE,
  };
  const registry = new RpcRegistry(jobs.rpcs({
    session: "default",
    frame: () => frame,
    release: () => RELEASE,
    workspace: cs.dir,
  }));
  const ctx: RpcContext = {
    signal: new AbortController().signal,
    method: "llm",
    parent: "rq",
    cell,
  };
  const metered = jobs.meter("main", () => ({ session: "default", frameId }));
  jobs.startSession("default");
  return {
    jobs,
    timers,
    requests,
    llm: async (prompt) => await registry.call("llm", { prompt }, ctx) as Record<string, unknown>,
    turn: (signal) => metered.streamChat({ messages: [] }, { signal }),
  };
}

async function withBudget(budget: string, fn: (p: Parts, cs: ClockedStore) => Promise<void>) {
  await withClockedStore(async (cs) => {
    const parts = startJobs(cs, { budget });
    try {
      await fn(parts, cs);
    } finally {
      await parts.jobs.shutdown();
    }
  });
}

async function refused(promise: Promise<unknown>, pattern: RegExp): Promise<void> {
  await assert.rejects(promise, (error) => {
    assert.ok(error instanceof KlbrError, String(error));
    assert.equal(error.code, "over_budget");
    assert.match(error.message, pattern);
    return true;
  });
}

const spentRecords = (cs: ClockedStore) =>
  readEventsOfKind(cs.store, "default", "budget.exhausted").map((e) => {
    const b = e.body as Record<string, unknown>;
    return [b.what, b.used, b.limit, b.effect];
  });

/** Whether `promise` has settled, after the microtasks already queued have run. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(() => (done = true), () => (done = true));
  for (let i = 0; i < 100; i++) await Promise.resolve();
  return done;
}

Deno.test("`llm()` uses at most the children's share of the hour, and the agent's turns still get the rest", async () => {
  await withBudget("budget {\n model_requests_per_hour 4\n}", async (p, cs) => {
    const first = cs.clock.now;
    await p.llm("a");
    cs.clock.now += 1_000;
    await p.llm("b");
    const frees = new Date(first + HOUR_MS).toISOString();
    await refused(
      p.llm("c"),
      new RegExp(`child_model_requests_per_hour: 2 of 2 used; frees at ${frees}`),
    );
    // The children's half is spent; the turns get theirs.
    await p.turn();
    await p.turn();
    assert.equal(p.requests.length, 4);
    const stop = new AbortController();
    const waiting = p.turn(stop.signal);
    assert.equal(await settled(waiting), false, "the fifth request waits for the hour");
    stop.abort(new Error("operator stop"));
    await assert.rejects(waiting, /operator stop/);
    assert.deepEqual(spentRecords(cs), [
      ["child_model_requests_per_hour", 2, 2, "llm() and child agents are refused"],
      ["model_requests_per_hour", 4, 4, "the agent's next model request waits"],
    ]);
    const status = p.jobs.budget.status() as Record<string, Record<string, unknown>>;
    assert.deepEqual(status.model_requests_hour, { used: 4, limit: 4, configured: 4 });
    assert.deepEqual(status.child_requests_hour, { used: 2, limit: 2 });
  });
});

Deno.test("`child_share_percent` sets the children's share: 0 refuses every child call, 100 lets them use the whole hour", async () => {
  await withBudget("budget {\n model_requests_per_hour 3\n child_share_percent 0\n}", async (p) => {
    await refused(p.llm("a"), /child_model_requests_per_hour: 0 of 0 used\)$/);
    assert.equal(p.requests.length, 0);
    // Refusing them is the configuration's choice, not a pause: nothing to report or lift.
    assert.deepEqual((p.jobs.budget.status() as { over_budget: unknown[] }).over_budget, []);
    await p.turn();
    assert.equal(p.requests.length, 1);
  });
  await withBudget(
    "budget {\n model_requests_per_hour 3\n child_share_percent 100\n}",
    async (p) => {
      for (const prompt of ["a", "b", "c"]) await p.llm(prompt);
      await refused(p.llm("d"), /\(got model_requests_per_hour: 3 of 3 used; frees at /);
    },
  );
  assert.throws(
    () => parseConfig("budget {\n child_share_percent 101\n}", { file: "t.kdl" }),
    /child_share_percent.*expected at most 100 \(got 101\)/,
  );
});

Deno.test("a spent limit is announced once a pause, however often it refuses; a request that goes out ends the pause", async () => {
  await withBudget("budget {\n model_requests_per_hour 4\n}", async (p, cs) => {
    const first = cs.clock.now;
    await p.llm("a");
    cs.clock.now += 1_000;
    await p.llm("b");
    for (let i = 0; i < 5; i++) await refused(p.llm("again"), /child_model_requests_per_hour/);
    assert.equal(spentRecords(cs).length, 1);
    // The first call leaves the hour: one more goes out, and the next refusal is a new pause.
    cs.clock.now = first + HOUR_MS;
    await p.llm("c");
    await refused(p.llm("d"), /child_model_requests_per_hour/);
    await refused(p.llm("e"), /child_model_requests_per_hour/);
    assert.equal(spentRecords(cs).length, 2);
    assert.equal(p.requests.length, 3);
  });
});

Deno.test("a reset starts the windows again, durably; a raise lasts for the run", async () => {
  await withClockedStore(async (cs) => {
    let p = startJobs(cs, { budget: "budget {\n model_requests_per_hour 2\n}" });
    try {
      await p.turn();
      await p.turn();
      const waiting = p.turn();
      assert.equal(await settled(waiting), false);
      cs.clock.now += 60_000;
      p.jobs.budget.lift({ reset: true });
      // No timer ran (the clock is where the test put it): the reset let it go.
      assert.equal(await settled(waiting), true);
      await waiting;
      assert.equal(p.requests.length, 3);
      const reset = p.jobs.budget.status() as Record<string, unknown>;
      assert.equal(reset.window_reset_at, new Date(cs.clock.now).toISOString());

      // A restart counts only the call made since the reset.
      await p.jobs.shutdown();
      cs.reopen();
      p = startJobs(cs, { budget: "budget {\n model_requests_per_hour 2\n}" });
      const after = p.jobs.budget.status() as Record<string, Record<string, number>>;
      assert.deepEqual(after.model_requests_hour, { used: 1, limit: 2, configured: 2 });

      await p.turn();
      const paused = p.turn();
      assert.equal(await settled(paused), false);
      p.jobs.budget.lift({ raise: 3 });
      assert.equal(await settled(paused), true);
      await paused;
      assert.equal(p.jobs.budget.requestLimit, 3);
      assert.throws(
        () => p.jobs.budget.lift({ raise: 3 }),
        /cannot raise the budget: give a whole number of requests above the current limit 3 \(got 3\)/,
      );
      assert.throws(() => p.jobs.budget.lift({}), /cannot lift the budget: ask for reset or raise/);

      // The raise was for that run; the configured limit returns at the next start.
      await p.jobs.shutdown();
      cs.reopen();
      p = startJobs(cs, { budget: "budget {\n model_requests_per_hour 2\n}" });
      assert.equal(p.jobs.budget.requestLimit, 2);
    } finally {
      await p.jobs.shutdown();
    }
  });
});

/** The jobs domain over a fake model server started with `quirks`; both closed after `fn`. */
async function withServer(
  server: Parameters<typeof startFakeOpenAI>[0],
  fn: (p: Parts, fake: FakeOpenAI) => Promise<void>,
) {
  const fake = startFakeOpenAI({ fallback: () => ({ text: "ok" }), ...server });
  try {
    await withClockedStore(async (cs) => {
      const parts = startJobs(cs, { budget: "", server: fake });
      try {
        await fn(parts, fake);
      } finally {
        await parts.jobs.shutdown();
      }
    });
  } finally {
    await fake.close();
  }
}

/**
 * Waits (real time, at most 5 s) until the server has answered `answers` requests and the next
 * timer is due in `waitMs`: the call met a failure and waits that long to ask again.
 */
async function retryWaiting(
  p: Parts,
  fake: FakeOpenAI,
  wait: { answers: number; waitMs: number },
): Promise<void> {
  const waiting = () =>
    fake.statuses.length >= wait.answers && p.timers.nextAt === p.timers.clock.now + wait.waitMs;
  for (let i = 0; i < 500 && !waiting(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(waiting(), `${fake.statuses.length} answers, next timer at ${p.timers.nextAt}`);
}

Deno.test("`llm()` met by a rate limit waits the Retry-After its server named and is asked again; each attempt is a request of the hour", async () => {
  // OpenAI's 429 with `retry-after-ms` (the fake's `rateLimited` quirk).
  await withServer(
    { quirks: { rateLimited: { requests: 1, retryAfterMs: 1_500 } } },
    async (p, fake) => {
      const reply = p.llm("a");
      await retryWaiting(p, fake, { answers: 1, waitMs: 1_500 });
      assert.deepEqual(fake.statuses, [429]);
      p.timers.advance(1_499);
      assert.equal(await settled(reply), false, "asked again before the wait ended");
      p.timers.advance(1);
      assert.equal((await reply).text, "ok");
      assert.deepEqual(fake.statuses, [429, 200]);
      const status = p.jobs.budget.status() as Record<string, Record<string, unknown>>;
      assert.equal(status.child_requests_hour.used, 2);
    },
  );
});

Deno.test("`llm()` asks a failing server three times at most, then fails saying so; a refusal is asked once", async () => {
  await withServer(
    { fallback: () => ({ status: 503, message: "overloaded" }) },
    async (p, fake) => {
      const reply = p.llm("a");
      reply.catch(() => {});
      await retryWaiting(p, fake, { answers: 1, waitMs: 1_000 });
      p.timers.advance(1_000);
      await retryWaiting(p, fake, { answers: 2, waitMs: 4_000 });
      p.timers.advance(4_000);
      await assert.rejects(reply, /503.*\(after 3 attempts\)$/s);
      assert.deepEqual(fake.statuses, [503, 503, 503]);
    },
  );
  await withServer(
    { fallback: () => ({ status: 400, message: "bad request" }) },
    async (p, fake) => {
      await assert.rejects(p.llm("a"), (error) => !String(error).includes("attempts"));
      assert.deepEqual(fake.statuses, [400]);
      assert.ok((p.timers.nextAt ?? Infinity) > p.timers.clock.now + 60_000, "no wait armed");
    },
  );
});

Deno.test("`llm()` sends no tools: a server without tool calling (Ollama's model, llama-server without --jinja) answers it", async () => {
  for (const profile of ["ollama-no-tools", "llama.cpp-no-jinja"] as const) {
    await withServer({ profile }, async (p, fake) => {
      assert.equal((await p.llm("a")).text, "ok");
      assert.deepEqual(fake.statuses, [200], profile);
      assert.equal(fake.requests[0].body.tools, undefined);
      assert.equal(fake.requests[0].body.tool_choice, undefined);
    });
  }
});

Deno.test("`llm()` answers without the thinking its server left in the text", async () => {
  // llama-server with --reasoning-format none (ggml-org/llama.cpp#24671), and a DeepSeek-R1
  // distill whose opening tag was in the prompt.
  for (const text of ["<think>\nThe user wants 7.\n</think>\n\n7", "It is 7.\n</think>\n\n7"]) {
    await withServer({ fallback: () => ({ text }) }, async (p) => {
      assert.equal((await p.llm("a")).text, "7");
    });
  }
});

// Acceptance of unattended work against the real daemon (`main.ts daemon` under the serve
// permissions), real Python workbenches and the fake model over real HTTP: timers that wake the
// agent with no input, jobs that finish while it waits, budgets that pause without dropping
// input, and the operator's jobs commands. The timer tests are the one place a short real wait
// is allowed: a 2-second timer, and the time a timer falls due while the daemon is dead.

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  type FakeOpenAI,
  type RecordedRequest,
  startFakeOpenAI,
} from "../../fakes/openai_server.ts";
import { REPO_ROOT, startTestDaemon, type TestDaemon } from "../../_helpers/daemon.ts";
import { connectLane, type LaneClient } from "../../_helpers/lane_client.ts";
import type { LaneRecord, ServerMessage } from "../../../runtime/core/mod.ts";
import { processGroupMembers } from "../../../runtime/sandbox/mod.ts";
import { getJob, listJobs } from "../../../store/tables/jobs.ts";
import { modelCallsOf } from "../../_helpers/store.ts";
import { openStore, type Store } from "../../../store/store.ts";
import { getTimer } from "../../../store/tables/timers.ts";
import { readEventsOfKind } from "../../../store/tables/events.ts";

const records = (client: LaneClient, type?: string) =>
  client.messages.filter((m): m is LaneRecord =>
    m.kind === "record" && (type === undefined || m.type === type)
  );

const waitRecord = (
  client: LaneClient,
  type: string,
  extra: (r: LaneRecord) => boolean = () => true,
  timeoutMs = 30_000,
) =>
  client.waitFor<LaneRecord>((m) => m.kind === "record" && m.type === type && extra(m), timeoutMs);

/** Whether a chat request is the agent's own turn (its contract first), not a child call. */
const isTurn = (r: RecordedRequest) =>
  String(r.body?.messages?.[0]?.content ?? "").startsWith("You are the klbr agent");

/** Each POST with the time it arrived, and whether it was the agent's turn. */
function modelServer(): { fake: FakeOpenAI; arrivals: { at: number; turn: boolean }[] } {
  const arrivals: { at: number; turn: boolean }[] = [];
  const fake = startFakeOpenAI({
    fallback: (request) =>
      isTurn(request)
        ? { toolCall: { code: "wait()" } }
        : { text: "child says hi", usage: "openai" },
  });
  const wrapped = fake.requests.push.bind(fake.requests);
  fake.requests.push = (...items: RecordedRequest[]) => {
    for (const item of items) {
      if (item.method === "POST") arrivals.push({ at: Date.now(), turn: isTurn(item) });
    }
    return wrapped(...items);
  };
  return { fake, arrivals };
}

const posts = (fake: FakeOpenAI) => fake.requests.filter((r) => r.method === "POST");
const turns = (fake: FakeOpenAI) => posts(fake).filter(isTurn);
const lastUser = (r: RecordedRequest) =>
  String(
    (r.body.messages as { role: string; content: string }[]).filter((m) => m.role === "user")
      .at(-1)?.content,
  );

async function withDaemon(
  options: { extraConfig?: string },
  fn: (
    parts: {
      fake: FakeOpenAI;
      daemon: TestDaemon;
      client: LaneClient;
      arrivals: { at: number; turn: boolean }[];
    },
  ) => Promise<void>,
): Promise<void> {
  const { fake, arrivals } = modelServer();
  const daemon = await startTestDaemon({ modelUrl: fake.url, extraConfig: options.extraConfig });
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  try {
    await fn({ fake, daemon, client, arrivals });
  } finally {
    await client.close();
    await daemon.stop();
    await fake.close();
  }
}

/** Reads the store of a daemon that is running (no owner lock) or dead. */
function peek<T>(stateDir: string, fn: (store: Store) => T): T {
  const store = openStore(stateDir, { create: false, owner: false });
  try {
    return fn(store);
  } finally {
    store.close();
  }
}

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

/** Polls for a file the job writes; bounded. */
async function fileAppears(path: string): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (await exists(path)) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`${path} never appeared`);
}

/** Whether process group `pgid` is gone within a bounded wait for a delivered SIGKILL. */
async function groupGone(pgid: number): Promise<boolean> {
  for (let i = 0; i < 100; i++) {
    if ((await processGroupMembers(pgid)).length === 0) return true;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return false;
}

const inputsOf = (client: LaneClient, source: string) =>
  records(client, "input.admitted").filter((r) => r.data.source_kind === source);

Deno.test("a cell's 2-second timer wakes the agent with no input from anyone and no request in between", async () => {
  await withDaemon({}, async ({ fake, client, arrivals }) => {
    fake.enqueue({ toolCall: { code: "wait('nap', seconds=2)" } });
    await client.request({ kind: "input", client_msg_id: "m1", text: "take a nap" });
    const firstEnd = await waitRecord(client, "turn.ended");
    assert.equal(firstEnd.data.wait_reason, "nap");
    const set = records(client, "timer.set")[0];
    assert.equal(set.data.wait, true);
    const cell = records(client, "cell.finished")[0];
    const wait = (cell.data.result as { wait: { timer_id: string; due_at: number } }).wait;
    assert.equal(wait.timer_id, set.data.timer_id);
    assert.equal(wait.due_at, set.data.due_at);
    // Due two seconds after the cell asked (the record is written a moment after that).
    const ahead = Number(set.data.due_at) - set.at;
    assert.ok(ahead > 1_900 && ahead <= 2_000, `due ${ahead} ms after it was set`);
    assert.equal(posts(fake).length, 1);

    const fired = await waitRecord(client, "timer.fired", () => true, 15_000);
    assert.ok(fired.at >= Number(set.data.due_at), "it fired at its due time, not before");
    await waitRecord(client, "turn.ended", (r) => r.seq > fired.seq);
    // No one wrote: the only inputs are the owner's first message and the timer.
    assert.deepEqual(records(client, "input.admitted").map((r) => r.data.source_kind), [
      "local",
      "timer",
    ]);
    const timerInput = inputsOf(client, "timer")[0];
    assert.equal(timerInput.data.dedupe_key, `timer:${set.data.timer_id}`);
    // Exactly one request after the first, made after the timer fired, and woken by it.
    assert.equal(posts(fake).length, 2);
    assert.ok(arrivals[1].at >= fired.at);
    assert.match(
      lastUser(posts(fake)[1]),
      /from timer in local:default\]\ntimer tm_\w+ .*: the wait\(\) that ended your turn is over\nnote: nap/,
    );
    const frame = records(client, "frame.accepted").at(-1)!;
    assert.deepEqual(frame.data.input_ids, [timerInput.data.input_id]);
  });
});

Deno.test("a timer that falls due while the daemon is SIGKILLed fires exactly once after restart", async () => {
  const { fake } = modelServer();
  let daemon = await startTestDaemon({ modelUrl: fake.url });
  try {
    fake.enqueue({
      toolCall: { code: "t = await timers.after(2, 'after the crash')\nwait('crashing')" },
    });
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "m1", text: "set a timer" });
    await waitRecord(client, "turn.ended");
    const set = records(client, "timer.set")[0];
    const id = String(set.data.timer_id);
    const dueAt = Number(set.data.due_at);
    await client.close();
    await daemon.kill();
    // The kill landed before the timer was due: it is still pending, and nothing was admitted.
    assert.ok(Date.now() < dueAt, "the daemon died before the timer was due");
    assert.equal(peek(daemon.stateDir, (s) => getTimer(s, id)?.state), "pending");
    // The timer falls due while nothing runs.
    while (Date.now() <= dueAt) {
      await new Promise((resolve) => setTimeout(resolve, dueAt - Date.now() + 5));
    }
    daemon = await daemon.restart();
    const after = await connectLane({ port: daemon.port, token: daemon.token, since: 0 });
    const fired = await waitRecord(after, "timer.fired");
    await waitRecord(after, "turn.ended", (r) => r.seq > fired.seq);
    assert.equal(inputsOf(after, "timer").length, 1);
    await after.close();
    // One more restart: it is final and never fires again.
    await daemon.stop();
    daemon = await daemon.restart();
    const last = await connectLane({ port: daemon.port, token: daemon.token, since: 0 });
    await last.request({ kind: "op.status" });
    assert.equal(records(last, "timer.fired").length, 1);
    assert.equal(inputsOf(last, "timer").length, 1);
    assert.deepEqual(
      peek(
        daemon.stateDir,
        (s) => [getTimer(s, id)?.state, readEventsOfKind(s, "default", "timer.fired").length],
      ),
      ["fired", 1],
    );
    await last.close();
  } finally {
    await daemon.stop();
    await fake.close();
  }
});

const GATED_JOB = "import os, asyncio\nfor _ in range(3000):\n    if os.path.exists('go'):\n" +
  "        break\n    await asyncio.sleep(0.01)\n6 * 7";

Deno.test("a job the agent started finishes while it waits and wakes it with its result", async () => {
  await withDaemon({}, async ({ fake, daemon, client }) => {
    fake.enqueue({
      toolCall: {
        code: `j = await jobs.start(${
          JSON.stringify(GATED_JOB)
        }, name="answer")\nwait("job running")`,
      },
    });
    await client.request({ kind: "input", client_msg_id: "m1", text: "compute the answer" });
    const ended = await waitRecord(client, "turn.ended");
    // The turn is over and the job has not ended: it ends while the agent waits.
    assert.equal(records(client, "job.state").some((r) => r.data.to === "done"), false);
    assert.equal(turns(fake).length, 1);
    await Deno.writeTextFile(join(daemon.workspace, "go"), "");
    const done = await waitRecord(client, "job.state", (r) => r.data.to === "done");
    assert.ok(done.seq > ended.seq);
    const input = await waitRecord(client, "input.admitted", (r) => r.data.source_kind === "job");
    await waitRecord(client, "turn.ended", (r) => r.seq > input.seq);
    assert.equal(turns(fake).length, 2);
    assert.match(
      lastUser(turns(fake)[1]),
      /from job in local:default\]\njob job_\w+ "answer" ended done: its code finished\nvalue: 42/,
    );
    const cellId = String(records(client, "cell.finished")[0].data.cell_id);
    const job = peek(daemon.stateDir, (s) =>
      listJobs(s, "default").filter((j) => j.cellId === cellId))[0];
    const frame = records(client, "frame.accepted")[0];
    assert.deepEqual([job.state, job.frameId, job.releaseId, job.inputId], [
      "done",
      frame.data.frame_id,
      frame.data.policy_revision,
      input.data.input_id,
    ]);
    const health = await (await fetch(`${daemon.url}/health`)).json();
    assert.deepEqual([health.running_jobs, health.pending_jobs], [0, 0]);
  });
});

Deno.test("a job killed by a daemon SIGKILL is reported interrupted after restart, not re-run", async () => {
  const { fake } = modelServer();
  let daemon = await startTestDaemon({ modelUrl: fake.url });
  try {
    const code = "import os, time\nwith open('runs', 'a') as f:\n    f.write('x')\n" +
      "with open('pid', 'w') as f:\n    f.write(str(os.getpid()))\ntime.sleep(600)";
    fake.enqueue({
      toolCall: { code: `await jobs.start(${JSON.stringify(code)}, name="forever")\nwait()` },
    });
    const client = await connectLane({ port: daemon.port, token: daemon.token });
    await client.request({ kind: "input", client_msg_id: "m1", text: "start it" });
    await waitRecord(client, "turn.ended");
    await fileAppears(join(daemon.workspace, "pid"));
    const pid = Number(await Deno.readTextFile(join(daemon.workspace, "pid")));
    const health = await (await fetch(`${daemon.url}/health`)).json();
    assert.equal(health.running_jobs, 1);
    await client.close();
    await daemon.kill();
    // The kill reached the job's own process group (a SIGKILLed process takes a moment to go).
    assert.equal(await groupGone(pid), true, `job group ${pid} still alive after the kill`);
    const jobId = peek(daemon.stateDir, (s) => readEventsOfKind(s, "default", "job.state"))
      .map((e) => e.body as { job_id: string; to: string }).find((b) => b.to === "running")!.job_id;
    assert.equal(peek(daemon.stateDir, (s) => getJob(s, jobId)?.state), "running");

    daemon = await daemon.restart();
    const after = await connectLane({ port: daemon.port, token: daemon.token, since: 0 });
    const interrupted = await waitRecord(after, "job.state", (r) => r.data.to === "interrupted");
    assert.match(
      String(interrupted.data.cause),
      /the daemon stopped while it ran .*never resumed or run again/,
    );
    const input = await waitRecord(after, "input.admitted", (r) => r.data.source_kind === "job");
    await waitRecord(after, "turn.ended", (r) => r.seq > input.seq);
    assert.match(lastUser(turns(fake).at(-1)!), /"forever" ended interrupted/);
    // It ran once: one run marker, one move to running, and no process started for it again.
    assert.equal(await Deno.readTextFile(join(daemon.workspace, "runs")), "x");
    assert.equal(records(after, "job.state").filter((r) => r.data.to === "running").length, 1);
    const final = await (await fetch(`${daemon.url}/health`)).json();
    assert.deepEqual([final.running_jobs, final.pending_jobs], [0, 0]);
    await after.close();
  } finally {
    await daemon.stop();
    await fake.close();
  }
});

Deno.test("a job over its token budget ends over_budget while admission goes on", async () => {
  await withDaemon({}, async ({ fake, daemon, client }) => {
    const code = "await llm('first')\nimport os, asyncio\nfor _ in range(3000):\n" +
      "    if os.path.exists('go'):\n        break\n    await asyncio.sleep(0.01)\n" +
      "for i in range(5):\n    await llm(f'more {i}')";
    fake.enqueue({
      toolCall: {
        code: `await jobs.start(${JSON.stringify(code)}, budget={"tokens": 2000})\nwait()`,
      },
    });
    await client.request({ kind: "input", client_msg_id: "m1", text: "spend" });
    await waitRecord(client, "model_call");
    // While the job runs, and as it is ended, inputs are acknowledged at once.
    const during = await client.request({
      kind: "input",
      client_msg_id: "m2",
      text: "still here?",
    });
    assert.equal(during.kind, "ack");
    await Deno.writeTextFile(join(daemon.workspace, "go"), "");
    const over = await waitRecord(client, "job.state", (r) => r.data.to === "over_budget");
    assert.equal(over.data.cause, "job tokens: 2468 of 2000 used");
    const after = await client.request({ kind: "input", client_msg_id: "m3", text: "and now?" });
    assert.equal(after.kind, "ack");
    const input = await waitRecord(client, "input.admitted", (r) => r.data.source_kind === "job");
    await waitRecord(
      client,
      "frame.accepted",
      (r) => (r.data.input_ids as string[]).includes(String(input.data.input_id)),
    );
    const job = peek(daemon.stateDir, (s) => getJob(s, String(over.data.job_id)))!;
    assert.deepEqual([job.state, job.tokensUsed, job.requestsUsed], ["over_budget", 2468, 2]);
    // Each of its calls was recorded against it, and none was made past the limit.
    const calls = peek(daemon.stateDir, (s) => modelCallsOf(s, { jobId: job.id }));
    assert.deepEqual(calls.map((c) => [c.kind, c.state, c.promptTokens, c.completionTokens]), [
      ["llm", "done", 1200, 34],
      ["llm", "done", 1200, 34],
    ]);
    assert.equal(posts(fake).filter((r) => !isTurn(r)).length, 2);
  });
});

Deno.test("llm() is recorded with its causation and counted; a spent hour pauses the next turn, not admission", async () => {
  await withDaemon(
    { extraConfig: "budget {\n tokens_per_hour 1000\n}\n" },
    async ({ fake, daemon, client }) => {
      fake.enqueue({
        toolCall: {
          code:
            "r = await llm('name a prime', max_tokens=20)\nprint(r)\nfrom klbr.llm import BudgetExceeded\n" +
            "try:\n    await llm('again')\nexcept BudgetExceeded as e:\n    print('refused until', e.until)\nwait()",
        },
      });
      await client.request({ kind: "input", client_msg_id: "m1", text: "ask a child" });
      await waitRecord(client, "turn.ended");
      const cell = records(client, "cell.finished")[0];
      assert.match(
        (cell.data.result as { stdout: string }).stdout,
        /^child says hi\nrefused until \d{4}-\d\d-\d\dT/,
      );
      const frameId = String(records(client, "frame.accepted")[0].data.frame_id);
      const calls = peek(
        daemon.stateDir,
        (s) => modelCallsOf(s, { cellId: String(cell.data.cell_id) }),
      );
      assert.deepEqual(
        calls.map((c) => [c.kind, c.route, c.frameId, c.jobId, c.request.prompt, c.promptTokens]),
        [
          ["llm", "fast", frameId, null, "name a prime", 1200],
        ],
      );
      const child = posts(fake).find((r) => !isTurn(r))!;
      assert.deepEqual(
        [child.body.max_tokens, "tools" in child.body, "tool_choice" in child.body],
        [20, false, false],
      );
      assert.equal(
        posts(fake).filter((r) => !isTurn(r)).length,
        1,
        "the refused call made no request",
      );
      const spent = records(client, "budget.exhausted")[0];
      assert.equal(spent.data.what, "tokens_per_hour");

      // The hour is spent: a new input is admitted and framed, and its turn waits for the model.
      const requests = posts(fake).length;
      const ack = await client.request({ kind: "input", client_msg_id: "m2", text: "hello?" });
      assert.equal(ack.kind, "ack");
      await waitRecord(
        client,
        "budget.exhausted",
        (r) => r.data.effect === "the agent's next model request waits",
      );
      const health = await (await fetch(`${daemon.url}/health`)).json();
      assert.equal(health.ok, true);
      assert.equal(health.over_budget[0].what, "tokens_per_hour");
      assert.equal(health.over_budget[0].used, 1234);
      // The operator path works while the turn is paused, and stops it.
      const status = await client.request({ kind: "op.status" }) as Extract<
        ServerMessage,
        { kind: "op.result" }
      >;
      assert.equal(
        (status.result.budget as { tokens_hour: { used: number } }).tokens_hour.used,
        1234,
      );
      const stop = await client.request({ kind: "op.stop", session: "default" });
      assert.equal(stop.kind, "op.result");
      const stopped = await waitRecord(client, "frame.finished", (r) => r.data.state === "failed");
      assert.match(String(stopped.data.reason), /^stopped: /);
      assert.equal(posts(fake).length, requests, "no model request while the hour is spent");
    },
  );
});

/** Runs `main.ts <args>` as the operator does, with the `klbr` task's permissions. */
async function klbr(args: string[]) {
  const config = JSON.parse(await Deno.readTextFile(join(REPO_ROOT, "deno.json")));
  const flags = (config.tasks.klbr as string).split(/\s+/).filter((p) => p.startsWith("--allow-"));
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", ...flags, join(REPO_ROOT, "main.ts"), ...args],
    cwd: REPO_ROOT,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  return {
    code: out.code,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
}

Deno.test("klbr jobs lists jobs and timers; klbr cancel-job kills the job and wakes the agent", async () => {
  await withDaemon({}, async ({ fake, daemon, client }) => {
    fake.enqueue({
      toolCall: {
        code:
          "await timers.after(3600, 'later')\nawait jobs.start('import time\\ntime.sleep(600)', name='sleeper')\nwait()",
      },
    });
    await client.request({ kind: "input", client_msg_id: "m1", text: "start" });
    await waitRecord(client, "job.state", (r) => r.data.to === "running");
    const base = ["--state", daemon.stateDir, "--port", String(daemon.port)];
    const listed = await klbr(["jobs", "default", "--json", ...base]);
    assert.equal(listed.code, 0, listed.stderr);
    const parsed = JSON.parse(listed.stdout);
    assert.deepEqual([parsed.running_jobs, parsed.pending_timers, parsed.due_timers], [1, 1, 0]);
    const job = parsed.jobs[0];
    assert.deepEqual([job.name, job.state], ["sleeper", "running"]);
    assert.equal(parsed.timers[0].note, "later");
    const text = await klbr(["jobs", ...base]);
    assert.match(text.stdout, new RegExp(`^ {2}${job.job_id} {2}running {5}code "sleeper"`, "m"));
    assert.match(text.stdout, /^timers: 1 pending, 0 due$/m);
    const health = await (await fetch(`${daemon.url}/health`)).json();
    assert.deepEqual([health.running_jobs, health.pending_timers, health.due_timers], [1, 1, 0]);

    const cancelled = await klbr(["cancel-job", job.job_id, "--json", ...base]);
    assert.equal(cancelled.code, 0, cancelled.stderr);
    assert.deepEqual(
      [JSON.parse(cancelled.stdout).state, JSON.parse(cancelled.stdout).cancelled],
      ["cancelled", true],
    );
    const moved = await waitRecord(client, "job.state", (r) => r.data.to === "cancelled");
    assert.equal(moved.data.cause, "cancelled by the operator");
    const input = await waitRecord(client, "input.admitted", (r) => r.data.source_kind === "job");
    await waitRecord(
      client,
      "frame.accepted",
      (r) => (r.data.input_ids as string[]).includes(String(input.data.input_id)),
    );
    const unknown = await klbr(["cancel-job", "job_nope", ...base]);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /^klbr cancel-job: cannot find job: no job job_nope/m);
    const usage = await klbr(["cancel-job", ...base]);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /usage: klbr cancel-job <job-id>/);
  });
});

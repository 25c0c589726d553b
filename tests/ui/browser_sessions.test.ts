/**
 * A page opened on a session other than `default` (`?session=b`), in real headless Chromium
 * over the in-memory lane host: it says that session's own state (from `op.status`, whose
 * `sessions` map is per session), never the default session's that `/health` reports; from
 * `/health` it takes only what is the daemon's (store, model, sandbox, budgets).
 *
 * @module
 */

import assert from "node:assert/strict";
import { ensureUiBuilt } from "../../runtime/setup/mod.ts";
import { launchChromium, openPage, REPO, screenshot } from "./_browser.ts";
import { MemoryLaneHost, startLaneServer, TEST_TOKEN } from "./_memory_lane_host.ts";

const UI_DIR = await ensureUiBuilt({ repoRoot: REPO });

/** A `/health` body of the daemon's shape whose default session is in `state`. */
function defaultSessionHealth(state: string, pending: number): Record<string, unknown> {
  const held = state !== "running";
  return {
    ok: true,
    status: held ? "degraded" : "ok",
    reasons: held
      ? [`the session is ${state} by the operator: new messages wait until klbr resume default`]
      : [],
    admitting: true,
    store: { state: "ok", error: null, since: null },
    store_writable: true,
    model: { state: "ok", error: null, since: null },
    artifacts: { state: "ok", error: null, since: null },
    discord: null,
    session_state: state,
    waiting_reason: held ? `the session is ${state} by the operator` : null,
    stalled: false,
    oldest_pending_age_ms: pending > 0 ? 1_000 : null,
    pending_inputs: pending,
    waiting_inputs: 0,
    hook_backlog: 0,
    last_hook_failure: null,
    running_jobs: 0,
    pending_jobs: 0,
    pending_timers: 0,
    due_timers: 0,
    routes_adapted: [],
    over_budget: [],
    version: "test",
  };
}

/** Opens `?session=b` as the operator, with `/health` from `health`; runs `body`; closes all. */
async function onSessionB(
  host: MemoryLaneHost,
  health: () => Record<string, unknown>,
  body: (page: import("playwright-core").Page) => Promise<void>,
): Promise<void> {
  const server = await startLaneServer(host, { uiDir: UI_DIR, health });
  const browser = await launchChromium();
  try {
    const { page, errors } = await openPage(browser, 1280);
    await page.goto(`${server.url}/?session=b#token=${TEST_TOKEN}`);
    await page.waitForSelector("text=operator role granted");
    // Both reads have come: /health (its table) and op.status (the state field).
    await page.waitForSelector("#operator .health-table");
    await page.waitForSelector('#operator [data-field="state"]:not(:has-text("unknown"))');
    await body(page);
    assert.deepEqual(errors, [], "the page threw");
  } finally {
    await browser.close();
    await server.stop();
  }
}

Deno.test("a page on session b does not say the default session is stopped", async () => {
  const host = new MemoryLaneHost();
  host.loops.set("default", { state: "stopped", pending_inputs: 2 });
  await onSessionB(host, () => defaultSessionHealth("stopped", 2), async (page) => {
    assert.match(await page.locator("header .session").textContent() ?? "", /session b/);
    assert.equal(await page.textContent('#operator [data-field="state"]'), "running");
    // The health table names whose state `/health` gives.
    const parts = await page.textContent('#operator table[data-table="health-parts"]');
    assert.match(parts ?? "", /default sessionstopped/);
    await screenshot(page, "sessions", "01-default-stopped");
    assert.deepEqual(
      await page.$$eval("[data-state]", (nodes) => nodes.map((n) => n.getAttribute("data-state"))),
      [],
      "session b runs: nothing holds it, whatever holds the default session",
    );
  });
});

Deno.test("a page on session b says b is stopped, with Resume for b, while the default session runs", async () => {
  const host = new MemoryLaneHost();
  host.loops.set("b", { state: "stopped", pending_inputs: 1 });
  await onSessionB(host, () => defaultSessionHealth("running", 0), async (page) => {
    const header = page.locator('header .state-header-item[data-state="stopped"]');
    await header.waitFor();
    assert.match(await header.textContent() ?? "", /stopped\s*Resume/);
    await page.waitForSelector('#timeline .state-line[data-state="stopped"]');
    await screenshot(page, "sessions", "02-b-stopped");
    await page.click('header button[data-fix="stopped"]');
    const [resume] = await host.operationsOf("op.resume");
    assert.deepEqual(resume, { kind: "op.resume", request: resume.request, session: "b" });
  });
});

Deno.test("a page on session b keeps its header calm while only the default session is held or stalled", async () => {
  const host = new MemoryLaneHost();
  host.loops.set("default", { state: "drained", pending_inputs: 2 });
  const health = () => {
    const report = defaultSessionHealth("drained", 2);
    // The default session's own trouble, each a reason of `/health`'s `degraded`.
    return {
      ...report,
      stalled: true,
      waiting_inputs: 2,
      reasons: [
        ...(report.reasons as string[]),
        "the session stalled after its retries",
        "2 input(s) waiting over 300000 ms",
      ],
    };
  };
  await onSessionB(host, health, async (page) => {
    assert.equal(await page.getAttribute("header.topbar", "data-trouble"), "none");
    assert.equal(await page.locator("header .health").count(), 0, "no health badge");
  });
});

Deno.test("a page on session b turns amber for the daemon's trouble and b's own hold, never naming the default session's", async () => {
  const host = new MemoryLaneHost();
  host.loops.set("b", { state: "drained", pending_inputs: 1 });
  const budget = "the budget model_requests_hour is spent (100 of 100 used): new turns wait";
  const health = () => {
    const report = defaultSessionHealth("stopped", 2);
    return { ...report, reasons: [...(report.reasons as string[]), budget] };
  };
  await onSessionB(host, health, async (page) => {
    await page.waitForSelector('header .state-header-item[data-state="drained"]');
    assert.equal(await page.getAttribute("header.topbar", "data-trouble"), "amber");
    const detail = await page.textContent("header .health .health-detail");
    assert.equal(
      detail,
      `${budget}; the session is drained by the operator: new messages wait until klbr resume b`,
    );
  });
});

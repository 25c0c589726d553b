/**
 * The jobs panel in real headless Chromium over the in-memory lane host: timers and jobs from
 * their records, with their states in words, and the operator's cancel button sending
 * `op.cancel_job` for the job it belongs to.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ensureUiBuilt } from "../../runtime/setup/mod.ts";
import { launchChromium, openPage, REPO, screenshot } from "./_browser.ts";
import { MemoryLaneHost, startLaneServer, TEST_TOKEN } from "./_memory_lane_host.ts";
import { body } from "./_record_data.ts";

const UI_DIR = await ensureUiBuilt({ repoRoot: REPO });

Deno.test("the jobs panel shows timers and jobs and cancels a running job for the operator", async () => {
  const host = new MemoryLaneHost();
  const server = await startLaneServer(host, { uiDir: UI_DIR });
  const browser = await launchChromium();
  try {
    const { page, errors } = await openPage(browser, 1280);
    host.append("timer.set", body("timer.set", { due_at: Date.now() + 60_000 }));
    host.append(
      "job.state",
      body("job.state", { from: "pending", to: "running", cause: "a job slot was free" }),
    );
    host.append(
      "job.state",
      body("job.state", {
        job_id: "job_2",
        name: "old",
        kind: "agent",
        from: "running",
        to: "interrupted",
        cause: "the daemon stopped while it ran",
      }),
    );
    await page.goto(`${server.url}/#token=${TEST_TOKEN}`);
    await page.waitForSelector("text=operator role granted");
    await page.waitForSelector('#jobs [data-job="job_1"]');
    const timer = await page.locator('#jobs [data-timer="tm_1"]').textContent();
    assert.match(timer ?? "", /pending.*wait\(\) · check the build/);
    assert.match(
      await page.locator('#jobs [data-job="job_2"]').textContent() ?? "",
      /interrupted · not re-run/,
    );
    // Only the running job can be cancelled.
    assert.equal(await page.locator('#jobs [data-job="job_2"] button').count(), 0);
    await screenshot(page, "jobs", "01-running");
    await page.click('#jobs [data-job="job_1"] button:has-text("Cancel job")');
    await page.waitForSelector('#jobs .op-result:has-text("done")');
    assert.deepEqual(host.operations.filter((o) => o.kind === "op.cancel_job"), [
      {
        kind: "op.cancel_job",
        request: host.operations.find((o) => o.kind === "op.cancel_job")!.request,
        job: "job_1",
      },
    ]);
    host.append(
      "job.state",
      body("job.state", { from: "running", to: "cancelled", cause: "cancelled by the operator" }),
    );
    await page.waitForSelector('#jobs [data-job="job_1"][data-state="cancelled"]');
    assert.equal(await page.locator('#jobs [data-job="job_1"] button').count(), 0);
    assert.deepEqual(errors, [], "the page threw");
  } finally {
    await browser.close();
    await server.stop();
  }
});

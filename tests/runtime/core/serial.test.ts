/**
 * `SerialRunner`: one run at a time, and a request during a run is never lost.
 *
 * @module
 */

import assert from "node:assert/strict";
import { SerialRunner } from "../../../runtime/core/mod.ts";

/** Work whose runs each wait for a gate the test opens. */
function gatedWork() {
  const gates: (() => void)[] = [];
  let runs = 0;
  let concurrent = 0;
  let maxConcurrent = 0;
  const work = async () => {
    runs++;
    concurrent++;
    maxConcurrent = Math.max(maxConcurrent, concurrent);
    await new Promise<void>((resolve) => gates.push(resolve));
    concurrent--;
  };
  const open = async () => {
    while (gates.length === 0) await Promise.resolve();
    gates.shift()!();
  };
  return { work, open, runs: () => runs, maxConcurrent: () => maxConcurrent };
}

Deno.test("`SerialRunner.run()` merges requests made during a run into one more run", async () => {
  const w = gatedWork();
  const runner = new SerialRunner(w.work);
  const first = runner.run();
  assert.equal(runner.running, true);
  runner.run();
  runner.run();
  runner.run();
  await w.open();
  await w.open();
  await first;
  assert.equal(w.runs(), 2, "three requests during the first run give one more run");
  assert.equal(w.maxConcurrent(), 1);
  assert.equal(runner.running, false);
});

Deno.test("`SerialRunner.run()` after the work ended runs it again; idle() waits for the chain", async () => {
  const w = gatedWork();
  const runner = new SerialRunner(w.work);
  runner.run();
  await w.open();
  await runner.idle();
  assert.equal(w.runs(), 1);
  runner.run();
  const idle = runner.idle();
  await w.open();
  await idle;
  assert.equal(w.runs(), 2);
});

Deno.test("`SerialRunner.run()` rejects with the work's error and runs again when asked", async () => {
  let fail = true;
  let runs = 0;
  const runner = new SerialRunner(() => {
    runs++;
    return fail ? Promise.reject(new Error("store failed")) : Promise.resolve();
  });
  await assert.rejects(runner.run(), /store failed/);
  await runner.idle(); // idle never rejects
  fail = false;
  await runner.run();
  assert.equal(runs, 2);
});

Deno.test("`SerialRunner.run()` right after the last pass ended starts a new run, never loses it", async () => {
  // The request lands in the microtask after the chain's last pass has seen no request: a
  // runner that clears itself a microtask later would merge it into the ending chain and drop it.
  let runs = 0;
  let again: Promise<void> | undefined;
  const runner = new SerialRunner(() => {
    runs++;
    const done = Promise.resolve();
    if (runs === 1) {
      done.then(() => {}).then(() => {
        again = runner.run();
      });
    }
    return done;
  });
  await runner.run();
  for (let i = 0; i < 10 && again === undefined; i++) await Promise.resolve();
  await again;
  assert.equal(runs, 2);
  assert.equal(runner.running, false);
});

Deno.test("`SerialRunner.run()` whose work throws at once leaves the runner free", async () => {
  let runs = 0;
  const runner = new SerialRunner(() => {
    runs++;
    throw new Error("at once");
  });
  await assert.rejects(runner.run(), /at once/);
  assert.equal(runner.running, false);
  await assert.rejects(runner.run(), /at once/);
  assert.equal(runs, 2);
});

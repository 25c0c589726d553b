// The contract (the system message) states the limits a turn runs under, in the words a
// model reads: the step limit, the cell timeout and the size of a result's excerpt.

import assert from "node:assert/strict";
import { contractMessage } from "../../../runtime/session/mod.ts";

Deno.test("`contractMessage()` states the step limit, the cell timeout and the excerpt size, grouped as English writes numbers", () => {
  const text = contractMessage("/work/project", {
    limits: { maxSteps: 12, cellTimeoutMs: 90_000 },
  });
  assert.match(text, /Limits: 12 model steps a turn/);
  assert.match(text, /a cell\nruns at most 90 s/);
  assert.match(text, /a result shows about 8,192 characters of each output\./);
  assert.match(text, /Workspace \/work\/project, in every cell/);
});

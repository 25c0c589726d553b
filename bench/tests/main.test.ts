// The bench's command line: its arguments, help and exit codes (a run itself is tested in
// run_bench.test.ts).

import assert from "node:assert/strict";
import { main } from "../main.ts";

async function capture(fn: () => Promise<number>) {
  const out: string[] = [];
  const err: string[] = [];
  const { log, error } = console;
  console.log = (...a: unknown[]) => out.push(a.join(" "));
  console.error = (...a: unknown[]) => err.push(a.join(" "));
  try {
    return { code: await fn(), out: out.join("\n"), err: err.join("\n") };
  } finally {
    console.log = log;
    console.error = error;
  }
}

Deno.test("`main()` refuses an unknown option with exit code 2 and the usage", async () => {
  const { code, out, err } = await capture(() => main(["--fast"]));
  assert.equal(code, 2);
  assert.equal(out, "");
  assert.match(err, /^bench: cannot parse arguments: .*--fast/);
  assert.match(err, /usage: deno task bench \[--quick\] \[--json\]/);
});

Deno.test("`main()` refuses a positional argument with exit code 2", async () => {
  const { code, err } = await capture(() => main(["admission"]));
  assert.equal(code, 2);
  assert.match(err, /^bench: cannot parse arguments: .*admission/);
});

Deno.test("`main()` refuses a value given to a flag with exit code 2", async () => {
  const { code } = await capture(() => main(["--json=yes"]));
  assert.equal(code, 2);
});

Deno.test("`main()` prints the usage for --help and runs nothing", async () => {
  const { code, out, err } = await capture(() => main(["--help"]));
  assert.equal(code, 0);
  assert.match(out, /^usage: deno task bench \[--quick\] \[--json\]/);
  assert.equal(err, "");
});

Deno.test("`main()` refuses an unknown --only phase with exit code 2, naming it and the phases", async () => {
  const { code, out, err } = await capture(() => main(["--only", "admission,warp"]));
  assert.equal(code, 2);
  assert.equal(out, "");
  assert.match(err, /--only takes startup, admission, blocked, replay, .* \(got warp\)/);
});

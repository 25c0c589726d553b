// context.prepare's messages against real Python processes: a hook that edits its argument in
// place changes neither the host's messages nor what a later call gets, an unchanged answer
// hands back the host's own messages, and the hook sees the whole list in order.

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  KernelSupervisor,
  prepareMessages,
  resolvePython,
  skillRoots,
} from "../../../runtime/kernel/mod.ts";
import { KlbrError } from "../../../runtime/core/mod.ts";
import { REPO_ROOT } from "../../_helpers/daemon.ts";

const PYTHON = (await resolvePython("python3")).executable;

/** Runs `fn` with a supervisor whose release's context.py is `source`. */
async function withHooks(
  source: string,
  fn: (
    prepare: (messages: unknown[]) => Promise<unknown>,
    sup: KernelSupervisor,
    behavior: { revision: string; path: string },
  ) => Promise<void>,
) {
  const root = await Deno.makeTempDir({ prefix: "klbr-delta-" });
  const release = join(root, "release");
  await Deno.mkdir(release);
  await Deno.writeTextFile(join(release, "context.py"), source);
  const sup = new KernelSupervisor({
    python: PYTHON,
    session: "delta",
    workspace: root,
    repoRoot: REPO_ROOT,
    skillRoots: skillRoots({
      skillsDir: join(REPO_ROOT, "skills"),
      repoRoot: root,
      stateDir: root,
    }),
    recordGeneration: () => {},
  });
  const behavior = { revision: "delta-test", path: release };
  try {
    await fn(
      (messages) => sup.hook("context.prepare", { messages }, { behavior, timeoutMs: 10_000 }),
      sup,
      behavior,
    );
  } finally {
    await sup.shutdown();
    await Deno.remove(root, { recursive: true });
  }
}

const SYSTEM = { role: "system", content: "you are a test" };
const item = (content: string) => Object.freeze({ role: "user", content });

Deno.test("a hook that edits its messages in place changes neither the host's list nor a later call's", async () => {
  // Appends to the last message's content and adds a message, both in place, then returns it.
  const source = "def prepare(messages, **context):\n" +
    "    messages[-1]['content'] += ' (seen)'\n" +
    "    messages.append({'role': 'user', 'content': 'extra'})\n" +
    "    return messages\n";
  await withHooks(source, async (prepare) => {
    const a = item("a");
    const first = [{ ...SYSTEM }, a];
    assert.deepEqual(await prepare(first), [
      SYSTEM,
      { role: "user", content: "a (seen)" },
      { role: "user", content: "extra" },
    ]);
    assert.deepEqual(first, [SYSTEM, { role: "user", content: "a" }], "the host's own are intact");
    // The first call's edits reach nothing the second call gets (no " (seen)" on a, no "extra").
    const second = [{ ...SYSTEM }, a, item("b")];
    assert.deepEqual(await prepare(second), [
      SYSTEM,
      { role: "user", content: "a" },
      { role: "user", content: "b (seen)" },
      { role: "user", content: "extra" },
    ]);
  });
});

Deno.test("an unchanged answer is the host's own messages, across growing requests", async () => {
  await withHooks("def prepare(messages, **context):\n    return messages\n", async (prepare) => {
    const history: unknown[] = [];
    for (let i = 0; i < 5; i++) {
      history.push(item(`turn ${i}`));
      const messages = [{ ...SYSTEM }, ...history, { role: "user", content: `opening ${i}` }];
      assert.equal(await prepare(messages), messages, `request ${i} handed back as it was`);
    }
  });
});

Deno.test("a hook sees the whole list, in order", async () => {
  // Echoes what it was given as one string, so every message's place is checked.
  const source = "def prepare(messages, **context):\n" +
    "    return [{'role': 'user', 'content': '|'.join(m['content'] for m in messages)}]\n";
  await withHooks(source, async (prepare) => {
    const [a, b, c] = [item("a"), item("b"), item("c")];
    const seen = async (messages: unknown[]) =>
      ((await prepare(messages)) as { content: string }[])[0].content;
    assert.equal(await seen([{ ...SYSTEM }, a, b]), "you are a test|a|b");
    // Dropped from the front, reordered, a new one in the middle, a summary that changed.
    assert.equal(
      await seen([{ ...SYSTEM }, { role: "user", content: "summary" }, c, b, item("d")]),
      "you are a test|summary|c|b|d",
    );
    assert.equal(await seen([b]), "b");
    assert.equal(await seen([]), "");
  });
});

Deno.test("prepareMessages() refuses a reply outside the protocol", async () => {
  await assert.rejects(
    prepareMessages({ messages: [item("a")] }, () => Promise.resolve([1])),
    (error: unknown) =>
      error instanceof KlbrError && error.code === "hook_failed" &&
      error.message.includes("outside the protocol"),
  );
});

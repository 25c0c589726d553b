// Skills through the real daemon with the scripted model, the workspace elsewhere than the
// checkout: the builtin skills still come from the checkout (the contract lists them and
// `help(skills.code)` works); a cell writes a managed skill through `skills.write`, which the
// next turn's generation offers; refused writes say why; a job may not write skills.

import assert from "node:assert/strict";
import { join } from "node:path";
import type { LaneRecord } from "../../../runtime/core/mod.ts";
import { REPO_ROOT, startTestDaemon } from "../../_helpers/daemon.ts";
import { connectLane, type LaneClient, sendAndWait } from "../../_helpers/lane_client.ts";
import { type RecordedRequest, startFakeOpenAI } from "../../fakes/openai_server.ts";

const WAIT = { toolCall: { code: "wait()" } };
const NOTES = "# notes\n\nKeep running notes in notes.md of the workspace.\n";

const system = (r: RecordedRequest) => String(r.body.messages[0].content);
const lastMessage = (r: RecordedRequest) => String(r.body.messages.at(-1).content);
const stdoutOf = (r: LaneRecord) => String((r.data.result as { stdout?: string }).stdout ?? "");

/** Sends `text` and returns the `cell.finished` records of the frame that took it up. */
async function turn(client: LaneClient, text: string): Promise<LaneRecord[]> {
  const { accepted, finished } = await sendAndWait(client, text);
  return client.messages.filter((m): m is LaneRecord =>
    m.kind === "record" && m.type === "cell.finished" && m.seq > accepted.seq &&
    m.seq < finished.seq
  );
}

Deno.test("with the workspace elsewhere the builtin skills come from the checkout; a managed skill written by a cell is offered from the next turn", async () => {
  const fake = startFakeOpenAI({ fallback: () => WAIT });
  // KLBR_SKILLS_DIR empty is unset: the builtin root is the checkout's skills/, not the
  // workspace's (a fresh temp directory).
  const daemon = await startTestDaemon({ modelUrl: fake.url, env: { KLBR_SKILLS_DIR: "" } });
  const client = await connectLane({ port: daemon.port, token: daemon.token });
  const chats = () => fake.requests.filter((r) => r.method === "POST");
  try {
    fake.enqueue(
      { toolCall: { code: "help(skills.code)" } },
      {
        toolCall: {
          code: `r = await skills.write("notes", ${JSON.stringify(NOTES)})\n` +
            'print(r["id"], r["bytes"], r["offered_from"])\nprint("notes" in dir(skills))',
        },
      },
      {
        toolCall: {
          code: [
            "from klbr.rpc import RpcError",
            'for args in [("other", "# notes\\n"), ("code", "# code\\nmine\\n"), ("Bad", "# Bad\\n")]:',
            "    try:",
            "        await skills.write(*args)",
            "    except RpcError as e:",
            "        print(e.code, e.host_message)",
            "try:",
            '    await skills.delete("workspace")',
            "except RpcError as e:",
            "    print(e.code, e.host_message)",
            "wait()",
          ].join("\n"),
        },
      },
    );
    const [help, write, refused] = await turn(client, "one");
    const contract = system(chats()[0]);
    assert.match(contract, /\nSkills \(revision [0-9a-f]{12}\): code, maintenance, workspace; /);
    assert.ok(contract.includes("(help(skills.code))"), contract);
    const code = await Deno.readTextFile(join(REPO_ROOT, "skills", "code", "SKILL.md"));
    assert.ok(stdoutOf(help).includes(code.split("\n")[2]), stdoutOf(help));
    assert.equal(
      stdoutOf(write),
      `notes ${NOTES.length} your next turn: the workbench restarts before it, so variables ` +
        "are lost\nFalse\n",
    );
    assert.equal(
      await Deno.readTextFile(join(daemon.stateDir, "skills", "notes", "SKILL.md")),
      NOTES,
    );
    const builtin = join(REPO_ROOT, "skills", "code");
    assert.equal(
      stdoutOf(refused),
      'skill_invalid cannot write skill "other": the first non-empty line must be exactly ' +
        '"# other" (got "# notes")\n' +
        `skill_invalid cannot write skill "code": the builtin root holds this id (${builtin}); ` +
        "builtin and managed skills are one namespace, so a managed skill cannot replace or " +
        "remove it: choose another id\n" +
        'skill_invalid cannot write skill "Bad": the id must match ^[a-z][a-z0-9_]*$ and be at ' +
        'most 64 characters, so skills.<id> is a Python name (got "Bad")\n' +
        `skill_invalid cannot delete skill "workspace": the builtin root holds this id (${
          join(REPO_ROOT, "skills", "workspace")
        }); builtin and managed skills are one namespace, so a managed skill cannot replace ` +
        "or remove it: choose another id\n",
    );

    // The next turn: a new generation offers the skill; the contract lists it.
    fake.enqueue(
      {
        toolCall: {
          code: "print(skills.notes.body == " + JSON.stringify(NOTES) + ")\n" +
            "print([s for s in dir(skills) if s not in ('delete', 'refused', 'revision', 'roots', 'write')])\n" +
            "j = await jobs.start(\"await skills.write('x', '# x\\\\n')\")\n" +
            'print((await jobs.result(j))["result"]["error"]["message"])\nwait()',
        },
      },
    );
    const before = chats().length;
    const [next] = await turn(client, "two");
    const second = chats()[before];
    assert.match(
      system(second),
      /\nSkills \(revision [0-9a-f]{12}\): code, maintenance, notes, workspace; /,
    );
    assert.match(
      lastMessage(second),
      /your workbench was restarted since your last step: variables and imports are gone\./,
    );
    const lines = stdoutOf(next).split("\n");
    assert.deepEqual(lines.slice(0, 2), ["True", "['code', 'maintenance', 'notes', 'workspace']"]);
    assert.match(
      lines[2],
      /skills\.write failed \(forbidden\): cannot call skills\.write from a job: only the agent's own cells change its skills/,
    );
    const reset = client.messages.find((m) =>
      m.kind === "record" && m.type === "kernel.reset" &&
      String((m as LaneRecord).data.reason).startsWith("skills changed: write notes")
    );
    assert.ok(reset, "the new generation names the change");
  } finally {
    await client.close();
    await daemon.stop();
    await fake.close();
    await Deno.remove(daemon.stateDir, { recursive: true }).catch(() => {});
    await Deno.remove(daemon.workspace, { recursive: true }).catch(() => {});
  }
});

// `doctor` reports the Discord configuration, and with `--probe` checks the token with one
// `GET /users/@me` against the loopback fake Discord; the token itself is never printed.

import assert from "node:assert/strict";
import { join } from "node:path";
import { REPO_ROOT } from "../../_helpers/daemon.ts";
import { startFakeDiscord } from "../../fakes/discord_server.ts";

async function doctor(state: string, args: string[], env: Record<string, string>) {
  const config = JSON.parse(await Deno.readTextFile(join(REPO_ROOT, "deno.json")));
  const flags = (config.tasks.doctor as string).split(/\s+/).filter((p) =>
    p.startsWith("--allow-")
  );
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", ...flags, join(REPO_ROOT, "main.ts"), "doctor", "--state", state, ...args],
    cwd: REPO_ROOT,
    env: { NO_COLOR: "1", KLBR_SKILLS_DIR: join(REPO_ROOT, "skills"), ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: out.code, stdout: new TextDecoder().decode(out.stdout) };
}

Deno.test("doctor reports Discord's token variable, channels and intents, and --probe checks the token once", async () => {
  const state = await Deno.makeTempDir({ prefix: "klbr-doctor-" });
  const fake = startFakeDiscord();
  try {
    await Deno.writeTextFile(
      join(state, "config.kdl"),
      `llm { url "http://127.0.0.1:9/v1" }\ndiscord {\n token_env "KLBR_TEST_DISCORD"\n channels "123" "456"\n api_url "${fake.apiUrl}"\n gateway_url "${fake.gatewayUrl}"\n}\n`,
    );
    const plain = await doctor(state, [], { KLBR_TEST_DISCORD: "good-token" });
    assert.match(plain.stdout, /^discord: token KLBR_TEST_DISCORD is set$/m);
    assert.match(plain.stdout, /^ {2}channels 123, 456$/m);
    assert.match(
      plain.stdout,
      /^ {2}intents 37377 \(GUILDS \| GUILD_MESSAGES \| DIRECT_MESSAGES \| MESSAGE_CONTENT; MESSAGE_CONTENT is privileged\)$/m,
    );
    assert.match(plain.stdout, /token not probed/);
    assert.equal(fake.posts.length, 0);

    const probed = await doctor(state, ["--probe"], { KLBR_TEST_DISCORD: "good-token" });
    assert.match(probed.stdout, /^ {2}token ok: GET \/users\/@me is bot klbr-bot \(1\)$/m);
    assert.ok(!probed.stdout.includes("problem: discord"), probed.stdout);
    assert.deepEqual(fake.posts.map((p) => [p.method, p.path, p.authorization]), [
      ["GET", "/users/@me", "Bot good-token"],
    ]);

    const refused = await doctor(state, ["--probe"], { KLBR_TEST_DISCORD: "wrong" });
    assert.equal(refused.code, 1);
    assert.match(
      refused.stdout,
      /^problem: discord: GET \/users\/@me refused the token \(HTTP 401\): reset it in the developer portal \(Bot → Reset Token\) and set KLBR_TEST_DISCORD$/m,
    );
    assert.doesNotMatch(refused.stdout, /^problem: discord: .*unreachable/m);

    const unset = await doctor(state, [], {});
    assert.equal(unset.code, 1);
    assert.match(unset.stdout, /^discord: token KLBR_TEST_DISCORD is NOT set$/m);
    for (const run of [plain, probed, refused]) assert.ok(!run.stdout.includes("good-token"));
  } finally {
    await fake.close();
    await Deno.remove(state, { recursive: true });
  }
});

Deno.test("doctor --probe against a closed loopback port says unreachable, not refused", async () => {
  const state = await Deno.makeTempDir({ prefix: "klbr-doctor-" });
  // A port that was free a moment ago: nothing listens on it.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = listener.addr.port;
  listener.close();
  try {
    await Deno.writeTextFile(
      join(state, "config.kdl"),
      `llm { url "http://127.0.0.1:9/v1" }\ndiscord {\n token_env "KLBR_TEST_DISCORD"\n channels "123"\n api_url "http://127.0.0.1:${port}/api/v10"\n gateway_url "ws://127.0.0.1:${port}/gateway"\n}\n`,
    );
    const run = await doctor(state, ["--probe"], { KLBR_TEST_DISCORD: "good-token" });
    assert.equal(run.code, 1);
    assert.match(
      run.stdout,
      new RegExp(
        `^problem: discord: http://127\\.0\\.0\\.1:${port}/api/v10 is unreachable \\(network error: .+\\); the token was not checked: check the network, or api_url$`,
        "m",
      ),
    );
    assert.match(
      run.stdout,
      new RegExp(
        `^problem: discord: the gateway ws://127\\.0\\.0\\.1:${port}/gateway is unreachable \\(.+\\)$`,
        "m",
      ),
    );
    assert.ok(!run.stdout.includes("refused the token"), run.stdout);
  } finally {
    await Deno.remove(state, { recursive: true });
  }
});

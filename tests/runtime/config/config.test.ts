// The model configuration: KDL routes, their defaults, every refusal with its exact message
// and line, removal of smuggled cache fields, and keys that never reach printed output.

import assert from "node:assert/strict";
import {
  defaultConfigText,
  loadConfig,
  parseConfig,
  redactRoute,
  resolveApiKey,
  resolveDiscordToken,
  type Route,
  routeRequestFields,
} from "../../../runtime/config/mod.ts";
import { isKlbrError } from "../../../runtime/core/mod.ts";

const FILE = "/x/klbr.kdl";

function parse(text: string, env?: Record<string, string>) {
  return parseConfig(text, { file: FILE, env });
}

function mainRoute(fields: string): Route {
  return parse(`llm "main" {\n${fields}\n}`).config.routes.main;
}

/** Asserts that `text` is refused as `invalid_config` with exactly `message`. */
function assertRefused(text: string, message: string, env?: Record<string, string>): void {
  assert.throws(() => parse(text, env), (error) => {
    assert.ok(isKlbrError(error, "invalid_config"), `unexpected error: ${error}`);
    assert.equal(error.message, message);
    return true;
  });
}

// ---- defaults and what is read ----

Deno.test("`loadConfig()` without a file gives each role its own local endpoint", async () => {
  const { config, warnings, source } = await loadConfig(undefined, { env: {} });
  assert.deepEqual(source, { kind: "defaults" });
  assert.deepEqual(warnings, []);
  assert.equal(config.routes.main.url, "http://localhost:8001/v1");
  assert.equal(config.routes.fast.url, "http://localhost:8002/v1");
  assert.equal(config.routes.long.url, "http://localhost:8003/v1");
  assert.deepEqual(Object.keys(config.routes), ["main", "fast", "long"]);
  for (const role of ["main", "fast", "long"] as const) {
    assert.equal(config.routes[role].name, role);
    assert.equal(config.routes[role].cache_profile, undefined);
    assert.deepEqual(routeRequestFields(config.routes[role]), {});
  }
});

Deno.test("`parseConfig()` of `defaultConfigText()` gives main's defaults, copied by every role", async () => {
  const text = defaultConfigText();
  const { config: defaults } = await loadConfig(undefined, { env: {} });
  const { config } = parse(text);
  // One route is declared: pointing klbr at one model is one edit, and the other roles follow.
  assert.equal(text.match(/^llm /gm)?.length, 1);
  assert.deepEqual(config.routes.main, defaults.routes.main);
  assert.deepEqual(config.routes.fast, { ...defaults.routes.main, name: "fast" });
  assert.deepEqual(config.routes.long, { ...defaults.routes.main, name: "long" });
  assert.deepEqual({ ...config, routes: undefined }, { ...defaults, routes: undefined });
  // The file init writes documents each role.
  assert.match(text, /\/\/ main: the agent's turns/);
  assert.match(text, /\/\/ fast: policy hooks/);
  assert.match(text, /\/\/ long: compaction/);
});

Deno.test("`parseConfig()` keeps a file that declares all three routes as it was", () => {
  // Files written by init before it declared one route name each role's own endpoint.
  const { config } = parse(`llm "main" { url "http://localhost:8001/v1" }
llm "fast" { url "http://localhost:8002/v1"; model "small" }
llm "long" { url "http://localhost:8003/v1" }`);
  assert.equal(config.routes.main.url, "http://localhost:8001/v1");
  assert.equal(config.routes.fast.url, "http://localhost:8002/v1");
  assert.equal(config.routes.fast.model, "small");
  assert.equal(config.routes.long.url, "http://localhost:8003/v1");
  assert.equal(config.routes.long.model, "default");
});

Deno.test("`parseConfig()` of a file without routes gives the defaults", async () => {
  const { config: defaults } = await loadConfig(undefined, { env: {} });
  assert.deepEqual(parse("// nothing here yet\n").config, defaults);
});

Deno.test("`parseConfig()` reads every field, and an unnamed llm is main", () => {
  const { config, warnings } = parse(`
llm {
    url "https://api.example/v1"
    model "m"
    api_key_env "EXAMPLE_KEY"
    cache_profile "openai_prompt_cache_retention"
    cache_affinity "klbr:work"
    cache_retention "24h"
    timeout_ms 120000
    idle_timeout_ms 5000
    context_tokens 64000
    compact_at 0.8
    summary_share 0.08
    tool_calls "text"
    reasoning "drop"
    stream #false
    stream_usage #false
    tool_choice "required"
    max_tokens 4096
    max_steps 20
    role_order "strict"
    extra_options { temperature 0.2; stop "a" "b"; response_format type="json_object" }
}`);
  assert.deepEqual(warnings, []);
  assert.deepEqual(config.routes.main, {
    name: "main",
    url: "https://api.example/v1",
    model: "m",
    api_key_env: "EXAMPLE_KEY",
    cache_profile: "openai_prompt_cache_retention",
    cache_affinity: "klbr:work",
    cache_retention: "24h",
    timeout_ms: 120000,
    idle_timeout_ms: 5000,
    context_tokens: 64000,
    compact_at: 0.8,
    summary_share: 0.08,
    tool_calls: "text",
    reasoning: "drop",
    stream: false,
    stream_usage: false,
    tool_choice: "required",
    max_tokens: 4096,
    max_steps: 20,
    role_order: "strict",
    extra_options: {
      temperature: 0.2,
      stop: ["a", "b"],
      response_format: { type: "json_object" },
    },
  });
});

Deno.test("`parseConfig()` gives undeclared roles the fields main declares", () => {
  const { config } = parse(`llm { url "https://api.example/v1"; model "m" }
llm "long" { model "big" }`);
  assert.equal(config.routes.fast.name, "fast");
  assert.equal(config.routes.fast.url, "https://api.example/v1");
  assert.equal(config.routes.fast.model, "m");
  // A declared role is taken as written, with its own defaults.
  assert.equal(config.routes.long.url, "http://localhost:8003/v1");
  assert.equal(config.routes.long.model, "big");
});

Deno.test("`loadConfig()` reads a file and names it as the source", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/klbr.kdl`;
    await Deno.writeTextFile(path, `llm "fast" { url "http://127.0.0.1:9/v1" }\n`);
    const { config, source } = await loadConfig(path, { env: {} });
    assert.deepEqual(source, { kind: "file", path });
    assert.equal(config.routes.fast.url, "http://127.0.0.1:9/v1");
    assert.equal(config.routes.main.url, "http://localhost:8001/v1");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

// ---- cache profiles ----

Deno.test("`routeRequestFields()` sends only what the declared profile accepts", () => {
  const cases: [string, Record<string, unknown>][] = [
    [`cache_affinity "k"; cache_profile "openai_prompt_cache_key"`, { prompt_cache_key: "k" }],
    [`cache_profile "openai_prompt_cache_retention"`, {}],
    [
      `cache_profile "openai_prompt_cache_retention"; cache_affinity "k"; cache_retention "in_memory"`,
      { prompt_cache_key: "k", prompt_cache_retention: "in_memory" },
    ],
    [
      `cache_profile "openai_prompt_cache_retention"; cache_retention "24h"`,
      { prompt_cache_retention: "24h" },
    ],
    [
      `cache_profile "openai_prompt_cache_options"; cache_affinity "k"; cache_retention "30m"`,
      { prompt_cache_key: "k", prompt_cache_options: { ttl: "30m" } },
    ],
    [
      `cache_profile "openai_prompt_cache_options"; cache_retention "24h"`,
      { prompt_cache_retention: "24h" },
    ],
  ];
  for (const [fields, expected] of cases) {
    assert.deepEqual(routeRequestFields(mainRoute(fields)), expected, fields);
  }
});

Deno.test("`parseConfig()` refuses 30m on a key-only profile, naming file, line and field", () => {
  assertRefused(
    `llm "main" {
    url "https://api.example/v1"
    model "m"
    cache_profile "openai_prompt_cache_key"
    cache_affinity "klbr:work"

    cache_retention "30m"
}`,
    `cannot load config /x/klbr.kdl:7: llm "main" cache_retention: "30m" needs cache_profile openai_prompt_cache_options (got openai_prompt_cache_key)`,
  );
});

Deno.test("`parseConfig()` refuses 30m on a retention profile", () => {
  assertRefused(
    `llm {\n cache_profile "openai_prompt_cache_retention"\n cache_retention "30m"\n}`,
    `cannot load config /x/klbr.kdl:3: llm "main" cache_retention: "30m" needs cache_profile openai_prompt_cache_options (got openai_prompt_cache_retention)`,
  );
});

Deno.test("`parseConfig()` refuses any retention on a key-only profile", () => {
  assertRefused(
    `llm {\n cache_profile "openai_prompt_cache_key"\n cache_affinity "k"\n cache_retention "24h"\n}`,
    `cannot load config /x/klbr.kdl:4: llm "main" cache_retention: "24h" needs cache_profile openai_prompt_cache_retention or openai_prompt_cache_options (got openai_prompt_cache_key)`,
  );
});

Deno.test("`parseConfig()` refuses a retention without a profile: caching is never guessed", () => {
  assertRefused(
    `llm {\n cache_retention "in_memory"\n}`,
    `cannot load config /x/klbr.kdl:2: llm "main" cache_retention: "in_memory" needs cache_profile openai_prompt_cache_retention or openai_prompt_cache_options (got no cache_profile)`,
  );
});

Deno.test("`parseConfig()` refuses an unknown retention value", () => {
  assertRefused(
    `llm {\n cache_profile "openai_prompt_cache_options"\n cache_retention "1h"\n}`,
    `cannot load config /x/klbr.kdl:3: llm "main" cache_retention: expected in_memory, 24h or 30m (got "1h")`,
  );
});

Deno.test("`parseConfig()` refuses an unknown cache profile", () => {
  assertRefused(
    `llm {\n cache_profile "anthropic"\n}`,
    `cannot load config /x/klbr.kdl:2: llm "main" cache_profile: expected openai_prompt_cache_key, openai_prompt_cache_retention, openai_prompt_cache_options (got "anthropic")`,
  );
});

Deno.test("`parseConfig()` refuses a cache affinity without a profile", () => {
  assertRefused(
    `llm {\n url "http://127.0.0.1:1/v1"\n cache_affinity "klbr:work"\n}`,
    `cannot load config /x/klbr.kdl:3: llm "main" cache_affinity: needs a cache_profile to be sent (got no cache_profile)`,
  );
});

Deno.test("`parseConfig()` refuses the key profile without an affinity to send", () => {
  assertRefused(
    `llm {\n model "m"\n cache_profile "openai_prompt_cache_key"\n}`,
    `cannot load config /x/klbr.kdl:3: llm "main" cache_profile: openai_prompt_cache_key needs cache_affinity (got no cache_affinity)`,
  );
});

Deno.test("`parseConfig()` removes smuggled cache fields from extra_options and warns naming them", () => {
  const { config, warnings } = parse(`llm {
  cache_profile "openai_prompt_cache_key"
  cache_affinity "klbr:work"
  extra_options {
    temperature 0.5
    cache_prompt #true
    cache_control type="ephemeral"
    prompt_cache_key "smuggled"
    prompt_cache_retention "24h"
    prompt_cache_options { ttl "30m" }
  }
}`);
  assert.deepEqual(config.routes.main.extra_options, { temperature: 0.5 });
  assert.deepEqual(warnings, [
    `config /x/klbr.kdl:4: llm "main" extra_options: removed cache_prompt, cache_control, prompt_cache_key, prompt_cache_retention, prompt_cache_options; only cache_profile adds cache fields`,
  ]);
  // Only the declared profile re-adds a cache field, with the declared value.
  assert.deepEqual(routeRequestFields(config.routes.main), { prompt_cache_key: "klbr:work" });
});

// ---- shape and value refusals ----

Deno.test("`parseConfig()` refuses an unknown field, naming it and its line", () => {
  assertRefused(
    `llm "fast" {\n url "http://127.0.0.1:1/v1"\n temprature 0.2\n}`,
    `cannot load config /x/klbr.kdl:3: llm "fast" temprature: unknown field, expected one of url, model, api_key_env, api_key, cache_profile, cache_affinity, cache_retention, timeout_ms, idle_timeout_ms, extra_options, context_tokens, compact_at, summary_share, tool_calls, reasoning, stream, stream_usage, tool_choice, max_tokens, max_steps, role_order (got temprature)`,
  );
});

Deno.test("`parseConfig()` refuses a context budget out of range or a summary share too large", () => {
  assertRefused(
    `llm {\n context_tokens 1000\n}`,
    `cannot load config /x/klbr.kdl:2: llm "main" context_tokens: expected at least 2048 tokens (got 1000)`,
  );
  assertRefused(
    `llm {\n context_tokens 8192.5\n}`,
    `cannot load config /x/klbr.kdl:2: llm "main" context_tokens: expected a whole number of tokens (got 8192.5)`,
  );
  assertRefused(
    `llm {\n compact_at 1\n}`,
    `cannot load config /x/klbr.kdl:2: llm "main" compact_at: expected a fraction of 0.2-0.95 (got 1)`,
  );
  assertRefused(
    `llm {\n compact_at 0.4\n summary_share 0.25\n}`,
    `cannot load config /x/klbr.kdl:3: llm "main" summary_share: must be below half of compact_at, or a summary alone would trigger compaction (got 0.25 with compact_at 0.4)`,
  );
  assertRefused(
    `llm {\n context_tokens 2048\n summary_share 0.1\n}`,
    `cannot load config /x/klbr.kdl:3: llm "main" summary_share: leaves a summary under 256 tokens (got 0.1 of 2048)`,
  );
});

Deno.test("`parseConfig()` refuses an unknown top-level node, naming every node it knows", () => {
  // A misspelt sandbox or lanes node must not read as "only llm is allowed here".
  assertRefused(
    `llm {}\nserver { port 1 }`,
    `cannot load config /x/klbr.kdl:2: unknown node, expected llm, discord, budget, cleanup, backup, sandbox, workspace or lanes (got server)`,
  );
  assertRefused(
    `sandbx "required" {}`,
    `cannot load config /x/klbr.kdl:1: unknown node, expected llm, discord, budget, cleanup, backup, sandbox, workspace or lanes (got sandbx)`,
  );
});

Deno.test("`parseConfig()` refuses a route name that is not a role", () => {
  assertRefused(
    `llm "mian" {}`,
    `cannot load config /x/klbr.kdl:1: llm: unknown route name, expected main, fast or long (got "mian")`,
  );
});

Deno.test("`parseConfig()` refuses a route declared twice, counting an unnamed llm as main", () => {
  assertRefused(
    `llm "main" {}\n\nllm {}`,
    `cannot load config /x/klbr.kdl:3: llm "main": declared twice (got lines 1 and 3)`,
  );
});

Deno.test("`parseConfig()` refuses a field given twice", () => {
  assertRefused(
    `llm {\n model "a"\n model "b"\n}`,
    `cannot load config /x/klbr.kdl:3: llm "main" model: given twice (got lines 2 and 3)`,
  );
});

Deno.test("`parseConfig()` refuses a field with two values or none", () => {
  assertRefused(
    `llm {\n url "http://a/v1" "http://b/v1"\n}`,
    `cannot load config /x/klbr.kdl:2: llm "main" url: expected exactly one value (got 2 values)`,
  );
  assertRefused(
    `llm {\n model\n}`,
    `cannot load config /x/klbr.kdl:2: llm "main" model: expected exactly one value (got 0 values)`,
  );
});

Deno.test("`parseConfig()` refuses a url that is not http(s)", () => {
  assertRefused(
    `llm {\n url "ftp://models.example/v1"\n}`,
    `cannot load config /x/klbr.kdl:2: llm "main" url: expected an http(s) URL (got "ftp://models.example/v1")`,
  );
});

Deno.test("`parseConfig()` refuses timeouts that are not whole positive milliseconds", () => {
  assertRefused(
    `llm {\n timeout_ms "2m"\n}`,
    `cannot load config /x/klbr.kdl:2: llm "main" timeout_ms: expected whole milliseconds (got "2m")`,
  );
  assertRefused(
    `llm {\n idle_timeout_ms 1.5\n}`,
    `cannot load config /x/klbr.kdl:2: llm "main" idle_timeout_ms: expected whole milliseconds (got 1.5)`,
  );
  assertRefused(
    `llm {\n timeout_ms 0\n}`,
    `cannot load config /x/klbr.kdl:2: llm "main" timeout_ms: expected at least 1 ms (got 0)`,
  );
  // Longer than a host timer holds: `setTimeout` would fire it at once, aborting every request.
  assertRefused(
    `llm {\n timeout_ms 3000000000\n}`,
    `cannot load config /x/klbr.kdl:2: llm "main" timeout_ms: expected at most 2147483647 ms, about 24.8 days, the longest a timer waits (got 3000000000)`,
  );
});

Deno.test("`parseConfig()` refuses an empty model name", () => {
  assertRefused(
    `llm {\n model ""\n}`,
    `cannot load config /x/klbr.kdl:2: llm "main" model: expected a model name (got "")`,
  );
});

Deno.test("`parseConfig()` refuses a key given both in the file and by variable", () => {
  assertRefused(
    `llm {\n api_key_env "K"\n api_key "sk-both"\n}`,
    `cannot load config /x/klbr.kdl:3: llm "main" api_key: give api_key or api_key_env, not both (got both)`,
  );
});

Deno.test("`parseConfig()` with an env refuses an api_key_env that is not set", () => {
  assertRefused(
    `llm "long" {\n model "m"\n api_key_env "KLBR_TEST_UNSET_KEY"\n}`,
    `cannot load config /x/klbr.kdl:3: llm "long" api_key_env: environment variable is not set (got KLBR_TEST_UNSET_KEY)`,
    { OTHER: "x" },
  );
});

Deno.test("`parseConfig()` refuses extra_options that set a field the runtime owns", () => {
  assertRefused(
    `llm {\n extra_options {\n  temperature 1\n  tools "none"\n }\n}`,
    `cannot load config /x/klbr.kdl:4: llm "main" extra_options.tools: set by the route's tool_calls field, not by extra_options (got tools)`,
  );
});

Deno.test("`parseConfig()` refuses extra_options that set a field a route switch owns, naming the switch", () => {
  const cases = [
    ["stream #false", "stream", "stream"],
    ["stream_options include_usage=#false", "stream_options", "stream_usage"],
    ['tool_choice "none"', "tool_choice", "tool_choice"],
    ["max_tokens 64", "max_tokens", "max_tokens"],
  ];
  for (const [option, key, use] of cases) {
    assertRefused(
      `llm "fast" {\n extra_options {\n  ${option}\n }\n}`,
      `cannot load config /x/klbr.kdl:3: llm "fast" extra_options.${key}: set by the route's ${use} field, not by extra_options (got ${key})`,
    );
  }
  assertRefused(
    `llm {\n extra_options {\n  tools "none"\n }\n}`,
    `cannot load config /x/klbr.kdl:3: llm "main" extra_options.tools: set by the route's tool_calls field, not by extra_options (got tools)`,
  );
});

Deno.test("`parseConfig()` gives every switch its default, and role_order strict to Mistral", () => {
  const plain = parse(`llm { model "qwen3" }`).config.routes.main;
  assert.deepEqual(
    [plain.tool_calls, plain.reasoning, plain.stream, plain.stream_usage, plain.max_steps],
    ["auto", "echo", true, true, 50],
  );
  assert.equal(plain.role_order, "relaxed");
  // Absent, not a value the provider would have to leave out: none is sent.
  assert.equal("tool_choice" in plain, false);
  assert.equal("max_tokens" in plain, false);
  assert.equal(
    parse(`llm { model "Mistral-Small-3.2-24B" }`).config.routes.main.role_order,
    "strict",
  );
  const byUrl = parse(`llm { url "https://api.mistral.ai/v1"; model "x" }`).config.routes;
  assert.deepEqual([byUrl.main.role_order, byUrl.fast.role_order], ["strict", "strict"]);
  // Declared, it wins over the name.
  const declared = parse(`llm { model "mistral-large"; role_order "relaxed" }`).config.routes;
  assert.equal(declared.main.role_order, "relaxed");
});

Deno.test("`parseConfig()` refuses a switch outside its values", () => {
  const cases = [
    ['tool_calls "json"', `tool_calls: expected native, text, auto (got "json")`],
    ['reasoning "keep"', `reasoning: expected echo, drop (got "keep")`],
    ['stream "yes"', `stream: expected #true or #false (got "yes")`],
    ["stream_usage 1", `stream_usage: expected #true or #false (got 1)`],
    ['tool_choice "any"', `tool_choice: expected auto, required, none (got "any")`],
    ["max_tokens 0", `max_tokens: expected at least 1 token (got 0)`],
    ["max_steps 0", `max_steps: expected 1-1000 steps (got 0)`],
    ["max_steps 1001", `max_steps: expected 1-1000 steps (got 1001)`],
    ['role_order "loose"', `role_order: expected strict, relaxed (got "loose")`],
  ];
  for (const [field, message] of cases) {
    assertRefused(`llm {\n ${field}\n}`, `cannot load config /x/klbr.kdl:2: llm "main" ${message}`);
  }
});

Deno.test("`parseConfig()` refuses an extra option without a value or with mixed shapes", () => {
  assertRefused(
    `llm {\n extra_options { seed }\n}`,
    `cannot load config /x/klbr.kdl:2: llm "main" extra_options.seed: needs a value (got nothing)`,
  );
  assertRefused(
    `llm {\n extra_options {\n  stop "a" x=1\n }\n}`,
    `cannot load config /x/klbr.kdl:3: llm "main" extra_options.stop: give values, properties or a block, not several (got 2)`,
  );
  assertRefused(
    `llm {\n extra_options 1\n}`,
    `cannot load config /x/klbr.kdl:2: llm "main" extra_options: expected a block of options (got values)`,
  );
});

Deno.test("`parseConfig()` refuses an extra option of #inf or #nan, which JSON cannot carry, saying so", () => {
  const cases: [string, string][] = [
    [
      `temperature #nan`,
      `temperature: expected a finite number, JSON has no #inf, #-inf or #nan (got NaN)`,
    ],
    [
      `stop 1 #-inf`,
      `stop: expected a finite number, JSON has no #inf, #-inf or #nan (got -Infinity)`,
    ],
    [
      `logit_bias a=#inf`,
      `logit_bias: expected a finite number, JSON has no #inf, #-inf or #nan (got Infinity)`,
    ],
    [
      `x { y 1e400 }`,
      `x.y: expected a finite number, JSON has no #inf, #-inf or #nan (got Infinity)`,
    ],
  ];
  for (const [option, message] of cases) {
    assertRefused(
      `llm {\n extra_options {\n  ${option}\n }\n}`,
      `cannot load config /x/klbr.kdl:3: llm "main" extra_options.${message}`,
    );
  }
});

Deno.test("`parseConfig()` refuses an extra option's field given twice inside its block, naming the line", () => {
  // A block is an object: a second `type` would silently replace the first.
  assertRefused(
    `llm {\n extra_options {\n  response_format {\n   type "json_object"\n   type "text"\n  }\n }\n}`,
    `cannot load config /x/klbr.kdl:5: llm "main" extra_options.response_format.type: given twice (got lines 4 and 5)`,
  );
});

Deno.test("`parseConfig()` refuses text that is not KDL, naming the line", () => {
  assertRefused(
    `llm {\n model "m\n}`,
    `cannot load config /x/klbr.kdl:3: invalid KDL (got "Unexpected EOF inside string at 3:2")`,
  );
});

Deno.test("`parseConfig()` reports the first refusal by route and line", () => {
  assertRefused(
    `llm "fast" {\n timeout_ms 0\n}\nllm "main" {\n model ""\n url "x"\n}`,
    `cannot load config /x/klbr.kdl:5: llm "main" model: expected a model name (got "")`,
  );
});

Deno.test("`loadConfig()` refuses a missing file naming its path", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/missing.kdl`;
    await assert.rejects(loadConfig(path, { env: {} }), (error) => {
      assert.ok(isKlbrError(error, "invalid_config"));
      assert.equal(error.message, `cannot load config ${path}: file not found (got ${path})`);
      return true;
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("`loadConfig()` given a directory says it is one and asks for the file", async () => {
  // `--config ~/.config/klbr/` names the folder the file is in; "file unreadable" said not why.
  const dir = await Deno.makeTempDir();
  try {
    await assert.rejects(loadConfig(dir, { env: {} }), (error) => {
      assert.ok(isKlbrError(error, "invalid_config"));
      assert.equal(
        error.message,
        `cannot load config ${dir}: it is a directory; give the path of the .kdl file (got ${dir})`,
      );
      return true;
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("`loadConfig()` refuses an api_key_env the given environment does not set", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/klbr.kdl`;
    await Deno.writeTextFile(path, `llm {\n  api_key_env "KLBR_KEY"\n}\n`);
    await assert.rejects(loadConfig(path, { env: { KLBR_KEY: "" } }), (error) => {
      assert.ok(isKlbrError(error, "invalid_config"));
      assert.equal(
        error.message,
        `cannot load config ${path}:2: llm "main" api_key_env: environment variable is not set (got KLBR_KEY)`,
      );
      return true;
    });
    const { config } = await loadConfig(path, { env: { KLBR_KEY: "sk-env" } });
    assert.equal(resolveApiKey(config.routes.main, { KLBR_KEY: "sk-env" }), "sk-env");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

// ---- keys never printed ----

Deno.test("`parseConfig()` keeps a file key out of JSON, inspection and string forms", () => {
  const { config } = parse(`llm {\n api_key "sk-live-SECRET"\n}`);
  const route = config.routes.main;
  assert.equal(JSON.stringify(config).includes("sk-live-SECRET"), false);
  assert.equal(Deno.inspect(config, { depth: 10 }).includes("sk-live-SECRET"), false);
  assert.equal(String(route.api_key), "[redacted]");
  assert.equal(JSON.stringify({ ...route }).includes("sk-live-SECRET"), false);
  assert.equal(resolveApiKey(route, {}), "sk-live-SECRET");
});

Deno.test("`redactRoute()` names where the key comes from and never the key", () => {
  const fromFile = mainRoute(`api_key "sk-live-SECRET"`);
  const printed = redactRoute(fromFile);
  assert.equal(printed.api_key, "file");
  assert.equal(JSON.stringify(printed).includes("sk-live-SECRET"), false);
  assert.equal(Deno.inspect(printed).includes("sk-live-SECRET"), false);
  assert.equal(
    redactRoute(mainRoute(`api_key_env "OPENAI_API_KEY"`)).api_key,
    "env OPENAI_API_KEY",
  );
  assert.equal(redactRoute(mainRoute(`model "m"`)).api_key, "none");
  assert.equal("api_key_env" in redactRoute(mainRoute(`api_key_env "K"`)), false);
});

Deno.test("`resolveApiKey()` refuses a route whose variable is unset and allows a keyless route", () => {
  const route = mainRoute(`api_key_env "KLBR_TEST_UNSET_KEY"`);
  assert.throws(() => resolveApiKey(route, {}), (error) => {
    assert.ok(isKlbrError(error, "invalid_config"));
    assert.equal(
      error.message,
      `cannot resolve api key for llm "main": environment variable is not set (got KLBR_TEST_UNSET_KEY)`,
    );
    return true;
  });
  assert.equal(resolveApiKey(mainRoute(`model "m"`), { OPENAI_API_KEY: "sk-ignored" }), undefined);
});

// ---- discord ----

const DISCORD = `discord {\n token_env "DISCORD_TOKEN"\n channels "123" "456"\n}`;

Deno.test("`parseConfig()` reads a discord node and defaults its URLs to Discord's", () => {
  const { config } = parse(DISCORD, { DISCORD_TOKEN: "t" });
  assert.deepEqual(config.discord, {
    token_env: "DISCORD_TOKEN",
    channels: ["123", "456"],
    dms: true,
    api_url: "https://discord.com/api/v10",
    gateway_url: "wss://gateway.discord.gg",
    send_timeout_ms: 15_000,
    nonce_window_ms: 120_000,
    attachment_max_bytes: 8 * 1024 * 1024,
    backfill_max_messages: 1000,
  });
  // The model routes are unaffected by the discord node.
  assert.equal(config.routes.main.url, "http://localhost:8001/v1");
});

Deno.test("`parseConfig()` leaves discord off without a discord node", () => {
  assert.equal(parse(`llm {}`).config.discord, undefined);
});

Deno.test("`parseConfig()` takes loopback discord URLs and a send timeout", () => {
  const { config } = parse(
    `discord {\n token_env "T"\n channels "1"\n api_url "http://127.0.0.1:9/api"\n gateway_url "ws://127.0.0.1:9/gw"\n send_timeout_ms 500\n}`,
  );
  assert.equal(config.discord?.api_url, "http://127.0.0.1:9/api");
  assert.equal(config.discord?.gateway_url, "ws://127.0.0.1:9/gw");
  assert.equal(config.discord?.send_timeout_ms, 500);
});

Deno.test("`parseConfig()` answers direct messages by default; `dms #false` refuses them", () => {
  assert.equal(parse(`discord {\n token_env "T"\n channels "1"\n}`).config.discord?.dms, true);
  const { config } = parse(`discord {\n token_env "T"\n channels "1"\n dms #false\n}`);
  assert.equal(config.discord?.dms, false);
  assert.throws(() => parse(`discord {\n token_env "T"\n channels "1"\n dms "no"\n}`), /dms/);
});

Deno.test("`parseConfig()` takes the nonce window, attachment size and backfill bound, and refuses a window over 10 minutes", () => {
  const { config } = parse(
    `discord {\n token_env "T"\n channels "1"\n nonce_window_ms 5000\n attachment_max_bytes 0\n backfill_max_messages 10\n}`,
  );
  assert.equal(config.discord?.nonce_window_ms, 5000);
  assert.equal(config.discord?.attachment_max_bytes, 0);
  assert.equal(config.discord?.backfill_max_messages, 10);
  assert.throws(
    () => parse(`discord {\n token_env "T"\n channels "1"\n nonce_window_ms 600001\n}`),
    /discord nonce_window_ms: expected at most 600000 ms/,
  );
});

Deno.test("`parseConfig()` refuses a discord token_env that is not set", () => {
  assertRefused(
    DISCORD,
    `cannot load config /x/klbr.kdl:2: discord token_env: environment variable is not set (got DISCORD_TOKEN)`,
    {},
  );
});

Deno.test("`parseConfig()` refuses a discord node without token_env", () => {
  assertRefused(
    `llm {}\ndiscord {\n channels "1"\n}`,
    `cannot load config /x/klbr.kdl:2: discord token_env: expected an environment variable name (got undefined)`,
  );
});

Deno.test("`parseConfig()` refuses a discord channel that is not a snowflake", () => {
  assertRefused(
    `discord {\n token_env "T"\n channels "123" "general"\n}`,
    `cannot load config /x/klbr.kdl:3: discord channels: expected a channel id (got "general")`,
  );
});

Deno.test("`parseConfig()` refuses discord channels given as numbers", () => {
  assertRefused(
    `discord {\n token_env "T"\n channels 123\n}`,
    `cannot load config /x/klbr.kdl:3: discord channels: expected a channel id string (got 123)`,
  );
});

Deno.test("`parseConfig()` refuses a discord gateway_url that is not ws(s)", () => {
  assertRefused(
    `discord {\n token_env "T"\n channels "1"\n gateway_url "http://127.0.0.1:1"\n}`,
    `cannot load config /x/klbr.kdl:4: discord gateway_url: expected a ws(s) URL (got "http://127.0.0.1:1")`,
  );
});

Deno.test("`parseConfig()` refuses an unknown discord field, naming it and its line", () => {
  assertRefused(
    `discord {\n token_env "T"\n channels "1"\n token "abc"\n}`,
    `cannot load config /x/klbr.kdl:4: discord token: unknown field, expected one of token_env, channels, dms, api_url, gateway_url, send_timeout_ms, nonce_window_ms, attachment_max_bytes, backfill_max_messages (got token)`,
  );
});

Deno.test("`parseConfig()` refuses two discord nodes and an empty channels list", () => {
  assertRefused(
    `discord {\n token_env "T"\n channels "1"\n}\ndiscord {\n}`,
    `cannot load config /x/klbr.kdl:5: discord: declared twice (got lines 1 and 5)`,
  );
  assertRefused(
    `discord {\n token_env "T"\n channels\n}`,
    `cannot load config /x/klbr.kdl:3: discord channels: expected one or more values (got 0 values)`,
  );
});

Deno.test("`resolveDiscordToken()` reads the variable and never prints it", () => {
  const { config } = parse(DISCORD);
  const token = resolveDiscordToken(config.discord!, { DISCORD_TOKEN: "sekrit-token" });
  assert.equal(token.reveal(), "sekrit-token");
  assert.equal(JSON.stringify({ token }), '{"token":"[redacted]"}');
  assert.equal(Deno.inspect(token), "[redacted]");
  assert.equal(String(token), "[redacted]");
  assert.doesNotMatch(JSON.stringify(config), /sekrit/);
});

Deno.test("`resolveDiscordToken()` refuses an unset variable", () => {
  const { config } = parse(DISCORD);
  assert.throws(() => resolveDiscordToken(config.discord!, {}), (error) => {
    assert.ok(isKlbrError(error, "invalid_config"));
    assert.equal(
      error.message,
      "cannot resolve the discord token: environment variable is not set (got DISCORD_TOKEN)",
    );
    return true;
  });
});

// ---- budget and cleanup ----

Deno.test("`parseConfig()` without budget or cleanup nodes gives the documented defaults", () => {
  const { config } = parse(`llm {}`);
  assert.deepEqual(config.budget, {
    model_requests_per_hour: 600,
    tokens_per_hour: 2_000_000,
    child_share_percent: 50,
    concurrent_jobs: 2,
    concurrent_processes: 8,
    artifact_disk_mb: 256,
    job: { wall_time_s: 1800, model_requests: 100, tokens: 200_000 },
  });
  assert.deepEqual(config.cleanup, {
    draft_max_age_days: 7,
    release_keep_days: 30,
    interval_hours: 6,
  });
});

Deno.test("`parseConfig()` reads a budget node with a nested job block, and a cleanup node", () => {
  const { config } = parse(
    `budget {\n tokens_per_hour 5000\n concurrent_jobs 3\n job {\n  tokens 1000\n  wall_time_s 60\n }\n}\n` +
      `cleanup {\n release_keep_days 2\n}`,
  );
  assert.equal(config.budget.tokens_per_hour, 5000);
  assert.equal(config.budget.concurrent_jobs, 3);
  // Fields left out keep their defaults, also inside the job block.
  assert.equal(config.budget.model_requests_per_hour, 600);
  assert.deepEqual(config.budget.job, { wall_time_s: 60, model_requests: 100, tokens: 1000 });
  assert.equal(config.cleanup.release_keep_days, 2);
  assert.equal(config.cleanup.draft_max_age_days, 7);
});

Deno.test("`parseConfig()` refuses bad budget and cleanup fields with their line", () => {
  assertRefused(
    `budget {\n concurrent_jobs 0\n}`,
    "cannot load config /x/klbr.kdl:2: budget concurrent_jobs: expected at least 1 (got 0)",
  );
  assertRefused(
    `budget {\n job {\n  tokens "many"\n }\n}`,
    'cannot load config /x/klbr.kdl:3: budget job tokens: expected a whole number of tokens (got "many")',
  );
  assertRefused(
    `budget {\n tokens 5\n}`,
    "cannot load config /x/klbr.kdl:2: budget tokens: unknown field, expected one of " +
      "model_requests_per_hour, tokens_per_hour, child_share_percent, concurrent_jobs, " +
      "concurrent_processes, " +
      "artifact_disk_mb, job (got tokens)",
  );
  assertRefused(
    `budget {\n job {\n  cpu 1\n }\n}`,
    "cannot load config /x/klbr.kdl:3: budget job cpu: unknown field, expected one of " +
      "wall_time_s, model_requests, tokens (got cpu)",
  );
  assertRefused(
    `cleanup {\n interval_hours 1 2\n}`,
    "cannot load config /x/klbr.kdl:2: cleanup interval_hours: expected exactly one value (got 2 values)",
  );
  assertRefused(
    `budget {}\nbudget {}`,
    "cannot load config /x/klbr.kdl:2: budget: declared twice (got lines 1 and 2)",
  );
  assertRefused(
    `cleanup 3`,
    "cannot load config /x/klbr.kdl:1: cleanup: expected a block (got values)",
  );
  // Each running job holds a process slot, so its own workspace.run needs one more.
  assertRefused(
    `budget {
 concurrent_jobs 4
 concurrent_processes 4
}`,
    "cannot load config /x/klbr.kdl:3: budget concurrent_processes: must be more than " +
      "concurrent_jobs 4, since each running job holds one for its workbench (got 4)",
  );
});

Deno.test("`defaultConfigText()` shows the budget and cleanup defaults, commented out", () => {
  const text = defaultConfigText();
  assert.match(text, /^\/\/ budget \{$/m);
  assert.match(text, /^\/\/\s+tokens_per_hour 2000000$/m);
  assert.match(text, /^\/\/\s+release_keep_days 30\b/m);
  // Uncommented, the blocks parse to the same defaults as no blocks at all.
  const uncommented = text.split("\n").map((line) =>
    /^\/\/ (budget|cleanup) \{|^\/\/\s{4,}\w+ \d+|^\/\/\s+job \{|^\/\/\s*\}$/.test(line)
      ? line.replace(/^\/\/ ?/, "").replace(/\s+\/\/.*$/, "")
      : line
  ).join("\n");
  assert.match(uncommented, /^budget \{$/m);
  const { config } = parse(uncommented);
  assert.deepEqual(config.budget, parse("").config.budget);
  assert.deepEqual(config.cleanup, parse("").config.cleanup);
});

/** The sandbox's default limits. */
const LIMITS = { max_processes: 256, memory: 2 ** 30, cpu_weight: 50, max_file_size: 4 * 2 ** 30 };

Deno.test("`parseConfig()` defaults the sandbox to auto without network and the lanes to their bounds", () => {
  const { config } = parse("");
  assert.deepEqual(config.sandbox, { mode: "auto", network: false, ...LIMITS });
  assert.deepEqual(config.workspace, { self_edit: false });
  assert.deepEqual(config.lanes, {
    view_without_token: false,
    max_connections: 64,
    max_pending_hello: 256,
    hello_timeout_ms: 3_000,
    max_unacked_inputs: 256,
    attachment_max_bytes: 8 * 1024 * 1024,
  });
});

Deno.test('`parseConfig()` reads `sandbox "required" { network #true }` and a lanes block', () => {
  const { config } = parse(
    `sandbox "required" {\n    network #true\n}\nlanes {\n    view_without_token #true\n    max_connections 3\n    max_pending_hello 5\n    hello_timeout_ms 500\n    max_unacked_inputs 32\n    attachment_max_bytes 0\n}`,
  );
  assert.deepEqual(config.sandbox, { mode: "required", network: true, ...LIMITS });
  assert.deepEqual(config.lanes, {
    view_without_token: true,
    max_connections: 3,
    max_pending_hello: 5,
    hello_timeout_ms: 500,
    max_unacked_inputs: 32,
    attachment_max_bytes: 0,
  });
  assert.deepEqual(parse(`sandbox { network #true }`).config.sandbox, {
    mode: "auto",
    network: true,
    ...LIMITS,
  });
});

Deno.test("`parseConfig()` reads the sandbox's limits in bytes or sizes, and `workspace { self_edit }`", () => {
  const { config } = parse(
    `sandbox {\n    max_processes 64\n    memory "512MiB"\n    cpu_weight 20\n    max_file_size 1048576\n}\nworkspace {\n    self_edit #true\n}`,
  );
  assert.deepEqual(config.sandbox, {
    mode: "auto",
    network: false,
    max_processes: 64,
    memory: 512 * 2 ** 20,
    cpu_weight: 20,
    max_file_size: 2 ** 20,
  });
  assert.deepEqual(config.workspace, { self_edit: true });
  const cases: [string, string][] = [
    [
      `sandbox {\n    memory "1.5GiB"\n}`,
      `2: sandbox memory: expected a size of at least 67108864 bytes, such as "1GiB" (got "1.5GiB")`,
    ],
    [
      `sandbox {\n    memory 1000\n}`,
      `2: sandbox memory: expected a size of at least 67108864 bytes, such as "1GiB" (got 1000)`,
    ],
    [`sandbox {\n    max_processes 8\n}`, `2: sandbox max_processes: expected at least 16 (got 8)`],
    [
      `workspace {\n    selfedit #true\n}`,
      `2: workspace selfedit: unknown field, expected one of self_edit (got selfedit)`,
    ],
    [`workspace {\n    self_edit 1\n}`, `2: workspace self_edit: expected #true or #false (got 1)`],
  ];
  for (const [text, message] of cases) {
    assertRefused(text, `cannot load config /x/klbr.kdl:${message}`);
  }
});

Deno.test("`parseConfig()` refuses a bad sandbox or lanes node, naming the field and its line", () => {
  const cases: [string, string][] = [
    [`sandbox "maybe"`, `1: sandbox mode: expected auto or required (got "maybe")`],
    [`sandbox "a" "b"`, `1: sandbox: expected at most one mode and a block (got "a" "b")`],
    [
      `sandbox {\n    net #true\n}`,
      `2: sandbox net: unknown field, expected one of mode, network, max_processes, memory, cpu_weight, max_file_size (got net)`,
    ],
    [`sandbox {\n    network "yes"\n}`, `2: sandbox network: expected #true or #false (got "yes")`],
    [
      `lanes {\n    view_without_token 1\n}`,
      `2: lanes view_without_token: expected #true or #false (got 1)`,
    ],
    [`lanes {\n    max_connections 0\n}`, `2: lanes max_connections: expected at least 1 (got 0)`],
    [`lanes "x"`, `1: lanes: expected a block (got "x")`],
    [`lanes {\n}\nlanes {\n}`, `3: lanes: declared twice (got lines 1 and 3)`],
  ];
  for (const [text, message] of cases) {
    assertRefused(text, `cannot load config /x/klbr.kdl:${message}`);
  }
});

Deno.test("`defaultConfigText()` shows the sandbox and lanes defaults, commented out", () => {
  const text = defaultConfigText();
  const nodes = text.split("\n").filter((line) => /^\/\/ (sandbox|lanes) /.test(line));
  assert.equal(nodes.length, 2, "the sandbox and lanes nodes are there");
  // Uncommented, those nodes parse to the same settings as no nodes at all.
  const uncommented = nodes.map((line) => line.replace(/^\/\/ /, "")).join("\n");
  assert.match(
    uncommented,
    /^sandbox "auto" \{ network #false; max_processes 256; memory "1GiB"; cpu_weight 50; max_file_size "4GiB"; \}$/m,
  );
  assert.match(text, /^\/\/ workspace \{ self_edit #false; \}$/m);
  const { config } = parse(`${uncommented}\nworkspace { self_edit #false; }`);
  assert.deepEqual(config.sandbox, parse("").config.sandbox);
  assert.deepEqual(config.workspace, parse("").config.workspace);
  assert.deepEqual(config.lanes, parse("").config.lanes);
});

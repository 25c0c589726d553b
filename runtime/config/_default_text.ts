/**
 * The commented configuration file `init` writes: one `main` route, which the other roles copy
 * until the file declares them, and the schema's defaults for everything else.
 *
 * @module
 */

import { ConfigSchema } from "./_config.ts";

/**
 * Returns the commented configuration file that `init` writes into the state directory.
 *
 * It declares one route, `main`, with the schema's defaults; `fast` and `long` copy it (see
 * `parseConfig`), so pointing klbr at one model is one edit. Every other node is the default,
 * commented out.
 */
export function defaultConfigText(): string {
  const { routes, budget, cleanup, sandbox, lanes, backup } = ConfigSchema.parse({});
  const main = routes.main;
  const blocks = [[
    "// main: the agent's turns. One model is enough: the other roles copy this route until",
    '// they are declared with their own block, e.g. llm "fast" { url "…"; model "…" }:',
    "// fast: policy hooks and other cheap calls",
    "// long: compaction of long histories",
    "//",
    "// For a local OpenAI-compatible server (llama.cpp's llama-server, vLLM, Ollama, LM Studio,",
    "// …) set url to its base URL — the part before /chat/completions, usually ending in /v1 —",
    "// and model to a model name it serves (GET <url>/models lists them).",
    `llm "main" {`,
    `    url "${main.url}"`,
    `    model "${main.model}"`,
    `    // api_key_env "OPENAI_API_KEY"    // the key's environment variable (or api_key "…")`,
    `    timeout_ms ${main.timeout_ms}          // the whole request`,
    `    idle_timeout_ms ${main.idle_timeout_ms}     // the longest silence inside a stream`,
    `    context_tokens ${main.context_tokens}      // the largest request; compaction starts at compact_at of it`,
    `}`,
  ].join("\n")];
  return [
    "// klbr configuration (KDL v2). See docs/configuration.md.",
    "//",
    "// Prompt caching is opt-in per route, e.g.:",
    '//     cache_profile "openai_prompt_cache_retention"  // or openai_prompt_cache_key | openai_prompt_cache_options',
    '//     cache_affinity "klbr:work"                     // one stable key for related requests',
    '//     cache_retention "24h"                          // in_memory | 24h, or 30m on an options route',
    "// and extra request fields go in a block:",
    "//     extra_options { temperature 0.2; max_tokens 4096 }",
    "",
    ...blocks.flatMap((block) => [block, ""]),
    "// Budgets of unattended work (timers, jobs, llm() and agent()); these are the defaults.",
    "// See docs/jobs.md.",
    "// budget {",
    `//     model_requests_per_hour ${budget.model_requests_per_hour}   // the whole daemon, any rolling hour`,
    `//     tokens_per_hour ${budget.tokens_per_hour}`,
    `//     concurrent_jobs ${budget.concurrent_jobs}                 // more wait pending`,
    `//     concurrent_processes ${budget.concurrent_processes}            // job workbenches and workspace.run children`,
    `//     artifact_disk_mb ${budget.artifact_disk_mb}`,
    "//     job {                             // each job's limits: what it may ask for at most",
    `//         wall_time_s ${budget.job.wall_time_s}`,
    `//         model_requests ${budget.job.model_requests}`,
    `//         tokens ${budget.job.tokens}`,
    "//     }",
    "// }",
    "// cleanup {",
    `//     draft_max_age_days ${cleanup.draft_max_age_days}`,
    `//     release_keep_days ${cleanup.release_keep_days}             // unless active, last good or pinned`,
    `//     interval_hours ${cleanup.interval_hours}`,
    "// }",
    "// Verified backups on a schedule, the newest keep of them kept (docs/operations.md); none",
    "// without every. dir (absolute; default <state>/backups) also gets the backup taken before",
    "// a store migration.",
    `// backup { every "24h"; keep ${backup.keep}; dir "/srv/klbr-backups"; }`,
    "",
    "// The workbench runs inside bubblewrap; see docs/security.md. These are the defaults:",
    '// "required" refuses to start unconfined, network #true shares the host\'s network,',
    "// view_without_token #true lets a page without the token watch, read-only.",
    `// sandbox "${sandbox.mode}" { network #${sandbox.network}; }`,
    `// lanes { view_without_token #${lanes.view_without_token}; max_connections ${lanes.max_connections}; hello_timeout_ms ${lanes.hello_timeout_ms}; }`,
    "",
  ].join("\n");
}

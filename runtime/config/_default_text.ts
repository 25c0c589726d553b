/**
 * The commented configuration file `init` writes: one `main` route, which the other roles copy
 * until the file declares them, and the schema's defaults for everything else.
 *
 * @module
 */

import { ConfigSchema } from "./_config.ts";

/** A size as the file writes it: `1073741824` → `1GiB`. */
function size(bytes: number): string {
  for (const [unit, factor] of [["GiB", 2 ** 30], ["MiB", 2 ** 20], ["KiB", 2 ** 10]] as const) {
    if (bytes % factor === 0) return `${bytes / factor}${unit}`;
  }
  return `${bytes}B`;
}

/**
 * Returns the commented configuration file that `init` writes into the state directory.
 *
 * It declares one route, `main`, with the schema's defaults; `fast` and `long` copy it (see
 * `parseConfig`), so pointing klbr at one model is one edit. Every other node is the default,
 * commented out.
 */
export function defaultConfigText(): string {
  const { routes, budget, cleanup, sandbox, workspace, lanes, backup } = ConfigSchema.parse({});
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
    "//     extra_options { temperature 0.2 }",
    "// How a server differs (tool_calls, reasoning, stream, stream_usage, tool_choice, max_tokens,",
    "// max_steps, role_order) is declared per route: see docs/configuration.md and docs/models.md.",
    "",
    ...blocks.flatMap((block) => [block, ""]),
    "// Budgets of unattended work (timers, jobs, llm() and agent()); these are the defaults.",
    "// See docs/jobs.md.",
    "// budget {",
    `//     model_requests_per_hour ${budget.model_requests_per_hour}   // the whole daemon, any rolling hour`,
    `//     tokens_per_hour ${budget.tokens_per_hour}`,
    `//     child_share_percent ${budget.child_share_percent}          // llm() and agent() use at most this share of each`,
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
    '// "required" refuses to start unconfined, network #true shares the host\'s network, the',
    "// limits bind each process tree (a cell's, a workspace.run program's, a job's);",
    "// self_edit #true lets cells change klbr's own code when the workspace holds its checkout;",
    "// view_without_token #true lets a page without the token watch, read-only.",
    `// sandbox "${sandbox.mode}" { network #${sandbox.network}; max_processes ${sandbox.max_processes}; memory "${
      size(sandbox.memory)
    }"; cpu_weight ${sandbox.cpu_weight}; max_file_size "${size(sandbox.max_file_size)}"; }`,
    `// workspace { self_edit #${workspace.self_edit}; }`,
    `// lanes { view_without_token #${lanes.view_without_token}; max_connections ${lanes.max_connections}; max_pending_hello ${lanes.max_pending_hello}; hello_timeout_ms ${lanes.hello_timeout_ms}; max_unacked_inputs ${lanes.max_unacked_inputs}; attachment_max_bytes ${lanes.attachment_max_bytes}; }`,
    "",
  ].join("\n");
}

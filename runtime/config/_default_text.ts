/**
 * The commented configuration file `init` writes: the schema's defaults, so parsing it gives
 * the same routes as no file at all.
 *
 * @module
 */

import { ConfigSchema } from "./_config.ts";
import { ROUTE_NAMES, type RouteName } from "./_kdl.ts";

const ROLE_NOTES: Record<RouteName, string> = {
  main: "the agent's turns",
  fast: "policy hooks and other cheap calls",
  long: "compaction of long histories",
};

/**
 * Returns the commented default configuration file that `init` writes into the state dir.
 *
 * Its values are the schema's defaults, so parsing it gives the same routes as no file.
 */
export function defaultConfigText(): string {
  const { routes, budget, cleanup, sandbox, lanes } = ConfigSchema.parse({});
  const blocks = ROUTE_NAMES.map((role) =>
    [
      `// ${role}: ${ROLE_NOTES[role]}`,
      `llm "${role}" {`,
      `    url "${routes[role].url}"`,
      `    model "${routes[role].model}"`,
      `    // api_key_env "OPENAI_API_KEY"    // the key's environment variable (or api_key "…")`,
      `    timeout_ms ${routes[role].timeout_ms}          // the whole request`,
      `    idle_timeout_ms ${
        routes[role].idle_timeout_ms
      }     // the longest silence inside a stream`,
      `    context_tokens ${
        routes[role].context_tokens
      }      // the largest request; compaction starts at compact_at of it`,
      `}`,
    ].join("\n")
  );
  return [
    "// klbr model routes (KDL v2). See docs/configuration.md.",
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
    "",
    "// The workbench runs inside bubblewrap; see docs/security.md. These are the defaults:",
    '// "required" refuses to start unconfined, network #true shares the host\'s network,',
    "// view_without_token #true lets a page without the token watch, read-only.",
    `// sandbox "${sandbox.mode}" { network #${sandbox.network}; }`,
    `// lanes { view_without_token #${lanes.view_without_token}; max_connections ${lanes.max_connections}; hello_timeout_ms ${lanes.hello_timeout_ms}; }`,
    "",
  ].join("\n");
}

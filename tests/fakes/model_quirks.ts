/**
 * How real OpenAI-compatible servers differ, reproduced for the fake server
 * (`startFakeOpenAI({ profile, quirks })` in `openai_server.ts`). Each quirk follows a server's
 * documented behaviour or a public issue showing it, cited where it is defined; each profile is
 * a named set of quirks, and quirks compose (`{ profile: "vllm", quirks: { rateLimited } }`).
 *
 * | profile              | server                                    | quirks                                                    |
 * | -------------------- | ----------------------------------------- | --------------------------------------------------------- |
 * | `openai`             | OpenAI                                    | unknown model → 404 `model_not_found`                     |
 * | `llama.cpp`          | llama-server with `--jinja`               | history arguments not JSON → 500                          |
 * | `llama.cpp-no-jinja` | llama-server without `--jinja`            | any `tools` → 500 "tools param requires --jinja flag"     |
 * | `vllm`               | vLLM                                      | history arguments not JSON → 400; unknown model → 404     |
 * | `ollama`             | Ollama's `/v1`                            | parallel calls all at `index` 0; `reasoning`; unknown model → 404 |
 * | `ollama-no-tools`    | Ollama, a model without tool support      | any `tools` → 400 "… does not support tools"              |
 * | `deepseek`           | DeepSeek, thinking mode                   | `reasoning_content`; 400 when it is not sent back         |
 * | `mistral`            | Mistral's API                             | `user` right after `tool` → 400; call ids not 9 alnum → 400 |
 * | `openrouter`         | OpenRouter                                | `reasoning`; `: OPENROUTER PROCESSING` comments           |
 *
 * And the quirks no one server owns: `jsonToStream`, `htmlPage`, `noFinishReason`, `apiKey`
 * (401), `rateLimited` (429 with `Retry-After`), `strictModel`, `context` (a request past the
 * server's context refused in OpenAI's, vLLM's or llama-server's words), `truncateAt` (one cut
 * silently, as Ollama does), `maxCompletionTokensOnly` (OpenAI's reasoning models), `outOfCredit`.
 * Per response, `filtered` is a reply a content filter stopped ({@linkcode filteredChunks}).
 *
 * @module
 */

/** Composable server behaviours; every one is off unless set. */
export interface FakeQuirks {
  /** Refuses any request carrying `tools`, as the named server does. */
  refuseTools?: "llama.cpp" | "ollama";
  /** Refuses a request whose history holds tool-call arguments that are no JSON object. */
  strictArguments?: "llama.cpp" | "vllm";
  /** Streams each parallel tool call whole, in one chunk, every one at `index` 0. */
  toolCallIndexZero?: boolean;
  /** The field reasoning is sent in. @default {"reasoning_content"} */
  reasoningField?: "reasoning_content" | "reasoning" | "reasoning_text";
  /** Refuses (400) an assistant message with tool calls that lacks `reasoning_content`. */
  requireReasoningBack?: boolean;
  /** Refuses (400) a `user` message right after a `tool` message. */
  userAfterToolRefused?: boolean;
  /** Refuses (400) a tool-call id in the history that is not nine letters and digits. */
  nineCharToolCallIds?: boolean;
  /** Sends `: OPENROUTER PROCESSING` comment lines before the stream's first chunk. */
  keepAliveComments?: boolean;
  /** Answers `stream: true` with one whole JSON completion (`application/json`). */
  jsonToStream?: boolean;
  /** Answers every chat request with HTTP 200 and an HTML page of this title. */
  htmlPage?: string;
  /** Ends the stream with `[DONE]` but never sends a `finish_reason`. */
  noFinishReason?: boolean;
  /** Refuses (401) a request whose bearer is not this key, chat and `GET /models` alike. */
  apiKey?: string;
  /** Refuses (404) a model it does not list, in the named server's words. */
  strictModel?: "openai" | "vllm" | "ollama";
  /** The first `requests` chat requests get 429 with this `Retry-After` (seconds) or `retry-after-ms`. */
  rateLimited?: { requests: number; retryAfterSeconds?: number; retryAfterMs?: number };
  /**
   * Refuses (400) a request whose {@linkcode fakePromptTokens} (with its `max_tokens`, for the
   * servers that count it) pass `tokens`, in the named server's words.
   */
  context?: { tokens: number; words: "openai" | "vllm" | "llama.cpp" };
  /**
   * Ollama past a model's `num_ctx`: a longer prompt is cut from the front without an error, and
   * the usage reports what was kept (ollama/ollama#5902: "input truncated n_ctx=2048"; #6026: a
   * long prompt answered with `prompt_eval_count` 1026). Applies to the counted usage
   * (`countTokens`).
   */
  truncateAt?: number;
  /**
   * Refuses (400) a request carrying `max_tokens`, as OpenAI does for its reasoning models (the
   * o-series, gpt-5 and later), which take `max_completion_tokens` only.
   */
  maxCompletionTokensOnly?: boolean;
  /**
   * The account is out of credit: every chat request is refused as the named provider does,
   * until the test sets it back to undefined (credit added).
   */
  outOfCredit?: "openai" | "deepseek" | "openrouter";
  /** Refuses (400) a request carrying any of these top-level fields, as OpenAI-format proxies do. */
  unknownFields?: string[];
  /**
   * Answers a path it does not serve (a route `url` without `/v1`) with HTTP 200 and a JSON
   * error, as LM Studio does ({@linkcode unexpectedEndpoint}).
   */
  unknownPathOk?: boolean;
  /**
   * How the fake counts a request's tokens ({@linkcode fakePromptTokens}): `bytes`, a third of
   * a token per UTF-8 byte whatever the script; `bpe`, as a model's byte-level BPE vocabulary
   * does, four ASCII characters a token and one token per other character (a CJK character, an
   * emoji).
   * @default {"bytes"}
   */
  tokenizer?: "bytes" | "bpe";
}

/** The named profiles: one server's documented behaviour each. */
export const FAKE_PROFILES = {
  openai: { strictModel: "openai" },
  "llama.cpp": { strictArguments: "llama.cpp" },
  "llama.cpp-no-jinja": { refuseTools: "llama.cpp" },
  vllm: { strictArguments: "vllm", strictModel: "vllm" },
  ollama: { toolCallIndexZero: true, reasoningField: "reasoning", strictModel: "ollama" },
  "ollama-no-tools": { refuseTools: "ollama", strictModel: "ollama" },
  deepseek: { reasoningField: "reasoning_content", requireReasoningBack: true },
  mistral: { userAfterToolRefused: true, nineCharToolCallIds: true },
  openrouter: { reasoningField: "reasoning", keepAliveComments: true },
} as const satisfies Record<string, FakeQuirks>;

/** A profile's name. */
export type FakeProfile = keyof typeof FAKE_PROFILES;

/** The quirks of a fake: its profile's, then the ones given on top. */
export function resolveQuirks(
  profile: FakeProfile | undefined,
  quirks: FakeQuirks = {},
): FakeQuirks {
  return { ...(profile === undefined ? {} : FAKE_PROFILES[profile]), ...quirks };
}

/** An error answer: status, headers and JSON body, as the server words it. */
export interface FakeRefusal {
  status: number;
  headers?: Record<string, string>;
  body: unknown;
}

/** What a request check needs to know beyond the request. */
export interface RequestFacts {
  // deno-lint-ignore no-explicit-any
  body: any;
  headers: Record<string, string>;
  models: string[];
  /** How many chat requests came before this one. */
  before: number;
}

/**
 * The refusal a quirky server answers this chat request with, or undefined when it serves it.
 * Checked in the order a server checks: the key, the rate limit, the model, then the body.
 */
export function refuseRequest(quirks: FakeQuirks, facts: RequestFacts): FakeRefusal | undefined {
  return refuseKey(quirks, facts.headers) ?? refuseCredit(quirks) ??
    refuseRate(quirks, facts.before) ??
    refuseModel(quirks, facts.body?.model, facts.models) ?? refuseContext(quirks, facts.body) ??
    refuseMaxTokens(quirks, facts.body) ?? refuseFields(quirks, facts.body) ??
    refuseTools(quirks, facts.body) ??
    refuseArguments(quirks, facts.body?.messages) ??
    refuseReasoning(quirks, facts.body?.messages) ??
    refuseOrder(quirks, facts.body?.messages) ?? refuseCallIds(quirks, facts.body?.messages);
}

/**
 * The fake's token count of a chat request's messages and tools. `bytes` (the default): a third
 * of a token per UTF-8 byte (klbr's uncalibrated estimate assumes a quarter and a bit), the same
 * ratio for every script. `bpe`: what llama-server and vLLM report, since both count with the
 * model's own tokenizer (llama.cpp's `llama_tokenize` on the GGUF vocabulary, vLLM's Hugging
 * Face tokenizer) — the byte-level BPE vocabularies of Llama 3, Qwen2 and GPT-4-class models
 * take common English at about four characters a token (OpenAI's tokenizer guide: "one token
 * generally corresponds to ~4 characters of text for common English text") and CJK text or
 * emoji at about one token per character or more; klbr's estimate (UTF-8 bytes / 4) takes a CJK
 * character, three bytes, for three quarters of a token.
 */
export function fakePromptTokens(
  // deno-lint-ignore no-explicit-any
  body: any,
  tokenizer: FakeQuirks["tokenizer"] = "bytes",
): number {
  const text = JSON.stringify({ messages: body?.messages ?? [], tools: body?.tools ?? [] });
  if (tokenizer === "bytes") return Math.ceil(new TextEncoder().encode(text).length / 3);
  let ascii = 0;
  let other = 0;
  for (const character of text) {
    if (character.codePointAt(0)! < 0x80) ascii++;
    else other++;
  }
  return Math.ceil(ascii / 4) + other;
}

/**
 * A request past the server's context, in each server's words. OpenAI: 400
 * `context_length_exceeded`, "This model's maximum context length is N tokens. However, your
 * messages resulted in M tokens. Please reduce the length of the messages." (platform.openai.com
 * error codes; DeepSeek answers the same). vLLM: 400 "This model's maximum context length is N
 * tokens. However, you requested M tokens (P in the messages, C in the completion). Please
 * reduce the length of the messages or completion." (`_validate_input` in vLLM's
 * serving_engine.py; it counts `max_tokens` too). llama-server: 400 `exceed_context_size_error`,
 * "request (M tokens) exceeds the available context size (N tokens), try increasing it", with
 * `n_prompt_tokens` and `n_ctx` beside it (ggml-org/llama.cpp#15780, llmmllab/llmmllab-api#69).
 */
// deno-lint-ignore no-explicit-any
function refuseContext(quirks: FakeQuirks, body: any): FakeRefusal | undefined {
  const limit = quirks.context;
  if (limit === undefined) return undefined;
  const prompt = fakePromptTokens(body, quirks.tokenizer);
  const completion = typeof body?.max_tokens === "number" ? body.max_tokens : 0;
  const counted = limit.words === "vllm" ? prompt + completion : prompt;
  if (counted <= limit.tokens) return undefined;
  const n = limit.tokens;
  const error = {
    openai: {
      message: `This model's maximum context length is ${n} tokens. However, your messages ` +
        `resulted in ${prompt} tokens. Please reduce the length of the messages.`,
      type: "invalid_request_error",
      param: "messages",
      code: "context_length_exceeded",
    },
    vllm: {
      message: `This model's maximum context length is ${n} tokens. However, you requested ` +
        `${counted} tokens (${prompt} in the messages, ${completion} in the completion). ` +
        "Please reduce the length of the messages or completion.",
      type: "BadRequestError",
      param: null,
      code: 400,
    },
    "llama.cpp": {
      code: 400,
      message: `request (${prompt} tokens) exceeds the available context size (${n} tokens), ` +
        "try increasing it",
      type: "exceed_context_size_error",
      n_prompt_tokens: prompt,
      n_ctx: n,
    },
  }[limit.words];
  return { status: 400, body: { error } };
}

/**
 * OpenAI answers a wrong key with 401 `invalid_api_key` (platform.openai.com/docs/guides/
 * error-codes: "401 - Invalid Authentication / Incorrect API key provided").
 */
export function refuseKey(
  quirks: FakeQuirks,
  headers: Record<string, string>,
): FakeRefusal | undefined {
  if (quirks.apiKey === undefined || headers.authorization === `Bearer ${quirks.apiKey}`) {
    return undefined;
  }
  const given = (headers.authorization ?? "").replace(/^Bearer /, "");
  return {
    status: 401,
    body: {
      error: {
        message: `Incorrect API key provided: ${given.slice(0, 3)}***${given.slice(-4)}. ` +
          "You can find your API key at https://platform.openai.com/account/api-keys.",
        type: "invalid_request_error",
        param: null,
        code: "invalid_api_key",
      },
    },
  };
}

/**
 * An account out of credit, in each provider's words: OpenAI's 429 `insufficient_quota` (its
 * error-codes guide; the body as quoted in ChatGPTNextWeb/NextChat#3123), DeepSeek's 402
 * "Insufficient Balance" (its error-codes page; continuedev/continue#9942), OpenRouter's 402
 * "Insufficient credits" (its errors page: `{"error": {"code": 402, "message": …}}`).
 */
function refuseCredit(quirks: FakeQuirks): FakeRefusal | undefined {
  switch (quirks.outOfCredit) {
    case undefined:
      return undefined;
    case "openai":
      return {
        status: 429,
        body: {
          error: {
            message: "You exceeded your current quota, please check your plan and billing details.",
            type: "insufficient_quota",
            param: null,
            code: "insufficient_quota",
          },
        },
      };
    case "deepseek":
      return {
        status: 402,
        body: {
          error: {
            message: "Insufficient Balance",
            type: "unknown_error",
            param: null,
            code: "invalid_request_error",
          },
        },
      };
    case "openrouter":
      return {
        status: 402,
        body: {
          error: {
            code: 402,
            message: "Insufficient credits. Add more using https://openrouter.ai/credits",
          },
        },
      };
  }
}

/**
 * A field the server does not take, in OpenAI's error shape as an OpenAI-format proxy answers it
 * ("Unknown parameter: 'stream_options'.", `unknown_parameter`; QuantumNous/new-api#418).
 */
// deno-lint-ignore no-explicit-any
function refuseFields(quirks: FakeQuirks, body: any): FakeRefusal | undefined {
  const field = quirks.unknownFields?.find((name) => body?.[name] !== undefined);
  if (field === undefined) return undefined;
  return {
    status: 400,
    body: {
      error: {
        message: `Unknown parameter: '${field}'.`,
        type: "invalid_request_error",
        param: field,
        code: "unknown_parameter",
      },
    },
  };
}

/**
 * OpenAI's reasoning models refusing `max_tokens`, in its words and body (quoted in public
 * reports for o1 and o3-mini, teilomillet/gollm#33; gpt-5, griptape-ai/ComfyUI-Griptape#312;
 * gpt-5.1 on Azure, anomalyco/opencode#37964).
 */
// deno-lint-ignore no-explicit-any
function refuseMaxTokens(quirks: FakeQuirks, body: any): FakeRefusal | undefined {
  if (!quirks.maxCompletionTokensOnly || body?.max_tokens === undefined) return undefined;
  return {
    status: 400,
    body: {
      error: {
        message:
          "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
        type: "invalid_request_error",
        param: "max_tokens",
        code: "unsupported_parameter",
      },
    },
  };
}

/**
 * A rate limit: 429 with `Retry-After` (OpenAI's rate-limit guide; DeepSeek and OpenRouter send
 * 429 the same way), or `retry-after-ms`, which the `openai` SDK also reads.
 */
function refuseRate(quirks: FakeQuirks, before: number): FakeRefusal | undefined {
  const limit = quirks.rateLimited;
  if (limit === undefined || before >= limit.requests) return undefined;
  const headers: Record<string, string> = limit.retryAfterMs !== undefined
    ? { "retry-after-ms": String(limit.retryAfterMs) }
    : { "retry-after": String(limit.retryAfterSeconds ?? 1) };
  return {
    status: 429,
    headers,
    body: {
      error: {
        message: "Rate limit reached for requests. Please try again later.",
        type: "requests",
        param: null,
        code: "rate_limit_exceeded",
      },
    },
  };
}

/**
 * An unknown model, in each server's words: OpenAI 404 `model_not_found` ("The model `x` does
 * not exist or you do not have access to it."); vLLM 404 "The model `x` does not exist."
 * (`NotFoundError`, `_check_model` in vllm/entrypoints/openai/serving_engine.py); Ollama 404 "model \"x\" not
 * found, try pulling it first" (ollama/ollama docs/openai.md, its error passthrough).
 * llama-server serves whatever it loaded and ignores the name, so it has no such quirk.
 */
function refuseModel(
  quirks: FakeQuirks,
  model: unknown,
  models: string[],
): FakeRefusal | undefined {
  if (quirks.strictModel === undefined || models.includes(String(model))) return undefined;
  const words = {
    openai: {
      message: `The model \`${model}\` does not exist or you do not have access to it.`,
      type: "invalid_request_error",
      param: null,
      code: "model_not_found",
    },
    vllm: {
      message: `The model \`${model}\` does not exist.`,
      type: "NotFoundError",
      param: null,
      code: 404,
    },
    ollama: {
      message: `model "${model}" not found, try pulling it first`,
      type: "api_error",
      param: null,
      code: null,
    },
  }[quirks.strictModel];
  return { status: 404, body: { error: words } };
}

/**
 * Tools refused. llama-server without `--jinja`: HTTP 500 `{"error": {"code": 500, "message":
 * "tools param requires --jinja flag", "type": "server_error"}}` (containers/ramalama#988,
 * defilantech/LLMKube#126). Ollama with a model whose template has no tools: HTTP 400
 * "registry.ollama.ai/library/gemma3:4b does not support tools" (ollama/ollama#6027,
 * louisho5/picobot#6).
 */
function refuseTools(
  quirks: FakeQuirks,
  body: { tools?: unknown } | null,
): FakeRefusal | undefined {
  if (quirks.refuseTools === undefined || body?.tools === undefined) return undefined;
  if (quirks.refuseTools === "llama.cpp") {
    return {
      status: 500,
      body: {
        error: { code: 500, message: "tools param requires --jinja flag", type: "server_error" },
      },
    };
  }
  return {
    status: 400,
    body: {
      error: {
        message: "registry.ollama.ai/library/gemma3:4b does not support tools",
        type: "api_error",
        param: null,
        code: null,
      },
    },
  };
}

// deno-lint-ignore no-explicit-any
type Message = any;

/** The first tool-call arguments in the history that are no JSON object, and why. */
export function badArguments(messages: Message[] | undefined): string | undefined {
  for (const message of messages ?? []) {
    if (message?.role !== "assistant") continue;
    for (const call of message.tool_calls ?? []) {
      const text = call?.function?.arguments;
      try {
        const parsed = JSON.parse(text);
        if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
          return `arguments are not an object: ${text}`;
        }
      } catch (error) {
        return (error as Error).message;
      }
    }
  }
  return undefined;
}

/**
 * History arguments that are no JSON object. vLLM `json.loads()` every historical
 * `tool_calls[].function.arguments` before the chat template and answers 400 with Python's
 * error (vllm-project/vllm#43995: `{"error": {"message": "Expecting ',' delimiter: line 1
 * column 54 (char 53)", "type": "BadRequestError", "param": null, "code": 400}}`). llama-server
 * answers 500 "Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] …"
 * (ggml-org/llama.cpp#22072; OpenHands/OpenHands#13949).
 */
function refuseArguments(
  quirks: FakeQuirks,
  messages: Message[] | undefined,
): FakeRefusal | undefined {
  if (quirks.strictArguments === undefined) return undefined;
  const bad = badArguments(messages);
  if (bad === undefined) return undefined;
  if (quirks.strictArguments === "vllm") {
    return {
      status: 400,
      body: {
        error: {
          message: "Expecting value: line 1 column 1 (char 0)",
          type: "BadRequestError",
          param: null,
          code: 400,
        },
      },
    };
  }
  return {
    status: 500,
    body: {
      error: {
        code: 500,
        message: "Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] " +
          "parse error at line 1, column 1: syntax error while parsing value - unexpected end of input",
        type: "server_error",
      },
    },
  };
}

/**
 * DeepSeek's thinking mode (api-docs.deepseek.com/guides/thinking_mode, "Tool Calls"): for turns
 * that made tool calls, the assistant's `reasoning_content` "must be fully passed back to the
 * API in all subsequent requests"; otherwise 400 "The `reasoning_content` in the thinking mode
 * must be passed back to the API." (anomalyco/opencode#24722, earendil-works/pi#3636). So every
 * assistant message with tool calls in the history needs it, not only the current turn's.
 */
function refuseReasoning(
  quirks: FakeQuirks,
  messages: Message[] | undefined,
): FakeRefusal | undefined {
  if (!quirks.requireReasoningBack) return undefined;
  const missing = (messages ?? []).some((m) =>
    m?.role === "assistant" && (m.tool_calls?.length ?? 0) > 0 &&
    typeof m.reasoning_content !== "string"
  );
  if (!missing) return undefined;
  return {
    status: 400,
    body: {
      error: {
        message: "The `reasoning_content` in the thinking mode must be passed back to the API.",
        type: "invalid_request_error",
        param: null,
        code: "invalid_request_error",
      },
    },
  };
}

/**
 * Mistral's role order: a `user` message right after a `tool` message is refused with 400 and a
 * top-level body `{"object": "error", "message": "Unexpected role 'user' after role 'tool'",
 * "type": "invalid_request_message_order", "param": null, "code": "3230"}`
 * (datapizza-labs/datapizza-ai#98, avante-corp/avante.nvim#2695).
 */
function refuseOrder(quirks: FakeQuirks, messages: Message[] | undefined): FakeRefusal | undefined {
  if (!quirks.userAfterToolRefused) return undefined;
  const list = messages ?? [];
  const at = list.findIndex((m, i) => i > 0 && m?.role === "user" && list[i - 1]?.role === "tool");
  if (at < 0) return undefined;
  return {
    status: 400,
    body: {
      object: "error",
      message: "Unexpected role 'user' after role 'tool'",
      type: "invalid_request_message_order",
      param: null,
      code: "3230",
    },
  };
}

/**
 * Mistral's tool-call ids: 400 `{"object": "error", "message": "Tool call id was <id> but must
 * be a-z, A-Z, 0-9, with a length of 9.", "type": "invalid_request_error"}` for any id in the
 * history that is not nine letters and digits (jackmpcollins/magentic#276,
 * langchain-ai/langchain#24668, openclaw/openclaw#57672).
 */
function refuseCallIds(
  quirks: FakeQuirks,
  messages: Message[] | undefined,
): FakeRefusal | undefined {
  if (!quirks.nineCharToolCallIds) return undefined;
  const ids = (messages ?? []).flatMap((m) => {
    const message = m as { tool_call_id?: unknown; tool_calls?: { id?: unknown }[] };
    return [message.tool_call_id, ...(message.tool_calls ?? []).map((call) => call.id)];
  }).filter((id) => id !== undefined);
  const bad = ids.find((id) => typeof id !== "string" || !/^[A-Za-z0-9]{9}$/.test(id));
  if (bad === undefined) return undefined;
  return {
    status: 400,
    body: {
      object: "error",
      message: `Tool call id was ${bad} but must be a-z, A-Z, 0-9, with a length of 9.`,
      type: "invalid_request_error",
      param: null,
      code: null,
    },
  };
}

/**
 * A 200 HTML page where the API should be: a web app at the configured URL (NextChat answered
 * its own page to `/api/openai`, ChatGPTNextWeb/NextChat#3814; "a silent empty reply when the
 * site answered 200", JuiceBoxxGames/utsuwa#67).
 */
export function htmlPage(title: string): Response {
  const html = `<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">` +
    `<title>${title}</title></head><body><div id="root"></div></body></html>\n`;
  return new Response(html, { headers: { "content-type": "text/html; charset=utf-8" } });
}

/**
 * OpenRouter keeps a connection open with SSE comments, `: OPENROUTER PROCESSING`
 * (openrouter.ai/docs/api-reference/streaming: "ignore these comments").
 */
export const OPENROUTER_COMMENT = ": OPENROUTER PROCESSING\n\n";

/**
 * LM Studio's answer to a path it does not serve: HTTP 200 with `{"error": "Unexpected endpoint
 * or method. (POST /chat/completions)"}`, logged as "Returning 200 anyway"
 * (lmstudio-ai/lmstudio-bug-tracker#618: `POST http://localhost:1234/chat/completions`, a base URL
 * without `/v1`; #1323, #2085).
 */
export function unexpectedEndpoint(method: string, path: string): Response {
  return Response.json({ error: `Unexpected endpoint or method. (${method} ${path})` });
}

/**
 * A reply the provider's content filter stopped. OpenAI documents the finish reason:
 * `content_filter` "if content was omitted due to a flag from our content filters" (the chat
 * completion chunk's `finish_reason`, openai/openai-python#344). Azure OpenAI filters a
 * stream in buffered pieces: a piece that violates the policy is blocked instead of returned
 * (https://learn.microsoft.com/azure/foundry/openai/concepts/content-streaming), and the stream
 * stops with its last chunk carrying `finish_reason: "content_filter"` (as summarised at
 * https://www.developersdigest.tech/errors/api/azure-openai/200-finish-reason-content-filter). So the flagged piece — here the last content chunk, which may be inside a tool
 * call's arguments — never arrives.
 */
export function filteredChunks<T>(content: T[]): T[] {
  return content.slice(0, -1);
}

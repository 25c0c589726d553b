// The reachability probe against servers' real `GET /v1/models` answers, over real HTTP: which
// lists name the models a server serves, and when a configured model is worth a warning.

import assert from "node:assert/strict";
import { modelNote, probeRoute } from "../../../runtime/model/mod.ts";

/** Probes a loopback server that answers `GET /v1/models` with `list`. */
async function probeList(list: unknown) {
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    () => Response.json(list),
  );
  try {
    return await probeRoute(`http://127.0.0.1:${server.addr.port}/v1`);
  } finally {
    await server.shutdown();
  }
}

Deno.test("`modelNote()` says nothing for llama-server with one model, which serves it under any name", async () => {
  // llama-server lists its one model by path or alias, with `owned_by: "llamacpp"` and a `meta`
  // object (`handle_models` in its server.cpp), and answers a chat request whatever its model
  // field says; docs/models.md gives its route `model "default"`.
  const single = await probeList({
    object: "list",
    data: [{
      id: "/models/Qwen3-8B-Q4_K_M.gguf",
      object: "model",
      created: 1,
      owned_by: "llamacpp",
      meta: { vocab_type: 2, n_vocab: 151936, n_ctx_train: 40960, n_embd: 4096 },
    }],
  });
  assert.equal(single.problem, null);
  assert.equal(modelNote("default", single), null);
  // Its router mode (several models, by name) does route by the name: it is worth the warning.
  const router = await probeList({
    object: "list",
    data: [{
      id: "qwen3-8b",
      object: "model",
      created: 1,
      owned_by: "llamacpp",
      status: { value: "loaded" },
    }],
  });
  assert.equal(
    modelNote("default", router),
    'model "default" is not among the models the server lists ("qwen3-8b")',
  );
  // vLLM serves only the names it lists.
  const vllm = await probeList({
    object: "list",
    data: [{ id: "Qwen/Qwen3-8B", object: "model", created: 1, owned_by: "vllm" }],
  });
  assert.equal(
    modelNote("default", vllm),
    'model "default" is not among the models the server lists ("Qwen/Qwen3-8B")',
  );
});

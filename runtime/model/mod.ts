/**
 * The OpenAI-compatible provider, the builder that turns a reply (streamed or whole) into one
 * complete provider turn, and the reachability probe.
 *
 * @module
 */

export {
  type ChatMessage,
  type ChatRequest,
  createProvider,
  endedByFilter,
  modelFailureFacts,
  type Provider,
  type ProviderDelta,
  ProviderFailure,
  type ProviderReasoning,
  type ProviderRefusal,
  type ProviderTurn,
  PYTHON_TOOL,
} from "./_provider.ts";
export { assistantMessage, endedAtLength, REASONING_FIELDS } from "./_provider_turn.ts";
export { modelNote, type ProbeResult, probeRoute } from "./_probe.ts";

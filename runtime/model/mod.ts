/**
 * The OpenAI-compatible streaming provider and the builder that turns a stream into one
 * complete provider turn.
 *
 * @module
 */

export {
  type ChatMessage,
  createProvider,
  type Provider,
  type ProviderDelta,
  ProviderFailure,
  type ProviderTurn,
  PYTHON_TOOL,
} from "./_provider.ts";
export { assistantMessage } from "./_provider_turn.ts";
export { describeFetchError, PROBE_TIMEOUT_MS, type ProbeResult, probeRoute } from "./_probe.ts";

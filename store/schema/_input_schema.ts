/**
 * What an input must be to be admitted: the schema of `admitInput`'s argument and its checks.
 * Private to `inputs.ts`.
 *
 * @module
 */

import { z } from "zod";
import { KlbrError, SOURCE_KINDS } from "../../runtime/core/mod.ts";
import { hasControlCharacter, schemaError } from "./_schema_error.ts";
import { checkSessionId } from "../tables/sessions.ts";

/** Largest accepted input body, in UTF-16 code units of its JSON text. */
export const MAX_INPUT_BODY_CHARS = 1 << 20;

const Text = z.string().min(1).max(512).refine(
  (v) => !hasControlCharacter(v),
  "has a control character",
);

const AdmitInputSchema = z.object({
  /** The session the input is for; it must exist. */
  session: z.string(),
  sourceKind: z.enum(SOURCE_KINDS),
  /** `<source_kind>:…`, e.g. from `localDedupeKey` or `discordDedupeKey` (`dedupe_keys.ts`). */
  dedupeKey: Text,
  /** The conversation the input belongs to; immutable once admitted. */
  conversationId: Text,
  author: Text,
  /** Any JSON value: a string for plain text. */
  body: z.unknown(),
  /** When the transport received it, in ms; defaults to the admission time. */
  receivedAt: z.number().int().nonnegative().optional(),
  /**
   * A local input's `client_msg_id`, written into `input.admitted` so a client can match the
   * record to what it sent without reading the dedupe key.
   */
  clientMsgId: Text.optional(),
}).strict();

/** What {@linkcode admitInput} takes. */
export type AdmitInput = z.input<typeof AdmitInputSchema>;

/** An input that passed its checks, with its body as JSON text. */
export type ParsedInput = z.infer<typeof AdmitInputSchema> & { bodyText: string };

/**
 * Checks an input (schema, session id, dedupe key prefix, body size) and encodes its body.
 *
 * @throws {KlbrError} `invalid_input` naming the field that is wrong.
 */
export function parseInput(input: AdmitInput): ParsedInput {
  const parsed = AdmitInputSchema.safeParse(input);
  if (!parsed.success) throw schemaError("admit input", parsed.error, input);
  const data = parsed.data;
  checkSessionId(data.session);
  if (!data.dedupeKey.startsWith(`${data.sourceKind}:`)) {
    throw new KlbrError(
      "invalid_input",
      `cannot admit input: a ${data.sourceKind} dedupe key starts with "${data.sourceKind}:" (got ${
        JSON.stringify(data.dedupeKey)
      })`,
    );
  }
  let bodyText: string | undefined;
  try {
    bodyText = JSON.stringify(data.body);
  } catch {
    bodyText = undefined;
  }
  if (bodyText === undefined || bodyText.length > MAX_INPUT_BODY_CHARS) {
    throw new KlbrError(
      "invalid_input",
      `cannot admit input: body must be JSON of at most ${MAX_INPUT_BODY_CHARS} characters (got ${
        bodyText === undefined ? typeof data.body : `${bodyText.length} characters`
      })`,
    );
  }
  return { ...data, bodyText };
}

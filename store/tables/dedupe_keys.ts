/**
 * Canonical source dedupe keys: the identity by which a repeated delivery is one input.
 *
 * A key starts with its source kind and a colon; `admitInput` refuses one that does not.
 *
 * @module
 */

import { KlbrError } from "../../runtime/core/mod.ts";
import { hasControlCharacter } from "../schema/_schema_error.ts";

function keyPart(action: string, name: string, value: string, colonAllowed: boolean): void {
  if (
    typeof value !== "string" || value.length === 0 || value.length > 200 ||
    hasControlCharacter(value) ||
    (!colonAllowed && value.includes(":"))
  ) {
    const rule = colonAllowed ? "1-200 characters" : `1-200 characters without ":"`;
    throw new KlbrError(
      "invalid_input",
      `cannot build ${action} dedupe key: ${name} must be ${rule} and no control characters (got ${
        JSON.stringify(value)
      })`,
    );
  }
}

/**
 * Builds the canonical dedupe key of a local input, `local:<client_id>:<client_msg_id>`.
 *
 * @throws {KlbrError} `invalid_input` when either part is empty, too long or has a control
 *   character, or `clientId` has a `:` (which would make the key ambiguous).
 * @example
 * ```ts
 * localDedupeKey("cl_7", "m-42"); // "local:cl_7:m-42"
 * ```
 */
export function localDedupeKey(clientId: string, clientMsgId: string): string {
  keyPart("local", "client_id", clientId, false);
  keyPart("local", "client_msg_id", clientMsgId, true);
  return `local:${clientId}:${clientMsgId}`;
}

/**
 * Builds the canonical dedupe key of a Discord message, `discord:<channel_id>:<message_id>`.
 *
 * @throws {KlbrError} `invalid_input` unless both ids are Discord snowflakes (1–20 digits).
 */
export function discordDedupeKey(channelId: string, messageId: string): string {
  for (const [name, value] of [["channel_id", channelId], ["message_id", messageId]]) {
    if (typeof value !== "string" || !/^[0-9]{1,20}$/.test(value)) {
      throw new KlbrError(
        "invalid_input",
        `cannot build discord dedupe key: ${name} must be a snowflake of 1-20 digits (got ${
          JSON.stringify(value)
        })`,
      );
    }
  }
  return `discord:${channelId}:${messageId}`;
}

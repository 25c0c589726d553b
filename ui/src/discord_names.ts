/**
 * Readable names for Discord authors and for the conversation a message belongs to.
 *
 * @module
 */

/**
 * The username in a Discord author `discord:<id>:<username>`; any other author as it is.
 *
 * @example
 * ```ts
 * authorName("discord:4417:alice"); // "alice"
 * ```
 */
export function authorName(author: string): string {
  const match = author.match(/^discord:[^:]+:(.+)$/);
  return match === null ? author : match[1];
}

/**
 * The conversation in words: `Discord channel <id>` for `discord:<id>`, any other id (such as
 * `local:default`) as it is.
 */
export function conversationLabel(conversation: string): string {
  const discord = conversation.match(/^discord:(.+)$/);
  if (discord !== null) return `Discord channel ${discord[1]}`;
  return conversation;
}

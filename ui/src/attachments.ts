/**
 * Files an input carries: the page's upload of one (`POST /attachments`, answered once the
 * daemon has kept it) and the list an input record names, from the composer or from Discord.
 *
 * @module
 */

import type { InputAttachment } from "../../runtime/core/mod.ts";
import { isObject } from "./json_value.ts";

/** A file as an input record names it. */
export interface AttachedFile {
  filename: string;
  /** Its size in bytes, when known. */
  size: number | undefined;
  /** The kept artifact that holds it; `null` when it was not kept (see `skipped`). */
  artifact: string | null;
  /** Why it was not kept (a Discord file over the limit), or `null`. */
  skipped: string | null;
}

/**
 * The files an input's body names: `body.attachments` of a local input sent with files or of
 * a Discord message; none for a plain text body.
 *
 * @example
 * ```ts
 * attachedFiles({ text: "", attachments: [{ filename: "a.csv", size: 8, artifact: "3fa2…" }] });
 * ```
 */
export function attachedFiles(body: unknown): AttachedFile[] {
  if (!isObject(body) || !Array.isArray(body.attachments)) return [];
  return body.attachments.filter(isObject).map((a) => ({
    filename: typeof a.filename === "string" ? a.filename : "file",
    size: typeof a.size === "number" ? a.size : undefined,
    artifact: typeof a.artifact === "string" ? a.artifact : null,
    skipped: typeof a.skipped === "string" ? a.skipped : null,
  }));
}

/**
 * Uploads `file` and resolves with what the input names it by, once the daemon has kept it.
 * The page's session cookie is the credential.
 *
 * @throws {Error} with the daemon's message (for a file over `lanes { attachment_max_bytes }`,
 *   the limit and how to raise it), or saying the daemon did not answer and to send again
 *   once it is back (the composer keeps the message and its files).
 */
export async function uploadAttachment(file: File): Promise<InputAttachment> {
  let response: Response;
  try {
    response = await fetch("/attachments", {
      method: "POST",
      body: file,
      credentials: "same-origin",
      headers: { "content-type": "application/octet-stream" },
    });
  } catch (error) {
    throw new Error(
      `cannot attach ${file.name}: the daemon did not answer (${error}); the message and its files are kept here: send again once the daemon is back`,
    );
  }
  const reply = await response.json().catch(() => ({})) as Record<string, unknown>;
  if (!response.ok || typeof reply.artifact !== "string") {
    const why = typeof reply.message === "string" ? reply.message : `HTTP ${response.status}`;
    throw new Error(why);
  }
  return {
    artifact: reply.artifact,
    filename: file.name.slice(0, 256) || "file",
    content_type: file.type.slice(0, 256) || null,
  };
}

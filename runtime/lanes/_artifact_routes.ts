/**
 * `/artifacts` and `/attachments`: reading a spooled output or a kept attachment back (the
 * cells lane's long outputs and displays, an input's files), and the page's upload of a file
 * it attaches to a message.
 *
 * Both take the lanes' credentials: the operator token as `Authorization: Bearer`, or the
 * session cookie. A read-only viewer (`lanes { view_without_token #true }`) may read, never
 * upload: an upload becomes part of an input, and a viewer sends none.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { type Context, Hono } from "hono";
import { isKlbrError, KlbrError } from "../core/mod.ts";
import type { AppDeps } from "./_server.ts";

/** The most of an artifact one `GET /artifacts/<id>` answers: 16 MiB. */
const ARTIFACT_MAX_BYTES = 1 << 24;

/**
 * Checks the request's lane credentials: a bearer token must be right, else a valid session
 * cookie, else (to read only) the configuration's `view_without_token`.
 *
 * @throws {KlbrError} the token's own refusal (`token_missing`, `token_wrong`, …).
 */
function requireCredentials(c: Context, deps: AppDeps, use: "read" | "upload"): void {
  const bearer = /^Bearer (.+)$/.exec(c.req.header("authorization") ?? "")?.[1];
  if (bearer !== undefined) return deps.auth.checkToken(bearer);
  if (deps.auth.readCookie(c.req.header("cookie"), deps.address().port) === "valid") return;
  if (use === "read" && deps.auth.viewWithoutToken) return;
  deps.auth.checkToken(undefined);
}

/** `GET /artifacts/<id>`: an artifact's bytes, at most 16 MiB from `offset`. */
export function artifactRoutes(deps: AppDeps): Hono {
  const artifacts = new Hono();
  artifacts.get("/:id", async (c) => {
    requireCredentials(c, deps, "read");
    if (deps.artifacts === undefined) {
      throw new KlbrError("not_found", "cannot read artifact: this daemon keeps none", {
        status: 404,
      });
    }
    const offset = Number(c.req.query("offset") ?? 0);
    const length = Math.min(
      Number(c.req.query("length") ?? ARTIFACT_MAX_BYTES),
      ARTIFACT_MAX_BYTES,
    );
    const id = c.req.param("id");
    const read = await deps.artifacts(id, { offset, length }).catch((error) => {
      if (isKlbrError(error) && error.code === "not_found") {
        throw new KlbrError(error.code, error.message, { status: 404 });
      }
      throw error;
    });
    return c.body(read.data as Uint8Array<ArrayBuffer>, 200, {
      "content-type": "text/plain; charset=utf-8",
      "x-artifact-bytes": String(read.bytes),
      "x-content-type-options": "nosniff",
      "content-security-policy": "default-src 'none'; sandbox",
      "cache-control": "no-store",
    });
  });
  return artifacts;
}

/**
 * `POST /attachments`: the request's body, kept as an attachment (`keepAttachment`: fsynced,
 * never evicted) before the reply, which names it. The page then sends its input with the id;
 * admission checks the id names a kept attachment.
 *
 * @throws {KlbrError} `limit_reached` (413) for a body over `lanes { attachment_max_bytes }`,
 *   read no further than the limit.
 */
export function attachmentRoutes(deps: AppDeps): Hono {
  const attachments = new Hono();
  attachments.post("/", async (c) => {
    requireCredentials(c, deps, "upload");
    const upload = deps.attachments;
    if (upload === undefined || upload.maxBytes === 0) {
      throw new KlbrError(
        "forbidden",
        "cannot attach a file: this daemon takes none; set lanes { attachment_max_bytes } above 0",
        { status: 403 },
      );
    }
    const data = await readCapped(c.req.raw, upload.maxBytes);
    const reply = await upload.keep(data);
    c.header("cache-control", "no-store");
    return c.json(reply);
  });
  return attachments;
}

/** The request's body, refused as soon as it (or its `Content-Length`) passes `max` bytes. */
async function readCapped(request: Request, max: number): Promise<Uint8Array> {
  const tooLarge = (got: number) =>
    new KlbrError(
      "limit_reached",
      `cannot attach a file of ${got} bytes or more: the limit is ${max} bytes; send a smaller file or raise lanes { attachment_max_bytes }`,
      { status: 413 },
    );
  const declared = Number(request.headers.get("content-length") ?? NaN);
  if (declared > max) throw tooLarge(declared);
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of request.body ?? []) {
    size += chunk.length;
    if (size > max) throw tooLarge(size);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size);
}

/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * The viewer of a spooled output: the whole text a cell printed, read from the daemon's
 * authenticated `/artifacts/<id>` route (the page's session cookie goes with it), at most the
 * first MiB at once, with a link to the raw file.
 *
 * @module
 */

import type { JSX } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { byteSize } from "./format.ts";

/** How much of an artifact the viewer reads at once. */
export const VIEW_BYTES = 1024 * 1024;

/** What the viewer shows: a spooled output's artifact and what it is. */
export interface ArtifactTarget {
  id: string;
  bytes: number | undefined;
  /** What it holds, e.g. "stdout of cell_01J…". */
  label: string;
}

type Loaded =
  | { state: "loading" }
  | { state: "ok"; text: string; shown: number; total: number }
  | { state: "error"; message: string };

/** What {@linkcode readArtifactBytes} read: the bytes and the artifact's whole size, or why not. */
export type ArtifactBytes =
  | { ok: true; data: Uint8Array; total: number }
  | { ok: false; message: string };

/**
 * Reads the first `length` bytes of an artifact through the authenticated route (the page's
 * session cookie goes with it); never rejects.
 */
export async function readArtifactBytes(id: string, length: number): Promise<ArtifactBytes> {
  try {
    const response = await fetch(`/artifacts/${encodeURIComponent(id)}?length=${length}`, {
      credentials: "same-origin",
      cache: "no-store",
    });
    if (!response.ok) {
      const body = await response.json().catch(() => ({})) as { message?: unknown };
      const why = typeof body.message === "string" ? body.message : `HTTP ${response.status}`;
      return { ok: false, message: why };
    }
    const data = new Uint8Array(await response.arrayBuffer());
    const total = Number(response.headers.get("x-artifact-bytes") ?? data.length);
    return { ok: true, data, total: Number.isFinite(total) ? total : data.length };
  } catch (error) {
    return { ok: false, message: `cannot reach the daemon (${error})` };
  }
}

/** Reads the first {@linkcode VIEW_BYTES} of an artifact through the authenticated route. */
export async function fetchArtifact(id: string): Promise<Loaded> {
  const read = await readArtifactBytes(id, VIEW_BYTES);
  if (!read.ok) return { state: "error", message: read.message };
  return {
    state: "ok",
    text: new TextDecoder().decode(read.data),
    shown: read.data.length,
    total: read.total,
  };
}

/** The viewer, over the page; Escape or the button closes it. */
export function ArtifactViewer(
  props: { target: ArtifactTarget; onClose: () => void },
): JSX.Element {
  const [loaded, setLoaded] = useState<Loaded>({ state: "loading" });
  const close = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    let live = true;
    setLoaded({ state: "loading" });
    void fetchArtifact(props.target.id).then((result) => live && setLoaded(result));
    close.current?.focus();
    return () => {
      live = false;
    };
  }, [props.target.id]);
  return (
    <div
      class="viewer-backdrop"
      onKeyDown={(event) => {
        if (event.key === "Escape") props.onClose();
      }}
    >
      <div
        class="viewer"
        role="dialog"
        aria-modal="true"
        aria-labelledby="viewer-title"
        data-artifact-id={props.target.id}
      >
        <div class="viewer-head">
          <h2 id="viewer-title">{props.target.label}</h2>
          <a href={`/artifacts/${props.target.id}`} target="_blank" rel="noopener noreferrer">
            Open the raw file
          </a>
          <button type="button" ref={close} onClick={props.onClose}>Close</button>
        </div>
        {loaded.state === "loading" && <p class="note">Loading…</p>}
        {loaded.state === "error" && (
          <p class="error-text" role="alert">Cannot open the output: {loaded.message}</p>
        )}
        {loaded.state === "ok" && (
          <>
            <p class="note">
              {loaded.shown < loaded.total
                ? `The first ${byteSize(loaded.shown)} of ${byteSize(loaded.total)}.`
                : `All ${byteSize(loaded.total)}.`}
            </p>
            <pre class="text viewer-text" tabIndex={0}>{loaded.text}</pre>
          </>
        )}
      </div>
    </div>
  );
}

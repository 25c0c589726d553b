/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * What a cell showed with `display()`: each kept as an artifact and read through the daemon's
 * authenticated `/artifacts/<id>` route; an image shown inline (as a `data:` URL, the one image
 * source the page's CSP allows besides its own), HTML sanitised like Markdown (no scripts, event
 * handlers, styles or forms).
 *
 * @module
 */

import type { JSX } from "preact";
import { useEffect, useState } from "preact/hooks";
import type { CellDisplay } from "../../runtime/core/mod.ts";
import { readArtifactBytes } from "./artifact_viewer.tsx";
import { byteSize } from "./format.ts";
import { sanitizeHtml } from "./markdown.ts";

type Shown =
  | { state: "loading" }
  | { state: "image"; url: string }
  | { state: "html"; html: string }
  | { state: "error"; message: string };

/** Reads one display's artifact and turns it into what the page shows. */
async function loadDisplay(display: CellDisplay): Promise<Shown> {
  if (display.artifact === undefined) {
    return { state: "error", message: display.error ?? "not kept" };
  }
  const read = await readArtifactBytes(display.artifact.id, display.artifact.bytes);
  if (!read.ok) {
    return {
      state: "error",
      message: `cannot read artifact ${display.artifact.id} (${read.message})`,
    };
  }
  if (display.mime === "text/html") {
    return { state: "html", html: sanitizeHtml(new TextDecoder().decode(read.data)) };
  }
  const blob = new Blob([read.data as Uint8Array<ArrayBuffer>], { type: display.mime });
  const url = await new Promise<string>((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
  return { state: "image", url };
}

/** One display of a cell. */
function DisplayView({ display, n }: { display: CellDisplay; n: number }): JSX.Element {
  const [shown, setShown] = useState<Shown>({ state: "loading" });
  useEffect(() => {
    let live = true;
    loadDisplay(display).then(
      (next) => live && setShown(next),
      (error) => live && setShown({ state: "error", message: String(error) }),
    );
    return () => {
      live = false;
    };
  }, [display.artifact?.id, display.error]);
  const what = `display ${n} of the cell: ${display.mime}, ${byteSize(display.bytes)}`;
  if (shown.state === "image") {
    return <img class="cell-display-image" src={shown.url} alt={what} title={what} />;
  }
  if (shown.state === "html") {
    return (
      <div
        class="cell-display-html"
        role="group"
        aria-label={what}
        // Sanitised by sanitizeHtml just above, as Markdown is.
        dangerouslySetInnerHTML={{ __html: shown.html }}
      />
    );
  }
  if (shown.state === "error") return <p class="note">{what}: {shown.message}</p>;
  return <p class="note">loading {what}…</p>;
}

/** The displays of a cell, in the order it showed them. */
export function CellDisplays({ displays }: { displays: readonly CellDisplay[] }): JSX.Element {
  return (
    <div class="output cell-displays">
      <h3 class="output-name">displayed</h3>
      {displays.map((display, i) => (
        <DisplayView key={display.artifact?.id ?? i} display={display} n={i + 1} />
      ))}
    </div>
  );
}

/**
 * A cell's `display()` output as the host keeps it: each display whole in an artifact, named in
 * the model's result by type, size and artifact id (never its bytes), and a failed write named
 * in the display while the cell keeps its outcome.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { keepCellOutput, keptCellResult, renderCellResult } from "../../../runtime/session/mod.ts";
import type { CellResult } from "../../../runtime/kernel/mod.ts";
import { readArtifact } from "../../../store/tables/artifacts.ts";
import { cellResult } from "../../_helpers/session_loop.ts";
import { tempDir } from "../../_helpers/temp.ts";

const PNG = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3]);

function shown(): CellResult {
  return cellResult({
    duration_ms: 3,
    displays: [
      { mime: "image/png", data_b64: btoa(String.fromCharCode(...PNG)) },
      { mime: "text/html", data_b64: btoa("<b>hi</b>") },
    ],
  });
}

Deno.test("each display is kept whole as an artifact and named to the model without its bytes", async () => {
  const stateDir = await tempDir();
  const kept = await keepCellOutput(stateDir, shown());
  assert.deepEqual(kept.displays.map((d) => [d.mime, d.bytes]), [
    ["image/png", PNG.length],
    ["text/html", 9],
  ]);
  const png = kept.displays[0].artifact!;
  assert.deepEqual((await readArtifact(stateDir, png.id, {})).data, PNG);
  const stored = keptCellResult(kept);
  assert.deepEqual(stored.displays, kept.displays);
  const text = renderCellResult({ ...kept.result, displays: kept.displays });
  assert.match(text, new RegExp(`1\\. image/png, ${PNG.length} bytes, artifact ${png.id}`));
  assert.match(text, /2\. text\/html, 9 bytes, artifact [0-9a-f]{64}/);
  assert.doesNotMatch(text, /data_b64|iVBOR/);
  // The worker's raw reply (bytes, no artifact) is never rendered.
  assert.doesNotMatch(renderCellResult(shown()), /displayed/);
});

Deno.test("a display that cannot be written is named in the result, and the cell keeps its outcome", async () => {
  const stateDir = await tempDir();
  // A file where the artifacts folder goes: every artifact write fails.
  await Deno.writeTextFile(join(stateDir, "artifacts"), "not a folder");
  const reports: (string | null)[] = [];
  const kept = await keepCellOutput(stateDir, shown(), { report: (e) => reports.push(e) });
  assert.equal(kept.result.outcome, "ok");
  assert.equal(kept.displays.length, 2);
  for (const display of kept.displays) {
    assert.equal(display.artifact, undefined);
    assert.match(display.error ?? "", /^not kept: /);
  }
  assert.equal(reports.filter((r) => r !== null).length, 2);
  assert.match(
    renderCellResult({ ...kept.result, displays: kept.displays }),
    /1\. image\/png, 11 bytes, not kept: /,
  );
});

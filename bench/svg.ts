/**
 * Figure 11 drawn by hand as an SVG line chart: one line per series, its value at each history
 * size as a ratio to its value at the smallest size, the sizes on a log axis. Written from the
 * measured figures (`deno task bench --scale` writes `docs/performance-scale.svg`).
 *
 * @module
 */

import { SCALE_SERIES, type ScalePoint } from "./scale.ts";

const WIDTH = 940;
const HEIGHT = 420;
const PAD = { left: 64, right: 380, top: 40, bottom: 56 };
const COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"];

function escapeXml(text: string): string {
  return text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");
}

function sizeLabel(records: number): string {
  if (records >= 1e6) return `${records / 1e6}M`;
  if (records >= 1e3) return `${records / 1e3}k`;
  return String(records);
}

/**
 * Renders the scaling chart of `points` (smallest size first) as an SVG document.
 *
 * @example
 * ```ts
 * await Deno.writeTextFile("docs/performance-scale.svg", scaleSvg(points, "2026-12-03"));
 * ```
 */
export function scaleSvg(points: ScalePoint[], caption: string): string {
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const logs = points.map((p) => Math.log10(p.records));
  const [minLog, maxLog] = [Math.min(...logs), Math.max(...logs)];
  const x = (records: number) =>
    PAD.left + (maxLog === minLog ? 0 : (Math.log10(records) - minLog) / (maxLog - minLog)) * plotW;
  const ratios = SCALE_SERIES.flatMap((s) => points.map((p) => p[s.key] / points[0][s.key]));
  const top = Math.max(2, Math.ceil(Math.max(...ratios.filter(Number.isFinite)) * 2) / 2);
  const y = (ratio: number) => PAD.top + plotH - (ratio / top) * plotH;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" ` +
    `viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="sans-serif" font-size="12">`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="white"/>`,
    `<text x="${PAD.left}" y="22" font-size="14" font-weight="bold">` +
    `klbr as history grows: each figure as a ratio to its value at ${
      sizeLabel(points[0].records)
    } records</text>`,
  ];
  // Horizontal grid: every 0.5×, the 1× line darker.
  for (let r = 0; r <= top + 1e-9; r += 0.5) {
    const colour = r === 1 ? "#888" : "#e4e4e4";
    out.push(
      `<line x1="${PAD.left}" x2="${PAD.left + plotW}" y1="${y(r)}" y2="${
        y(r)
      }" stroke="${colour}"/>`,
      `<text x="${PAD.left - 8}" y="${y(r) + 4}" text-anchor="end">${r.toFixed(1)}×</text>`,
    );
  }
  for (const p of points) {
    out.push(
      `<line x1="${x(p.records)}" x2="${x(p.records)}" y1="${PAD.top}" y2="${
        PAD.top + plotH
      }" stroke="#e4e4e4"/>`,
      `<text x="${x(p.records)}" y="${PAD.top + plotH + 18}" text-anchor="middle">${
        sizeLabel(p.records)
      }</text>`,
    );
  }
  out.push(
    `<text x="${PAD.left + plotW / 2}" y="${HEIGHT - 14}" text-anchor="middle">` +
      `records in the store (log scale)</text>`,
  );
  SCALE_SERIES.forEach((series, i) => {
    const colour = COLOURS[i % COLOURS.length];
    const coords = points.map((p) => [x(p.records), y(p[series.key] / points[0][series.key])]);
    out.push(
      `<polyline fill="none" stroke="${colour}" stroke-width="2" points="${
        coords.map(([a, b]) => `${a.toFixed(1)},${b.toFixed(1)}`).join(" ")
      }"/>`,
      ...coords.map(([a, b]) =>
        `<circle cx="${a.toFixed(1)}" cy="${b.toFixed(1)}" r="3.5" fill="${colour}"/>`
      ),
    );
    const ly = PAD.top + 10 + i * 20;
    const last = points.at(-1)!;
    const ratio = last[series.key] / points[0][series.key];
    out.push(
      `<line x1="${WIDTH - PAD.right + 16}" x2="${WIDTH - PAD.right + 36}" y1="${ly}" y2="${ly}" ` +
        `stroke="${colour}" stroke-width="2"/>`,
      `<text x="${WIDTH - PAD.right + 42}" y="${ly + 4}">${
        escapeXml(
          `${series.figure} (${ratio.toFixed(2)}×${
            series.unit.endsWith("/s") ? ", a rate: higher is better" : ""
          })`,
        )
      }</text>`,
    );
  });
  out.push(
    `<text x="${WIDTH - PAD.right + 16}" y="${PAD.top + 10 + SCALE_SERIES.length * 20 + 10}" ` +
      `fill="#555">${escapeXml(caption)}</text>`,
    "</svg>",
  );
  return out.join("\n") + "\n";
}

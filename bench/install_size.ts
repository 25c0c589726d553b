/**
 * What a fresh clone's first `serve` fetches from npm. The checkout's files (or a revision's,
 * `--ref REV`) are copied into a temp directory and started once with the `serve` task's
 * flags (`main.ts serve --help`) under an empty `DENO_DIR`; Deno installs every package of
 * `deno.lock`'s snapshot at that first start, used or not, so this is what any first start
 * fetches. Deno reaches npm through a loopback forwarder that counts the bytes it is sent.
 *
 * ```
 * deno run --allow-read --allow-write --allow-run --allow-env \
 *   --allow-net=127.0.0.1,registry.npmjs.org bench/install_size.ts [--ref REV]
 * ```
 *
 * Prints the packages, the bytes downloaded (tarballs as sent; the few package documents
 * Deno asks for count decompressed), their unpacked size and the disk they take.
 *
 * @module
 */

import { dirname, join } from "node:path";
import { parseArgs } from "node:util";

const REPO = join(dirname(new URL(import.meta.url).pathname), "..");
const REGISTRY = "https://registry.npmjs.org";
const MB = 1_000_000;

/** The figures of one measurement. */
export interface InstallSize {
  packages: string[];
  downloadedBytes: number;
  unpackedBytes: number;
  diskBytes: number;
}

/** Copies the checkout's tracked and unignored files, or a revision's, into `dest`. */
async function copyCheckout(dest: string, ref: string | undefined): Promise<void> {
  const script = ref === undefined
    ? `git ls-files -z --cached --others --exclude-standard | xargs -0 tar -cf - | tar -xf - -C "$1"`
    : `git archive "$2" | tar -xf - -C "$1"`;
  const out = await new Deno.Command("sh", {
    args: ["-c", script, "sh", dest, ref ?? ""],
    cwd: REPO,
    stderr: "piped",
  }).output();
  if (!out.success) {
    throw new Error(`cannot copy the checkout: ${new TextDecoder().decode(out.stderr)}`);
  }
}

/** A loopback npm registry that forwards to npm and counts the bytes it sends on. */
function countingRegistry(): { url: string; bytes: () => number; close: () => Promise<void> } {
  let bytes = 0;
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, forward);
  const url = `http://127.0.0.1:${server.addr.port}`;
  async function forward(request: Request): Promise<Response> {
    const upstream = await fetch(REGISTRY + new URL(request.url).pathname, {
      headers: { accept: request.headers.get("accept") ?? "*/*" },
    });
    let body = new Uint8Array(await upstream.arrayBuffer());
    bytes += body.byteLength;
    const type = upstream.headers.get("content-type") ?? "application/octet-stream";
    // A package document names its tarballs by the registry's URL: keep them coming here.
    if (type.includes("json")) {
      body = new TextEncoder().encode(new TextDecoder().decode(body).replaceAll(REGISTRY, url));
    }
    return new Response(body, { status: upstream.status, headers: { "content-type": type } });
  }
  return { url, bytes: () => bytes, close: () => server.shutdown() };
}

/** Apparent bytes and allocated disk of every file under `dir`. */
async function sizeOf(dir: string): Promise<{ bytes: number; disk: number }> {
  let bytes = 0;
  let disk = 0;
  for await (const entry of Deno.readDir(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory) {
      const inner = await sizeOf(path);
      bytes += inner.bytes;
      disk += inner.disk;
    } else if (entry.isFile) {
      const stat = await Deno.lstat(path);
      bytes += stat.size;
      disk += (stat.blocks ?? 0) * 512;
    }
  }
  return { bytes, disk };
}

/**
 * Measures the first start of a fresh copy of the checkout (or of `ref`).
 *
 * @throws {Error} when the copy or the start fails.
 */
export async function measureInstall(ref?: string): Promise<InstallSize> {
  const root = await Deno.makeTempDir({ prefix: "klbr-install-" });
  const registry = countingRegistry();
  try {
    const clone = join(root, "clone");
    await Deno.mkdir(clone);
    await copyCheckout(clone, ref);
    const config = JSON.parse(await Deno.readTextFile(join(clone, "deno.json")));
    const flags = (config.tasks.serve as string).split(/\s+/).filter((p) => p.startsWith("--"));
    const denoDir = join(root, "deno_dir");
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", ...flags, "main.ts", "serve", "--help"],
      cwd: clone,
      env: { DENO_DIR: denoDir, NPM_CONFIG_REGISTRY: `${registry.url}/`, NO_COLOR: "1" },
      stdout: "null",
      stderr: "piped",
    }).output();
    if (!out.success) {
      throw new Error(`the first start failed: ${new TextDecoder().decode(out.stderr)}`);
    }
    const npm = join(denoDir, "npm");
    const packages: string[] = [];
    for (const dir of Deno.readDirSync(join(clone, "node_modules", ".deno"))) {
      if (dir.isDirectory && dir.name !== "node_modules") packages.push(dir.name);
    }
    const { bytes, disk } = await sizeOf(npm);
    return {
      packages: packages.sort(),
      downloadedBytes: registry.bytes(),
      unpackedBytes: bytes,
      diskBytes: disk,
    };
  } finally {
    await registry.close();
    await Deno.remove(root, { recursive: true });
  }
}

if (import.meta.main) {
  const { values } = parseArgs({ args: Deno.args, options: { ref: { type: "string" } } });
  const size = await measureInstall(values.ref);
  const mb = (n: number) => `${(n / MB).toFixed(1)} MB`;
  console.log(`${values.ref ?? "the working tree"}: ${size.packages.length} npm packages`);
  console.log(`  ${size.packages.join(" ")}`);
  console.log(`  downloaded ${mb(size.downloadedBytes)}`);
  console.log(`  unpacked   ${mb(size.unpackedBytes)} (${mb(size.diskBytes)} on disk)`);
}

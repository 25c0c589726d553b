// Files attached from the page's composer, end to end on the real daemon: `POST /attachments`
// keeps the bytes (fsynced, never evicted) before it answers, an input names them by id, the
// model is offered each by id, name and size, and a cell reads it with `read_artifact`. Who may
// upload, how much, and an input naming a file never uploaded are tried as a client would.

import assert from "node:assert/strict";
import { join } from "node:path";
import { startFakeOpenAI } from "../../fakes/openai_server.ts";
import { startTestDaemon } from "../../_helpers/daemon.ts";
import { connectLane } from "../../_helpers/lane_client.ts";
import type { LaneRecord } from "../../../runtime/core/mod.ts";

const CSV = "a,b\n1,2\n";
const keptFiles = (stateDir: string) => {
  try {
    return [...Deno.readDirSync(join(stateDir, "artifacts", "kept"))].map((e) => e.name);
  } catch {
    return [];
  }
};

Deno.test("an attachment is kept before its upload is answered, offered to the model by id and read by a cell", async () => {
  const fake = startFakeOpenAI({ fallback: () => ({ toolCall: { code: "wait()" } }) });
  const daemon = await startTestDaemon({
    modelUrl: fake.url,
    extraConfig: "lanes {\n    attachment_max_bytes 64\n}\n",
  });
  const upload = (body: string, headers: Record<string, string>) =>
    fetch(`${daemon.url}/attachments`, { method: "POST", body, headers });
  try {
    // Without credentials, or from another origin, nothing is kept.
    const anonymous = await upload(CSV, {});
    assert.equal(anonymous.status, 401, await anonymous.text());
    const foreign = await upload(CSV, {
      authorization: `Bearer ${daemon.token}`,
      origin: "http://evil.example",
    });
    assert.equal(foreign.status, 403, await foreign.text());
    // Over the configured limit: refused with the limit and the fix, nothing kept.
    const big = await upload("x".repeat(65), { authorization: `Bearer ${daemon.token}` });
    assert.equal(big.status, 413);
    assert.deepEqual(await big.json(), {
      code: "limit_reached",
      message:
        "cannot attach a file of 65 bytes or more: the limit is 64 bytes; send a smaller file or raise lanes { attachment_max_bytes }",
    });
    assert.deepEqual(keptFiles(daemon.stateDir), []);

    const kept = await upload(CSV, { authorization: `Bearer ${daemon.token}` });
    assert.equal(kept.status, 200);
    const { artifact, bytes } = await kept.json() as { artifact: string; bytes: number };
    assert.equal(bytes, CSV.length);
    assert.deepEqual(keptFiles(daemon.stateDir), [artifact], "on disk before the answer");

    const client = await connectLane({ port: daemon.port, token: daemon.token });
    // An input naming a file this daemon never kept is refused alone, saying what to do.
    const unknown = await client.request({
      kind: "input",
      client_msg_id: "m0",
      text: "",
      attachments: [{ artifact: "f".repeat(64), filename: "ghost.csv" }],
    });
    assert.equal(unknown.kind, "error");
    assert.match(
      (unknown as { message: string }).message,
      /attachment ghost\.csv \(ffffffffffff\) was not uploaded to this daemon; upload it again/,
    );

    fake.enqueue({
      toolCall: {
        code: [
          "import hashlib",
          `aid = hashlib.sha256(${JSON.stringify(CSV)}.encode()).hexdigest()`,
          "print((await read_artifact(aid)).decode().splitlines())",
          "wait()",
        ].join("\n"),
      },
    });
    // Text may be empty when a file is attached.
    const ack = await client.request({
      kind: "input",
      client_msg_id: "m1",
      text: "",
      attachments: [{ artifact, filename: "table.csv", content_type: "text/csv" }],
    });
    assert.equal(ack.kind, "ack", JSON.stringify(ack));
    const admitted = await client.waitFor<LaneRecord>((m) =>
      m.kind === "record" && m.type === "input.admitted"
    );
    assert.deepEqual(admitted.data.body, {
      text: "",
      attachments: [{
        filename: "table.csv",
        size: CSV.length,
        content_type: "text/csv",
        artifact,
      }],
    });
    const finished = await client.waitFor<LaneRecord>(
      (m) => m.kind === "record" && m.type === "cell.finished",
      30_000,
    );
    assert.equal((finished.data.result as { stdout: string }).stdout, "['a,b', '1,2']\n");
    const opening = fake.requests.find((r) => r.method === "POST")!.body.messages
      .find((m: { role: string; content: unknown }) =>
        m.role === "user" && String(m.content).includes("[input ")
      );
    assert.match(
      String(opening.content),
      new RegExp(`"filename":"table.csv","size":8.*${artifact}`),
    );
    await client.close();
  } finally {
    await daemon.stop();
    await fake.close();
  }
});

// A browser sends the whole body before it reads any answer. The daemon refuses an upload over
// its limit by its `Content-Length`, without reading the rest; a connection kept open then waits
// for bytes nothing reads, and the page said `Uploading 1 file…` for half a minute or more. The
// refusal must close the connection, so the browser's next write fails and it reads the answer.
Deno.test("an upload refused before its body is read is answered with the connection closed", async () => {
  const daemon = await startTestDaemon({
    extraConfig: "lanes {\n    attachment_max_bytes 1024\n}\n",
  });
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: daemon.port });
  try {
    const declared = 20 << 20;
    const head = [
      "POST /attachments HTTP/1.1",
      `host: 127.0.0.1:${daemon.port}`,
      `authorization: Bearer ${daemon.token}`,
      "content-type: application/octet-stream",
      `content-length: ${declared}`,
    ].join("\r\n") + "\r\n\r\n";
    // The start of the body only: the rest is what a browser would still be sending.
    await conn.write(new TextEncoder().encode(head));
    await conn.write(new Uint8Array(64 * 1024));
    const text = await readUntilClosed(conn);
    const [status, ...lines] = text.slice(0, text.indexOf("\r\n\r\n")).split("\r\n");
    assert.equal(status, "HTTP/1.1 413 Payload Too Large");
    assert.ok(
      lines.some((line) => line.toLowerCase() === "connection: close"),
      `the refusal keeps the connection open:\n${lines.join("\n")}`,
    );
    assert.match(text, /the limit is 1024 bytes; send a smaller file/);
  } finally {
    try {
      conn.close();
    } catch { /* closed by the daemon */ }
    await daemon.stop();
  }
});

/**
 * Reads until the response's head says the connection stays open (then returns at once, so the
 * test fails rather than waits) or the daemon closes it.
 */
async function readUntilClosed(conn: Deno.Conn): Promise<string> {
  const buf = new Uint8Array(64 * 1024);
  let text = "";
  for (let i = 0; i < 10_000; i++) {
    const n = await conn.read(buf).catch(() => null);
    if (n === null) break;
    text += new TextDecoder().decode(buf.subarray(0, n));
    const head = text.slice(0, text.indexOf("\r\n\r\n")).toLowerCase();
    if (text.includes("\r\n\r\n") && !head.includes("connection: close")) break;
  }
  return text;
}

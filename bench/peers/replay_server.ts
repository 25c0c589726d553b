/**
 * The peer of replay (figure 4a): a bare `Deno.serve` WebSocket that replays a klbr store's
 * `default` session to a `since` client — `welcome`, the records in `records` messages of up to
 * 1,000 (stored bodies spliced in unparsed), `replayed` — reading the same file the daemon read,
 * read-only. It speaks the subset of the v2 lane `bench/lane_driver.ts` uses for a catch-up.
 * Run: `deno run --allow-net=127.0.0.1 --allow-read --allow-write replay_server.ts <runtime.sqlite>`;
 * it prints its port on stdout; SIGTERM ends it.
 *
 * @module
 */

import { DatabaseSync } from "node:sqlite";

/** Serves `path` read-only on a free loopback port; resolves with the port. */
export function serveReplay(path: string): Promise<number> {
  const db = new DatabaseSync(path, { readOnly: true });
  const page = db.prepare(
    `SELECT seq, kind, at, body FROM events WHERE session_id = 'default' AND seq > ?
     ORDER BY seq LIMIT 1000`,
  );
  const last = db.prepare("SELECT coalesce(max(seq), 0) AS head FROM events WHERE session_id = ?");

  async function replay(socket: WebSocket, since: number): Promise<void> {
    const { head } = last.get("default") as { head: number };
    socket.send(JSON.stringify({ kind: "welcome", head }));
    while (since < head) {
      const rows = page.all(since) as { seq: number; kind: string; at: number; body: string }[];
      if (rows.length === 0) break;
      const records = rows.map((r) =>
        `{"seq":${r.seq},"at":${r.at},"type":${JSON.stringify(r.kind)},"data":${r.body}}`
      );
      socket.send(`{"kind":"records","session":"default","records":[${records.join(",")}]}`);
      since = rows[rows.length - 1].seq;
      // Let the socket write before the next page, as a server that bounds its buffer must.
      if (socket.bufferedAmount > 1 << 20) await new Promise((resolve) => setTimeout(resolve, 1));
    }
    socket.send(JSON.stringify({ kind: "replayed" }));
  }

  return new Promise((resolve) => {
    Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: (addr) => resolve(addr.port) },
      (req) => {
        const { socket, response } = Deno.upgradeWebSocket(req);
        socket.onmessage = (event) => {
          const message = JSON.parse(String(event.data));
          if (message.kind === "hello") void replay(socket, message.since ?? 0);
        };
        return response;
      },
    );
  });
}

if (import.meta.main) console.log(await serveReplay(Deno.args[0]));

/**
 * The peer of admission (figures 1, 2): the least server with klbr's admission guarantees, a
 * bare `Deno.serve` WebSocket on `node:sqlite`. An input is acknowledged only after the
 * `synchronous=FULL` commit that holds it; a source key seen before is answered with the first
 * id (`duplicate: true`); each new input writes a numbered log row and an inbox row; committed
 * records go to every subscriber; commits are grouped: whatever is queued is committed when the
 * previous commit returns, with no timer. It speaks the subset of klbr's v2 lane that
 * `bench/lane_driver.ts` uses (`hello`/`welcome`/`record(s)`/`replayed`, `input`/`ack`), so one
 * driver drives both. Run: `deno run --allow-net=127.0.0.1 --allow-read --allow-write
 * durable_server.ts <db file>`; it prints its port on stdout; SIGTERM ends it.
 *
 * @module
 */

import { DatabaseSync } from "node:sqlite";

type Pending = { socket: WebSocket; request: string; key: string; text: string };

/** Opens the store and serves it on a free loopback port; resolves with the port. */
export function serveDurable(path: string): Promise<number> {
  const db = new DatabaseSync(path);
  db.exec(`PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;
    CREATE TABLE IF NOT EXISTS log (seq INTEGER PRIMARY KEY, type TEXT NOT NULL, body TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS inbox (id TEXT PRIMARY KEY, source_key TEXT NOT NULL UNIQUE,
      seq INTEGER NOT NULL REFERENCES log (seq), pending INTEGER NOT NULL DEFAULT 1);`);
  const find = db.prepare("SELECT id, seq FROM inbox WHERE source_key = ?");
  const log = db.prepare("INSERT INTO log (type, body) VALUES ('input.admitted', ?)");
  const inbox = db.prepare("INSERT INTO inbox (id, source_key, seq) VALUES (?, ?, ?)");
  const page = db.prepare("SELECT seq, type, body FROM log WHERE seq > ? ORDER BY seq LIMIT 1000");
  const subscribers = new Set<WebSocket>();
  let queue: Pending[] = [];
  let committing = false;

  function commit(): void {
    const group = queue;
    queue = [];
    const acks: string[] = [];
    const records: string[] = [];
    db.exec("BEGIN IMMEDIATE");
    for (const input of group) {
      const first = find.get(input.key) as { id: string; seq: number } | undefined;
      if (first !== undefined) {
        acks.push(ack(input.request, first.id, first.seq, true));
        continue;
      }
      const id = crypto.randomUUID();
      const body = JSON.stringify({ input_id: id, source_key: input.key, text: input.text });
      const seq = Number(log.run(body).lastInsertRowid);
      inbox.run(id, input.key, seq);
      acks.push(ack(input.request, id, seq, false));
      records.push(`{"kind":"record","seq":${seq},"type":"input.admitted","data":${body}}`);
    }
    db.exec("COMMIT");
    group.forEach((input, i) => input.socket.send(acks[i]));
    for (const socket of subscribers) for (const record of records) socket.send(record);
    // The inputs that arrive while the acks go out join the next commit: one event-loop turn
    // later, when their messages were read; none came: the server is idle again.
    afterTurn(() => queue.length > 0 ? commit() : (committing = false));
  }

  function afterTurn(then: () => void): void {
    const { port1, port2 } = new MessageChannel();
    port1.onmessage = () => {
      port1.close();
      then();
    };
    port2.postMessage(null);
  }

  function ack(request: string, id: string, seq: number, duplicate: boolean): string {
    return JSON.stringify({ kind: "ack", request, input_id: id, seq, duplicate });
  }

  function onMessage(socket: WebSocket, text: string): void {
    const message = JSON.parse(text);
    if (message.kind === "input") {
      queue.push({
        socket,
        request: message.request,
        key: message.client_msg_id,
        text: message.text,
      });
      if (!committing) {
        committing = true;
        commit();
      }
    } else if (message.kind === "hello") {
      const head = (db.prepare("SELECT coalesce(max(seq), 0) AS head FROM log").get() as {
        head: number;
      }).head;
      socket.send(JSON.stringify({ kind: "welcome", head }));
      for (let since = message.since ?? 0; since < head;) {
        const rows = page.all(since) as { seq: number; type: string; body: string }[];
        if (rows.length === 0) break;
        const records = rows.map((r) => `{"seq":${r.seq},"type":"${r.type}","data":${r.body}}`);
        socket.send(`{"kind":"records","records":[${records.join(",")}]}`);
        since = rows[rows.length - 1].seq;
      }
      socket.send(JSON.stringify({ kind: "replayed" }));
      subscribers.add(socket);
    }
  }

  return new Promise((resolve) => {
    Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: (addr) => resolve(addr.port) },
      (req) => {
        if (new URL(req.url).pathname === "/health") return Response.json({ ok: true });
        const { socket, response } = Deno.upgradeWebSocket(req);
        socket.onmessage = (event) => onMessage(socket, String(event.data));
        socket.onclose = () => subscribers.delete(socket);
        return response;
      },
    );
  });
}

if (import.meta.main) console.log(await serveDurable(Deno.args[0]));

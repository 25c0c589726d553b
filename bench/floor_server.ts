/**
 * The floor the daemon's start-up, idle size and socket are compared with: a bare `Deno.serve`
 * that answers `/health`, and on `/echo` a WebSocket that sends each message back. Run as
 * `deno run --allow-net=127.0.0.1 floor_server.ts <port>`; SIGTERM ends it.
 *
 * @module
 */

if (import.meta.main) {
  const port = Number(Deno.args[0]);
  Deno.serve(
    { hostname: "127.0.0.1", port, onListen: () => {} },
    (request) => {
      if (new URL(request.url).pathname !== "/echo") return Response.json({ ok: true });
      const { socket, response } = Deno.upgradeWebSocket(request);
      socket.onmessage = (event) => socket.send(event.data);
      return response;
    },
  );
}

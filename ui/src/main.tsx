/** @jsxRuntime automatic */
/** @jsxImportSource preact */
/**
 * The page's entry: trades a `#token=…` address (at load, and whenever one is pasted into an
 * open tab) for a session cookie, keeps a stable client id in `localStorage`, opens the lane
 * socket, keeps `/health` fresh and renders the app.
 *
 * @module
 */

import { render } from "preact";
import { App } from "./app.tsx";
import { askHealth, watchHealth } from "./health_watch.ts";
import { LaneClient } from "./lane_client.ts";
import { exchangeToken, legacyStoredToken, signOut, tokenFromHash } from "./page_auth.ts";
import { applyTheme, storedTheme } from "./theme.tsx";

const CLIENT_KEY = "klbr:client";

function clientId(): string {
  let id: string | undefined;
  try {
    id = localStorage.getItem(CLIENT_KEY) ?? undefined;
  } catch { /* storage denied */ }
  if (id === undefined || !/^[A-Za-z0-9_-]{1,100}$/.test(id)) {
    id = `web-${crypto.randomUUID()}`;
    try {
      localStorage.setItem(CLIENT_KEY, id);
    } catch { /* storage denied: the id lives as long as the page */ }
  }
  return id;
}

async function start(): Promise<void> {
  applyTheme(storedTheme());
  const params = new URLSearchParams(location.search);
  const client = new LaneClient({
    url: `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/v2`,
    session: params.get("session") ?? "default",
    clientId: clientId(),
    storage: sessionStorage,
    onWelcome: () => askHealth(client),
  });
  // The token goes to the daemon once; the page keeps the HttpOnly cookie it answers with.
  const useToken = async (token: string | undefined) => {
    if (token === undefined) {
      await signOut();
      return client.reconnect();
    }
    const answer = await exchangeToken(token);
    if (answer.ok) client.reconnect();
    else client.noteTokenRefused(answer.message);
  };
  addEventListener("hashchange", () => {
    const token = tokenFromHash();
    if (token !== undefined) void useToken(token);
  });
  addEventListener("pagehide", () => client.persistNow());
  const root = document.getElementById("app");
  if (root === null) throw new Error("klbr: the page has no #app element");
  root.textContent = "";
  render(<App client={client} onToken={(token) => void useToken(token)} />, root);
  const initial = tokenFromHash() ?? legacyStoredToken();
  if (initial !== undefined) {
    const answer = await exchangeToken(initial);
    if (!answer.ok) client.noteTokenRefused(answer.message);
  }
  client.start();
  watchHealth(client, { everyMs: 5000 });
}

void start();

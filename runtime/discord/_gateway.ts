/**
 * The Discord gateway on `@discordeno/gateway`'s `DiscordenoShard` (one shard), with its
 * resume state kept durably (`store/tables/discord_gateway.ts`): a reconnect, and a daemon
 * restart, resume from the last handled sequence; a refused resume (op 9) identifies anew and
 * tells `onSession`, so the transport can backfill. The library's close handler is guarded: it
 * would reconnect in a tight loop, and throw (ending the process) on a close code it cannot
 * cure; here failures back off up to 30 s and a fatal code ends reconnecting. A close the
 * gateway never answers (a zombied connection) is given up (`_close_socket.ts`). The measurements
 * and the whole design are in `docs/discord.md`, "How it works".
 *
 * @module
 */

import type { DiscordenoShard } from "@discordeno/gateway";
import type { Store } from "../../store/store.ts";
import {
  readGatewayState,
  saveGatewaySeq,
  saveGatewaySession,
} from "../../store/tables/discord_gateway.ts";
import type { Secret } from "../config/mod.ts";
import type { Logger } from "../core/mod.ts";
import { fatalClose } from "./_close_codes.ts";
import { boundClose } from "./_close_socket.ts";
import { sleep } from "./_rest.ts";

/** GUILDS | GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT (threads come with GUILDS). */
export const GATEWAY_INTENTS: number = (1 << 0) | (1 << 9) | (1 << 12) | (1 << 15);

/** Longest wait between two connection attempts, in ms. */
const MAX_BACKOFF_MS = 30_000;
/** Failed connections to a resume URL (not the configured one) before identifying instead. */
const RESUME_URL_ATTEMPTS = 3;

/** What a session started: `resumed` when Discord replays, else a new session (backfill). */
export interface GatewaySession {
  resumed: boolean;
  sessionId: string;
  /** The bot's own user id (from `READY`, or saved from the last one). */
  selfId: string | null;
}

/**
 * The gateway's state as `/health` and the start-up block show it: `connecting` (the first
 * connection), `connected` (after `READY`/`RESUMED`), `resuming` (a connection dropped and is
 * being resumed at once), `down` (a connection attempt failed: waiting to retry), `refused` (a
 * fatal close code: not reconnecting; `fix` says what to do), `stopped` (the daemon stops).
 */
export interface GatewayStatus {
  state: "connecting" | "connected" | "resuming" | "down" | "refused" | "stopped";
  /** The configured gateway URL. */
  url: string;
  /** When the current state began (for `down`: the first failure), in ms. */
  since: number;
  /** The last connection error or close, with the URL or the close code; null before any. */
  lastError: string | null;
  /** The last close code Discord (or the network) ended a connection with. */
  closeCode: number | null;
  /** For `refused`: the fix for the close code. */
  fix: string | null;
}

/** The status of a gateway on `url` before its first connection, since `since` (ms). */
export function connectingStatus(url: string, since: number): GatewayStatus {
  return { state: "connecting", url, since, lastError: null, closeCode: null, fix: null };
}

/** Options for {@linkcode DiscordGateway}. */
export interface DiscordGatewayOptions {
  /** The gateway URL, e.g. `wss://gateway.discord.gg`; `v=10&encoding=json` is added. */
  url: string;
  token: Secret;
  /** The token's environment variable, named in the fix for a refused token. */
  tokenEnv?: string;
  store: Store;
  log: Logger;
  /** Called, in order, with each dispatch but `READY`/`RESUMED` (data camel-cased). */
  onDispatch: (event: string, data: unknown) => void | Promise<void>;
  /** Called after `READY` (a new session) and after `RESUMED`. */
  onSession?: (session: GatewaySession) => void | Promise<void>;
}

interface Packet {
  op: number;
  s?: number | null;
  t?: string | null;
  d?: unknown;
}

/**
 * `@discordeno/gateway`, loaded when a gateway starts, not with the daemon: with its `ws`
 * dependency it is a good part of the daemon's start-up, and a daemon without Discord never
 * needs it. The specifier is computed so that Deno does not load it up front.
 */
type GatewayLibrary = typeof import("@discordeno/gateway");
const LIBRARY = "@discordeno/gateway";

/** One gateway connection at a time, resumed when it drops, until {@linkcode stop}. */
export class DiscordGateway {
  #o: DiscordGatewayOptions;
  #lib!: GatewayLibrary;
  #shard!: DiscordenoShard;
  #started: Promise<void> | undefined;
  #stopped = false;
  #failures = 0;
  #opened = false;
  #established = false;
  #queue: Promise<void> = Promise.resolve();
  /** Aborted by {@linkcode stop}: cuts a backoff wait short. */
  #stopWaits = new AbortController();
  #status: GatewayStatus;
  #errorSinceOpen: string | null = null;
  /**
   * The sequence of the first dispatch of this session whose handler threw (a message not
   * admitted): no later sequence is saved until a replay handles it, so the next resume, in
   * this daemon or the next, delivers it again. Null while every dispatch was handled.
   */
  #unhandledSeq: number | null = null;

  /** Creates the client; {@linkcode start} connects (resuming a saved session). */
  constructor(options: DiscordGatewayOptions) {
    this.#o = options;
    this.#status = connectingStatus(options.url, Date.now());
  }

  /** The gateway's state now. */
  status(): GatewayStatus {
    return { ...this.#status };
  }

  /** Moves to `state`; `since` is kept while `down` follows `resuming` or `down`. */
  #enter(state: GatewayStatus["state"], fields: Partial<GatewayStatus> = {}): void {
    const keep = state === this.#status.state ||
      (state === "down" && this.#status.state === "resuming");
    this.#status = {
      ...this.#status,
      ...fields,
      state,
      since: keep ? this.#status.since : Date.now(),
    };
  }

  /** A connection attempt failed before or while open: the URL and what the socket said. */
  #onSocketError(event: unknown): void {
    const message = event instanceof ErrorEvent
      ? event.message || "connection error"
      : event instanceof Error
      ? event.message
      : String(event);
    const url = this.#shard.connectionUrl;
    this.#errorSinceOpen = `cannot connect to ${url}: ${message}`;
    this.#o.log.warn("discord.gateway_error", `discord gateway: ${this.#errorSinceOpen}`, {
      url,
    });
  }

  /** The library's shard for this gateway, with klbr's close handling. */
  #makeShard(lib: GatewayLibrary): DiscordenoShard {
    const options = this.#o;
    const { log } = options;
    const debug = () => {};
    const warn = (...args: unknown[]) =>
      log.warn("discord.gateway_library", `discord gateway: ${args.join(" ")}`);
    const shard = new lib.DiscordenoShard({
      id: 0,
      connection: {
        compress: false,
        transportCompression: null,
        intents: GATEWAY_INTENTS,
        properties: { os: Deno.build.os, browser: "klbr", device: "klbr" },
        token: options.token.reveal(),
        url: options.url,
        version: 10,
        totalShards: 1,
      },
      logger: {
        debug,
        info: debug,
        warn,
        error: warn,
        fatal: (...args: unknown[]) =>
          log.error("discord.gateway_library", `discord gateway: ${args.join(" ")}`),
      } as never,
      events: {
        connected: () => this.#onConnected(),
        message: (_shard, packet) => this.#enqueue(packet as Packet),
      },
      // A refused resume (op 9, not resumable) asks for a new identify through this.
      requestIdentify: async () => {
        if (!this.#stopped) await this.#shard.identify();
      },
    });
    // Discord: only a resume uses `resume_gateway_url`; an identify connects to the gateway URL.
    Object.defineProperty(shard, "connectionUrl", {
      get: () => shard.state === lib.ShardState.Resuming && shard.resumeGatewayUrl || options.url,
    });
    const handleClose = shard.handleClose.bind(shard);
    shard.handleClose = (close: CloseEvent) => this.#guardClose(close, handleClose);
    // A zombied connection's close is never answered: give it up and resume.
    boundClose(shard, {
      onNoAnswer: (code, reason) => {
        this.#errorSinceOpen = `no answer from ${shard.connectionUrl} (${reason || code})`;
        log.warn("discord.gateway_error", `discord gateway: ${this.#errorSinceOpen}`);
      },
    });
    // The library logs the bare event (`[object ErrorEvent]`): name the URL instead.
    shard.handleError = (event: Event) => this.#onSocketError(event);
    return shard;
  }

  /**
   * Connects: resumes the saved session when there is one, else identifies. The library loads
   * first; {@linkcode stop} waits for that.
   */
  start(): void {
    this.#started = import(LIBRARY).then((lib: GatewayLibrary) => {
      this.#lib = lib;
      this.#shard = this.#makeShard(lib);
      if (!this.#stopped) this.#connect();
    });
    this.#started.catch((error) => {
      this.#o.log.error("discord.gateway_error", `discord gateway: cannot load: ${error}`);
    });
  }

  #connect(): void {
    const saved = readGatewayState(this.#o.store);
    const shard = this.#shard;
    if (saved?.sessionId) {
      shard.sessionId = saved.sessionId;
      shard.resumeGatewayUrl = this.#resumeUrl(saved.resumeUrl);
      shard.previousSequenceNumber = saved.seq;
      this.#o.log.info(
        "discord.gateway_resuming",
        `discord gateway: resuming session from sequence ${saved.seq}`,
        { seq: saved.seq },
      );
      this.#run(() => shard.resume());
    } else {
      this.#run(() => shard.identify());
    }
  }

  /** Closes the connection and stops reconnecting; resolves when pending dispatches are handled. */
  async stop(): Promise<void> {
    if (this.#status.state !== "refused") this.#enter("stopped");
    this.#stopped = true;
    this.#stopWaits.abort();
    if (this.#started === undefined) return;
    if (!(await this.#started.then(() => true, () => false))) return;
    await this.#shard.shutdown().catch(() => {});
    this.#shard.socket?.close(3000);
    await this.#queue;
  }

  /** Runs a library action in the background; a failure is logged, never unhandled. */
  #run(action: () => Promise<void>): void {
    action().catch((error) => {
      this.#o.log.warn("discord.gateway_error", `discord gateway: ${error}`);
    });
  }

  #onConnected(): void {
    this.#opened = true;
    this.#errorSinceOpen = null;
    // A socket that opened after stop() must not identify.
    if (this.#stopped) this.#shard.socket?.close(3000);
  }

  /** A resume URL is used only on the configured gateway's domain; else the configured URL. */
  #resumeUrl(url: string | null): string {
    if (url === null) return "";
    try {
      const host = new URL(url).hostname;
      const configured = new URL(this.#o.url).hostname;
      const parent = configured.split(".").slice(1).join(".");
      return host === configured || (parent.includes(".") && host.endsWith(`.${parent}`))
        ? url
        : "";
    } catch {
      return "";
    }
  }

  async #guardClose(close: CloseEvent, handleClose: (close: CloseEvent) => Promise<void>) {
    const { log } = this.#o;
    if (this.#stopped) {
      // Stopping: end the connection without the library's reconnect, and release its close().
      this.#shard.stopHeartbeating();
      this.#shard.state = this.#lib.ShardState.Offline;
      this.#shard.resolveAfterClose?.(close);
      return;
    }
    const url = this.#shard.connectionUrl;
    const fatal = fatalClose(close.code, this.#o.tokenEnv ?? "the token's variable");
    if (fatal !== null) {
      const { fix } = fatal;
      const lastError = `the gateway closed with ${close.code} (${fatal.name})`;
      this.#enter("refused", { lastError, closeCode: close.code, fix });
      log.error(
        "discord.gateway_closed",
        `discord gateway ${url} closed with ${close.code} (${fatal.name}); not reconnecting: ${fix}`,
        { code: close.code, url },
      );
      this.#stopped = true;
      await handleClose(close).catch(() => {});
      return;
    }
    const lastError = this.#errorSinceOpen ?? `${url} closed with ${close.code}`;
    this.#errorSinceOpen = null;
    // A connection that reached READY or RESUMED resets the count; any other close adds one.
    this.#failures = this.#established ? 0 : this.#failures + 1;
    this.#enter(this.#failures > 0 ? "down" : "resuming", { lastError, closeCode: close.code });
    const opened = this.#opened;
    this.#opened = false;
    this.#established = false;
    if (this.#failures > 0) {
      const wait = Math.min(MAX_BACKOFF_MS, 250 * 2 ** Math.min(this.#failures, 10));
      log.warn(
        "discord.gateway_reconnect",
        `discord gateway ${url} closed (${close.code}); reconnecting in ${wait} ms`,
        { code: close.code, wait_ms: wait, url },
      );
      await sleep(wait, this.#stopWaits.signal);
      if (this.#stopped) return;
      // A connection that never opened says nothing about the session: resume it again, unless
      // a resume URL of its own failed RESUME_URL_ATTEMPTS times (left `Resuming`, it identifies).
      const own = this.#shard.resumeGatewayUrl;
      const giveUp = own !== "" && own !== this.#o.url && this.#failures >= RESUME_URL_ATTEMPTS;
      if (!opened && this.#shard.state === this.#lib.ShardState.Resuming && !giveUp) {
        this.#shard.state = this.#lib.ShardState.Disconnected;
      }
    }
    await handleClose(close).catch((error) => {
      log.warn("discord.gateway_error", `discord gateway: ${error}`);
    });
  }

  /** Handles packets one at a time, in arrival order; a sequence is saved after its dispatch. */
  #enqueue(packet: Packet): void {
    this.#queue = this.#queue.then(() => this.#handle(packet)).catch((error) => {
      this.#o.log.error("discord.dispatch_failed", `discord: cannot handle a dispatch: ${error}`);
    });
  }

  async #handle(packet: Packet): Promise<void> {
    if (packet.op !== 0 || typeof packet.t !== "string") return;
    const { store, log } = this.#o;
    if (packet.t === "READY") {
      this.#established = true;
      // A new session numbers its dispatches anew; what the old one held is for the backfill.
      this.#unhandledSeq = null;
      this.#enter("connected");
      const d = packet.d as {
        sessionId: string;
        resumeGatewayUrl?: string;
        user?: { id?: string };
      };
      const selfId = typeof d.user?.id === "string" ? d.user.id : null;
      saveGatewaySession(store, {
        sessionId: d.sessionId,
        resumeUrl: d.resumeGatewayUrl ?? null,
        selfId,
        seq: packet.s ?? null,
      });
      log.info("discord.gateway_ready", "discord gateway ready (a new session)", {
        session: d.sessionId,
      });
      await this.#o.onSession?.({ resumed: false, sessionId: d.sessionId, selfId });
      return;
    }
    if (packet.t === "RESUMED") {
      this.#established = true;
      this.#enter("connected");
      const saved = readGatewayState(store);
      log.info("discord.gateway_resumed", "discord gateway resumed; missed events replayed");
      await this.#o.onSession?.({
        resumed: true,
        sessionId: saved?.sessionId ?? "",
        selfId: saved?.selfId ?? null,
      });
      return;
    }
    const seq = typeof packet.s === "number" ? packet.s : null;
    try {
      await this.#o.onDispatch(packet.t, packet.d);
    } catch (error) {
      if (seq !== null) this.#unhandledSeq ??= seq;
      throw error;
    }
    const sessionId = this.#shard.sessionId;
    if (seq === null || !sessionId) return;
    if (this.#unhandledSeq !== null) {
      // Saving past a dispatch that was not handled would skip it at the next resume.
      if (seq > this.#unhandledSeq) return;
      if (seq === this.#unhandledSeq) this.#unhandledSeq = null;
    }
    saveGatewaySeq(store, sessionId, seq);
  }
}
